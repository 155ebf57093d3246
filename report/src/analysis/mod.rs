//! Analysis: the sixth stage. Pure functions of a [`Report`] (a fresh one,
//! or one read back from JSON, schema 1 included) that say what bounds each
//! NVTX range and each heavy kernel, how far they are from the device's
//! peaks, why the GPU idled, and what to change, ranked by what it costs.

#[macro_use]
mod names;

mod advice;
internal_mod! { mod answer; }
internal_mod! { mod blocks; }
internal_mod! { mod cost; }
internal_mod! { mod devices; }
mod findings;
mod framework;
pub mod job;
pub mod peaks;
mod rates;
mod windowed;
internal_mod! { mod rules; }
internal_mod! { mod verdict; }

pub use answer::{Action, Answer, Other, Part, BUSY_SAMPLED, BUSY_TRACED, BUSY_UNKNOWN};
pub use blocks::BlockGroup;
pub use devices::DeviceUse;
pub use findings::Finding;
#[cfg(feature = "internal")]
pub use findings::MAX_PER_KIND as MAX_FINDINGS_PER_KIND;
pub use peaks::{LinkPeak, Peaks};
pub use rules::FindingKind;
use verdict::Counted;
pub use verdict::{Bound, Verdict};

use crate::model::comm::{collective, is_comm_kernel};
use crate::model::idle::IdleSplit;
use crate::model::units::fmt_ns;
use crate::report::{KernelStats, RangeSummary, Report};
use peaks::{Pipe, TENSOR_BF16};
use rates::{rates, rates_from, Rates};
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

/// Kernels with at least this share of all kernel time get a verdict of
/// their own (the rest are too small to change the picture).
pub(crate) const HEAVY_KERNEL_PCT: f64 = 3.0;
/// At most this many heavy kernels.
pub(crate) const MAX_HEAVY_KERNELS: usize = 12;

/// Everything the analysis says about one report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Analysis {
    /// The device's peaks, and where they come from.
    pub peaks: Option<Peaks>,
    /// One per push/pop range path, in the report's order.
    pub ranges: Vec<RangeAnalysis>,
    /// Kernels with at least 3% of kernel time, most first (at most 12).
    pub kernels: Vec<KernelAnalysis>,
    /// What to change, most costly first.
    pub findings: Vec<Finding>,
    /// What the analysis could not do, and what would let it.
    pub notes: Vec<String>,
    /// The answer the report opens with (`None`: nothing ran).
    pub answer: Option<answer::Answer>,
    /// Repeated ranges (`layers.0` ... `layers.7`, and what is inside
    /// them) summed.
    pub blocks: Vec<blocks::BlockGroup>,
    /// Each GPU's use, when the process drove several (empty with one).
    pub devices: Vec<devices::DeviceUse>,
}

