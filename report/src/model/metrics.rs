//! Hardware metrics as the stages after collection see them: the names
//! gpuscope always collects, one launch's values, and how collection went.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// nvprof's `achieved_occupancy`: active warps over the SM's maximum.
pub const ACHIEVED_OCCUPANCY: &str = "sm__warps_active.avg.pct_of_peak_sustained_active";
/// nvprof's `sm_efficiency`: share of elapsed cycles with a warp active.
pub const SM_EFFICIENCY: &str = "smsp__cycles_active.avg.pct_of_peak_sustained_elapsed";
/// GPU duration of the kernel, ns (the activity record's times are not
/// trustworthy under kernel replay).
pub const DURATION: &str = "gpu__time_duration.sum";
/// Elapsed SM cycles.
pub const SM_CYCLES_ELAPSED: &str = "sm__cycles_elapsed.avg";
/// DRAM bytes read.
pub const DRAM_READ: &str = "dram__bytes_read.sum";
/// DRAM bytes written.
pub const DRAM_WRITE: &str = "dram__bytes_write.sum";
/// Share of active cycles in which a warp scheduler issued an instruction:
/// how busy the SM's issue slots (ALU, FMA, memory instructions) are.
pub const ISSUE_ACTIVE: &str = "smsp__issue_active.avg.pct_of_peak_sustained_active";
/// Share of active cycles the tensor cores worked (any data type).
pub const TENSOR_ACTIVE: &str = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active";
/// Tensor-core operations (FLOPs: 2 per multiply-add) per input type, with
/// the analysis pipe each counts for.
pub const TENSOR_OPS: [(&str, &str); 6] = [
    ("sm__ops_path_tensor_src_bf16_dst_fp32.sum", "tensor_bf16"),
    ("sm__ops_path_tensor_src_fp16.sum", "tensor_fp16"),
    ("sm__ops_path_tensor_src_tf32_dst_fp32.sum", "tensor_tf32"),
    ("sm__ops_path_tensor_src_fp8.sum", "tensor_fp8"),
    ("sm__ops_path_tensor_src_int8.sum", "tensor_int8"),
    ("sm__ops_path_tensor_src_fp64.sum", "tensor_fp64"),
];
/// Thread instructions of the FMA pipes: (op, FLOPs each, pipe). A half
/// instruction works on a pair (ncu's roofline weights).
pub const FMA_OPS: [(&str, f64, &str); 9] = [
    ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", 1.0, "fma_fp32"),
    ("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", 1.0, "fma_fp32"),
    ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 2.0, "fma_fp32"),
    ("smsp__sass_thread_inst_executed_op_dadd_pred_on.sum", 1.0, "fma_fp64"),
    ("smsp__sass_thread_inst_executed_op_dmul_pred_on.sum", 1.0, "fma_fp64"),
    ("smsp__sass_thread_inst_executed_op_dfma_pred_on.sum", 2.0, "fma_fp64"),
    ("smsp__sass_thread_inst_executed_op_hadd_pred_on.sum", 2.0, "fma_fp16"),
    ("smsp__sass_thread_inst_executed_op_hmul_pred_on.sum", 2.0, "fma_fp16"),
    ("smsp__sass_thread_inst_executed_op_hfma_pred_on.sum", 4.0, "fma_fp16"),
];

