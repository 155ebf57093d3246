//! Sampling mode's data: PM samples as collection hands them on, the
//! weighted sums aggregation keeps of them, and the figures and status the
//! report gives.

use super::metrics::{ACHIEVED_OCCUPANCY, DRAM_READ, DRAM_WRITE, SM_EFFICIENCY};
#[cfg(doc)]
use super::metrics::{ISSUE_ACTIVE, TENSOR_ACTIVE};
use serde::{Deserialize, Serialize};

/// Active SM cycles per SM: weighs occupancy and tensor activity, which
/// are shares of active cycles.
pub const SM_CYCLES_ACTIVE: &str = "sm__cycles_active.avg";
/// Cycles the graphics/compute engine was active (DCGM's `GR_ENGINE_ACTIVE`,
/// what `nvidia-smi` calls utilization): over [`GR_CYCLES_ELAPSED`], the
/// share of time any kernel (or other engine work) ran.
pub const GR_CYCLES_ACTIVE: &str = "gr__cycles_active.avg";
/// Elapsed cycles of the graphics/compute engine.
pub const GR_CYCLES_ELAPSED: &str = "gr__cycles_elapsed.max";
/// Cycles the tensor pipe was active per SM: over [`SM_CYCLES_ACTIVE`],
/// [`TENSOR_ACTIVE`] (counts Hopper's warpgroup MMA as well as HMMA: 96.9%
/// on a bf16 nvjet GEMM under ncu on an H200, as its HMMA counter).
/// Counters, not ratios, fit one PM-sampling pass with the engine's.
pub const TENSOR_CYCLES: &str = "sm__pipe_tensor_cycles_active.avg";
/// The tensor pipe's sustained peak per cycle ([`TENSOR_CYCLES`]' unit per
/// cycle): a constant of the chip, evaluated with no counter, so
/// [`TENSOR_CYCLES`] over active cycles is a share of the peak as ncu's
/// `pct_of_peak_sustained_active` is.
pub const TENSOR_PEAK: &str = "sm__pipe_tensor_cycles_active.avg.peak_sustained";
/// The issue slots' sustained peak per cycle, likewise.
pub const ISSUE_PEAK: &str = "smsp__issue_active.avg.peak_sustained";
/// Cycles an SM sub-partition issued an instruction: over the SM's
/// active cycles ([`SM_CYCLES_ACTIVE`]), close to [`ISSUE_ACTIVE`] (which
/// divides by the sub-partition's own active cycles, a counter that does
/// not fit one pass with this one and the engine's on GH100). A kernel
/// with fewer warps per SM than sub-partitions reads low; its SM
/// efficiency already calls it latency-bound.
pub const ISSUE_CYCLES: &str = "smsp__issue_active.avg";

/// The counters sampling mode collects, in the order a sample is read
/// from (`Sample::from_values`). PM sampling takes single-pass
/// configurations only: the counters are packed into as few of them as
/// the chip allows (`FIGURES`), and several are taken in turn.
pub const SAMPLED_METRICS: [&str; 11] = [
    SM_EFFICIENCY,
    ACHIEVED_OCCUPANCY,
    SM_CYCLES_ACTIVE,
    DRAM_READ,
    DRAM_WRITE,
    TENSOR_CYCLES,
    ISSUE_CYCLES,
    GR_CYCLES_ACTIVE,
    GR_CYCLES_ELAPSED,
    TENSOR_PEAK,
    ISSUE_PEAK,
];

/// The counters every configuration carries: the weight of the shares of
/// active cycles, and the engine's activity (GPU busy, sampled
/// throughout).
pub const EVERY_CONFIG: [&str; 3] = [SM_CYCLES_ACTIVE, GR_CYCLES_ACTIVE, GR_CYCLES_ELAPSED];

/// A sampled figure and the counters it comes from, most needed first:
/// configurations are filled in this order, so a chip that cannot take
/// them all in turn loses the last ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    /// Its name in reports ("GPU busy", "SM efficiency", ...).
    pub name: &'static str,
    /// The counters it needs, besides [`EVERY_CONFIG`].
    pub metrics: &'static [&'static str],
}