/// One NVTX range path, its calls after warm-up together (all of them when
/// warm-up cannot be told apart: see [`crate::report::Steady`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RangeAnalysis {
    /// `outer/inner`.
    pub path: String,
    /// Calls counted (warm-up calls left out).
    pub count: u64,
    /// Their wall time, ns.
    pub wall_ns: u64,
    /// Warm-up calls left out, and their wall time, ns.
    pub warmup_calls: u64,
    /// See `warmup_calls`.
    pub warmup_wall_ns: u64,
    /// Median and 90th percentile wall time of the calls counted, ns.
    pub median_ns: Option<u64>,
    /// See `median_ns`.
    pub p90_ns: Option<u64>,
    /// gpuscope's own time in these calls that the GPU waited for (CUPTI's
    /// measured per-launch cost and gpuscope's callbacks), left out before
    /// judging, ns; in older reports its whole cost, taken out of the
    /// host's idle time.
    pub profiler_ns: Option<u64>,
    /// GPU idle time by cause as the report holds it: with gpuscope's cost
    /// in its profiler share already where
    /// [`crate::report::ProfilerCost::in_idle`], else before it was taken
    /// out.
    pub idle_measured: Option<IdleSplit>,
    /// What its threads did in these calls.
    pub host: crate::report::HostFigures,
    /// The library's or framework's NVTX domain when the range is one of
    /// theirs: folded into the range around it, no verdict of its own.
    pub library: Option<String>,
    /// gpuscope opened it for a function on the Python stack (a module, the
    /// optimizer): never a step.
    pub from_stack: bool,
    /// A framework integration opened it through gpuscope (the PyTorch
    /// hooks' `step`, modules, ...): a repeating range of the program's own
    /// is the step before it.
    #[serde(skip)]
    pub from_hooks: bool,
    /// Wall time without gpuscope's own time (its measurements in metrics
    /// mode, its estimated per-launch cost in trace mode), ns: the time
    /// base of the shares, utilisation and MFU below.
    pub active_ns: u64,
    /// Share of that time in which a kernel ran: what `nvidia-smi` would
    /// show for the range, %. Any kernel of the process counts (schema 2);
    /// schema-1 reports count only the range's own kernels.
    pub utilization_pct: f64,
    /// GPU idle time by cause (schema 2), gpuscope's own cost moved to
    /// `profiler_ns`.
    pub idle: Option<IdleSplit>,
    /// Kernel time launched inside the range (nested ranges included), ns:
    /// of all its calls, warm-up included.
    pub kernel_ns: u64,
    /// Share of that kernel time whose kernels have hardware counters
    /// (measured there, or the same kernel measured elsewhere), %.
    pub measured_pct: f64,
    /// SM efficiency, achieved occupancy, compute and DRAM throughput
    /// (% of peak), weighted by kernel time over the kernels with values.
    pub sm_efficiency_pct: Option<f64>,
    /// See `sm_efficiency_pct`.
    pub achieved_occupancy_pct: Option<f64>,
    /// See `sm_efficiency_pct`.
    pub compute_pct: Option<f64>,
    /// See `sm_efficiency_pct`.
    pub dram_pct: Option<f64>,
    /// The four figures above come from PM samples over the range's kernel
    /// time (sampling mode), not per-launch measurements.
    pub sampled: bool,
    /// FLOPs counted by the hardware (extrapolated from the measured
    /// launches to all of the range's kernel time), when FLOP counters
    /// were collected (`--metrics tensor`, `flops` or `roofline`).
    pub flops: Option<f64>,
    /// Counted FLOPs per pipe.
    pub flops_by_pipe: Vec<(Pipe, f64)>,
    /// Hardware MFU: for each pipe, its FLOPs over one GPU's dense peak,
    /// summed, over `active_ns`, per GPU its calls usually ran on, %.
    pub hardware_mfu_pct: Option<f64>,
    /// FLOPs per DRAM byte, and the ridge point of the pipe with most FLOPs.
    pub arithmetic_intensity: Option<f64>,
    /// See `arithmetic_intensity`.
    pub ridge_point: Option<f64>,
    /// Declared model FLOPs per second per GPU (a range whose calls ran on
    /// several GPUs of the process divides by their count), and as a share
    /// of one GPU's dense peak of the pipe with most counted FLOPs (bf16
    /// tensor cores when none), %.
    pub model_flops_per_s: Option<f64>,
    /// See `model_flops_per_s`.
    pub model_mfu_pct: Option<f64>,
    /// The pipe whose peak `model_mfu_pct` uses.
    pub model_mfu_pipe: Option<Pipe>,
    /// The model FLOPs were counted from operand shapes (PyTorch's
    /// automatic ranges), not declared.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model_flops_counted: bool,
    /// Declared work per second, and its unit.
    pub throughput_per_s: Option<f64>,
    /// See `throughput_per_s`.
    pub throughput_unit: Option<String>,
    /// What bounds it.
    pub verdict: Verdict,
    /// No instance was traced (sampling mode's trace windows): `count`,
    /// `wall_ns` and `launches` are of the untraced instances, the figures
    /// are PM samples over their wall time (idle GPU included), and
    /// `utilization_pct` is the graphics engine's sampled activity, times
    /// the kernels' share of it inside trace windows where the steady state
    /// has them ([`WindowsBusy`](crate::report::WindowsBusy); 0 when not
    /// sampled: unknown).
    pub untraced: bool,
    /// Kernel launch calls made inside it (nested ranges included); of an
    /// untraced range, counted by the launch callbacks (`None`: not
    /// counted, a report of an older gpuscope).
    pub launches: Option<u64>,
    /// Communication kernels' time in the calls judged (the union on each
    /// device, summed), ns.
    #[serde(skip_serializing_if = "is_zero")]
    pub comm_ns: u64,
    /// The part of `comm_ns` no compute kernel of the same device ran
    /// under, ns: what `communication-bound` is judged on.
    #[serde(skip_serializing_if = "is_zero")]
    pub exposed_comm_ns: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One heavy kernel.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct KernelAnalysis {
    /// Demangled name.
    pub name: String,
    /// Its display name in the report.
    #[serde(skip)]
    pub display_name: String,
    /// Launches.
    pub launches: u64,
    /// GPU time, ns, and its share of all kernel time, %.
    pub gpu_ns: u64,
    /// See `gpu_ns`.
    pub share_pct: f64,
    /// Measured figures (see [`RangeAnalysis`]).
    pub sm_efficiency_pct: Option<f64>,
    /// The figures come from PM samples (sampling mode), not per-launch
    /// measurements.
    pub sampled: bool,
    /// See `sm_efficiency_pct`.
    pub achieved_occupancy_pct: Option<f64>,
    /// See `sm_efficiency_pct`.
    pub compute_pct: Option<f64>,
    /// See `sm_efficiency_pct`.
    pub dram_pct: Option<f64>,
    /// Counted FLOP/s while it runs.
    pub flops_per_s: Option<f64>,
    /// FLOPs per DRAM byte.
    pub arithmetic_intensity: Option<f64>,
    /// Launch shape (see [`KernelStats`]).
    pub sm_coverage_pct: Option<f64>,
    /// See `sm_coverage_pct`.
    pub wave_efficiency_pct: Option<f64>,
    /// See `sm_coverage_pct`.
    pub waves: Option<f64>,
    /// What bounds it (`None`: not measured, shape unremarkable).
    pub verdict: Option<Verdict>,
}

