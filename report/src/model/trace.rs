//! Per-event records, kept (up to a cap) for the Chrome trace.

use super::metrics::KernelMetrics;
use super::occupancy::Occupancy;
use super::path::RangePath;
use super::sampled::Sample;
use serde::{Deserialize, Serialize};

/// Per-event records.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Trace {
    /// Kernels, in arrival order.
    pub kernels: Vec<KernelRecord>,
    /// Push/pop and start/end range instances.
    pub ranges: Vec<RangeRecord>,
    /// Copies and sets.
    pub memory: Vec<MemoryRecord>,
    /// PM samples (sampling mode), for counter tracks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<SampleRecord>,
}

/// One PM sample of one device (sampling mode).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SampleRecord {
    /// Device.
    pub device: u32,
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
    /// SM efficiency over the sample, % (absent when its configuration
    /// did not hold it).
    pub sm_efficiency_pct: Option<f32>,
    /// Achieved occupancy over its active cycles, % (absent when no SM was
    /// active, or not in its configuration).
    pub achieved_occupancy_pct: Option<f32>,
    /// Tensor pipe active over active cycles, %.
    pub tensor_active_pct: Option<f32>,
    /// DRAM bandwidth, GB/s.
    pub dram_gb_per_s: Option<f32>,
    /// Graphics/compute engine active over the sample, %.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_busy_pct: Option<f32>,
}

impl From<&Sample> for SampleRecord {
    fn from(s: &Sample) -> Self {
        let finite = |v: f32| v.is_finite().then_some(v);
        SampleRecord {
            device: s.device,
            start_ns: s.start,
            end_ns: s.end,
            sm_efficiency_pct: finite(s.sm_efficiency_pct),
            achieved_occupancy_pct: finite(s.occupancy_pct),
            tensor_active_pct: finite(s.tensor_active_pct),
            dram_gb_per_s: finite(s.dram_bytes).map(|b| if s.is_empty() { 0.0 } else { b / s.len() as f32 }),
            gpu_busy_pct: finite(s.gr_active_pct),
        }
    }
}

/// One kernel execution.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelRecord {
    /// Demangled name.
    pub name: String,
    /// Device ordinal.
    pub device: u32,
    /// CUDA context id.
    pub context: u32,
    /// Stream id.
    pub stream: u32,
    /// Correlation id of the launch.
    pub correlation_id: u32,
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
    /// Grid.
    pub grid: [i32; 3],
    /// Block.
    pub block: [i32; 3],
    /// Cluster (zeros when none).
    pub cluster: [u32; 3],
    /// Registers per thread.
    pub registers_per_thread: u32,
    /// Static shared memory per block, bytes.
    pub static_smem_bytes: u32,
    /// Dynamic shared memory per block, bytes.
    pub dynamic_smem_bytes: u32,
    /// The SM's shared memory carveout for the launch, bytes.
    pub smem_carveout_bytes: u32,
    /// Theoretical occupancy.
    pub occupancy: Option<Occupancy>,
    /// OS thread that launched it (0: unknown).
    pub thread: u32,
    /// NVTX ranges open on that thread at the launch.
    pub path: RangePath,
    /// CUDA graph id (0: not from a graph).
    pub graph_id: u32,
    /// Measured by the range profiler: `end_ns` is start + the measured
    /// duration; under kernel replay (several passes), whose records carry
    /// no timestamps, `start_ns` is when its launch call began.
    #[serde(default)]
    pub replayed: bool,
    /// Hardware metrics, for profiled launches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<KernelMetrics>,
    /// A communication kernel's message size, bytes: what the NCCL call
    /// that launched it moves (from NCCL's NVTX payload; absent when the
    /// call gave none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_bytes: Option<u64>,
}

/// One range instance.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RangeRecord {
    /// Path (for start/end ranges, the range alone).
    pub path: RangePath,
    /// Thread that opened it.
    pub thread: u32,
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
}

/// One copy or set.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemoryRecord {
    /// "HtoD", ..., "memset".
    pub kind: String,
    /// Bytes.
    pub bytes: u64,
    /// Device.
    pub device: u32,
    /// Stream.
    pub stream: u32,
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
}
