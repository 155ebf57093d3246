//! Per kernel name, and per (NVTX path, kernel name): launches, GPU time,
//! theoretical occupancy and, in metrics mode, the measured values.

use crate::model::metrics::KernelMetrics;
use crate::model::occupancy::Occupancy;
use crate::model::sampled::SampledAcc;
use std::collections::BTreeMap;

/// How a launch's grid meets the device: `blocks` blocks on `sms` SMs
/// (`u128`: a record's three grid dimensions may multiply past `u64`).
#[derive(Debug, Clone, Copy)]
pub struct Grid {
    /// Blocks of the grid.
    pub blocks: u128,
    /// SMs of the device it ran on.
    pub sms: u32,
}

/// Running totals of a set of launches.
#[derive(Debug, Clone, Default)]
pub struct KernelAcc {
    /// Launches.
    pub launches: u64,
    /// Their summed GPU time, ns.
    pub total: u64,
    /// The shortest launch, ns.
    pub min: u64,
    /// The longest launch, ns.
    pub max: u64,
    /// When the first launch started and the last ended, ns.
    pub first_start: u64,
    /// See `first_start`.
    pub last_end: u64,
    /// Theoretical occupancy times duration, and the duration it covers.
    pub occ_weighted: f64,
    /// See `occ_weighted`.
    pub occ_time: u64,
    /// Time under each occupancy limiter (`Limiter as usize`).
    pub limiter_time: [u64; 4],
    /// Measured launches, and their values weighted by measured duration.
    pub profiled: u64,
    /// See `profiled`: achieved occupancy.
    pub achieved_weighted: f64,
    /// See `profiled`: SM efficiency.
    pub efficiency_weighted: f64,
    /// See `profiled`: the measured duration the values are weighted by.
    pub metric_time: f64,
    /// Every measured value by metric name: summed for additive counters
    /// (`.sum`), weighted by measured duration for the rest.
    pub counters: BTreeMap<String, f64>,
    /// Share of SMs the grid reaches, and wave efficiency, each times
    /// duration, and the duration they cover.
    pub coverage_weighted: f64,
    /// See `coverage_weighted`: wave efficiency.
    pub waves_weighted: f64,
    /// See `coverage_weighted`: waves.
    pub wave_count_weighted: f64,
    /// See `coverage_weighted`: the duration they cover.
    pub grid_time: u64,
    /// Sampling mode: every launch's shares of the samples it overlaps
    /// (for range figures), and the samples wholly inside launches long
    /// enough for a figure of their own.
    pub sampled: SampledAcc,
    /// See `sampled`.
    pub sampled_own: SampledAcc,
    /// Host work in the idle gaps its launches ended, ns.
    pub host_before: u64,
}

/// Whether a metric's values add up over launches (a count, not a rate).
pub fn additive(metric: &str) -> bool {
    metric.ends_with(".sum")
}

impl KernelAcc {
    /// Adds one launch of `dur` ns that started at `start`.
    pub fn add(
        &mut self,
        start: u64,
        dur: u64,
        occ: Option<&Occupancy>,
        m: Option<&KernelMetrics>,
        grid: Option<Grid>,
    ) {
        if self.launches == 0 || start < self.first_start {
            self.first_start = start;
        }
        self.last_end = self.last_end.max(start.saturating_add(dur));
        if let Some(m) = m {
            // Weighted by measured GPU time, as ncu's per-range averages.
            let w = if m.duration_ns.is_finite() && m.duration_ns > 0.0 { m.duration_ns } else { 1.0 };
            self.profiled += 1;
            self.achieved_weighted += m.achieved_occupancy_pct * w;
            self.efficiency_weighted += m.sm_efficiency_pct * w;
            self.metric_time += w;
            for (name, v) in m.values.iter().filter(|(_, v)| v.is_finite()) {
                *self.counters.entry(name.clone()).or_default() += if additive(name) { *v } else { v * w };
            }
        }
        if self.launches == 0 || dur < self.min {
            self.min = dur;
        }
        self.max = self.max.max(dur);
        self.launches += 1;
        self.total = self.total.saturating_add(dur);
        if let Some(o) = occ {
            // Zero-length records still count once, so occupancy is defined.
            let w = dur.max(1);
            self.occ_weighted += o.theoretical_pct * w as f64;
            self.occ_time = self.occ_time.saturating_add(w);
            self.limiter_time[o.limiter as usize] = self.limiter_time[o.limiter as usize].saturating_add(w);
            if let Some(g) = grid.filter(|g| g.sms > 0 && g.blocks > 0 && o.blocks_per_sm > 0) {
                // Blocks reach at most one SM each; they run in waves of
                // SMs x blocks-per-SM, and the last wave may be partial.
                // Every grid CUDA launches has under 2^63 blocks: u64 here (no
                // 128-bit division per kernel); a larger product (a corrupt
                // record) is figured in f64.
                let slots = g.sms as u64 * o.blocks_per_sm as u64;
                let (blocks, in_waves) = match u64::try_from(g.blocks) {
                    Ok(b) => (b as f64, (b.div_ceil(slots) as f64) * slots as f64),
                    Err(_) => {
                        let b = g.blocks as f64;
                        (b, (b / slots as f64).ceil() * slots as f64)
                    }
                };
                self.coverage_weighted += blocks.min(g.sms as f64) / g.sms as f64 * w as f64;
                self.waves_weighted += blocks / in_waves * w as f64;
                self.wave_count_weighted += blocks / slots as f64 * w as f64;
                self.grid_time = self.grid_time.saturating_add(w);
            }
        }
    }
}