/// Figures of a set of kernels weighted by their kernel time.
#[derive(Default)]
struct Weighted {
    time: f64,
    measured: f64,
    sums: [(f64, f64); 4],
    flops: Vec<(Pipe, f64)>,
    dram_bytes: f64,
    dram_time: f64,
    /// Kernel time and evidence per verdict (a handful of bounds).
    votes: Vec<(verdict::Bound, f64, String)>,
}

impl Weighted {
    fn add(&mut self, t: f64, r: &Rates) {
        self.time += t;
        if r.measured() {
            self.measured += t;
        }
        for (i, v) in [r.sm_efficiency, r.occupancy, r.compute_pct, r.dram_pct].into_iter().enumerate() {
            if let Some(v) = v {
                self.sums[i].0 += v * t;
                self.sums[i].1 += t;
            }
        }
        for (pipe, f) in &r.flops_per_ns {
            match self.flops.iter_mut().find(|(p, _)| p == pipe) {
                Some((_, x)) => *x += f * t,
                None => self.flops.push((pipe, f * t)),
            }
        }
        if let Some(b) = r.dram_bytes_per_ns {
            self.dram_bytes += b * t;
            self.dram_time += t;
        }
        if let Some(v) = verdict::kernel(r) {
            match self.votes.iter_mut().find(|(b, _, _)| *b == v.bound) {
                Some((_, time, evidence)) => {
                    *time += t;
                    *evidence = v.evidence;
                }
                None => self.votes.push((v.bound, t, v.evidence)),
            }
        }
    }

    fn mean(&self, i: usize) -> Option<f64> {
        let (s, t) = self.sums[i];
        (t > 0.0).then(|| s / t)
    }

    /// The verdict of most of the kernel time, when kernels with one make
    /// up at least half of it.
    fn verdict(&self) -> Option<Verdict> {
        let (bound, t, evidence) = self.votes.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
        let share = 100.0 * t / self.time.max(1.0);
        if share < 50.0 {
            return None;
        }
        let evidence = if share >= 99.5 {
            evidence.clone()
        } else {
            format!("{share:.0}% of its kernel time is {bound} (largest: {evidence})")
        };
        Some(Verdict { bound: bound.clone(), evidence })
    }
}

impl Report {
    /// What bounds each range and heavy kernel, and what to change:
    /// [`analyze`] of this report, computed at the first call (or the
    /// first rendering) and kept, so every format renders from one
    /// analysis. Edits to the report's fields after that are not seen here:
    /// call [`analyze`] on an edited report, or edit a clone (a clone
    /// analyses afresh).
    pub fn analysis(&self) -> &Analysis {
        self.analysis.0.get_or_init(|| Box::new(analyze(self)))
    }

    /// Drops the analysis [`Report::analysis`] kept: the next use analyses
    /// the report as it is then (after its fields were edited).
    #[doc(hidden)]
    pub fn forget_analysis(&mut self) {
        self.analysis = Default::default();
    }
}

