//! Steady state: a range's calls without its warm-up, and the session
//! without its start-up and shutdown.
//!
//! **Warm-up calls.** The first calls of a range often do one-time work:
//! cuBLAS and cuDNN set-up and autotuning, the caching allocator growing,
//! `torch.compile` compiling, CUDA graphs being captured, XLA compiling. A
//! range's reference time is the median wall time of its later calls (all
//! but the first half of the first [`FIRST_CALLS`](crate::report) kept one
//! by one). Its warm-up is the calls before the first run of
//! [`SETTLE_CALLS`] consecutive calls each taking at most [`SETTLED`] times
//! the reference; at most half of the calls. A range needs
//! [`MIN_CALLS`] calls for this; with fewer, or when no such run comes,
//! every call counts.
//!
//! **The session's steady state** (for programs without ranges): the same
//! rule over the session's time bins: a bin is steady when its launches,
//! or its kernel time, are within a factor of [`BIN_BAND`] of the
//! [`REFERENCE_QUANTILE_PCT`]th percentile of the active bins'; the steady
//! state runs from the first run of [`SETTLE_CALLS`] steady bins to the
//! last; before it is start-up (imports, model set-up, compilation), after
//! it shutdown.

use super::{HostFigures, IdleSplit, SampledFigures};
use crate::aggregated::calls::{CallLog, Figures};
use crate::aggregated::timeline::{Bin, Timeline};
use crate::model::totals::Totals;
use serde::{Deserialize, Serialize};

/// Calls a range needs before warm-up is told apart.
pub const MIN_CALLS: u64 = 4;
/// Consecutive calls (or bins) within the band that end warm-up.
pub const SETTLE_CALLS: usize = 3;
/// A call taking at most this many times the reference is settled.
pub const SETTLED: f64 = 1.5;
/// A bin with launches within this factor of the reference (either way)
/// is steady.
pub const BIN_BAND: f64 = 2.0;
/// The session's reference bin: this percentile of the active bins.
pub const REFERENCE_QUANTILE_PCT: usize = 90;
/// The launching threads' CPU time is given for a steady state its
/// readings covered for at least this share of, %.
pub const CPU_COVERED_PCT: u64 = 90;
/// Without kernel records, a bin is active when the engine's sampled
/// activity in it is at least the busiest bin's over this.
pub const SAMPLED_FLOOR: u64 = 20;

/// A range's calls after warm-up (how warm-up is told apart: "Steady
/// calls" in docs/concepts/figures.md).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct Steady {
    /// Calls counted (all but the warm-up ones).
    pub calls: u64,
    /// Warm-up calls left out, and their wall time, ns.
    pub warmup_calls: u64,
    /// See `warmup_calls`.
    pub warmup_wall_ns: u64,
    /// A run of settled calls was found (false: per-call times never
    /// settled, and every call counts).
    pub settled: bool,
    /// Median and 90th percentile wall time per call, ns (to 2%).
    pub median_ns: u64,
    /// See `median_ns`.
    pub p90_ns: u64,
    /// Wall time of these calls, ns.
    pub wall_ns: u64,
    /// Their kernels' GPU time (union), ns, and the part inside their
    /// windows.
    pub gpu_busy_ns: u64,
    /// See `gpu_busy_ns`.
    pub in_window_ns: u64,
    /// Kernel launch calls.
    pub launches: u64,
    /// GPU idle time in them by cause.
    pub idle: IdleSplit,
    /// What their host threads did.
    pub host: HostFigures,
    /// Model FLOPs counted in them from operand shapes (PyTorch's automatic
    /// ranges), nested ranges included.
    #[serde(default, skip_serializing_if = "super::is_zero_f64")]
    pub counted_flops: f64,
    /// Their totals (see [`super::RangeSummary::totals`]).
    #[serde(flatten)]
    pub totals: Totals,
}

impl Steady {
    /// Share of their wall time with a kernel running, %.
    pub fn utilization_pct(&self) -> f64 {
        if self.wall_ns == 0 {
            0.0
        } else {
            100.0 * self.in_window_ns as f64 / self.wall_ns as f64
        }
    }
}

/// The host figures of aggregated [`Figures`].
pub(crate) fn host_figures(f: &Figures) -> HostFigures {
    HostFigures {
        graph_launches: f.graph_launches,
        callback_ns: f.callback_ns,
        hook_ns: f.hook_ns,
        launch_call_ns: f.call_ns,
        calls_timed: f.calls_timed,
        syncs: f.syncs,
        sync_ns: f.sync_ns,
        copies: f.copies,
        h2d_bytes: f.h2d_bytes,
        pageable_copies: f.pageable,
        d2h_copies: f.d2h,
    }
}

