//! What a kernel's measured counters say about it: how busy its SMs,
//! compute pipes and DRAM were, and the FLOPs it did per nanosecond.

use super::peaks::{Peaks, Pipe};
use crate::model::metrics::{DRAM_READ, DRAM_WRITE, FMA_OPS, ISSUE_ACTIVE, TENSOR_ACTIVE, TENSOR_OPS};
use crate::model::sampled::SampledFigures;
use crate::report::KernelStats;

/// Figures of one kernel (or one kernel under one NVTX path).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Rates {
    /// SM efficiency, %.
    pub sm_efficiency: Option<f64>,
    /// Achieved occupancy, %.
    pub occupancy: Option<f64>,
    /// Compute throughput, % of peak: the busier of the issue slots and
    /// the tensor pipe over the kernel's elapsed time (ncu's "Compute (SM)
    /// Throughput" up to its other sub-units), or counted FLOPs over peak.
    pub compute_pct: Option<f64>,
    /// Tensor pipe activity over active cycles, %.
    pub tensor_pct: Option<f64>,
    /// DRAM bytes per ns of kernel time.
    pub dram_bytes_per_ns: Option<f64>,
    /// DRAM bandwidth, % of peak.
    pub dram_pct: Option<f64>,
    /// Counted FLOPs per ns of kernel time, per pipe (empty: not counted).
    pub flops_per_ns: Vec<(Pipe, f64)>,
    /// Share of SMs the grid reaches, %.
    pub sm_coverage: Option<f64>,
    /// Wave efficiency, %.
    pub wave_efficiency: Option<f64>,
    /// Waves the grid needs.
    pub waves: Option<f64>,
}

impl Rates {
    /// Whether hardware counters were measured.
    pub(crate) fn measured(&self) -> bool {
        self.sm_efficiency.is_some()
    }

    /// All counted FLOPs per ns.
    pub(crate) fn total_flops_per_ns(&self) -> f64 {
        self.flops_per_ns.iter().map(|(_, f)| f).sum()
    }
}

/// The launch shape of `s` alone.
fn shape(s: &KernelStats) -> Rates {
    Rates {
        sm_coverage: s.sm_coverage_pct,
        wave_efficiency: s.wave_efficiency_pct,
        waves: s.waves,
        ..Default::default()
    }
}

/// The figures of `s`; peaks turn bandwidth and FLOPs into shares.
pub(crate) fn rates(s: &KernelStats, peaks: Option<&Peaks>) -> Rates {
    rates_from(s, s, peaks)
}

/// The launch shape of `s` with the measured figures of `measured` (the
/// same kernel measured elsewhere, when `s` has no measurements of its own).
pub(crate) fn rates_from(s: &KernelStats, measured: &KernelStats, peaks: Option<&Peaks>) -> Rates {
    let shape = shape(s);
    let s = measured;
    if s.profiled_launches == 0 {
        return match &s.sampled {
            Some(f) => sampled(f, shape, peaks),
            None => shape,
        };
    }
    let c = |name: &str| s.counters.get(name).copied();
    let per_ns = |total: f64| (s.measured_ns > 0.0).then(|| total / s.measured_ns);
    let mut flops: Vec<(Pipe, f64)> = Vec::new();
    for (name, pipe) in TENSOR_OPS {
        if let Some(v) = c(name).and_then(per_ns) {
            flops.push((pipe, v));
        }
    }
    for (name, weight, pipe) in FMA_OPS {
        if let Some(v) = c(name).and_then(per_ns) {
            match flops.iter_mut().find(|(p, _)| *p == pipe) {
                Some((_, f)) => *f += v * weight,
                None => flops.push((pipe, v * weight)),
            }
        }
    }
    let dram_bytes_per_ns = match (c(DRAM_READ), c(DRAM_WRITE)) {
        (Some(r), Some(w)) => per_ns(r + w),
        _ => None,
    };
    let dram_pct = dram_bytes_per_ns.zip(peaks).map(|(b, p)| b * 1e9 / p.dram_bytes_per_s * 100.0);
    let elapsed = s.sm_efficiency_pct.map_or(1.0, |e| e / 100.0);
    let from_pipes = match (c(ISSUE_ACTIVE), c(TENSOR_ACTIVE)) {
        (None, None) => None,
        (i, t) => Some(i.unwrap_or(0.0).max(t.unwrap_or(0.0)) * elapsed),
    };
    let from_flops = peaks
        .filter(|_| !flops.is_empty())
        .map(|p| flops.iter().filter_map(|(pipe, f)| p.flops(pipe).map(|peak| f * 1e9 / peak)).sum::<f64>() * 100.0);
    Rates {
        sm_efficiency: s.sm_efficiency_pct,
        occupancy: s.achieved_occupancy_pct,
        compute_pct: from_pipes.or(from_flops),
        tensor_pct: c(TENSOR_ACTIVE),
        dram_bytes_per_ns,
        dram_pct,
        flops_per_ns: flops,
        ..shape
    }
}