/// Analyses `r`.
pub fn analyze(r: &Report) -> Analysis {
    let peaks = r.devices.first().and_then(peaks::peaks);
    let total_kernel_ns = r.total_kernel_ns().max(1) as f64;
    let by_name: HashMap<&str, &KernelStats> = r.kernels.iter().map(|k| (k.name.as_str(), &k.stats)).collect();
    // A (path, kernel) without counters of its own takes those of its kernel
    // measured anywhere (metrics mode measures the first launches).
    let rate_of = |name: &str, s: &KernelStats| -> Rates {
        match by_name.get(name) {
            Some(k) if s.profiled_launches == 0 && k.profiled_launches > 0 => rates_from(s, k, peaks.as_ref()),
            _ => rates(s, peaks.as_ref()),
        }
    };
    // Kernels under each range: a (path, kernel) counts for every prefix of
    // its path.
    let prefixes = r.path_kernels.iter().map(|k| k.path.frames.len()).sum::<usize>();
    let mut under: HashMap<&[crate::model::path::RangeFrame], Weighted> =
        HashMap::with_capacity_and_hasher(prefixes.min(r.ranges.len().saturating_mul(4)), Default::default());
    for k in &r.path_kernels {
        // A communication kernel's time counts, its SM figures do not: they
        // would call a range waiting on the network latency-bound.
        let rt = if is_comm_kernel(&k.name) { Rates::default() } else { rate_of(&k.name, &k.stats) };
        for n in 1..=k.path.frames.len() {
            under.entry(&k.path.frames[..n]).or_default().add(k.stats.total_ns as f64, &rt);
        }
    }
    let one = |g: &RangeSummary| match &g.library {
        Some(domain) => folded_range(g, domain),
        None => range(r, g, under.get(g.path.frames.as_slice()), peaks.as_ref()),
    };
    let ranges = in_parallel(&r.ranges, one);
    // Every kernel can make a finding; the heavy ones are shown.
    let all: Vec<KernelAnalysis> = r.kernels.iter().map(|k| kernel(k, total_kernel_ns, peaks.as_ref())).collect();
    let mut kernels: Vec<KernelAnalysis> = all.iter().filter(|k| k.share_pct >= HEAVY_KERNEL_PCT).cloned().collect();
    kernels.truncate(MAX_HEAVY_KERNELS);
    let mut notes = Vec::new();
    if peaks.is_none() {
        notes.push(match r.devices.first() {
            Some(d) => format!("no peak figures for {:?} (not in the datasheet table, and the report has no clock figures): throughput shares and MFU are left out", d.name),
            None => "no device in the report: throughput shares and MFU are left out".to_string(),
        });
    }
    if r.mode == "trace" && !r.kernels.is_empty() {
        notes.push("trace mode: compute-, memory- and latency-bound need hardware counters; run again with --mode metrics (GPUSCOPE_MODE=metrics)".into());
    } else if r.kernels.iter().any(|k| k.stats.profiled_launches > 0) && ranges.iter().all(|g| g.flops.is_none()) {
        notes.push(
            "hardware MFU needs FLOP counters: --metrics tensor (tensor cores; 7 replay passes) or roofline".into(),
        );
    }
    let uncounted = r.kernels.iter().filter(|k| rules::checklist::bytes_uncounted(&k.stats)).count();
    if uncounted > 0 {
        notes.push(format!(
            "the instrumented share of used bytes (smsp__sass_*) read 0 for {uncounted} kernel(s) whose global loads \
             were counted (loads it does not see, such as cp.async copies; in a pass asked of a live process, every \
             kernel's): their coalescing is judged from sectors per request alone (more than 16)"
        ));
    }
    if r.schema_version < 2 {
        notes.push(format!(
            "schema-{} report: GPU idle causes were not recorded; utilisation counts each range's own kernels only",
            r.schema_version
        ));
    }
    let evidence = advice::Evidence::new(r, &ranges);
    let (findings, omitted) = findings::findings(&evidence, &ranges, &all, peaks.as_ref());
    if omitted > 0 {
        notes.push(format!(
            "{omitted} smaller findings left out: at most the {} most costly of each kind are listed",
            findings::MAX_PER_KIND
        ));
    }
    let answer = answer::answer(r, &ranges, &all, &findings, &evidence);
    let blocks = blocks::groups(&ranges);
    let devices = evidence.devices;
    Analysis { peaks, ranges, kernels, findings, notes, answer, blocks, devices }
}