/// What sampling mode measures, and from which counters.
pub const FIGURES: [Figure; 6] = [
    Figure { name: "GPU busy", metrics: &[GR_CYCLES_ACTIVE, GR_CYCLES_ELAPSED] },
    Figure { name: "SM efficiency", metrics: &[SM_EFFICIENCY] },
    Figure { name: "achieved occupancy", metrics: &[ACHIEVED_OCCUPANCY] },
    Figure { name: "DRAM throughput", metrics: &[DRAM_READ, DRAM_WRITE] },
    Figure { name: "tensor-pipe activity", metrics: &[TENSOR_CYCLES, TENSOR_PEAK] },
    Figure { name: "issue-slot activity", metrics: &[ISSUE_CYCLES, ISSUE_PEAK] },
];

/// One PM sample of one device: counter values over `[start, end)` (ns on
/// CUPTI's clock, the activity records' timebase). A figure its
/// configuration did not hold is NaN.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Device ordinal.
    pub device: u32,
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// SM efficiency over the sample, %.
    pub sm_efficiency_pct: f32,
    /// Achieved occupancy over its active cycles, % (NaN when no SM was
    /// active).
    pub occupancy_pct: f32,
    /// Active cycles per SM.
    pub sm_cycles_active: f32,
    /// Tensor pipe active over active cycles, % (NaN when not collected or
    /// no SM was active).
    pub tensor_active_pct: f32,
    /// Issue slots busy over active cycles, % (NaN likewise).
    pub issue_active_pct: f32,
    /// DRAM bytes read and written.
    pub dram_bytes: f32,
    /// Graphics/compute engine active over the sample, %: GPU busy.
    pub gr_active_pct: f32,
}

#[doc(hidden)]
impl Sample {
    /// A sample of flat test values: SM efficiency `eff`, occupancy `occ`,
    /// the engine active as long as the SMs.
    pub fn flat(device: u32, start: u64, end: u64, eff: f32, occ: f32) -> Sample {
        Sample {
            device,
            start,
            end,
            sm_efficiency_pct: eff,
            occupancy_pct: occ,
            sm_cycles_active: (end - start) as f32 * eff / 100.0,
            tensor_active_pct: f32::NAN,
            issue_active_pct: f32::NAN,
            dram_bytes: 1000.0,
            gr_active_pct: eff,
        }
    }

    /// Flat samples of 10 ns from `from` to `to`.
    pub fn flat_run(device: u32, from: u64, to: u64, eff: f32, occ: f32) -> Vec<Sample> {
        Sample::flat_every(10, device, from, to, eff, occ)
    }

    /// Flat samples of `ns` each from `from` to `to` (long runs: fewer).
    pub fn flat_every(ns: u64, device: u32, from: u64, to: u64, eff: f32, occ: f32) -> Vec<Sample> {
        (from..to).step_by(ns as usize).map(|t| Sample::flat(device, t, t + ns, eff, occ)).collect()
    }
}

impl Sample {
    /// From values in [`SAMPLED_METRICS`] order (NaN: not in the sample's
    /// configuration).
    pub fn from_values(device: u32, start: u64, end: u64, v: &[f64]) -> Sample {
        let get = |i: usize| v.get(i).copied().unwrap_or(f64::NAN);
        // Bytes are known when either direction was sampled (both are in
        // one figure's counters, so in the same configurations).
        let dram = match (get(3), get(4)) {
            (r, w) if r.is_nan() && w.is_nan() => f64::NAN,
            (r, w) => [r, w].iter().filter(|x| x.is_finite()).sum::<f64>(),
        };
        // Shares of active cycles; NaN where a counter was not sampled or
        // nothing was active.
        // (`f64::min` would turn a NaN part into 100.)
        let share = |part: f64, whole: f64| {
            if part.is_finite() && whole > 0.0 {
                (100.0 * part / whole).min(100.0)
            } else {
                f64::NAN
            }
        };
        let gr = share(get(7), get(8));
        // A peak per cycle not evaluated leaves the share unknown.
        let peak = |p: f64| if p > 0.0 { p } else { f64::NAN };
        Sample {
            device,
            start,
            end,
            sm_efficiency_pct: get(0) as f32,
            occupancy_pct: get(1) as f32,
            sm_cycles_active: get(2) as f32,
            tensor_active_pct: share(get(5), get(2) * peak(get(9))) as f32,
            issue_active_pct: share(get(6), get(2) * peak(get(10))) as f32,
            dram_bytes: dram as f32,
            gr_active_pct: gr as f32,
        }
    }