fn median(mut v: Vec<u64>) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[v.len() / 2])
}

/// How many leading `walls` are warm-up against `reference`, looking at
/// most `limit` calls in (`None`: no run of settled calls begins there).
/// `all`: `walls` are every call, so a shorter run at their end counts.
pub fn warmup_calls(walls: &[u64], reference: u64, limit: usize, all: bool) -> Option<usize> {
    let settled = |w: u64| w as f64 <= SETTLED * reference as f64;
    (0..=limit.min(walls.len())).find(|&i| {
        let run = &walls[i..walls.len().min(i + SETTLE_CALLS)];
        let whole = run.len() == SETTLE_CALLS || (all && !run.is_empty());
        whole && run.iter().all(|&w| settled(w))
    })
}

/// The steady state of a range with `count` calls totalling `total`.
pub(crate) fn of_range(count: u64, total: &Figures, log: &CallLog) -> Option<Steady> {
    if count < MIN_CALLS {
        return None;
    }
    let first = &log.first;
    let walls: Vec<u64> = first.iter().map(|c| c.figures.wall).collect();
    // The reference: every call but the first half of those kept.
    let skip = (walls.len() / 2).min(count as usize / 2);
    let reference = if count as usize == walls.len() {
        median(walls[skip..].to_vec())?
    } else {
        let mut later = log.walls.clone();
        for &w in &walls[..skip] {
            later.remove(w);
        }
        later.quantile(0.5)?
    };
    let limit = (count as usize / 2).min(walls.len());
    let found = warmup_calls(&walls, reference, limit, count as usize == walls.len());
    let w = found.unwrap_or(0);
    let mut steady = *total;
    let mut hist = log.walls.clone();
    let mut warm_wall = 0u64;
    for c in &first[..w] {
        steady.sub(&c.figures);
        hist.remove(c.figures.wall);
        warm_wall = warm_wall.saturating_add(c.figures.wall);
    }
    Some(Steady {
        calls: count - w as u64,
        warmup_calls: w as u64,
        warmup_wall_ns: warm_wall,
        settled: found.is_some(),
        median_ns: hist.quantile(0.5).unwrap_or(0),
        p90_ns: hist.quantile(0.9).unwrap_or(0),
        wall_ns: steady.wall,
        gpu_busy_ns: steady.busy,
        in_window_ns: steady.in_window,
        launches: steady.launches,
        idle: IdleSplit::from_array(steady.idle),
        host: host_figures(&steady),
        counted_flops: steady.mflops as f64 * 1e6,
        totals: steady.totals,
    })
}

/// The session without start-up and shutdown, from its time bins.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct SessionSteady {
    /// Where it begins and ends, ns on the session's clock.
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
    /// Session time before it (start-up, compilation, warm-up), ns.
    pub startup_ns: u64,
    /// Session time after it (shutdown, or work of another kind), ns.
    pub shutdown_ns: u64,
    /// A run of steady bins was found (false: activity never settled; the
    /// span from the first launch to the last is taken).
    pub settled: bool,
    /// Launch calls in it.
    pub launches: u64,
    /// Kernel time in it (summed over kernels), ns.
    pub kernel_ns: u64,
    /// GPU idle time in it by cause.
    pub idle: IdleSplit,
    /// gpuscope's launch-callback time in it, ns.
    pub callback_ns: u64,
    /// A framework integration's hook time in it, ns.
    #[serde(default)]
    pub hook_ns: u64,
    /// Device memory allocations and releases in it (allocation records).
    #[serde(default)]
    pub allocations: u64,
    /// See `allocations`.
    #[serde(default)]
    pub releases: u64,
    /// Copies started in it (`None` in reports that did not count them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies: Option<u64>,
    /// Of which from or to pageable host memory.
    #[serde(default)]
    pub pageable_copies: u64,
    /// Of which device to host (the program reading results).
    #[serde(default)]
    pub device_to_host_copies: u64,
    /// Of which host to device, of a batch's bytes or more (64 KiB): a
    /// loop's inputs (`None` in reports that did not count them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_copies: Option<u64>,
    /// Launch-call time in it over the calls timed, ns.
    #[serde(default)]
    pub call_ns: u64,
    /// See `call_ns`.
    #[serde(default)]
    pub calls_timed: u64,
    /// PM samples over it (sampling mode): GPU busy and the SM figures
    /// where no kernel record was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampledFigures>,
    /// Communication kernels' time in it, and the part of it with no
    /// compute kernel of the same device under it, ns (devices summed; see
    /// [`super::Totals::exposed_comm_ns`]).
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub comm_ns: u64,
    /// See `comm_ns`.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub exposed_comm_ns: u64,
    /// Steps found from its kernel stream (no range around the step
    /// needed; [`super::FoundSteps`] says how), where its kernels repeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<super::FoundSteps>,
    /// CPU time of the threads that launched kernels in it, summed over
    /// them (each reading capped at the time since the last), ns (`None`:
    /// not read, or read over less than 90% of it).
    /// With the idle time and [`Self::cuda_blocked_ns`] it says whether
    /// those threads computed or waited off a CPU (a data loader's queue,
    /// a lock, I/O): [`Self::launching_off_cpu_ns`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launching_cpu_ns: Option<u64>,
    /// Time host threads were blocked in CUDA synchronisations and blocking
    /// copies in it, ns.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub cuda_blocked_ns: u64,
    /// Its time inside trace windows (sampling mode with them), where
    /// both the kernels and the engine's sampled activity are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<WindowsBusy>,
}