/// The figures of PM samples over a kernel's launches (sampling mode): no
/// FLOP counts, compute from the pipes' activity. Compute throughput is
/// the busier of the issue slots and the tensor pipe; with one of them not
/// sampled it is unknown, unless the other alone reaches the
/// speed-of-light threshold (a lower bound that already decides).
pub(crate) fn sampled(f: &SampledFigures, shape: Rates, peaks: Option<&Peaks>) -> Rates {
    let dram_bytes_per_ns = f.dram_gb_per_s;
    let elapsed = f.sm_efficiency_pct.map(|e| e / 100.0);
    let compute_pct = match (f.issue_active_pct, f.tensor_active_pct, elapsed) {
        (Some(i), Some(t), Some(e)) => Some(i.max(t) * e),
        (Some(x), None, Some(e)) | (None, Some(x), Some(e)) => {
            Some(x * e).filter(|c| *c >= super::verdict::SOL_BOUND_PCT)
        }
        _ => None,
    };
    Rates {
        sm_efficiency: f.sm_efficiency_pct,
        occupancy: f.achieved_occupancy_pct,
        compute_pct,
        tensor_pct: f.tensor_active_pct,
        dram_bytes_per_ns,
        dram_pct: dram_bytes_per_ns.zip(peaks).map(|(b, p)| b * 1e9 / p.dram_bytes_per_s * 100.0),
        ..shape
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::device::DeviceInfo;
    use crate::model::occupancy::SmLimits;

    fn stats(counters: &[(&str, f64)], eff: f64, ns: f64) -> KernelStats {
        KernelStats {
            launches: 1,
            total_ns: ns as u64,
            mean_ns: ns as u64,
            min_ns: ns as u64,
            max_ns: ns as u64,
            theoretical_occupancy_pct: Some(50.0),
            occupancy_limiter: None,
            profiled_launches: 1,
            achieved_occupancy_pct: Some(40.0),
            sm_efficiency_pct: Some(eff),
            counters: counters.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            measured_ns: ns,
            sm_coverage_pct: Some(100.0),
            wave_efficiency_pct: Some(100.0),
            waves: Some(1.0),
            sampled: None,
            metrics_sampled: false,
            first_ns: 0,
            last_ns: 0,
            host_before_ns: 0,
        }
    }

    #[test]
    fn sampled_figures_stand_in_for_measured_ones() {
        let h100 = super::super::peaks::peaks(&DeviceInfo::new(0, "NVIDIA H100 80GB HBM3", 132, SmLimits::SM_90));
        let mut s = stats(&[], 0.0, 1e6);
        s.profiled_launches = 0;
        s.sm_efficiency_pct = None;
        s.achieved_occupancy_pct = None;
        assert!(!rates(&s, h100.as_ref()).measured());
        s.sampled = Some(crate::model::sampled::SampledFigures {
            sm_efficiency_pct: Some(90.0),
            achieved_occupancy_pct: Some(30.0),
            tensor_active_pct: Some(10.0),
            issue_active_pct: Some(50.0),
            dram_gb_per_s: Some(1675.0),
            gpu_busy_pct: None,
            covered_ns: 1_000_000,
            samples: 50,
        });
        let r = rates(&s, h100.as_ref());
        assert_eq!((r.sm_efficiency, r.occupancy), (Some(90.0), Some(30.0)));
        // Issue slots 50% of active cycles, active 90% of the time.
        assert!((r.compute_pct.unwrap() - 45.0).abs() < 1e-9);
        // 1675 GB/s of the H100 SXM's 3350.
        assert!((r.dram_pct.unwrap() - 50.0).abs() < 0.5, "{:?}", r.dram_pct);
        // The tensor pipe not sampled: compute is unknown, not the issue
        // slots' 45%; known when the issue slots alone reach the threshold.
        let f = s.sampled.as_mut().unwrap();
        f.tensor_active_pct = None;
        assert_eq!(rates(&s, h100.as_ref()).compute_pct, None);
        s.sampled.as_mut().unwrap().issue_active_pct = Some(80.0);
        assert!((rates(&s, h100.as_ref()).compute_pct.unwrap() - 72.0).abs() < 1e-9);
    }

    #[test]
    fn rates_follow_ncu_speed_of_light_on_the_validation_kernels() {
        let h100 = super::super::peaks::peaks(&DeviceInfo::new(0, "NVIDIA H100 80GB HBM3", 132, SmLimits::SM_90));
        // ncu on the device: fma_loop issue 96.75% x SM efficiency 98.8%
        // -> Compute (SM) Throughput 95.62%; stream_copy 534 MB in 240 us
        // -> DRAM Throughput 66.33%.
        let fma = rates(&stats(&[(ISSUE_ACTIVE, 96.75), (TENSOR_ACTIVE, 0.0)], 98.8, 228_960.0), h100.as_ref());
        assert!((fma.compute_pct.unwrap() - 95.6).abs() < 0.1);
        let copy = rates(
            &stats(&[(DRAM_READ, 278_796_800.0), (DRAM_WRITE, 255_117_312.0), (ISSUE_ACTIVE, 3.43)], 91.7, 240_160.0),
            h100.as_ref(),
        );
        assert!((copy.dram_pct.unwrap() - 66.4).abs() < 0.2, "{:?}", copy.dram_pct);
        // A bf16 GEMM: the tensor pipe, not the issue slots, is busy.
        let gemm = rates(
            &stats(&[(ISSUE_ACTIVE, 20.0), (TENSOR_ACTIVE, 96.9), (TENSOR_OPS[0].0, 1.1167e12)], 96.4, 1_355_296.0),
            h100.as_ref(),
        );
        assert!((gemm.compute_pct.unwrap() - 93.4).abs() < 0.1);
        assert_eq!(gemm.flops_per_ns.len(), 1);
        assert!((gemm.total_flops_per_ns() - 823_950.0).abs() < 100.0, "{}", gemm.total_flops_per_ns());
        // FLOP counters alone give compute throughput through the peaks.
        let fl = rates(&stats(&[(FMA_OPS[2].0, 33.5e9)], 100.0, 1e6), h100.as_ref());
        assert!((fl.compute_pct.unwrap() - 100.0).abs() < 0.01, "67 TFLOP/s of 67: {:?}", fl.compute_pct);
        // Unmeasured: only the launch shape.
        let mut s = stats(&[], 0.0, 1e6);
        s.profiled_launches = 0;
        let r = rates(&s, h100.as_ref());
        assert!(!r.measured() && r.sm_coverage == Some(100.0) && r.compute_pct.is_none());
    }
}