/// Ranges from which their analysis is split over threads: each range's
/// is independent of the others', and a report of a million ranges (range
/// names with a step number or a request id) would take seconds on one.
const PARALLEL_FROM: usize = 20_000;

/// `f` of each item, in order; over up to 8 threads for long inputs, each
/// making the results of its share, moved into one vector as the threads
/// are joined (the moves copy each result's own bytes, not what it points
/// to).
fn in_parallel<T: Sync, U: Send>(items: &[T], f: impl Fn(&T) -> U + Sync) -> Vec<U> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    if items.len() < PARALLEL_FROM || threads < 2 {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    let mut out: Vec<U> = Vec::with_capacity(items.len());
    std::thread::scope(|s| {
        let parts: Vec<_> =
            items.chunks(chunk).map(|from| s.spawn(move || from.iter().map(f).collect::<Vec<U>>())).collect();
        for p in parts {
            match p.join() {
                Ok(part) => out.extend(part),
                // A panic in one range's analysis is the same panic as
                // without threads.
                Err(e) => std::panic::resume_unwind(e),
            }
        }
    });
    out
}

fn range(r: &Report, g: &RangeSummary, w: Option<&Weighted>, peaks: Option<&Peaks>) -> RangeAnalysis {
    // Untraced calls speak for the range when it has no traced one, or in
    // an always-on session when they are most of its calls (a window asked
    // for traced a few).
    if g.untraced_count > 0 && (g.count == 0 || (answer::always_on(r) && g.untraced_count >= g.count)) {
        let counted = r.sampling.as_ref().and_then(|s| s.trace_windows.as_ref()).and_then(|w| w.untraced_launches);
        let share = r.session_steady.and_then(|s| s.kernel_share());
        return untraced_range(g, peaks, counted.is_some(), share);
    }
    let path = g.path.to_string();
    // The calls after warm-up, when they can be told apart.
    let calls = Calls::of(g);
    let h = &calls.host;
    let added = r.profiler_cost.added_ns(calls.launches, h.callback_ns, h.launch_call_ns, h.calls_timed, h.hook_ns);
    let idle = calls.idle.map(|i| cost::taken_out(&r.profiler_cost, i, added));
    let profiler = idle.map_or(0, |i| i.profiler_ns);
    let active_ns = calls.wall_ns.saturating_sub(profiler);
    let shares = idle.as_ref().and_then(|i| verdict::Shares::of(calls.wall_ns, i));
    let utilization_pct = shares.map_or(calls.utilization_pct, |s| s.busy);
    let empty = Weighted::default();
    let w = w.unwrap_or(&empty);
    // Sampling mode: the figures of the samples over its kernels' time.
    let sampled = g.sampled.as_ref().filter(|_| g.metrics_sampled).map(|f| rates::sampled(f, Rates::default(), peaks));
    let secs = active_ns as f64 / 1e9;
    // Peaks are one device's: a range whose calls ran on several GPUs had
    // that many times the peak. FLOP/s and MFU are per GPU.
    let gpus = g.gpus.max(1) as f64;
    let flops = (!w.flops.is_empty()).then(|| w.flops.iter().map(|(_, f)| f).sum::<f64>());
    let hardware_mfu_pct = flops.and(peaks).filter(|_| secs > 0.0).map(|p| {
        w.flops.iter().filter_map(|(pipe, f)| p.flops(pipe).map(|peak| f / peak)).sum::<f64>() / secs / gpus * 100.0
    });
    let main_pipe = w.flops.iter().filter(|(_, f)| *f > 0.0).max_by(|a, b| a.1.total_cmp(&b.1)).map(|(p, _)| *p);
    let arithmetic_intensity = flops.filter(|f| *f > 0.0 && w.dram_bytes > 0.0).map(|f| f / w.dram_bytes);
    let ridge_point = arithmetic_intensity.and(peaks).and_then(|p| p.ridge(main_pipe.unwrap_or(TENSOR_BF16)));
    let declared = r.declared.iter().filter(|d| d.matches(&path));
    let declared_flops = declared.clone().find_map(|d| d.flops).map(|f| f * calls.count as f64);
    // Declared FLOPs win over those counted from shapes.
    let model_flops_counted = declared_flops.is_none() && calls.counted_flops > 0.0;
    let model_flops = declared_flops.or(model_flops_counted.then_some(calls.counted_flops));
    let work = declared.clone().find_map(|d| d.work.map(|w| (w * calls.count as f64, d.unit.clone())));
    let model_mfu_pipe = model_flops.and(peaks).map(|_| main_pipe.unwrap_or(TENSOR_BF16));
    let per_s = |x: f64| (secs > 0.0).then(|| x / secs);
    let model_flops_per_s = model_flops.and_then(per_s).map(|f| f / gpus);
    let model_mfu_pct = model_flops_per_s
        .zip(model_mfu_pipe.zip(peaks).and_then(|(pipe, p)| p.flops(pipe)))
        .map(|(f, peak)| 100.0 * f / peak);
    // A range whose window the GPU spends mostly on kernels launched
    // outside it (another thread: PyTorch's autograd worker runs backward)
    // is not judged by its own few kernels.
    // Kernel time is over every call: compare per call.
    let per_call = w.time / g.count.max(1) as f64;
    let busy_ns = idle.map(|i| calls.wall_ns.saturating_sub(i.total()));
    let elsewhere = busy_ns.is_some_and(|b| b > 0 && per_call * (calls.count as f64) < 0.5 * b as f64);
    let gpu_side = if elsewhere {
        Some(Verdict {
            bound: Bound::Gpu,
            evidence: format!(
                "its own kernels ran {} of the {} the GPU was busy in it; the rest was launched before it or outside it (queued earlier, or by another thread such as PyTorch's autograd worker)",
                fmt_ns(w.time as u64),
                fmt_ns(busy_ns.unwrap_or(0))
            ),
        })
    } else {
        // Sampling mode: short kernels have no figures of their own; the
        // range's samples speak for them.
        w.verdict().or_else(|| sampled.as_ref().and_then(verdict::kernel))
    };
    let pick = |i: usize, v: Option<f64>| match &sampled {
        Some(_) => v,
        None => w.mean(i),
    };
    let mut v = verdict::range(shares, utilization_pct, gpu_side.clone(), w.measured > 0.0);
    if v.bound == Bound::Launch {
        v.evidence
            .push_str(&format!("; {}", advice::launch_rate(calls.launches, calls.count, calls.wall_ns, per_call)));
    }
    let taken =
        calls.idle.and_then(|i| cost::taken(&r.profiler_cost, &cost::taken_out(&r.profiler_cost, i, added), added));
    if let (Some(a), Some(measured)) = (taken.filter(|a| *a > 0), calls.idle) {
        // Within the estimate's margin, would the verdict hold?
        let other = [1.0 - cost::MARGIN, 1.0 + cost::MARGIN].into_iter().find_map(|f| {
            let i = cost::scaled(&r.profiler_cost, measured, a, f);
            let s = verdict::Shares::of(calls.wall_ns, &i);
            let b = verdict::range(s, s.map_or(0.0, |s| s.busy), gpu_side.clone(), w.measured > 0.0).bound;
            (b != v.bound).then_some(b)
        });
        if let Some(b) = other {
            v.evidence.push_str(&format!(
                "; uncertain: gpuscope's own cost ({} here) decides it: with {:.0}% more or less of it taken out it \
                 reads {b}",
                fmt_ns(a),
                cost::MARGIN * 100.0
            ));
        }
    }
    let v = verdict::communication(v, shares, active_ns, calls.comm_ns, calls.exposed_comm_ns);
    RangeAnalysis {
        count: calls.count,
        wall_ns: calls.wall_ns,
        warmup_calls: g.steady.map_or(0, |s| s.warmup_calls),
        warmup_wall_ns: g.steady.map_or(0, |s| s.warmup_wall_ns),
        median_ns: g.steady.map(|s| s.median_ns),
        p90_ns: g.steady.map(|s| s.p90_ns),
        profiler_ns: if r.profiler_cost.in_idle { taken } else { added },
        idle_measured: calls.idle,
        host: calls.host,
        library: None,
        active_ns,
        utilization_pct,
        idle,
        kernel_ns: w.time as u64,
        measured_pct: if w.time > 0.0 { 100.0 * w.measured / w.time } else { 0.0 },
        sm_efficiency_pct: pick(0, sampled.as_ref().and_then(|r| r.sm_efficiency)).or(g.sm_efficiency_pct),
        achieved_occupancy_pct: pick(1, sampled.as_ref().and_then(|r| r.occupancy)).or(g.achieved_occupancy_pct),
        compute_pct: pick(2, sampled.as_ref().and_then(|r| r.compute_pct)),
        dram_pct: pick(3, sampled.as_ref().and_then(|r| r.dram_pct)),
        sampled: sampled.is_some(),
        flops,
        flops_by_pipe: w.flops.clone(),
        hardware_mfu_pct,
        arithmetic_intensity,
        ridge_point,
        model_flops_per_s,
        model_mfu_pct,
        model_mfu_pipe,
        model_flops_counted,
        throughput_per_s: work.as_ref().and_then(|(w, _)| per_s(*w)),
        throughput_unit: work.and_then(|(_, u)| u),
        verdict: v,
        path,
        from_stack: g.path.leaf_domain() == Some(crate::model::path::STACK_DOMAIN),
        from_hooks: g.path.leaf_domain() == Some(crate::model::path::HOOKS_DOMAIN),
        untraced: false,
        launches: Some(calls.launches),
        comm_ns: calls.comm_ns,
        exposed_comm_ns: calls.exposed_comm_ns,
    }
}