/// The time of a steady state inside trace windows: how much of it the
/// kernels' union held, and how much the graphics engine was active by PM
/// samples. The engine counts as active between back-to-back kernels too
/// (setting up the next), so its share exceeds the kernels' on a loop of
/// many short kernels; the ratio of the two turns the sampled GPU busy
/// outside the windows into the kernels' (trace mode's) measure.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct WindowsBusy {
    /// Time of the PM samples inside trace windows whose kernels are all
    /// known, ns: samples that an idle gap across a window's edge overlaps
    /// are left out (kernels launched before a window run in it without
    /// records while the queue the host filled ahead drains).
    pub traced_ns: u64,
    /// The kernels' union over those samples, ns.
    pub kernel_ns: u64,
    /// The engine's active share over those samples, %.
    pub engine_pct: f64,
}

/// Traced time a steady state needs inside windows before their kernels'
/// share of the engine's activity stands for the rest of it: half a
/// default window, 50 samples of 1 ms (a steady state holding one window
/// has a little less than its 100 ms inside its bins).
pub(crate) const MIN_WINDOWS_BUSY_NS: u64 = 50_000_000;

impl WindowsBusy {
    /// The kernels' union as a share of the engine's sampled activity, at
    /// most 1 (`None`: under 50 ms traced, or no kernel or no engine
    /// activity in it).
    pub fn kernel_share(&self) -> Option<f64> {
        if self.traced_ns < MIN_WINDOWS_BUSY_NS || self.engine_pct < 1.0 || self.kernel_ns == 0 {
            return None;
        }
        let kernels_pct = 100.0 * self.kernel_ns as f64 / self.traced_ns as f64;
        Some((kernels_pct / self.engine_pct).min(1.0))
    }
}

impl SessionSteady {
    /// The kernels' share of the engine's sampled activity inside the trace
    /// windows in it ([`WindowsBusy::kernel_share`]).
    pub(crate) fn kernel_share(&self) -> Option<f64> {
        self.windows?.kernel_share()
    }

    /// Its length, ns.
    pub fn wall_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// Time the launching threads spent off a CPU, outside CUDA calls that
    /// block, while the GPU idled, at least, ns (`None` where their CPU
    /// time was not read): the idle time less their CPU time and less the
    /// blocked time that cannot have fallen in the GPU's busy time. Several
    /// threads that launch in turn (PyTorch's backward launches from
    /// autograd's thread while the program's waits for it) count as one;
    /// where they overlap, this reads low.
    pub fn launching_off_cpu_ns(&self) -> Option<u64> {
        let cpu = self.launching_cpu_ns?;
        let (wall, idle) = (self.wall_ns(), self.idle.total());
        let busy = wall.saturating_sub(idle);
        // Blocked time in the GPU's idle time: what its busy time cannot
        // hold, and at least the blocking copies' (the GPU idles for them).
        let blocked = self.cuda_blocked_ns;
        let blocked_idle = blocked.saturating_sub(busy).max(blocked.min(self.idle.copy_ns));
        Some(idle.saturating_sub(cpu).saturating_sub(blocked_idle))
    }
}