/// Global load sectors (32 bytes each) the L1 cache was asked for.
pub const GLOBAL_LD_SECTORS: &str = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum";
/// Global load requests (one per warp instruction).
pub const GLOBAL_LD_REQUESTS: &str = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum";
/// Share of the bytes of the sectors global loads fetched that the threads
/// asked for, % (instrumented; Nsight Compute's figure behind its global
/// access pattern rule).
pub const GLOBAL_LD_USE: &str = "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct";
/// Global store sectors.
pub const GLOBAL_ST_SECTORS: &str = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum";
/// Global store requests.
pub const GLOBAL_ST_REQUESTS: &str = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum";
/// The same for global stores, %.
pub const GLOBAL_ST_USE: &str = "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct";
/// Shared-memory load requests (warp instructions).
pub const SHARED_LD_REQUESTS: &str = "smsp__inst_executed_op_shared_ld.sum";
/// Shared-memory load wavefronts (passes through the banks).
pub const SHARED_LD_WAVEFRONTS: &str = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum";
/// Shared-memory load bank conflicts.
pub const SHARED_LD_CONFLICTS: &str = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum";
/// Shared-memory store requests.
pub const SHARED_ST_REQUESTS: &str = "smsp__inst_executed_op_shared_st.sum";
/// Shared-memory store wavefronts.
pub const SHARED_ST_WAVEFRONTS: &str = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum";
/// Shared-memory store bank conflicts.
pub const SHARED_ST_CONFLICTS: &str = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum";
/// Share of active cycles the FMA pipe worked, %.
pub const FMA_PIPE_ACTIVE: &str = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active";
/// Why warps did not issue: per reason, warps stalled for it per issued
/// instruction (ncu's warp state statistics), with ncu's name for it.
pub const WARP_STALLS: [(&str, &str); 17] = [
    ("long_scoreboard", "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"),
    ("barrier", "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"),
    ("short_scoreboard", "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio"),
    ("mio_throttle", "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio"),
    ("lg_throttle", "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio"),
    ("wait", "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"),
    ("math_pipe_throttle", "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio"),
    ("not_selected", "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio"),
    ("membar", "smsp__average_warps_issue_stalled_membar_per_issue_active.ratio"),
    ("branch_resolving", "smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio"),
    ("no_instruction", "smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio"),
    ("dispatch_stall", "smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio"),
    ("drain", "smsp__average_warps_issue_stalled_drain_per_issue_active.ratio"),
    ("imc_miss", "smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio"),
    ("tex_throttle", "smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio"),
    ("sleeping", "smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio"),
    ("misc", "smsp__average_warps_issue_stalled_misc_per_issue_active.ratio"),
];
/// What the kernel checklist reads, on top of the default set: global
/// access (coalescing), shared-memory banks, the FMA pipe and the warp stall
/// reasons.
pub const CHECKLIST: [&str; 30] = [
    GLOBAL_LD_SECTORS,
    GLOBAL_LD_REQUESTS,
    GLOBAL_LD_USE,
    GLOBAL_ST_SECTORS,
    GLOBAL_ST_REQUESTS,
    GLOBAL_ST_USE,
    SHARED_LD_REQUESTS,
    SHARED_LD_WAVEFRONTS,
    SHARED_LD_CONFLICTS,
    SHARED_ST_REQUESTS,
    SHARED_ST_WAVEFRONTS,
    SHARED_ST_CONFLICTS,
    FMA_PIPE_ACTIVE,
    WARP_STALLS[0].1,
    WARP_STALLS[1].1,
    WARP_STALLS[2].1,
    WARP_STALLS[3].1,
    WARP_STALLS[4].1,
    WARP_STALLS[5].1,
    WARP_STALLS[6].1,
    WARP_STALLS[7].1,
    WARP_STALLS[8].1,
    WARP_STALLS[9].1,
    WARP_STALLS[10].1,
    WARP_STALLS[11].1,
    WARP_STALLS[12].1,
    WARP_STALLS[13].1,
    WARP_STALLS[14].1,
    WARP_STALLS[15].1,
    WARP_STALLS[16].1,
];

/// What was measured on one kernel launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelMetrics {
    /// [`ACHIEVED_OCCUPANCY`], %.
    pub achieved_occupancy_pct: f64,
    /// [`SM_EFFICIENCY`], %.
    pub sm_efficiency_pct: f64,
    /// [`DURATION`], ns.
    pub duration_ns: f64,
    /// [`SM_CYCLES_ELAPSED`].
    pub sm_cycles_elapsed: f64,
    /// Every collected metric by name, the four above included.
    pub values: BTreeMap<String, f64>,
}

impl KernelMetrics {
    /// From values in the order of `names` (a `MetricSet`'s).
    pub fn from_values(names: &[String], values: &[f64]) -> Self {
        let values: BTreeMap<String, f64> = names.iter().cloned().zip(values.iter().copied()).collect();
        let get = |n: &str| values.get(n).copied().unwrap_or(f64::NAN);
        KernelMetrics {
            achieved_occupancy_pct: get(ACHIEVED_OCCUPANCY),
            sm_efficiency_pct: get(SM_EFFICIENCY),
            duration_ns: get(DURATION),
            sm_cycles_elapsed: get(SM_CYCLES_ELAPSED),
            values,
        }
    }