    /// Its length, ns.
    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// Whether it covers no time.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Weighted sums of sampled values over some stretch of time: a kernel's
/// run, a range's window. `share` is the part of a sample that counts (its
/// overlap, over the time any kernel ran in it for kernel figures). Each
/// figure is weighted by the samples that held it: with configurations
/// taken in turn, a figure's samples are a subset of the stretch's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SampledAcc {
    /// Time covered by any sample, ns.
    pub covered_ns: f64,
    /// SM efficiency times ns, and the ns of samples that held it.
    pub efficiency_ns: f64,
    /// See `efficiency_ns`.
    pub efficiency_weight: f64,
    /// Occupancy times active cycles, and the active cycles.
    pub occupancy_cycles: f64,
    /// Active cycles that weigh occupancy.
    pub active_cycles: f64,
    /// Tensor activity times active cycles, and the active cycles.
    pub tensor_cycles: f64,
    /// Active cycles that weigh tensor activity.
    pub tensor_weight: f64,
    /// Issue activity times active cycles, and the active cycles.
    pub issue_cycles: f64,
    /// Active cycles that weigh issue activity.
    pub issue_weight: f64,
    /// DRAM bytes, and the ns of samples that counted them.
    pub dram_bytes: f64,
    /// See `dram_bytes`.
    pub dram_ns: f64,
    /// Engine-active share times ns, and the ns of samples that held it.
    pub busy_ns: f64,
    /// See `busy_ns`.
    pub busy_weight: f64,
    /// Samples that contributed.
    pub samples: u64,
}

impl SampledAcc {
    /// Adds `share` (0 to 1) of sample `s` standing for `ns` of time with
    /// SM efficiency `efficiency` (the sample's own, or rescaled to the
    /// time kernels ran in it) and engine activity `busy` (the sample's
    /// own over wall time; 100 over kernels' time).
    pub fn add(&mut self, s: &Sample, share: f64, ns: f64, efficiency: f64, busy: f64) {
        if share.is_nan() || ns.is_nan() || share <= 0.0 || ns <= 0.0 {
            return;
        }
        self.samples += 1;
        self.covered_ns += ns;
        if efficiency.is_finite() {
            self.efficiency_ns += efficiency * ns;
            self.efficiency_weight += ns;
        }
        if busy.is_finite() {
            self.busy_ns += busy * ns;
            self.busy_weight += ns;
        }
        let cycles = s.sm_cycles_active as f64 * share;
        for (v, sum, weight) in [
            (s.occupancy_pct, &mut self.occupancy_cycles, &mut self.active_cycles),
            (s.tensor_active_pct, &mut self.tensor_cycles, &mut self.tensor_weight),
            (s.issue_active_pct, &mut self.issue_cycles, &mut self.issue_weight),
        ] {
            if cycles > 0.0 && v.is_finite() {
                *sum += v as f64 * cycles;
                *weight += cycles;
            }
        }
        if s.dram_bytes.is_finite() {
            self.dram_bytes += s.dram_bytes as f64 * share;
            self.dram_ns += ns;
        }
    }

    /// Adds the figures of a stretch of kernel time as one part weighted by
    /// the time they cover: a range's figures from its kernels', each kernel
    /// weighted by its time as metrics mode weighs measured kernels.
    pub fn add_figures(&mut self, f: &SampledFigures) {
        let t = f.covered_ns as f64;
        self.covered_ns += t;
        for (sum, weight, v) in [
            (&mut self.efficiency_ns, &mut self.efficiency_weight, f.sm_efficiency_pct),
            (&mut self.occupancy_cycles, &mut self.active_cycles, f.achieved_occupancy_pct),
            (&mut self.tensor_cycles, &mut self.tensor_weight, f.tensor_active_pct),
            (&mut self.issue_cycles, &mut self.issue_weight, f.issue_active_pct),
            (&mut self.busy_ns, &mut self.busy_weight, f.gpu_busy_pct),
        ] {
            if let Some(v) = v {
                *sum += v * t;
                *weight += t;
            }
        }
        if let Some(gb) = f.dram_gb_per_s {
            // GB/s times ns: bytes.
            self.dram_bytes += gb * t;
            self.dram_ns += t;
        }
        self.samples = self.samples.saturating_add(f.samples);
    }

