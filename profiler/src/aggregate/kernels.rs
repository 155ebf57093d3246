//! Per kernel name, and per (NVTX path, kernel name): launches, GPU time,
//! theoretical occupancy and, in metrics mode, the measured values.

use crate::model::metrics::KernelMetrics;
use crate::model::occupancy::Occupancy;

/// Running totals of a set of launches.
#[derive(Debug, Clone, Default)]
pub(crate) struct KernelAcc {
    pub launches: u64,
    pub total: u64,
    pub min: u64,
    pub max: u64,
    /// Theoretical occupancy times duration, and the duration it covers.
    pub occ_weighted: f64,
    pub occ_time: u64,
    /// Time under each occupancy limiter (`Limiter as usize`).
    pub limiter_time: [u64; 4],
    /// Measured launches, and their values weighted by measured duration.
    pub profiled: u64,
    pub achieved_weighted: f64,
    pub efficiency_weighted: f64,
    pub metric_time: f64,
}

impl KernelAcc {
    /// Adds one launch of `dur` ns.
    pub(crate) fn add(&mut self, dur: u64, occ: Option<&Occupancy>, m: Option<&KernelMetrics>) {
        if let Some(m) = m {
            // Weighted by measured GPU time, as ncu's per-range averages.
            let w = if m.duration_ns.is_finite() && m.duration_ns > 0.0 { m.duration_ns } else { 1.0 };
            self.profiled += 1;
            self.achieved_weighted += m.achieved_occupancy_pct * w;
            self.efficiency_weighted += m.sm_efficiency_pct * w;
            self.metric_time += w;
        }
        if self.launches == 0 || dur < self.min {
            self.min = dur;
        }
        self.max = self.max.max(dur);
        self.launches += 1;
        self.total += dur;
        if let Some(o) = occ {
            // Zero-length records still count once, so occupancy is defined.
            let w = dur.max(1);
            self.occ_weighted += o.theoretical_pct * w as f64;
            self.occ_time += w;
            self.limiter_time[o.limiter as usize] += w;
        }
    }
}
