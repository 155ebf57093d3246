//! Sampling mode's data: PM samples as collection hands them on, the
//! weighted sums aggregation keeps of them, and the figures and status the
//! report gives.

use super::metrics::{ACHIEVED_OCCUPANCY, DRAM_READ, DRAM_WRITE, ISSUE_ACTIVE, SM_EFFICIENCY, TENSOR_ACTIVE};
use serde::{Deserialize, Serialize};

/// Active SM cycles per SM: weighs occupancy and tensor activity, which
/// are shares of active cycles.
pub const SM_CYCLES_ACTIVE: &str = "sm__cycles_active.avg";

/// The counters sampling mode collects, in the order its samples are read.
/// PM sampling takes single-pass configs only: where the last two (the
/// pipes) do not fit one pass with the rest, they are left out.
pub const SAMPLED_METRICS: [&str; 7] =
    [SM_EFFICIENCY, ACHIEVED_OCCUPANCY, SM_CYCLES_ACTIVE, DRAM_READ, DRAM_WRITE, TENSOR_ACTIVE, ISSUE_ACTIVE];

/// Of [`SAMPLED_METRICS`], the first this many are needed; the rest are
/// dropped when they do not fit one pass.
pub const REQUIRED_METRICS: usize = 5;

/// One PM sample of one device: counter values over `[start, end)` (ns on
/// CUPTI's clock, the activity records' timebase).
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
}

#[cfg(test)]
impl Sample {
    /// A sample of flat test values: SM efficiency `eff`, occupancy `occ`.
    pub(crate) fn flat(device: u32, start: u64, end: u64, eff: f32, occ: f32) -> Sample {
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
        }
    }

    /// Flat samples of 10 ns from `from` to `to`.
    pub(crate) fn flat_run(device: u32, from: u64, to: u64, eff: f32, occ: f32) -> Vec<Sample> {
        Sample::flat_every(10, device, from, to, eff, occ)
    }

    /// Flat samples of `ns` each from `from` to `to` (long runs: fewer).
    pub(crate) fn flat_every(ns: u64, device: u32, from: u64, to: u64, eff: f32, occ: f32) -> Vec<Sample> {
        (from..to).step_by(ns as usize).map(|t| Sample::flat(device, t, t + ns, eff, occ)).collect()
    }
}