    /// Adds another's sums.
    pub fn merge(&mut self, o: &SampledAcc) {
        self.covered_ns += o.covered_ns;
        self.efficiency_ns += o.efficiency_ns;
        self.efficiency_weight += o.efficiency_weight;
        self.occupancy_cycles += o.occupancy_cycles;
        self.active_cycles += o.active_cycles;
        self.tensor_cycles += o.tensor_cycles;
        self.tensor_weight += o.tensor_weight;
        self.issue_cycles += o.issue_cycles;
        self.issue_weight += o.issue_weight;
        self.dram_bytes += o.dram_bytes;
        self.dram_ns += o.dram_ns;
        self.busy_ns += o.busy_ns;
        self.busy_weight += o.busy_weight;
        self.samples = self.samples.saturating_add(o.samples);
    }

    /// Takes another's sums away (one of the parts merged into these),
    /// each at least 0.
    pub fn remove(&mut self, o: &SampledAcc) {
        // Each (sum, weight) pair; a weight left at a rounding residue of
        // what it was means no sample is left: both 0, so the figure is
        // unknown rather than a ratio of residues.
        for (sum, weight, osum, oweight) in [
            (&mut self.efficiency_ns, &mut self.efficiency_weight, o.efficiency_ns, o.efficiency_weight),
            (&mut self.occupancy_cycles, &mut self.active_cycles, o.occupancy_cycles, o.active_cycles),
            (&mut self.tensor_cycles, &mut self.tensor_weight, o.tensor_cycles, o.tensor_weight),
            (&mut self.issue_cycles, &mut self.issue_weight, o.issue_cycles, o.issue_weight),
            (&mut self.dram_bytes, &mut self.dram_ns, o.dram_bytes, o.dram_ns),
            (&mut self.busy_ns, &mut self.busy_weight, o.busy_ns, o.busy_weight),
        ] {
            let before = *weight;
            *weight = (*weight - oweight).max(0.0);
            *sum = (*sum - osum).max(0.0);
            if *weight <= before * 1e-9 {
                (*sum, *weight) = (0.0, 0.0);
            }
        }
        self.covered_ns = (self.covered_ns - o.covered_ns).max(0.0);
        self.samples = self.samples.saturating_sub(o.samples);
    }

    /// The figures these sums give; `None` when no time is covered. A
    /// figure no sample held is `None`: unknown, not 0.
    pub fn figures(&self) -> Option<SampledFigures> {
        let ratio = |sum: f64, weight: f64| (weight > 0.0).then(|| sum / weight);
        (self.covered_ns > 0.0).then(|| SampledFigures {
            sm_efficiency_pct: ratio(self.efficiency_ns, self.efficiency_weight),
            achieved_occupancy_pct: ratio(self.occupancy_cycles, self.active_cycles),
            tensor_active_pct: ratio(self.tensor_cycles, self.tensor_weight),
            issue_active_pct: ratio(self.issue_cycles, self.issue_weight),
            dram_gb_per_s: ratio(self.dram_bytes, self.dram_ns),
            gpu_busy_pct: ratio(self.busy_ns, self.busy_weight),
            covered_ns: self.covered_ns as u64,
            samples: self.samples,
        })
    }
}

