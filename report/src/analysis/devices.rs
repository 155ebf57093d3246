//! Each GPU of a process that drives several: how busy it was, what it
//! waited for, and whether the work is spread evenly. The session's figures
//! count a gap only when no GPU ran a kernel, so a GPU that idled while
//! another worked shows here only.

use super::cost;
use super::findings::Finding;
use super::rules::{FindingKind, IDLE};
use super::verdict::{self, Bound};
use crate::model::idle::IdleSplit;
use crate::model::units::{fmt_ns, saturating_sum};
use crate::report::Report;
use serde::Serialize;

/// Of GPUs working at the same time, one busy less than this share of the
/// busiest one's time, by at least [`UNEVEN_MIN_POINTS`], makes a finding:
/// DCGM reads SM activity under 0.5 as "likely ineffective", and a
/// process's GPUs doing the same work (data parallelism) should be within a
/// few points of each other.
pub const UNEVEN_RATIO: f64 = 0.5;
/// See [`UNEVEN_RATIO`], percentage points of the window.
pub const UNEVEN_MIN_POINTS: f64 = 10.0;

/// One GPU's use over the steady state (or the session).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct DeviceUse {
    /// The device's ordinal.
    pub device: u32,
    /// Its name, when the report has it.
    pub name: Option<String>,
    /// "the steady state" or "the session".
    pub window: &'static str,
    /// The window's length, ns.
    pub wall_ns: u64,
    /// Time some kernel of it ran in the window, ns.
    pub busy_ns: u64,
    /// `busy_ns` over `wall_ns`, %.
    pub busy_pct: f64,
    /// Its idle time by cause, gpuscope's own cost taken out (counted as
    /// `profiler_ns`).
    pub idle: IdleSplit,
}

impl DeviceUse {
    /// Its largest idle cause: (the finding kind's name, its verdict, what
    /// it means, ns).
    pub fn main_idle(&self) -> Option<(FindingKind, Bound, &'static str, u64)> {
        let a = self.idle.to_array();
        IDLE.iter()
            .map(|c| (c.kind.clone(), c.bound.clone(), c.meaning, saturating_sum(c.causes.iter().map(|&i| a[i]))))
            .filter(|c| c.3 > 0)
            .max_by_key(|c| c.3)
    }

    /// "busy 31.0% of the steady state; idle: host 17%, sync 52%" (the causes
    /// named and ordered as in the session's line).
    pub fn describe(&self) -> String {
        let causes = verdict::Shares::of(self.wall_ns, &self.idle).map(|s| s.causes()).unwrap_or_default();
        let mut s = format!("busy {:.1}% of {}", self.busy_pct, self.window);
        if !causes.is_empty() {
            s.push_str("; idle: ");
            s.push_str(&causes);
        }
        s
    }
}

/// Each GPU's use, when the process drove several (empty with one: the
/// session's figures are its own): over the steady state when one was
/// found; with trace windows, each GPU's kernel time over the time kernel
/// records were on (a lower bound: gaps touching the untraced stretches
/// are neither busy nor idle as far as gpuscope knows).
pub fn device_use(r: &Report) -> Vec<DeviceUse> {
    if r.device_time.len() < 2 {
        return Vec::new();
    }
    let traced = traced_ns(r);
    let steady = r.session_steady.as_ref().filter(|_| traced.is_none());
    // gpuscope's own per-launch cost delayed every GPU's next launch alike.
    let added =
        steady.and_then(|s| r.profiler_cost.added_ns(s.launches, s.callback_ns, s.call_ns, s.calls_timed, s.hook_ns));
    r.device_time
        .iter()
        .map(|t| {
            let (window, wall_ns, idle) = match (steady, t.steady_idle, traced) {
                (Some(s), Some(idle), _) => ("the steady state", s.wall_ns(), cost::taken_out(&r.profiler_cost, idle, added)),
                (_, _, Some(traced)) => ("the traced time", traced.max(t.busy_ns), t.idle),
                // The time decided so far: busy or idle.
                _ => ("the session", t.busy_ns.saturating_add(t.idle.total()), t.idle),
            };
            let busy_ns = match traced {
                Some(_) => t.busy_ns,
                None => wall_ns.saturating_sub(idle.total()),
            };
            DeviceUse {
                device: t.device,
                name: r.devices.iter().find(|d| d.id == t.device).map(|d| d.name.clone()),
                window,
                wall_ns,
                busy_ns,
                busy_pct: 100.0 * busy_ns as f64 / wall_ns.max(1) as f64,
                idle,
            }
        })
        .collect()
}