    /// FP32 FLOPs (fadd + fmul + 2 ffma), when `flops` was collected.
    pub fn fp32_flops(&self) -> Option<f64> {
        let v = |s: &str| self.values.get(&format!("smsp__sass_thread_inst_executed_op_{s}_pred_on.sum")).copied();
        Some(v("fadd")? + v("fmul")? + 2.0 * v("ffma")?)
    }
}

/// How metrics collection went, for the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsStatus {
    /// The metrics collected.
    pub metrics: Vec<String>,
    /// Replay passes per profiled kernel.
    pub passes: usize,
    /// Launches measured.
    pub profiled_launches: u64,
    /// Selected launches measured whose range could not be told: their
    /// batch decoded a different number of ranges than it measured
    /// launches and the thread-block counts did not place them, or a
    /// range's count differed from its launch's grid.
    pub mismatches: u64,
    /// Selected launches skipped because another thread's launch into the
    /// same context was between its API entry and exit (its kernel could
    /// have taken this one's range).
    pub skipped_busy: u64,
    /// CUDA graph launches, which are not measured.
    pub skipped_graph_launches: u64,
    /// Selected launches into a stream being captured into a graph (they
    /// run later, as a graph; measuring them would break the capture).
    #[serde(default)]
    pub skipped_capturing: u64,
    /// Selected launches through an API whose stream gpuscope cannot read
    /// (legacy `cuLaunch*`, multi-device cooperative launches).
    #[serde(default)]
    pub skipped_unsupported_api: u64,
    /// Unselected launches measured to keep the profiler running between
    /// two selected ones (cheaper than a stop and a start); their values
    /// are dropped.
    #[serde(default)]
    pub lingered_launches: u64,
    /// Selected launches joined to their range by its thread-block count,
    /// in batches that decoded a different number of ranges than launches
    /// were measured.
    #[serde(default)]
    pub realigned_launches: u64,
    /// Times the range profiler was started (each start and its stop cost
    /// milliseconds; consecutive measured launches share one).
    #[serde(default)]
    pub profiler_starts: u64,
    /// Metrics passes asked for while an always-on session ran (`gpuscope
    /// trigger PID --metrics S`); 0 in metrics mode, which measures all
    /// along.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub passes_on_demand: u64,
    /// Why metrics were switched off, if they were.
    pub disabled: Option<String>,
    /// Time spent in each range-profiler step, summed over the session, ns:
    /// setup (per context), start, stop, decode, evaluate, re-arm.
    #[serde(default)]
    pub time_ns: PhaseTimes,
}

/// Where metrics mode spends its time (ns, summed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct PhaseTimes {
    /// Per-context setup (enable, counter data image, config).
    pub setup: u64,
    /// Building the metric configuration (profiler initialise, chip name,
    /// host object), on gpuscope's own thread at session start or at the
    /// first measured launch.
    #[serde(default)]
    pub setup_host: u64,
    /// From start to stop: the measured launch call itself.
    #[serde(default)]
    pub launch: u64,
    pub start: u64,
    pub stop: u64,
    pub decode: u64,
    pub evaluate: u64,
    pub rearm: u64,
    /// The program's launches waiting for gpuscope's metrics lock, mostly
    /// behind setup still running on gpuscope's own threads.
    #[serde(default)]
    pub launch_waits: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_map_to_named_fields() {
        let names: Vec<String> = [ACHIEVED_OCCUPANCY, SM_EFFICIENCY, DURATION, SM_CYCLES_ELAPSED]
            .iter()
            .map(|s| s.to_string())
            .chain(
                ["fadd", "fmul", "ffma"]
                    .iter()
                    .map(|op| format!("smsp__sass_thread_inst_executed_op_{op}_pred_on.sum")),
            )
            .collect();
        let m = KernelMetrics::from_values(&names, &[55.0, 90.0, 1000.0, 1800.0, 10.0, 20.0, 30.0]);
        assert_eq!((m.achieved_occupancy_pct, m.sm_efficiency_pct, m.duration_ns), (55.0, 90.0, 1000.0));
        assert_eq!(m.fp32_flops(), Some(10.0 + 20.0 + 60.0));
    }
}