/// The session's steady state from its bins; `None` without launches,
/// kernels or sampled engine activity.
#[doc(hidden)]
pub fn of_session(t: &Timeline, start_ns: u64, end_ns: u64) -> Option<SessionSteady> {
    of_session_from(t, start_ns, end_ns, 0, false)
}

/// [`of_session`] over the bins from the one holding `from_ns` on: the
/// steady state once a loop found in it began. `partly_traced`: kernel
/// records were off for part of the session (trace windows), so the bins'
/// kernel time says nothing of the time between windows.
pub(crate) fn of_session_from(
    t: &Timeline,
    start_ns: u64,
    end_ns: u64,
    from_ns: u64,
    partly_traced: bool,
) -> Option<SessionSteady> {
    let first_bin = (from_ns.saturating_sub(t.start) / t.width.max(1)) as usize;
    // Sampled engine activity counts from a twentieth of the busiest bin's:
    // start-up keeps the engine faintly active (context creation, copies,
    // a framework's autotuning) for seconds.
    // Only where kernel records did not cover the session (trace windows):
    // with them throughout, the kernels' time says it as in trace mode;
    // with periodic windows the kernels' time is the windows' alone, and a
    // loop between two windows has none (a short JAX loop after seconds of
    // compilation was read as start-up).
    let untraced = partly_traced || t.bins.iter().all(|b| b.kernel_ns == 0);
    let busiest = if untraced { t.bins.iter().map(Bin::sampled_busy_ns).max().unwrap_or(0) } else { 0 };
    let floor = (busiest / SAMPLED_FLOOR).max(1);
    let sampled_busy = |b: &Bin| Some(b.sampled_busy_ns()).filter(|&v| untraced && v >= floor).unwrap_or(0);
    let active: Vec<usize> = (first_bin.min(t.bins.len())..t.bins.len())
        .filter(|&i| t.bins[i].launches > 0 || t.bins[i].kernel_ns > 0 || sampled_busy(&t.bins[i]) > 0)
        .collect();
    let (&a, &z) = (active.first()?, active.last()?);
    // Launches per bin, and kernel time per bin: a program that queues its
    // work ahead launches in a few bins while its kernels fill the rest.
    // The reference is the busy end of the active bins: a short training
    // run after a long compilation is the busiest part, not the median.
    let reference = |f: fn(&crate::aggregated::timeline::Bin) -> u64| {
        let mut v: Vec<u64> = (a..=z).map(|i| f(&t.bins[i])).filter(|&v| v > 0).collect();
        v.sort_unstable();
        v.get(v.len() * REFERENCE_QUANTILE_PCT / 100).copied()
    };
    // Where kernel records did not cover the session, the engine's sampled
    // activity stands for the kernels' time.
    let launches = reference(|b| b.launches);
    // A GPU without the engine's counter or SM samples keeps the kernels'.
    let kernels = if untraced && busiest > 0 { None } else { reference(|b| b.kernel_ns) };
    let sampled = {
        let mut v: Vec<u64> = (a..=z).map(|i| sampled_busy(&t.bins[i])).filter(|&v| v > 0).collect();
        v.sort_unstable();
        v.get(v.len() * REFERENCE_QUANTILE_PCT / 100).copied()
    };
    let near =
        |v: u64, r: Option<u64>| r.is_some_and(|r| v as f64 >= r as f64 / BIN_BAND && v as f64 <= r as f64 * BIN_BAND);
    // A framework compiling (XLA's passes, its autotuning launching kernels)
    // for half a bin or more is start-up, whatever its launches look like.
    let compiling = |b: &Bin| b.compile_ns.saturating_mul(2) >= t.width;
    let in_band = |i: usize| {
        let b = &t.bins[i];
        !compiling(b) && (near(b.launches, launches) || near(b.kernel_ns, kernels) || near(sampled_busy(b), sampled))
    };
    let run = |i: usize| (i..i + SETTLE_CALLS).all(|j| j <= z && in_band(j));
    let first = (a..=z).find(|&i| run(i));
    let last = (a..=z).rev().find(|&j| j + 1 >= SETTLE_CALLS && run(j + 1 - SETTLE_CALLS));
    let (s, e, settled) = match (first, last) {
        (Some(s), Some(e)) if e >= s => (s, e, true),
        _ => (a, z, false),
    };
    Some(over_bins(t, s, e, settled, start_ns, end_ns))
}