impl Sample {
    /// From values in [`SAMPLED_METRICS`] order (missing ones NaN).
    pub fn from_values(device: u32, start: u64, end: u64, v: &[f64]) -> Sample {
        let get = |i: usize| v.get(i).copied().unwrap_or(f64::NAN);
        let dram = [get(3), get(4)].iter().filter(|x| x.is_finite()).sum::<f64>();
        Sample {
            device,
            start,
            end,
            sm_efficiency_pct: get(0) as f32,
            occupancy_pct: get(1) as f32,
            sm_cycles_active: get(2) as f32,
            tensor_active_pct: get(5) as f32,
            issue_active_pct: get(6) as f32,
            dram_bytes: dram as f32,
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
/// overlap, over the time any kernel ran in it for kernel figures).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SampledAcc {
    /// Time covered, ns.
    pub covered_ns: f64,
    /// SM efficiency times ns.
    pub efficiency_ns: f64,
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
    /// DRAM bytes.
    pub dram_bytes: f64,
    /// Samples that contributed.
    pub samples: u64,
}

impl SampledAcc {
    /// Adds `share` (0 to 1) of sample `s` standing for `ns` of time with
    /// SM efficiency `efficiency` (the sample's own, or rescaled to the
    /// time kernels ran in it).
    pub fn add(&mut self, s: &Sample, share: f64, ns: f64, efficiency: f64) {
        if share.is_nan() || ns.is_nan() || share <= 0.0 || ns <= 0.0 {
            return;
        }
        self.samples += 1;
        self.covered_ns += ns;
        if efficiency.is_finite() {
            self.efficiency_ns += efficiency * ns;
        }
        let cycles = s.sm_cycles_active as f64 * share;
        if cycles > 0.0 && s.occupancy_pct.is_finite() {
            self.occupancy_cycles += s.occupancy_pct as f64 * cycles;
            self.active_cycles += cycles;
        }
        if cycles > 0.0 && s.tensor_active_pct.is_finite() {
            self.tensor_cycles += s.tensor_active_pct as f64 * cycles;
            self.tensor_weight += cycles;
        }
        if cycles > 0.0 && s.issue_active_pct.is_finite() {
            self.issue_cycles += s.issue_active_pct as f64 * cycles;
            self.issue_weight += cycles;
        }
        if s.dram_bytes.is_finite() {
            self.dram_bytes += s.dram_bytes as f64 * share;
        }
    }

    /// Adds the figures of a stretch of kernel time as one part weighted by
    /// the time they cover: a range's figures from its kernels', each kernel
    /// weighted by its time as metrics mode weighs measured kernels.
    pub fn add_figures(&mut self, f: &SampledFigures) {
        let t = f.covered_ns as f64;
        self.covered_ns += t;
        self.efficiency_ns += f.sm_efficiency_pct * t;
        for (sum, weight, v) in [
            (&mut self.occupancy_cycles, &mut self.active_cycles, f.achieved_occupancy_pct),
            (&mut self.tensor_cycles, &mut self.tensor_weight, f.tensor_active_pct),
            (&mut self.issue_cycles, &mut self.issue_weight, f.issue_active_pct),
        ] {
            if let Some(v) = v {
                *sum += v * t;
                *weight += t;
            }
        }
        // GB/s times ns: bytes.
        self.dram_bytes += f.dram_gb_per_s * t;
        self.samples = self.samples.saturating_add(f.samples);
    }

    /// Adds another's sums.
    pub fn merge(&mut self, o: &SampledAcc) {
        self.covered_ns += o.covered_ns;
        self.efficiency_ns += o.efficiency_ns;
        self.occupancy_cycles += o.occupancy_cycles;
        self.active_cycles += o.active_cycles;
        self.tensor_cycles += o.tensor_cycles;
        self.tensor_weight += o.tensor_weight;
        self.issue_cycles += o.issue_cycles;
        self.issue_weight += o.issue_weight;
        self.dram_bytes += o.dram_bytes;
        self.samples = self.samples.saturating_add(o.samples);
    }

    /// The figures these sums give; `None` when no time is covered.
    pub fn figures(&self) -> Option<SampledFigures> {
        (self.covered_ns > 0.0).then(|| SampledFigures {
            sm_efficiency_pct: self.efficiency_ns / self.covered_ns,
            achieved_occupancy_pct: (self.active_cycles > 0.0).then(|| self.occupancy_cycles / self.active_cycles),
            tensor_active_pct: (self.tensor_weight > 0.0).then(|| self.tensor_cycles / self.tensor_weight),
            issue_active_pct: (self.issue_weight > 0.0).then(|| self.issue_cycles / self.issue_weight),
            dram_gb_per_s: self.dram_bytes / self.covered_ns,
            covered_ns: self.covered_ns as u64,
            samples: self.samples,
        })
    }
}

/// Hardware figures from PM samples over a stretch of time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampledFigures {
    /// Share of elapsed cycles with a warp active on an SM sub-partition, %.
    pub sm_efficiency_pct: f64,
    /// Active warps over the SM's maximum, over active cycles, %.
    pub achieved_occupancy_pct: Option<f64>,
    /// Tensor pipe active over active cycles, %.
    pub tensor_active_pct: Option<f64>,
    /// Issue slots busy over active cycles, %.
    #[serde(default)]
    pub issue_active_pct: Option<f64>,
    /// DRAM read + write bandwidth, GB/s.
    pub dram_gb_per_s: f64,
    /// Time the figures cover, ns.
    pub covered_ns: u64,
    /// Samples they come from.
    pub samples: u64,
}

/// How sampling went, for the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplingStatus {
    /// Sampling interval, ns: the resolution of every sampled figure.
    pub interval_ns: u64,
    /// Counters sampled.
    pub metrics: Vec<String>,
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
    /// The session ended at process exit with samples possibly still in
    /// the hardware buffer: those were not read (no CUPTI call is safe
    /// then). Stop the session before exit to keep them.
    #[serde(default)]
    pub tail_lost: bool,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(eff: f64, occ: Option<f64>, ns: u64) -> SampledFigures {
        SampledFigures {
            sm_efficiency_pct: eff,
            achieved_occupancy_pct: occ,
            tensor_active_pct: None,
            issue_active_pct: Some(50.0),
            dram_gb_per_s: 1000.0,
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
        assert!((f.sm_efficiency_pct - 70.0).abs() < 1e-9);
        // Occupancy only where it was known.
        assert_eq!(f.achieved_occupancy_pct, Some(20.0));
        assert_eq!(f.tensor_active_pct, None);
        assert!((f.dram_gb_per_s - 1000.0).abs() < 1e-9);
        assert_eq!(f.samples, 6);
    }
}