/// The figures of a range's calls that its verdict is of: those after
/// warm-up when it has them, all of them otherwise.
struct Calls {
    count: u64,
    wall_ns: u64,
    idle: Option<IdleSplit>,
    utilization_pct: f64,
    launches: u64,
    host: crate::report::HostFigures,
    counted_flops: f64,
    comm_ns: u64,
    exposed_comm_ns: u64,
}

impl Calls {
    fn of(g: &RangeSummary) -> Calls {
        match &g.steady {
            Some(s) => Calls {
                count: s.calls,
                wall_ns: s.wall_ns,
                idle: g.idle.map(|_| s.idle),
                utilization_pct: s.utilization_pct(),
                launches: s.launches,
                host: s.host,
                counted_flops: s.counted_flops,
                comm_ns: s.totals.comm_ns,
                exposed_comm_ns: s.totals.exposed_comm_ns,
            },
            None => Calls {
                count: g.count,
                wall_ns: g.wall_ns,
                idle: g.idle,
                utilization_pct: g.gpu_utilization_pct,
                launches: g.kernel_launches,
                host: g.host,
                counted_flops: g.counted_flops,
                comm_ns: g.totals.comm_ns,
                exposed_comm_ns: g.totals.exposed_comm_ns,
            },
        }
    }
}