/// Hardware figures from PM samples over a stretch of time. A figure no
/// sample held is `None` (unknown).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SampledFigures {
    /// Share of elapsed cycles with a warp active on an SM sub-partition, %.
    pub sm_efficiency_pct: Option<f64>,
    /// Active warps over the SM's maximum, over active cycles, %.
    pub achieved_occupancy_pct: Option<f64>,
    /// Tensor pipe active over active cycles, %.
    pub tensor_active_pct: Option<f64>,
    /// Issue slots busy over active cycles, %.
    #[serde(default)]
    pub issue_active_pct: Option<f64>,
    /// DRAM read + write bandwidth, GB/s.
    pub dram_gb_per_s: Option<f64>,
    /// Share of the time the graphics/compute engine was active (a kernel
    /// ran), %: over kernels' own time it is 100 by definition; over a
    /// range's or the session's wall time it is GPU busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_busy_pct: Option<f64>,
    /// Time the figures cover, ns.
    pub covered_ns: u64,
    /// Samples they come from.
    pub samples: u64,
}

/// One PM sampling configuration: counters that fit one pass, sampled in
/// turn with the others.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SampledConfig {
    /// Its counters.
    pub metrics: Vec<String>,
    /// Samples taken with it.
    pub samples: u64,
}

/// How sampling went, for the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplingStatus {
    /// Sampling interval, ns: the resolution of every sampled figure.
    pub interval_ns: u64,
    /// Counters sampled (every configuration's).
    pub metrics: Vec<String>,
    /// The configurations taken in turn (one when everything fits one
    /// pass), with their samples.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<SampledConfig>,
    /// Figures the chip's counters could not give in any configuration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub figures_missing: Vec<String>,
    /// Switches from one configuration to the next, and the time sampling
    /// was stopped for them, ns (no sample covers it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub switches: u64,
    /// See `switches`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub switch_ns: u64,
    /// Tries to start a configuration that failed (CUPTI refused it); each
    /// was tried again or the configuration left was taken back, so the
    /// figures only other configurations hold have fewer samples.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_switches: u64,
    /// Time sampling was paused for metrics passes asked for on demand
    /// (the range profiler took the counters), ns: no sample covers it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub paused_ns: u64,
    /// Devices sampled.
    pub devices: Vec<u32>,
    /// Samples decoded.
    pub samples: u64,
    /// Decodes that found the hardware buffer had overflowed (samples
    /// lost).
    pub overflows: u64,
    /// Samples dropped before they could be joined (memory bound).
    pub samples_expired: u64,
    /// Kernels no sample covered (ran before sampling began on their
    /// device, or their samples had expired).
    pub kernels_unsampled: u64,
    /// Kernels from which per-kernel figures come: those spanning at least
    /// [`SamplingStatus::min_kernel_samples`] whole samples.
    pub min_kernel_samples: u32,
    /// Why sampling is off, if it is (the trace carries on).
    pub disabled: Option<String>,
    /// The session ended at process exit with samples still in the
    /// hardware buffer that were not read: the exit came before CUDA was
    /// initialised for gpuscope's exit handler, or decoding them took
    /// longer than its bound. Stop the session before exit to keep them.
    #[serde(default)]
    pub tail_lost: bool,
    /// At exit, samples decoded after sampling stopped, and the time that
    /// took, ns (bounded: 2 s at most).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exit_samples: u64,
    /// See `exit_samples`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exit_decode_ns: u64,
    /// Time gpuscope spent decoding samples, ns (on its decoder thread, not
    /// the program's).
    pub decode_ns: u64,
    /// Of which in CUPTI's decode of the hardware buffer, ns.
    #[serde(default)]
    pub decode_data_ns: u64,
    /// Of which reading values out of decoded images, ns.
    #[serde(default)]
    pub evaluate_ns: u64,
    /// Trace windows, when kernel records were taken part of the time.
    #[serde(default)]
    pub trace_windows: Option<TraceWindows>,
    /// Trace windows were asked for but every kernel was traced, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_windows_off: Option<String>,
}

