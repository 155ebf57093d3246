//! Analysis: the sixth stage. Pure functions of a [`Report`] (a fresh one,
//! or one read back from JSON, schema 1 included) that say what bounds each
//! NVTX range and each heavy kernel, how far they are from the device's
//! peaks, why the GPU idled, and what to change, ranked by what it costs.

#[macro_use]
mod names;

mod advice;
pub mod answer;
pub mod blocks;
pub mod cost;
pub mod devices;
mod findings;
mod framework;
pub mod job;
pub mod peaks;
mod rates;
pub mod rules;
pub mod verdict;

pub use findings::{Finding, MAX_PER_KIND as MAX_FINDINGS_PER_KIND};
pub use peaks::Peaks;
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
pub const HEAVY_KERNEL_PCT: f64 = 3.0;
/// At most this many heavy kernels.
pub const MAX_HEAVY_KERNELS: usize = 12;

/// Everything the analysis says about one report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Analysis {
    /// The device's peaks, and where they come from.
    pub peaks: Option<Peaks>,
    /// One per push/pop range path, in the report's order.
    pub ranges: Vec<RangeAnalysis>,
    /// Kernels with at least [`HEAVY_KERNEL_PCT`] of kernel time, most
    /// first.
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
/// warm-up cannot be told apart: see [`crate::report::steady`]).
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
    /// gpuscope's own time in these calls (CUPTI's measured per-launch
    /// cost and gpuscope's callbacks), taken out of the host's idle time
    /// before judging: `idle` is without it, `idle_measured` with it, ns.
    pub profiler_ns: Option<u64>,
    /// GPU idle time by cause as measured, before gpuscope's cost was
    /// taken out.
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
    /// `utilization_pct` is the graphics engine's sampled activity (0 when
    /// not sampled: unknown).
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
        let any = self.analysis.0.get_or_init(|| Box::new(analyze(self)));
        // Only this function fills the cache, always with an `Analysis`.
        any.downcast_ref::<Analysis>().expect("the analysis cache holds an Analysis")
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
/// writing its share of the result in place (a million analyses are ~1 GB:
/// no copy of them).
fn in_parallel<T: Sync, U: Send>(items: &[T], f: impl Fn(&T) -> U + Sync) -> Vec<U> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    if items.len() < PARALLEL_FROM || threads < 2 {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    let mut out: Vec<U> = Vec::with_capacity(items.len());
    std::thread::scope(|s| {
        let parts: Vec<_> = items
            .chunks(chunk)
            .zip(out.spare_capacity_mut()[..items.len()].chunks_mut(chunk))
            .map(|(from, to)| {
                s.spawn(move || {
                    for (x, slot) in from.iter().zip(to) {
                        slot.write(f(x));
                    }
                })
            })
            .collect();
        for p in parts {
            if let Err(e) = p.join() {
                // A panic in one range's analysis is the same panic as
                // without threads (what was written is leaked, not read).
                std::panic::resume_unwind(e);
            }
        }
    });
    // SAFETY: every thread joined without a panic, so each of the first
    // `items.len()` slots (the chunks cover them all) was written once.
    unsafe { out.set_len(items.len()) };
    out
}