/// A range of a library's or framework's NVTX domain: folded into the
/// range around it (whose figures include it), no verdict of its own.
fn folded_range(g: &RangeSummary, domain: &str) -> RangeAnalysis {
    RangeAnalysis {
        from_stack: g.path.leaf_domain() == Some(crate::model::path::STACK_DOMAIN),
        from_hooks: g.path.leaf_domain() == Some(crate::model::path::HOOKS_DOMAIN),
        path: g.path.to_string(),
        count: g.count,
        wall_ns: g.wall_ns,
        warmup_calls: 0,
        warmup_wall_ns: 0,
        median_ns: None,
        p90_ns: None,
        profiler_ns: None,
        idle_measured: g.idle,
        host: g.host,
        library: Some(domain.to_string()),
        active_ns: g.wall_ns,
        utilization_pct: g.gpu_utilization_pct,
        idle: g.idle,
        kernel_ns: g.gpu_busy_ns,
        measured_pct: 0.0,
        sm_efficiency_pct: g.sm_efficiency_pct,
        achieved_occupancy_pct: g.achieved_occupancy_pct,
        compute_pct: None,
        dram_pct: None,
        sampled: false,
        flops: None,
        flops_by_pipe: Vec::new(),
        hardware_mfu_pct: None,
        arithmetic_intensity: None,
        ridge_point: None,
        model_flops_per_s: None,
        model_mfu_pct: None,
        model_mfu_pipe: None,
        model_flops_counted: false,
        throughput_per_s: None,
        throughput_unit: None,
        verdict: Verdict {
            bound: Bound::Folded,
            evidence: format!("a range of {domain}'s NVTX domain: its time is in the range around it"),
        },
        untraced: false,
        launches: Some(g.kernel_launches),
        comm_ns: g.totals.comm_ns,
        exposed_comm_ns: g.totals.exposed_comm_ns,
    }
}