/// Sampling mode with trace windows: the time kernel records were on.
fn traced_ns(r: &Report) -> Option<u64> {
    r.sampling.as_ref().and_then(|s| s.trace_windows.as_ref()).map(|w| w.traced_ns)
}

/// The share of `u`'s window in which any GPU ran a kernel, %; `None` with
/// trace windows (a gap touching an untraced stretch is not known idle).
fn any_busy_pct(r: &Report, u: &DeviceUse) -> Option<f64> {
    let (wall, idle) = match (u.window, &r.session_steady, &r.idle) {
        ("the steady state", Some(s), _) => (s.wall_ns(), s.idle.total()),
        // Over the time decided so far (a report while the session runs).
        ("the session", _, Some(i)) => (u.wall_ns, i.total()),
        _ => return None,
    };
    (wall > 0).then(|| (100.0 * wall.saturating_sub(idle) as f64 / wall as f64).min(100.0))
}

/// A GPU counts as working in the window from this busy share on: one that
/// ran a few small kernels (a metric, a check) is not part of the split.
pub const MIN_WORKING_PCT: f64 = 1.0;

/// How the process's working GPUs shared the window: the finding about it,
/// if any, whose cost is the time per window that a better split could
/// save.
///
/// - GPUs that run at the same time but unevenly (`uneven-devices`): one
///   busy under [`UNEVEN_RATIO`] of the busiest one's share, by at least
///   [`UNEVEN_MIN_POINTS`]. Spread evenly, each would be busy the mean
///   share: the busiest one's share less the mean could be saved.
/// - GPUs that take turns (`devices-take-turns`): their busy time overlaps
///   less than half of all but the busiest one's, as a model split across GPUs
///   without micro-batches runs one stage at a time. Run at once, the GPU
///   time would take the busiest one's share: the share any GPU was busy
///   less that could be saved, when at least [`UNEVEN_MIN_POINTS`].
pub(super) fn split(r: &Report, uses: &[DeviceUse]) -> Option<Finding> {
    let working: Vec<&DeviceUse> = uses.iter().filter(|u| u.busy_pct >= MIN_WORKING_PCT).collect();
    if working.len() < 2 {
        return None;
    }
    let busiest = *working.iter().max_by(|a, b| a.busy_pct.total_cmp(&b.busy_pct))?;
    let least = *working.iter().min_by(|a, b| a.busy_pct.total_cmp(&b.busy_pct))?;
    let sum: f64 = working.iter().map(|u| u.busy_pct).sum();
    let mean = sum / working.len() as f64;
    // Without it (trace windows), whether they worked at once is unknown.
    let any = any_busy_pct(r, busiest)?.clamp(busiest.busy_pct, sum.max(busiest.busy_pct));
    // Time two or more GPUs worked at once (exact for two), points.
    let overlap = sum - any;
    let shares = working.iter().map(|u| format!("GPU {} {:.0}%", u.device, u.busy_pct)).collect::<Vec<_>>().join(", ");
    let why = least.main_idle();
    let idled = why.as_ref().map_or(String::new(), |(_, _, what, ns)| {
        format!("; GPU {} idled mostly {what} ({})", least.device, fmt_ns(*ns))
    });
    // Taking turns: the others' work hardly overlaps (a GPU beside them
    // running a few small kernels does not make them side by side).
    let (kind, saves, message, advice) = if overlap < 0.5 * (sum - busiest.busy_pct) {
        let saves = any - busiest.busy_pct;
        if saves < UNEVEN_MIN_POINTS {
            return None;
        }
        (
            FindingKind::DevicesTakeTurns,
            saves,
            format!(
                "the GPUs took turns over {}: busy {shares}, at the same time only {overlap:.0}% of it (some GPU \
                 busy {any:.0}%){idled}",
                busiest.window
            ),
            "The GPUs run one after another, as a model split across GPUs does when each batch goes through the \
             stages whole: split the batch into micro-batches so that the stages work at once (GPipe or 1F1B \
             schedules, torch.distributed.pipelining), and balance the layers between the stages.",
        )
    } else {
        if least.busy_pct >= busiest.busy_pct * UNEVEN_RATIO || busiest.busy_pct - least.busy_pct < UNEVEN_MIN_POINTS {
            return None;
        }
        (
            FindingKind::UnevenDevices,
            busiest.busy_pct - mean,
            format!("the GPUs worked at the same time but unevenly over {}: busy {shares}{idled}", busiest.window),
            "Spread the work evenly over the GPUs: torch.nn.DataParallel scatters inputs, gathers outputs and \
             computes the loss on GPU 0 every step while the others wait (use DistributedDataParallel, one \
             process per GPU); with a manual split, move work from the busiest GPU.",
        )
    };
    let cost_ns = (saves / 100.0 * busiest.wall_ns as f64) as u64;
    Some(Finding {
        kind,
        bound: why.map_or(Bound::Idle, |w| w.1),
        range: None,
        kernel: None,
        cost_ns,
        calls: 0,
        message: format!("{message}: up to {} ({saves:.0}% of it) could be saved", fmt_ns(cost_ns)),
        advice: advice.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregated::Aggregate;
    use crate::model::device::DeviceTime;
    use crate::model::idle::{CAUSES, HOST, SYNC};

    fn idle(host: u64, sync: u64) -> IdleSplit {
        let mut a = [0u64; CAUSES];
        a[HOST] = host;
        a[SYNC] = sync;
        IdleSplit::from_array(a)
    }

    /// A 100 ms session whose GPUs were idle `(device, host, sync)` ns,
    /// and some GPU busy `any_busy` ns of it.
    fn report(times: &[(u32, u64, u64)], any_busy: u64) -> Report {
        let mut r = Report::build(Aggregate::empty(), 0, 100_000_000);
        r.idle = Some(idle(100_000_000 - any_busy, 0));
        r.device_time = times
            .iter()
            .map(|&(device, host, sync)| DeviceTime {
                device,
                busy_ns: 100_000_000 - host - sync,
                idle: idle(host, sync),
                steady_idle: None,
            })
            .collect();
        r
    }

    #[test]
    fn gpus_busy_at_once_but_unevenly_make_a_finding_naming_why_the_least_busy_idled() {
        // GPU 0 busy 95%, GPU 1 31% (waiting in synchronisations 52%), at
        // the same time: some GPU busy 95%.
        let r = report(&[(0, 5_000_000, 0), (1, 17_000_000, 52_000_000)], 95_000_000);
        let uses = device_use(&r);
        assert_eq!(uses.len(), 2);
        assert!((uses[1].busy_pct - 31.0).abs() < 1e-9);
        assert_eq!(uses[1].describe(), "busy 31.0% of the session; idle: host 17%, sync 52%");
        let f = split(&r, &uses).expect("a finding");
        assert_eq!((f.kind, f.bound), (FindingKind::UnevenDevices, Bound::Sync));
        // Spread evenly, each would be busy 63%: 32 points of 100 ms.
        assert_eq!(f.cost_ns, 32_000_000);
        assert!(
            f.message.starts_with(
                "the GPUs worked at the same time but unevenly over the session: busy GPU 0 95%, GPU 1 31%"
            ),
            "{}",
            f.message
        );
        assert!(f.message.contains("GPU 1 idled mostly after host synchronisations"), "{}", f.message);
    }

    #[test]
    fn gpus_that_take_turns_make_a_finding_with_what_running_them_at_once_saves() {
        // A 3:1 split run stage by stage: 60% then 20%, some GPU busy 80%.
        let r = report(&[(0, 40_000_000, 0), (1, 80_000_000, 0)], 80_000_000);
        let f = split(&r, &device_use(&r)).expect("a finding");
        assert_eq!(f.kind, "devices-take-turns");
        assert_eq!(f.cost_ns, 20_000_000, "run at once, the GPU time would take GPU 0's 60%");
        assert!(f.message.contains("at the same time only 0%"), "{}", f.message);
        assert!(f.advice.contains("micro-batches"), "{}", f.advice);
        // Balanced, the same: 45% each, one after the other.
        let r = report(&[(0, 55_000_000, 0), (1, 55_000_000, 0)], 90_000_000);
        assert_eq!(
            split(&r, &device_use(&r)).map(|f| (f.kind, f.cost_ns)),
            Some((FindingKind::DevicesTakeTurns, 45_000_000))
        );
    }

    #[test]
    fn gpus_within_the_band_or_unused_in_the_window_make_no_finding() {
        let none = |times: &[(u32, u64, u64)], any: u64| {
            let r = report(times, any);
            assert!(split(&r, &device_use(&r)).is_none(), "{times:?}");
        };
        // 95% and 60% at once: more than half.
        none(&[(0, 5_000_000, 0), (1, 40_000_000, 0)], 95_000_000);
        // 12% and 5% at once: under half, but 7 points apart (both idle:
        // the idle causes say why).
        none(&[(0, 88_000_000, 0), (1, 95_000_000, 0)], 12_000_000);
        // Taking turns with a GPU that adds 5 points: a small check or
        // metric after each step.
        none(&[(0, 10_000_000, 0), (1, 95_000_000, 0)], 95_000_000);
        // A GPU that ran nothing in the window (used at start-up only), or
        // a few small kernels (0.5%).
        none(&[(0, 5_000_000, 0), (1, 100_000_000, 0)], 95_000_000);
        none(&[(0, 10_000_000, 0), (1, 99_500_000, 0)], 90_500_000);
        // Two GPUs at once, 90% and 85%, and a third running a few small
        // kernels (0.5%): not a split.
        none(&[(0, 10_000_000, 0), (1, 15_000_000, 0), (2, 99_500_000, 0)], 90_000_000);
        // One GPU: its figures are the session's.
        assert!(device_use(&report(&[(0, 5_000_000, 0)], 95_000_000)).is_empty());
    }

    #[test]
    fn a_small_gpu_beside_one_stage_does_not_make_stages_that_take_turns_side_by_side() {
        // A 40/40 two-stage pipeline run stage by stage, and a third GPU
        // busy 3% while the first stage runs: some GPU busy 80%.
        let r = report(&[(0, 60_000_000, 0), (1, 60_000_000, 0), (2, 97_000_000, 0)], 80_000_000);
        let f = split(&r, &device_use(&r)).expect("a finding");
        assert_eq!((f.kind, f.cost_ns), (FindingKind::DevicesTakeTurns, 40_000_000));
    }

    #[test]
    fn under_trace_windows_shares_are_over_the_traced_time_and_make_no_finding() {
        use crate::model::sampled::{SamplingStatus, TraceWindows};
        // 20 ms of 100 traced: GPU 0 ran 18 ms of kernels in it, GPU 1 6 ms,
        // with 1 ms of known idle each (the rest touched untraced time).
        let mut r = report(&[(0, 1_000_000, 0), (1, 1_000_000, 0)], 95_000_000);
        r.device_time[0].busy_ns = 18_000_000;
        r.device_time[1].busy_ns = 6_000_000;
        let windows = TraceWindows { traced_ns: 20_000_000, ..Default::default() };
        r.sampling = Some(SamplingStatus { trace_windows: Some(windows), ..Default::default() });
        let uses = device_use(&r);
        assert_eq!(
            uses.iter().map(|u| (u.window, u.busy_pct.round())).collect::<Vec<_>>(),
            [("the traced time", 90.0), ("the traced time", 30.0)]
        );
        assert!(split(&r, &uses).is_none(), "whether they worked at once is not known");
    }
}
