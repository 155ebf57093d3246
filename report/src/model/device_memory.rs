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

/// Device memory held by the allocations one shared library made.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LibraryHolder {
    /// What [`library_of`] calls the library ("(unknown)": CUPTI did not
    /// say).
    pub library: String,
    /// Bytes live.
    pub bytes: u64,
}

/// Device memory while a range was open, over all its calls (nested ranges
/// included).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RangeMemory {
    /// Device allocations made by calls inside it, and their bytes.
    pub allocations: u64,
    /// See `allocations`.
    pub allocated_bytes: u64,
    /// Releases made by calls inside it, and their bytes.
    pub releases: u64,
    /// See `releases`.
    pub released_bytes: u64,
    /// Most device memory live at once (all devices, every allocation of
    /// the process, whoever made it) while one of its calls was open,
    /// bytes.
    pub peak_live_bytes: u64,
    /// Device memory live when its last call ended, bytes.
    pub live_at_end_bytes: u64,
    /// A framework's own accounting (PyTorch's caching allocator), when
    /// its integration reported it at the range's bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framework: Option<FrameworkMemory>,
}

/// A framework allocator's figures over a range's calls: memory in use by
/// tensors against what the allocator holds from the device.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FrameworkMemory {
    /// Calls with figures at both bounds.
    pub calls: u64,
    /// Bytes in use at its last call's start and end.
    pub allocated_at_start_bytes: u64,
    /// See `allocated_at_start_bytes`.
    pub allocated_at_end_bytes: u64,
    /// The most one call grew the bytes in use, start to end (what it
    /// keeps: activations saved by a forward pass).
    pub max_growth_bytes: u64,
    /// The allocator's high-water mark of bytes in use at its last call's
    /// end (since the program's start or its last reset).
    pub peak_allocated_bytes: u64,
    /// The highest bytes in use reached inside one of its calls, when a
    /// call raised the high-water mark (else it stayed under the mark it
    /// found: `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_inside_bytes: Option<u64>,
    /// Bytes the allocator held from the device at its last call's end;
    /// held but not in use is cached (and fragmented) memory.
    pub reserved_at_end_bytes: u64,
}

/// The name a report gives the shared library at `file` (the path CUPTI's
/// allocation-source tracking gives): the library for NVIDIA's and the
/// frameworks' known ones, else the file's name without its version.
pub fn library_of(file: &str) -> String {
    let name = file.rsplit('/').next().unwrap_or(file);
    const KNOWN: &[(&str, &str)] = &[
        ("libc10_cuda", "PyTorch"),
        ("libtorch_cuda", "PyTorch"),
        ("libtorch_python", "PyTorch"),
        ("libcublas", "cuBLAS"),
        ("libcudnn", "cuDNN"),
        ("libnccl", "NCCL"),
        ("libcufft", "cuFFT"),
        ("libcusparse", "cuSPARSE"),
        ("libcusolver", "cuSOLVER"),
        ("libcurand", "cuRAND"),
        ("libcudart", "CUDA runtime"),
        ("libcuda.", "CUDA driver"),
        ("libnvrtc", "NVRTC"),
        ("libtriton", "Triton"),
        ("xla_extension", "XLA"),
        ("libjax", "XLA"),
        ("libxla", "XLA"),
        ("cupy", "CuPy"),
    ];
    if let Some((_, lib)) =
        KNOWN.iter().find(|(prefix, _)| name.starts_with(prefix) || file.contains(&format!("/{prefix}")))
    {
        return lib.to_string();
    }
    match name.find(".so") {
        Some(i) => name[..i + 3].to_string(),
        None => name.to_string(),
    }
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
    /// The same memory by the shared library that allocated it (CUPTI's
    /// allocation-source tracking), most bytes first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_at_peak_by_library: Vec<LibraryHolder>,
    /// Allocations whose call was not seen (made by a library through a
    /// call gpuscope does not follow, or before the session).
    #[serde(default)]
    pub unattributed_allocations: u64,
    /// Live device bytes over time: (ns, bytes) points, the highest of each
    /// stretch when there were more changes than points kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<(u64, u64)>,
}

#[cfg(test)]
mod tests {
    use super::library_of;

    #[test]
    fn libraries_are_named_by_what_they_are() {
        for (file, lib) in [
            ("/usr/lib/python3/site-packages/torch/lib/libc10_cuda.so", "PyTorch"),
            ("/opt/venv/lib/site-packages/nvidia/cublas/lib/libcublasLt.so.12", "cuBLAS"),
            ("/usr/lib/x86_64-linux-gnu/libcudnn_engines_precompiled.so.9.1.0", "cuDNN"),
            ("/usr/lib/libnccl.so.2", "NCCL"),
            ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "CUDA driver"),
            ("/venv/site-packages/cupy/cuda/memory.cpython-312-x86_64-linux-gnu.so", "CuPy"),
            ("/venv/site-packages/jaxlib/xla_extension.so", "XLA"),
            ("/home/me/build/libmysolver.so.3.1", "libmysolver.so"),
            ("/home/me/build/train", "train"),
        ] {
            assert_eq!(library_of(file), lib, "{file}");
        }
    }
}
