//! GPU memory as the report describes it: each device's allocations and
//! releases over the session, its live bytes, their peak and a timeline.

use serde::{Deserialize, Serialize};

/// At most this many holders are listed at the peak.
pub const MAX_HOLDERS: usize = 12;

/// Device memory held by the allocations made inside one range path.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Holder {
    /// `outer/inner` ("": no range open; "(unknown)": the call was not
    /// seen).
    pub path: String,
    /// Bytes live.
    pub bytes: u64,
}

/// One device's memory over the session, from CUPTI's allocation records
/// (every `cudaMalloc`/`cuMemAlloc` and release in the process, whichever
/// library made it: PyTorch's caching allocator, cuBLAS, NCCL, ...).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Device ordinal.
    pub device: u32,
    /// Device-memory allocations and releases, and their bytes (static
    /// memory of loaded modules is not counted here: see
    /// `static_peak_bytes`).
    pub allocations: u64,
    /// See `allocations`.
    pub releases: u64,
    /// See `allocations`.
    pub allocated_bytes: u64,
    /// See `allocations`.
    pub released_bytes: u64,
    /// Releases of allocations made before the session began (not in the
    /// live bytes), and their bytes.
    pub earlier_releases: u64,
    /// See `earlier_releases`.
    pub earlier_released_bytes: u64,
    /// Allocations from stream-ordered pools (`cudaMallocAsync`).
    pub pool_allocations: u64,
    /// Most device memory allocated in the session and live at once,
    /// bytes, and when (ns, CUPTI's clock).
    pub peak_live_bytes: u64,
    /// See `peak_live_bytes`.
    pub peak_ns: u64,
    /// Live at the session's end, bytes.
    pub live_at_end_bytes: u64,
    /// Of the live bytes, the most that were static device memory at once
    /// (loaded modules' `__device__` variables, not allocations of the
    /// program's), bytes.
    #[serde(default)]
    pub static_peak_bytes: u64,
    /// Most pinned host memory and managed memory live at once, bytes.
    pub pinned_host_peak_bytes: u64,
    /// See `pinned_host_peak_bytes`.
    pub managed_peak_bytes: u64,
    /// Who held the device memory live at the peak: the NVTX path of each
    /// allocating call ("" when no range was open), most bytes first, at
    /// most [`MAX_HOLDERS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_at_peak: Vec<Holder>,
    /// Allocations whose call was not seen (made by a library through a
    /// call gpuscope does not follow, or before the session).
    #[serde(default)]
    pub unattributed_allocations: u64,
    /// Live device bytes over time: (ns, bytes) points, the highest of each
    /// stretch when there were more changes than points kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<(u64, u64)>,
}