/// Sampling mode's trace windows: kernel records on for `window_ns` of
/// every `period_ns` (never when `window_ns` is 0), PM sampling all the
/// time. Kernel
/// tables, GPU busy and idle time come from the traced windows; range
/// instances that touched an untraced stretch are counted apart, with
/// their sampled figures over their wall windows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceWindows {
    /// Traced time per period, ns.
    pub window_ns: u64,
    /// Period, ns.
    pub period_ns: u64,
    /// Windows traced (the session begins with one, unless windows are 0).
    pub windows: u64,
    /// Session time with kernel records on, ns.
    pub traced_ns: u64,
    /// Session time with them off, ns.
    pub untraced_ns: u64,
    /// Gaps between kernels that touched an untraced stretch: left out of
    /// idle time (kernels may have run unseen there), ns.
    pub unclassified_gaps_ns: u64,
    /// Kernel launch calls made while records were off: counted by the
    /// launch callbacks, for the session and for the ranges open at each
    /// (their `untraced_launches`), with no kernel record. `None`: not
    /// counted (a report of an older gpuscope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untraced_launches: Option<u64>,
    /// Windows asked for while the process ran (`gpuscope trigger`); with
    /// windows of 0 they are the `windows` counted (with scheduled windows,
    /// one asked for that overlaps them merges with them).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub on_demand: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl TraceWindows {
    /// Records were on in periodic windows and off for part of the session:
    /// a span longer than a window has its idle time known only inside them.
    pub(crate) fn periodic(&self) -> bool {
        self.window_ns > 0 && self.window_ns < self.period_ns && self.untraced_ns > 0
    }
}

/// The time in `[from, to)` inside windows of `window` ns opening every
/// `period` ns from `start` (`window` below `period`).
pub(crate) fn traced_between(start: u64, window: u64, period: u64, from: u64, to: u64) -> u64 {
    if period == 0 || to <= from {
        return 0;
    }
    // The windows' time from `start` to `t`.
    let upto = |t: u64| {
        let d = t.saturating_sub(start);
        (d / period).saturating_mul(window).saturating_add((d % period).min(window))
    };
    upto(to).saturating_sub(upto(from))
}