fn range(r: &Report, g: &RangeSummary, w: Option<&Weighted>, peaks: Option<&Peaks>) -> RangeAnalysis {
    // Untraced calls speak for the range when it has no traced one, or in
    // an always-on session when they are most of its calls (a window asked
    // for traced a few).
    if g.untraced_count > 0 && (g.count == 0 || (answer::always_on(r) && g.untraced_count >= g.count)) {
        let counted = r.sampling.as_ref().and_then(|s| s.trace_windows.as_ref()).and_then(|w| w.untraced_launches);
        return untraced_range(g, peaks, counted.is_some());
    }
    let path = g.path.to_string();
    // The calls after warm-up, when they can be told apart.
    let calls = Calls::of(g);
    let h = &calls.host;
    let added = r.profiler_cost.added_ns(calls.launches, h.callback_ns, h.launch_call_ns, h.calls_timed, h.hook_ns);
    let idle = calls.idle.map(|i| cost::remove(i, added.unwrap_or(0)));
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
    if let (Some(a), Some(measured)) = (added.filter(|a| *a > 0), calls.idle) {
        // Within the estimate's margin, would the verdict hold?
        let other = [1.0 - cost::MARGIN, 1.0 + cost::MARGIN].into_iter().find_map(|f| {
            let i = cost::remove(measured, (a as f64 * f) as u64);
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
        profiler_ns: added,
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
                comm_ns: s.comm_ns,
                exposed_comm_ns: s.exposed_comm_ns,
            },
            None => Calls {
                count: g.count,
                wall_ns: g.wall_ns,
                idle: g.idle,
                utilization_pct: g.gpu_utilization_pct,
                launches: g.kernel_launches,
                host: g.host,
                counted_flops: g.counted_flops,
                comm_ns: g.comm_ns,
                exposed_comm_ns: g.exposed_comm_ns,
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
        comm_ns: g.comm_ns,
        exposed_comm_ns: g.exposed_comm_ns,
    }
}

/// A range none of whose instances was traced: what PM samples over its
/// wall time and its launch counts say (`counted`: the session counted
/// launches between windows), and nothing that needs kernel records (with
/// no samples either, nothing is known). Its calls after warm-up, when
/// their wall times tell warm-up apart.
fn untraced_range(g: &RangeSummary, peaks: Option<&Peaks>, counted: bool) -> RangeAnalysis {
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
        utilization_pct: f.and_then(|f| f.gpu_busy_pct).unwrap_or(0.0),
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
            Some(f) => answer::wall_verdict(f, peaks, n),
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
    use crate::aggregate::Aggregator;
    use crate::model::event::HostEvent;
    use crate::model::path::{paths, ROOT};
    use crate::model::sampled::Sample;

    #[test]
    fn a_range_neither_traced_nor_sampled_is_unknown_not_an_idle_gpu() {
        let mut a = Aggregator::windows_of_zero();
        let sampled = paths().intern(ROOT, 0, "analysis-sampled");
        let unsampled = paths().intern(ROOT, 0, "analysis-unsampled");
        a.host_event(HostEvent::Push { instance: 1, parent: 0, path: sampled, tid: 1, ts: 100 });
        a.host_event(HostEvent::Pop { instance: 1, ts: 600 });
        let samples = Sample::flat_run(0, 0, 1000, 80.0, 50.0);
        a.samples(&samples);
        // Sampling stopped: the later range has no sample.
        for (i, ts) in [(2, 2000), (3, 3000)] {
            a.host_event(HostEvent::Push { instance: i, parent: 0, path: unsampled, tid: 1, ts });
            a.host_event(HostEvent::Pop { instance: i, ts: ts + 500 });
        }
        let r = Report::build(a.finish(4000), 0, 4000);
        let an = analyze(&r);
        let get = |p: &str| an.ranges.iter().find(|g| g.path == p).expect(p);
        let (s, u) = (get("analysis-sampled"), get("analysis-unsampled"));
        assert!(s.untraced && s.sampled, "{s:?}");
        assert_eq!(s.sm_efficiency_pct.map(|e| e.round()), Some(80.0));
        assert_ne!(s.verdict.bound, Bound::Unknown);
        assert!(u.untraced && !u.sampled, "{u:?}");
        assert_eq!((u.count, u.wall_ns, u.sm_efficiency_pct), (2, 1000, None));
        assert_eq!(u.verdict.bound, Bound::Unknown, "{:?}", u.verdict);
        assert!(u.verdict.evidence.contains("none of its 2 instances was traced"), "{}", u.verdict.evidence);
        let table = r.to_table(120);
        assert!(table.contains("unknown"), "{table}");
    }

    #[test]
    fn an_untraced_range_shows_its_counted_launches_in_the_table_and_the_evidence() {
        let mut a = Aggregator::windows_of_zero();
        let step = paths().intern(ROOT, 0, "cstep");
        let fwd = paths().intern(step, 0, "forward");
        for k in 0..5u64 {
            let (t, outer, inner) = (k * 10_000_000, 10 * k + 1, 10 * k + 2);
            a.host_event(HostEvent::Push { instance: outer, parent: 0, path: step, tid: 1, ts: t + 100 });
            a.host_event(HostEvent::Push { instance: inner, parent: outer, path: fwd, tid: 1, ts: t + 200 });
            a.host_event(HostEvent::UntracedLaunches {
                path: fwd,
                instance: 0,
                launches: 100,
                graphs: 0,
                start: 0,
                end: 0,
            });
            a.host_event(HostEvent::Pop { instance: inner, ts: t + 4_000_200 });
            a.host_event(HostEvent::UntracedLaunches {
                path: step,
                instance: 0,
                launches: 150,
                graphs: 0,
                start: 0,
                end: 0,
            });
            a.host_event(HostEvent::Pop { instance: outer, ts: t + 9_000_100 });
        }
        a.samples(&Sample::flat_every(100_000, 0, 0, 50_000_000, 9.0, 40.0));
        let r = Report::build(a.finish(50_000_000), 0, 50_000_000);
        let get = |an: &Analysis, p: &str| an.ranges.iter().find(|g| g.path == p).cloned().expect(p);
        let an = analyze(&r);
        let (s, f) = (get(&an, "cstep"), get(&an, "cstep/forward"));
        assert_eq!((s.count, s.launches, f.launches), (5, Some(1250), Some(500)));
        assert!(s.verdict.evidence.contains("250 launches per call, one every 36.0 us"), "{}", s.verdict.evidence);
        assert!(f.verdict.evidence.contains("100 launches per call, one every 40.0 us"), "{}", f.verdict.evidence);
        let table = r.to_table(120);
        let row = table.lines().find(|l| l.starts_with("cstep (x5 untraced)")).expect("the step's tree row");
        assert_eq!(row.split_whitespace().skip(3).collect::<Vec<_>>(), ["1250", "-", "45.00", "ms", "-"], "{row}");
        assert!(
            table.starts_with(
                "gpuscope sampling: 50.00 ms session, 1250 kernel launches counted without kernel records"
            ),
            "{table}"
        );
        // The counts survive the JSON report; one of an older gpuscope (no
        // counts) says nothing of launches rather than "no kernel launch".
        let back = Report::from_json(&r.to_json()).expect("the report reads back");
        assert_eq!(get(&analyze(&back), "cstep").launches, Some(1250));
        let old = r.to_json().replace("\"untraced_launches\"", "\"untraced_launches_of_another_version\"");
        let old = Report::from_json(&old).expect("an older report reads");
        let o = get(&analyze(&old), "cstep");
        assert_eq!(o.launches, None);
        assert!(
            !o.verdict.evidence.contains("no kernel launch") && o.verdict.bound == Bound::Idle,
            "not counted is not none: {:?}",
            o.verdict
        );
        let row = old.to_table(120).lines().find(|l| l.starts_with("cstep (x5 untraced)")).map(str::to_string);
        assert!(row.is_some_and(|r| r.split_whitespace().nth(3) == Some("-")), "no count shown as 0");
    }

    /// Five untraced calls of `step` (10 ms each) and `step/fwd` (`fwd_ms`
    /// each), `launches` in each fwd, SMs active `eff`% all the time.
    fn untraced_steps(name: &str, fwd_ms: u64, launches: u64, eff: f32) -> Analysis {
        let mut a = Aggregator::windows_of_zero();
        let step = paths().intern(ROOT, 0, name);
        let fwd = paths().intern(step, 0, "fwd");
        for k in 0..5u64 {
            let t = k * 10_000_000;
            a.host_event(HostEvent::Push { instance: 10 * k + 1, parent: 0, path: step, tid: 1, ts: t });
            a.host_event(HostEvent::Push { instance: 10 * k + 2, parent: 10 * k + 1, path: fwd, tid: 1, ts: t });
            a.host_event(HostEvent::UntracedLaunches { path: fwd, instance: 0, launches, graphs: 0, start: 0, end: 0 });
            a.host_event(HostEvent::Pop { instance: 10 * k + 2, ts: t + fwd_ms * 1_000_000 });
            a.host_event(HostEvent::Pop { instance: 10 * k + 1, ts: t + 10_000_000 });
        }
        a.samples(&Sample::flat_every(100_000, 0, 0, 50_000_000, eff, 40.0));
        analyze(&Report::build(a.finish(50_000_000), 0, 50_000_000))
    }

    #[test]
    fn sampled_ranges_whose_sms_idle_are_findings_with_the_way_to_the_cause() {
        let kinds = |an: &Analysis| {
            an.findings.iter().map(|f| (f.kind.clone(), f.range.clone().unwrap_or_default())).collect::<Vec<_>>()
        };
        // fwd is 9 ms of each 10 ms step: it explains the step's idle SMs,
        // which are left to it. 400 launches in 9 ms: one every 22.5 us.
        let dense = untraced_steps("fstep-dense", 9, 400, 10.0);
        assert_eq!(kinds(&dense), [(FindingKind::SmsIdle, "fstep-dense/fwd".to_string())]);
        let f = &dense.findings[0];
        assert_eq!((&f.bound, f.cost_ns), (&Bound::Idle, 40_500_000), "45 ms at 10% SM activity");
        assert!(f.message.contains("SMs active 10% of its wall time") && f.message.contains("over 5 calls"), "{f:?}");
        assert!(f.message.contains("one every 22.5 us"), "{}", f.message);
        assert!(f.advice.contains("CUDA graph") && f.advice.contains("--trace-windows"), "{}", f.advice);
        // A short fwd leaves most of the step: both are findings, and
        // sparse launches get only the way to the cause.
        let sparse = untraced_steps("fstep-sparse", 2, 4, 10.0);
        assert_eq!(
            kinds(&sparse),
            [
                (FindingKind::SmsIdle, "fstep-sparse".to_string()),
                (FindingKind::SmsIdle, "fstep-sparse/fwd".to_string())
            ]
        );
        assert!(!sparse.findings[1].advice.contains("CUDA graph"), "{}", sparse.findings[1].advice);
        // SMs busy: no finding (and the verdict is not gpu-idle).
        assert_eq!(kinds(&untraced_steps("fstep-busy", 9, 400, 80.0)), []);
    }

    #[test]
    fn mfu_of_a_range_whose_calls_ran_on_two_gpus_is_per_gpu() {
        use crate::aggregate::{AggregateOptions, Aggregator};
        use crate::decode::KernelActivity;
        use crate::model::device::DeviceInfo;
        use crate::model::event::HostEvent;
        use crate::model::occupancy::SmLimits;
        // Ten 10 ms calls of `mfu-step` declaring 2e12 FLOPs each; the
        // kernels of the first call ran on `first` devices side by side,
        // those of the others on `gpus`.
        let mfu = |first: u32, gpus: u32, name: &str| {
            let mut a =
                Aggregator::new(AggregateOptions::default(), crate::aggregate::devices::DeviceTable::fixed(vec![]));
            let step = paths().intern(ROOT, 0, name);
            let mut c = 0;
            for i in 0..10u64 {
                let t = i * 10_000_000;
                a.host_event(HostEvent::Push { instance: i + 1, parent: 0, path: step, tid: 1, ts: t });
                for d in 0..if i == 0 { first } else { gpus } {
                    c += 1;
                    a.host_event(HostEvent::launch(c, 1, step, i + 1, t + 1_000));
                    a.kernel(&KernelActivity { device: d, ..KernelActivity::sample(c, t + 2_000, t + 9_990_000) });
                }
                a.host_event(HostEvent::Pop { instance: i + 1, ts: t + 10_000_000 });
            }
            let mut r = Report::build(a.finish(100_000_000), 0, 100_000_000);
            r.devices = vec![DeviceInfo::new(0, "NVIDIA H100 80GB HBM3", 132, SmLimits::SM_90)];
            r.declared = vec![crate::model::declared::Declared {
                range: name.into(),
                flops: Some(2e12),
                work: None,
                unit: None,
            }];
            let g = analyze(&r).ranges.into_iter().find(|g| g.path == name).expect(name);
            (g.model_mfu_pct.expect("an MFU"), r.ranges.iter().find(|g| g.path.to_string() == name).unwrap().gpus)
        };
        let (one, n1) = mfu(1, 1, "mfu-step-1");
        let (two, n2) = mfu(2, 2, "mfu-step-2");
        assert_eq!((n1, n2), (1, 2));
        // A first call that touched a second GPU does not halve the rest.
        assert_eq!(mfu(2, 1, "mfu-step-warm"), (one, 1));
        // 2e12 FLOPs in 10 ms on one H100 (989.4 TFLOP/s bf16): about 20%.
        assert!((one - 20.2).abs() < 0.5, "{one}");
        assert!((two - one / 2.0).abs() < 1e-9, "{one} {two}");
    }

    #[test]
    fn ranges_from_the_python_stack_are_shown_but_never_the_step() {
        use crate::aggregate::{AggregateOptions, Aggregator};
        use crate::decode::KernelActivity;
        use crate::model::event::HostEvent;
        // A loop with no range of its own: each 10 ms step runs a model
        // (a stack range at the root, 6 ms of kernels) and an optimizer
        // step outside it (2 ms).
        let stack = gpuscope_nvtx::tool::domain(crate::model::path::STACK_DOMAIN);
        let model = paths().intern(ROOT, stack, "StackTestModel");
        let mut a = Aggregator::new(AggregateOptions::default(), crate::aggregate::devices::DeviceTable::fixed(vec![]));
        for i in 0..20u64 {
            let t = i * 10_000_000;
            a.host_event(HostEvent::Push { instance: i + 1, parent: 0, path: model, tid: 1, ts: t });
            let c = 2 * i as u32 + 1;
            a.host_event(HostEvent::launch(c, 1, model, i + 1, t + 1_000));
            a.kernel(&KernelActivity::sample(c, t + 2_000, t + 6_002_000));
            a.host_event(HostEvent::Pop { instance: i + 1, ts: t + 6_000_000 });
            a.host_event(HostEvent::launch(c + 1, 1, ROOT, 0, t + 6_100_000));
            a.kernel(&KernelActivity::sample(c + 1, t + 6_200_000, t + 8_200_000));
        }
        let r = Report::build(a.finish(200_000_000), 0, 200_000_000);
        let an = analyze(&r);
        let g = an.ranges.iter().find(|g| g.path == "StackTestModel").expect("the model's range is shown by name");
        assert!(g.from_stack && g.count == 20, "{g:?}");
        let answer = an.answer.expect("an answer");
        assert_eq!(answer.range, None, "the model's forward is not the step");
        assert!(answer.others.iter().all(|o| o.range != "StackTestModel"));
    }

    #[test]
    fn the_programs_step_leads_over_the_hooks_step_where_it_holds_most_of_it() {
        use crate::aggregate::{AggregateOptions, Aggregator};
        use crate::decode::KernelActivity;
        use crate::model::event::HostEvent;
        // The hooks' `step` (10 ms) around the program's range of `inner_ms`.
        let answer = |inner: &str, inner_ms: u64| {
            let hooks = gpuscope_nvtx::tool::domain(crate::model::path::HOOKS_DOMAIN);
            let step = paths().intern(ROOT, hooks, "step");
            let program = paths().intern(step, 0, inner);
            let mut a =
                Aggregator::new(AggregateOptions::default(), crate::aggregate::devices::DeviceTable::fixed(vec![]));
            for i in 0..20u64 {
                let (t, s, p) = (i * 10_000_000, 2 * i + 1, 2 * i + 2);
                a.host_event(HostEvent::Push { instance: s, parent: 0, path: step, tid: 1, ts: t });
                a.host_event(HostEvent::Push { instance: p, parent: s, path: program, tid: 1, ts: t + 100_000 });
                a.host_event(HostEvent::launch(i as u32 + 1, 1, program, p, t + 200_000));
                a.kernel(&KernelActivity::sample(i as u32 + 1, t + 300_000, t + 300_000 + inner_ms * 900_000));
                a.host_event(HostEvent::Pop { instance: p, ts: t + 100_000 + inner_ms * 1_000_000 });
                a.host_event(HostEvent::Pop { instance: s, ts: t + 9_900_000 });
            }
            let r = Report::build(a.finish(200_000_000), 0, 200_000_000);
            analyze(&r).answer.expect("an answer")
        };
        let led = answer("train_step_i46", 8);
        assert_eq!(led.range.as_deref(), Some("step/train_step_i46"));
        assert!(led.notes.iter().any(|n| n.contains("program's own range step/train_step_i46")), "{:?}", led.notes);
        // A small range of the program is not the step.
        let kept = answer("attn_i46", 2);
        assert_eq!(kept.range.as_deref(), Some("step"));
        assert!(kept.notes.is_empty(), "{:?}", kept.notes);
    }

    #[test]
    fn a_python_stack_range_left_open_ends_with_its_last_launch() {
        use crate::aggregate::{AggregateOptions, Aggregator};
        use crate::model::event::HostEvent;
        let stack = gpuscope_nvtx::tool::domain(crate::model::path::STACK_DOMAIN);
        let opt = paths().intern(ROOT, stack, "StackTestOptimizerOpen");
        let program = paths().intern(ROOT, 0, "stack-test-open-program");
        let mut a = Aggregator::new(AggregateOptions::default(), crate::aggregate::devices::DeviceTable::fixed(vec![]));
        a.host_event(HostEvent::Push { instance: 1, parent: 0, path: opt, tid: 1, ts: 1_000 });
        let mut e = HostEvent::launch(1, 1, opt, 1, 2_000);
        if let HostEvent::Launch { prev_call_ns, .. } = &mut e {
            *prev_call_ns = 0;
        }
        a.host_event(e);
        // The program's own range left open too: it ends with the session.
        a.host_event(HostEvent::Push { instance: 2, parent: 0, path: program, tid: 1, ts: 1_000 });
        let r = Report::build(a.finish(1_000_000_000), 0, 1_000_000_000);
        let wall = |name: &str| r.ranges.iter().find(|g| g.path.to_string() == name).map(|g| g.wall_ns);
        let w = wall("StackTestOptimizerOpen").expect("the range");
        assert!(w < 10_000, "ended with its launch, not the session: {w}");
        assert!(wall("stack-test-open-program").expect("the program's") > 900_000_000);
    }

    #[test]
    fn a_table_row_whose_parent_has_none_is_named_by_its_whole_path() {
        use crate::aggregate::{AggregateOptions, Aggregator};
        use crate::decode::KernelActivity;
        use crate::model::event::HostEvent;
        let outer = paths().intern(ROOT, 0, "quirk-outer");
        let inner = paths().intern(outer, 0, "quirk-inner");
        let next = paths().intern(ROOT, 0, "quirk-next");
        let report = || {
            let mut a =
                Aggregator::new(AggregateOptions::default(), crate::aggregate::devices::DeviceTable::fixed(vec![]));
            let mut id = 0;
            for (k, (path, parent)) in [(outer, 0), (inner, 1), (next, 0)].into_iter().enumerate() {
                let (t, instance) = (k as u64 * 10_000_000, k as u64 + 1);
                a.host_event(HostEvent::Push { instance, parent, path, tid: 1, ts: t });
                id += 1;
                a.host_event(HostEvent::launch(id, 1, path, instance, t + 1_000));
                a.kernel(&KernelActivity::sample(id, t + 2_000, t + 3_000_000));
                if path != outer {
                    a.host_event(HostEvent::Pop { instance, ts: t + 5_000_000 });
                }
            }
            a.host_event(HostEvent::Pop { instance: 1, ts: 15_000_000 });
            Report::build(a.finish(40_000_000), 0, 40_000_000)
        };
        let nested = report().to_table(120);
        assert!(nested.lines().any(|l| l.starts_with("  quirk-inner")), "{nested}");
        // The parent's row gone (as a range the table leaves out): the
        // child is named by its path, at the top.
        let mut r = report();
        r.ranges.retain(|g| g.path.to_string() != "quirk-outer");
        let table = r.to_table(120);
        assert!(table.lines().any(|l| l.starts_with("quirk-outer/quirk-inner")), "{table}");
        assert!(!table.lines().any(|l| l.starts_with("  quirk-inner")), "{table}");
        assert!(table.lines().any(|l| l.starts_with("quirk-outer/quirk-inner   ")), "the verdict table too: {table}");
    }
}