/// A range none of whose instances was traced: what PM samples over its
/// wall time and its launch counts say (`counted`: the session counted
/// launches between windows), and nothing that needs kernel records (with
/// no samples either, nothing is known). Its calls after warm-up, when
/// their wall times tell warm-up apart.
fn untraced_range(g: &RangeSummary, peaks: Option<&Peaks>, counted: bool, kernel_share: Option<f64>) -> RangeAnalysis {
    let s = g.untraced_steady.as_ref();
    let f = g.sampled_wall_steady.as_ref().or(g.sampled_wall.as_ref());
    let (count, wall_ns) = s.map_or((g.untraced_count, g.untraced_wall_ns), |s| (s.calls, s.wall_ns));
    let r = f.map_or_else(Rates::default, |f| rates::sampled(f, Rates::default(), peaks));
    // The steady calls' own launches (counted per call, sent before each
    // pop); without a steady state, all calls' (counts that reached only
    // the path included).
    let launches = counted.then(|| s.map_or(g.untraced_launches, |s| s.launches));
    let n = launches.map(|launches| Counted { calls: count, launches, wall_ns });
    RangeAnalysis {
        from_stack: g.path.leaf_domain() == Some(crate::model::path::STACK_DOMAIN),
        from_hooks: g.path.leaf_domain() == Some(crate::model::path::HOOKS_DOMAIN),
        path: g.path.to_string(),
        count,
        wall_ns,
        warmup_calls: s.map_or(0, |s| s.warmup_calls),
        warmup_wall_ns: s.map_or(0, |s| s.warmup_wall_ns),
        median_ns: s.map(|s| s.median_ns),
        p90_ns: s.map(|s| s.p90_ns),
        profiler_ns: None,
        idle_measured: None,
        // Graph launches of its steady calls (counted with the launches).
        host: crate::report::HostFigures { graph_launches: s.map_or(0, |s| s.host.graph_launches), ..g.host },
        library: None,
        active_ns: wall_ns,
        // The kernels' share of the engine's activity inside trace windows
        // turns the engine's sampled share into the kernels' union.
        utilization_pct: f.and_then(|f| f.gpu_busy_pct).map_or(0.0, |b| answer::kernels_busy(b, kernel_share)),
        idle: None,
        kernel_ns: 0,
        measured_pct: 0.0,
        sm_efficiency_pct: r.sm_efficiency,
        achieved_occupancy_pct: r.occupancy,
        compute_pct: r.compute_pct,
        dram_pct: r.dram_pct,
        sampled: f.is_some(),
        flops: None,
        flops_by_pipe: Vec::new(),
        hardware_mfu_pct: None,
        arithmetic_intensity: None,
        ridge_point: None,
        model_flops_per_s: None,
        model_mfu_pct: None,
        model_mfu_pipe: None,
        model_flops_counted: false,
        throughput_per_s: None,
        throughput_unit: None,
        verdict: match f {
            Some(f) => answer::wall_verdict(f, kernel_share, peaks, n),
            None => verdict::unmeasured(count),
        },
        untraced: true,
        launches,
        comm_ns: 0,
        exposed_comm_ns: 0,
    }
}

fn kernel(k: &crate::report::KernelSummary, total_ns: f64, peaks: Option<&Peaks>) -> KernelAnalysis {
    let s = &k.stats;
    let r = rates(s, peaks);
    let flops = r.total_flops_per_ns();
    KernelAnalysis {
        name: k.name.clone(),
        display_name: k.display_name.clone(),
        launches: s.launches,
        gpu_ns: s.total_ns,
        share_pct: 100.0 * s.total_ns as f64 / total_ns,
        sm_efficiency_pct: r.sm_efficiency,
        achieved_occupancy_pct: r.occupancy,
        sampled: s.metrics_sampled,
        compute_pct: r.compute_pct,
        dram_pct: r.dram_pct,
        flops_per_s: (!r.flops_per_ns.is_empty()).then_some(flops * 1e9),
        arithmetic_intensity: r.dram_bytes_per_ns.filter(|b| *b > 0.0 && flops > 0.0).map(|b| flops / b),
        sm_coverage_pct: r.sm_coverage,
        wave_efficiency_pct: r.wave_efficiency,
        waves: r.waves,
        verdict: match collective(&k.name) {
            Some(op) => Some(verdict::comm_kernel(op.as_str())),
            None => verdict::kernel(&r),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_inputs_are_analysed_over_threads_in_their_order() {
        let items: Vec<u64> = (0..PARALLEL_FROM as u64 * 3 + 7).collect();
        let doubled = in_parallel(&items, |x| x.to_string());
        assert_eq!(doubled, items.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        let panicked =
            std::panic::catch_unwind(|| in_parallel(&items, |x| if *x == 12_345 { panic!("one") } else { *x }));
        assert!(panicked.is_err(), "a panic in one item is the caller's panic");
    }
}