/// The steady state over the bins holding `[from_ns, to_ns]`: a loop found
/// by its repeating kernels or launches where its bins did not settle (a
/// step that outlasts a bin and leaves the next one empty).
pub(crate) fn of_span(t: &Timeline, start_ns: u64, end_ns: u64, from_ns: u64, to_ns: u64) -> Option<SessionSteady> {
    let bin = |ns: u64| (ns.saturating_sub(t.start) / t.width.max(1)) as usize;
    let (s, e) = (bin(from_ns), bin(to_ns).min(t.bins.len().checked_sub(1)?));
    (s <= e).then(|| over_bins(t, s, e, true, start_ns, end_ns))
}

/// The figures of bins `s..=e` as the session's steady state.
fn over_bins(t: &Timeline, s: usize, e: usize, settled: bool, start_ns: u64, end_ns: u64) -> SessionSteady {
    let mut out = SessionSteady { settled, ..Default::default() };
    let (mut cpu, mut covered) = (0u64, 0u64);
    let mut idle = [0u64; crate::model::idle::CAUSES];
    let mut sampled = crate::model::sampled::SampledAcc::default();
    let (mut comm_all, mut comm_compute) = (0u64, 0u64);
    let (mut traced, mut traced_kernels) = (0u64, 0u64);
    let mut traced_sampled = crate::model::sampled::SampledAcc::default();
    for b in &t.bins[s..=e] {
        sampled.merge(&b.sampled);
        traced = traced.saturating_add(b.traced_ns);
        traced_kernels = traced_kernels.saturating_add(b.traced_busy_ns);
        traced_sampled.merge(&b.traced_sampled);
        comm_all = comm_all.saturating_add(b.comm_all_ns);
        comm_compute = comm_compute.saturating_add(b.comm_compute_ns);
        out.comm_ns = out.comm_ns.saturating_add(b.comm_ns);
        out.launches = out.launches.saturating_add(b.launches);
        out.kernel_ns = out.kernel_ns.saturating_add(b.kernel_ns);
        out.callback_ns = out.callback_ns.saturating_add(b.callback_ns);
        out.hook_ns = out.hook_ns.saturating_add(b.hook_ns);
        out.allocations = out.allocations.saturating_add(b.allocations);
        out.releases = out.releases.saturating_add(b.releases);
        out.copies = Some(out.copies.unwrap_or(0).saturating_add(b.copies));
        out.pageable_copies = out.pageable_copies.saturating_add(b.pageable_copies);
        out.device_to_host_copies = out.device_to_host_copies.saturating_add(b.device_to_host_copies);
        out.batch_copies = Some(out.batch_copies.unwrap_or(0).saturating_add(b.batch_copies));
        out.call_ns = out.call_ns.saturating_add(b.call_ns);
        out.calls_timed = out.calls_timed.saturating_add(b.calls_timed);
        out.cuda_blocked_ns = out.cuda_blocked_ns.saturating_add(b.cuda_blocked_ns);
        cpu = cpu.saturating_add(b.launching_cpu_ns);
        covered = covered.saturating_add(b.cpu_covered_ns);
        for (x, y) in idle.iter_mut().zip(b.idle) {
            *x = x.saturating_add(y);
        }
    }
    out.idle = IdleSplit::from_array(idle);
    out.sampled = sampled.figures();
    out.windows = traced_sampled.figures().and_then(|f| f.gpu_busy_pct).filter(|_| traced > 0).map(|engine_pct| {
        WindowsBusy { traced_ns: traced, kernel_ns: traced_kernels, engine_pct }
    });
    out.exposed_comm_ns = comm_all.saturating_sub(comm_compute).min(out.comm_ns);
    let bin_start = |i: u64| t.start.saturating_add(i.saturating_mul(t.width));
    out.start_ns = bin_start(s as u64).max(start_ns);
    out.end_ns = bin_start(e as u64 + 1).min(end_ns).max(out.start_ns);
    // The launching threads' CPU time, where readings covered nearly all
    // of it (none where no launching thread was known to read).
    if covered.saturating_mul(100) >= out.wall_ns().saturating_mul(CPU_COVERED_PCT) && covered > 0 {
        out.launching_cpu_ns = Some(cpu);
    }
    out.startup_ns = out.start_ns.saturating_sub(start_ns);
    out.shutdown_ns = end_ns.saturating_sub(out.end_ns);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregated::calls::Figures;

    #[test]
    fn the_launching_threads_cpu_time_is_given_where_readings_covered_the_steady_state() {
        const MS: u64 = 1_000_000;
        let loop_of = || {
            let mut t = Timeline::new(0);
            for i in 0..10 {
                t.launch(i * 10 * MS + 1, 0, 0);
                t.kernel(i * 10 * MS + 1, i * 10 * MS + 4 * MS);
            }
            // The GPU idle 6 ms of each 10, waiting for the host.
            for b in &mut t.bins {
                b.idle[crate::model::idle::HOST] = 6 * MS;
            }
            t
        };
        // No reading (no launching thread known): not read, not "all waiting".
        let t = loop_of();
        let s = of_session(&t, 0, 100 * MS).expect("a steady state");
        assert_eq!((s.launching_cpu_ns, s.wall_ns()), (None, 100 * MS));
        // Read over all of it.
        let mut t = loop_of();
        t.launching_cpu(0, 100 * MS, 40 * MS);
        t.cuda_blocked(20 * MS, 22 * MS);
        let s = of_session(&t, 0, 100 * MS).unwrap();
        assert_eq!((s.launching_cpu_ns, s.cuda_blocked_ns), (Some(40 * MS), 2 * MS));
        // Idle 60 ms, on a CPU 40 ms (in the idle time at worst), blocked
        // 2 ms (in the 40 ms the GPU worked at best): 20 ms off a CPU.
        assert_eq!(s.launching_off_cpu_ns(), Some(20 * MS));
        // Blocked 45 ms: 5 ms of it past what the GPU's 40 ms of work can
        // hold, so 15 ms off a CPU while it idled.
        let mut t = loop_of();
        t.launching_cpu(0, 100 * MS, 40 * MS);
        t.cuda_blocked(0, 45 * MS);
        assert_eq!(of_session(&t, 0, 100 * MS).unwrap().launching_off_cpu_ns(), Some(15 * MS));
        // Read over 90% of it: given; over 89%, not.
        let mut t = loop_of();
        t.launching_cpu(0, 90 * MS, 20 * MS);
        assert_eq!(of_session(&t, 0, 100 * MS).unwrap().launching_cpu_ns, Some(20 * MS));
        let mut t = loop_of();
        t.launching_cpu(0, 89 * MS, 20 * MS);
        assert_eq!(of_session(&t, 0, 100 * MS).unwrap().launching_cpu_ns, None);
    }

    fn log_of(walls: &[u64]) -> (Figures, CallLog) {
        let mut total = Figures::default();
        let mut log = CallLog::default();
        for (i, &w) in walls.iter().enumerate() {
            let f = Figures { wall: w, launches: 10, in_window: w / 2, ..Default::default() };
            total.add(&f);
            log.add(i as u64 * 1_000_000_000, &f);
        }
        (total, log)
    }

    #[test]
    fn warm_up_is_the_calls_before_three_settled_ones() {
        // Compilation, graph capture, then 0.31 ms replays.
        let mut walls = vec![5_200_000_000, 640_000_000, 900_000];
        walls.extend(std::iter::repeat_n(310_000, 40));
        let (total, log) = log_of(&walls);
        let s = of_range(walls.len() as u64, &total, &log).unwrap();
        assert_eq!((s.calls, s.warmup_calls, s.settled), (40, 3, true));
        assert_eq!(s.warmup_wall_ns, 5_200_000_000 + 640_000_000 + 900_000);
        assert_eq!(s.wall_ns, 40 * 310_000);
        assert_eq!(s.launches, 400);
        assert!((s.median_ns as f64 / 310_000.0 - 1.0).abs() < 0.02, "{}", s.median_ns);
        assert!((s.utilization_pct() - 50.0).abs() < 1e-9);
    }

    #[test]
    fn no_warm_up_when_calls_are_alike_or_too_few_and_a_late_slow_call_is_not_warm_up() {
        let (total, log) = log_of(&[100, 101, 99, 100, 300, 100, 100, 100]);
        let s = of_range(8, &total, &log).unwrap();
        assert_eq!((s.warmup_calls, s.calls), (0, 8), "the slow 5th call is steady state");
        let (total, log) = log_of(&[5000, 100, 100]);
        assert_eq!(of_range(3, &total, &log), None, "three calls cannot tell");
        // No run of three settled calls in the first half: every call counts.
        let walls = [10_000, 100, 10_000, 100, 10_000, 100, 10_000, 100, 100, 100];
        let (total, log) = log_of(&walls);
        let s = of_range(10, &total, &log).unwrap();
        assert_eq!((s.warmup_calls, s.settled), (0, false));
    }

    #[test]
    fn the_reference_comes_from_the_histogram_beyond_the_calls_kept() {
        // 1000 calls: 10 slow ones, then 990 at 1 ms.
        let mut walls = vec![50_000_000; 10];
        walls.extend(std::iter::repeat_n(1_000_000, 990));
        let (total, log) = log_of(&walls);
        let s = of_range(1000, &total, &log).unwrap();
        assert_eq!((s.warmup_calls, s.calls), (10, 990));
        assert_eq!(s.wall_ns, 990_000_000);
    }

    #[test]
    fn the_session_s_steady_state_leaves_out_start_up_and_shutdown_bins() {
        let mut t = Timeline::new(0);
        // 2 s of start-up with a few launches, 3 s of steady launching,
        // then a quiet 1 s.
        for ms in (0..2000).step_by(100) {
            t.launch(ms * 1_000_000, 0, 0);
        }
        for us in (2_000_000..5_000_000u64).step_by(100) {
            t.launch(us * 1_000, 10, 0);
        }
        t.launch(5_500_000_000, 0, 0);
        let s = of_session(&t, 0, 6_000_000_000).unwrap();
        assert!(s.settled);
        assert_eq!(s.start_ns, 2_000_000_000);
        assert_eq!(s.end_ns, 5_000_000_000);
        assert_eq!((s.startup_ns, s.shutdown_ns), (2_000_000_000, 1_000_000_000));
        assert_eq!(s.launches, 30_000);
        assert_eq!(s.callback_ns, 300_000);
        assert_eq!(of_session(&Timeline::new(0), 0, 10), None);
    }

    #[test]
    fn a_short_busy_run_after_a_long_compilation_is_the_steady_state() {
        // 8 s of compilation with a few kernels every 100 ms, then 0.4 s of
        // training with the GPU busy.
        let mut t = Timeline::new(0);
        for ms in (0..8000u64).step_by(100) {
            t.launch(ms * 1_000_000, 0, 0);
            t.kernel(ms * 1_000_000, ms * 1_000_000 + 2_000_000);
        }
        for us in (8_000_000..8_400_000u64).step_by(100) {
            t.launch(us * 1_000, 0, 0);
        }
        t.kernel(8_000_000_000, 8_400_000_000);
        let s = of_session(&t, 0, 9_000_000_000).unwrap();
        assert!(s.settled);
        assert!(s.start_ns >= 7_960_000_000 && s.end_ns <= 8_440_000_000, "{s:?}");
    }

    #[test]
    fn autotuning_inside_compilation_ranges_is_start_up_though_it_launches_like_the_loop() {
        // 6 s of XLA compilation whose autotuning launches kernels as
        // densely as the loop does, then 0.6 s of training.
        let dense = || {
            let mut t = Timeline::new(0);
            for us in (0..6_600_000u64).step_by(100) {
                t.launch(us * 1_000, 0, 0);
                t.kernel(us * 1_000, us * 1_000 + 80_000);
            }
            t
        };
        let mut t = dense();
        t.compile(0, 6_000_000_000);
        let s = of_session(&t, 0, 6_600_000_000).unwrap();
        assert!(s.start_ns >= 6_000_000_000, "{s:?}");
        // Without the compilation range the same launches look steady throughout.
        assert!(of_session(&dense(), 0, 6_600_000_000).unwrap().start_ns < 1_000_000_000);
    }

    #[test]
    fn work_queued_ahead_is_steady_by_its_kernels_not_its_launches() {
        // 300 launches in the first millisecond, their kernels 137 ms long.
        let mut t = Timeline::new(0);
        for i in 0..300u64 {
            t.launch(i * 3_000, 0, 0);
        }
        t.kernel(500_000, 137_500_000);
        let s = of_session(&t, 0, 300_000_000).unwrap();
        assert!(s.settled);
        assert_eq!((s.start_ns, s.end_ns), (0, 140_000_000));
        assert_eq!(s.launches, 300);
    }

    #[test]
    fn without_kernel_records_the_sampled_engine_activity_finds_the_steady_state() {
        use crate::model::sampled::Sample;
        // 2 s of start-up with the engine idle, 3 s active 60%, 1 s idle:
        // no launch or kernel record at all (trace windows of 0).
        let mut t = Timeline::new(0);
        t.samples(&Sample::flat_every(1_000_000, 0, 0, 2_000_000_000, 0.0, 0.0));
        t.samples(&Sample::flat_every(1_000_000, 0, 2_000_000_000, 5_000_000_000, 60.0, 30.0));
        t.samples(&Sample::flat_every(1_000_000, 0, 5_000_000_000, 6_000_000_000, 0.0, 0.0));
        let s = of_session(&t, 0, 6_000_000_000).expect("sampled activity");
        assert!(s.settled);
        assert!(s.start_ns >= 1_950_000_000 && s.start_ns <= 2_000_000_000, "{s:?}");
        assert!(s.end_ns >= 5_000_000_000 && s.end_ns <= 5_050_000_000, "{s:?}");
        let f = s.sampled.expect("figures over it");
        assert!((f.gpu_busy_pct.unwrap() - 60.0).abs() < 2.0, "{f:?}");
        assert_eq!(s.launches, 0);
    }

    #[test]
    fn faint_start_up_activity_does_not_stretch_a_sampled_steady_state() {
        use crate::model::sampled::Sample;
        // XLA's 6.7 s of compilation: the engine faintly active (1%), with
        // an autotuning burst now and then; then 0.36 s of steps at 100%.
        let mut t = Timeline::new(0);
        for ms in 0..6_700u64 {
            let busy = if ms % 500 == 0 { 60.0 } else { 1.0 };
            t.samples(&[Sample::flat(0, ms * 1_000_000, (ms + 1) * 1_000_000, busy, 10.0)]);
        }
        t.samples(&Sample::flat_every(1_000_000, 0, 6_700_000_000, 7_060_000_000, 100.0, 40.0));
        let s = of_session(&t, 0, 7_100_000_000).expect("sampled activity");
        assert!(s.settled, "{s:?}");
        assert!(s.start_ns >= 6_600_000_000 && s.end_ns <= 7_100_000_000, "{s:?}");
        let busy = s.sampled.and_then(|f| f.gpu_busy_pct).unwrap();
        assert!(busy > 85.0, "{busy}");
    }

    #[test]
    fn with_periodic_trace_windows_a_loop_between_windows_is_found_by_its_samples() {
        use crate::model::sampled::Sample;
        const MS: u64 = 1_000_000;
        // A JAX run's bins: 8.7 s of start-up, XLA's compilation
        // ranges over most of it but not all, the engine faintly active and
        // bursts of a few hundred launches; a window at 8.0 s caught an
        // autotuning burst's kernels. Then 0.36 s of steps, one CUDA graph
        // launch each (~34 in a 40 ms bin), the engine busy throughout, and
        // no window over it.
        let jax = || {
            let mut t = Timeline::new(0);
            t.samples(&Sample::flat_every(MS, 0, 0, 8_720 * MS, 0.1, 0.1));
            for burst in [1_000u64, 2_000, 3_000, 4_000, 5_000, 6_000, 7_000, 8_000] {
                for i in 0..200 {
                    t.launch((burst + 500) * MS + i * 100_000, 0, 0);
                }
                t.samples(&Sample::flat_every(MS, 0, (burst + 500) * MS, (burst + 520) * MS, 100.0, 50.0));
                // Compilation around the burst, not over every bin.
                t.compile(burst * MS, (burst + 300) * MS);
            }
            t.kernel(8_000 * MS, 8_020 * MS);
            for i in 0..300u64 {
                t.launch(8_720 * MS + i * 1_170_000, 0, 0);
            }
            t.samples(&Sample::flat_every(MS, 0, 8_720 * MS, 9_070 * MS, 100.0, 60.0));
            t
        };
        let s = of_session_from(&jax(), 0, 9_300 * MS, 0, true).expect("a steady state");
        assert!(s.settled, "{s:?}");
        assert!(s.start_ns >= 8_600 * MS && s.end_ns <= 9_120 * MS, "{s:?}");
        assert!(s.sampled.and_then(|f| f.gpu_busy_pct).unwrap() > 90.0, "{s:?}");
        // Read as if records had covered the session, the start-up's bursts
        // set the launches' band, the one window's kernels the kernels',
        // and the loop is neither.
        let whole = of_session(&jax(), 0, 9_300 * MS).unwrap();
        assert!(whole.start_ns < 2_000 * MS, "{whole:?}");
    }

    #[test]
    fn a_session_at_the_top_of_the_clock_ends_there() {
        let start = u64::MAX - 10;
        let mut t = Timeline::new(start);
        t.launch(start, 0, 0);
        t.kernel(start, u64::MAX);
        let s = of_session(&t, start, u64::MAX).expect("launches");
        assert_eq!((s.start_ns, s.end_ns, s.launches, s.kernel_ns), (start, u64::MAX, 1, 10));
    }
}