/// At process exit, the last samples are decoded for at most this long
/// (from the exit handler gpuscope registers once CUDA is initialised);
/// what is left after it is reported lost (`tail_lost`).
pub const EXIT_DECODE_BOUND: std::time::Duration = std::time::Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(eff: f64, occ: Option<f64>, ns: u64) -> SampledFigures {
        SampledFigures {
            sm_efficiency_pct: Some(eff),
            achieved_occupancy_pct: occ,
            tensor_active_pct: None,
            issue_active_pct: Some(50.0),
            dram_gb_per_s: Some(1000.0),
            gpu_busy_pct: None,
            covered_ns: ns,
            samples: 3,
        }
    }

    #[test]
    fn figures_combine_weighted_by_the_time_they_cover() {
        let mut acc = SampledAcc::default();
        acc.add_figures(&figures(90.0, Some(20.0), 3_000));
        acc.add_figures(&figures(10.0, None, 1_000));
        let f = acc.figures().expect("covered");
        assert_eq!(f.covered_ns, 4_000);
        assert!((f.sm_efficiency_pct.unwrap() - 70.0).abs() < 1e-9);
        // Occupancy only where it was known.
        assert_eq!(f.achieved_occupancy_pct, Some(20.0));
        assert_eq!(f.tensor_active_pct, None);
        assert!((f.dram_gb_per_s.unwrap() - 1000.0).abs() < 1e-9);
        assert_eq!(f.gpu_busy_pct, None, "never sampled: unknown");
        assert_eq!(f.samples, 6);
    }

    /// Taking warm-up's samples out leaves a figure only warm-up held
    /// unknown, not a ratio of rounding residues.
    #[test]
    fn removing_the_only_samples_of_a_figure_leaves_it_unknown() {
        let nan = f64::NAN;
        let steady = Sample::from_values(0, 0, 10, &[80.0, 40.0, 8.0, 300.0, 100.0, nan, nan, 5.0, 10.0]);
        let warm = |t| Sample::from_values(0, t, t + 10, &[nan, nan, 0.3, nan, nan, 0.1, 0.1, 5.0, 10.0, 4.0, 1.0]);
        let (w1, w2) = (warm(10), warm(20));
        let mut all = SampledAcc::default();
        let mut warmup = SampledAcc::default();
        for (s, is_warm) in [(steady, false), (w1, true), (w2, true)] {
            let mut one = SampledAcc::default();
            one.add(&s, 0.1, 1.0, s.sm_efficiency_pct as f64, s.gr_active_pct as f64);
            all.merge(&one);
            if is_warm {
                warmup.merge(&one);
            }
        }
        all.remove(&warmup);
        let f = all.figures().expect("the steady sample is left");
        assert_eq!((f.tensor_active_pct, f.issue_active_pct), (None, None), "{f:?}");
        assert_eq!(f.sm_efficiency_pct, Some(80.0));
        assert_eq!((f.covered_ns, f.samples), (1, 1));
    }

    /// Configurations taken in turn: each figure is the mean of the
    /// samples that held it, weighted by their own time, not diluted by
    /// the samples of the other configuration.
    #[test]
    fn multiplexed_figures_are_weighted_by_their_own_samples() {
        let nan = f64::NAN;
        // Configuration A: SM efficiency 80, occupancy 40, DRAM; B: tensor
        // 90 and issue 30. The engine is active 50% in both.
        let a = |t: u64| Sample::from_values(0, t, t + 10, &[80.0, 40.0, 8.0, 300.0, 100.0, nan, nan, 5.0, 10.0]);
        // Tensor 28.8 of 8 active cycles at 4 per cycle (90%), issue 2.4
        // at 1 (30%).
        let b = |t: u64| Sample::from_values(0, t, t + 10, &[nan, nan, 8.0, nan, nan, 28.8, 2.4, 5.0, 10.0, 4.0, 1.0]);
        let mut acc = SampledAcc::default();
        // Three A samples, one B sample.
        for s in [a(0), a(10), a(20), b(30)] {
            acc.add(&s, 1.0, 10.0, s.sm_efficiency_pct as f64, s.gr_active_pct as f64);
        }
        let f = acc.figures().expect("covered");
        assert_eq!(f.covered_ns, 40);
        assert_eq!(f.sm_efficiency_pct, Some(80.0), "not 60: B's samples did not hold it");
        assert_eq!(f.achieved_occupancy_pct, Some(40.0));
        assert!(
            (f.tensor_active_pct.unwrap() - 90.0).abs() < 1e-4,
            "from B's one sample alone: {:?} {:?}",
            f.tensor_active_pct,
            b(30)
        );
        assert_eq!(f.issue_active_pct, Some(30.0));
        // 400 bytes per 10 ns sample of A: 40 GB/s.
        assert!((f.dram_gb_per_s.unwrap() - 40.0).abs() < 1e-9, "{:?}", f.dram_gb_per_s);
        assert_eq!(f.gpu_busy_pct, Some(50.0));
        // Only B's samples: the A figures are unknown, not 0.
        let mut only_b = SampledAcc::default();
        only_b.add(&b(0), 1.0, 10.0, f64::NAN, 50.0);
        let f = only_b.figures().expect("covered");
        assert_eq!((f.sm_efficiency_pct, f.achieved_occupancy_pct, f.dram_gb_per_s), (None, None, None));
        assert_eq!(f.tensor_active_pct, Some(90.0));
    }

    #[test]
    fn the_traced_time_is_the_windows_overlap_with_the_span() {
        const MS: u64 = 1_000_000;
        // Windows of 100 ms every second from 0: a span from 0.95 s to 3.05 s
        // holds 1.0-1.1, 2.0-2.1 and 3.0-3.05.
        assert_eq!(traced_between(0, 100 * MS, 1000 * MS, 950 * MS, 3050 * MS), 250 * MS);
        // Inside one window; none; an empty span.
        assert_eq!(traced_between(0, 100 * MS, 1000 * MS, 20 * MS, 60 * MS), 40 * MS);
        assert_eq!(traced_between(0, 100 * MS, 1000 * MS, 200 * MS, 900 * MS), 0);
        assert_eq!(traced_between(0, 100 * MS, 1000 * MS, 5 * MS, 5 * MS), 0);
        // Windows from a session that began later.
        assert_eq!(traced_between(500 * MS, 100 * MS, 1000 * MS, 0, 2000 * MS), 200 * MS);
    }
}
