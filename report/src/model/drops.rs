//! What was lost, by cause: collection, decoding, attribution and
//! aggregation each count theirs here.

use serde::{Deserialize, Serialize};

/// What was lost, by cause. Every report carries it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Drops {
    /// Records CUPTI dropped (it had no buffer).
    pub cupti_records: u64,
    /// Buffer requests refused because the pool was at its cap.
    pub buffer_requests_refused: u64,
    /// NVTX and launch events lost because the event queue was full.
    pub host_events: u64,
    /// Kernels whose launch was not seen (no thread or NVTX path).
    pub unattributed_kernels: u64,
    /// Records that could not be decoded.
    pub undecodable_records: u64,
    /// Kernels left out of the trace by its cap (they are in the statistics).
    pub trace_kernels_over_cap: u64,
    /// Pops with no open range of their domain on that thread.
    pub unbalanced_pops: u64,
    /// Range instances summarised early to bound memory (their late kernels
    /// are missing from range busy time).
    pub ranges_evicted: u64,
    /// Profiled kernels whose metric values never arrived.
    #[serde(default)]
    pub kernels_missing_metrics: u64,
    /// Kernels that arrived after the idle time around them was decided:
    /// idle time they overlapped is counted as idle.
    #[serde(default)]
    pub late_kernels: u64,
    /// NVTX ranges with a path new past the process's path cap
    /// (`gpuscope::MAX_PATHS`): recorded under one stand-in
    /// range inside their parent.
    #[serde(default)]
    pub ranges_over_path_cap: u64,
    /// Panics caught inside gpuscope's callbacks and threads: each lost
    /// what that call was handling (an NVTX event, a launch, a buffer's
    /// records or a measurement). The program runs on.
    #[serde(default)]
    pub callback_panics: u64,
    /// CUDA graph nodes captured inside ranges that were not remembered
    /// (the table was full): their replayed kernels count for the ranges
    /// around the graph's launch only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub graph_nodes_over_cap: u64,
    /// Device memory allocations not tracked because the table of live
    /// allocations was full: their bytes are not in the live figures.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub live_allocations_over_cap: u64,
    /// Range calls whose device memory peak is a lower bound: they began
    /// before the oldest change of live bytes still kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub range_memory_partial: u64,
    /// Kernels of GPUs past the 64th of the process: they count in the
    /// session's figures but have no per-device figures.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub devices_over_cap: u64,
    /// NCCL calls' message sizes not given to a communication kernel: the
    /// call's kernel never came (records off between trace windows, or
    /// dropped), or the tables were full. Those calls have no bandwidth.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub comm_messages_unmatched: u64,
    /// Kernels of a CUDA graph launched before a trace window closed that
    /// ran past the close (queued behind others, or running): CUPTI gives
    /// such nodes no true end (every node's end tens of ms late), so they
    /// are left out of every figure.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub window_cut_graph_kernels: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Drops {
    /// True when nothing was lost.
    pub fn is_empty(&self) -> bool {
        *self == Drops::default()
    }
}
