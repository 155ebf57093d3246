//! The few CUDA driver calls a profiler needs (device attributes and names,
//! and an empty kernel to time launches with),
//! loaded at run time from `libcuda.so.1` like CUPTI itself.

use crate::{CUdevice_attribute, LoadError};
use std::ffi::{c_char, c_int, c_void};

/// `CUresult`: 0 is success.
pub type CUresult = c_int;
/// `CUdevice`: a device ordinal.
pub type CUdevice = c_int;

/// The driver entry points gpuscope uses.
pub struct Driver {
    _lib: libloading::Library,
    /// `cuInit`.
    pub cu_init: unsafe extern "C" fn(flags: u32) -> CUresult,
    /// `cuDriverGetVersion`.
    pub cu_driver_get_version: unsafe extern "C" fn(version: *mut c_int) -> CUresult,
    /// `cuDeviceGetCount`.
    pub cu_device_get_count: unsafe extern "C" fn(count: *mut c_int) -> CUresult,
    /// `cuDeviceGet`.
    pub cu_device_get: unsafe extern "C" fn(dev: *mut CUdevice, ordinal: c_int) -> CUresult,
    /// `cuDeviceGetAttribute`.
    pub cu_device_get_attribute:
        unsafe extern "C" fn(value: *mut c_int, attr: CUdevice_attribute, dev: CUdevice) -> CUresult,
    /// `cuCtxGetDevice`: the device of the calling thread's current context.
    pub cu_ctx_get_device: unsafe extern "C" fn(dev: *mut CUdevice) -> CUresult,
    /// `cuCtxGetId`: a context's id, unique for the life of the process
    /// (a new context may reuse a destroyed one's address, never its id).
    pub cu_ctx_get_id: unsafe extern "C" fn(ctx: crate::CUcontext, id: *mut u64) -> CUresult,
    /// `cuCtxGetCurrent`: the calling thread's current context (null if
    /// none; fails before `cuInit` without initialising anything).
    pub cu_ctx_get_current: unsafe extern "C" fn(ctx: *mut crate::CUcontext) -> CUresult,
    /// `cuStreamIsCapturing`: 0 (none), 1 (active), 2 (invalidated).
    pub cu_stream_is_capturing: unsafe extern "C" fn(stream: crate::CUstream, status: *mut c_int) -> CUresult,
    /// `cuCtxPushCurrent` (v2).
    pub cu_ctx_push_current: unsafe extern "C" fn(ctx: crate::CUcontext) -> CUresult,
    /// `cuCtxPopCurrent` (v2).
    pub cu_ctx_pop_current: unsafe extern "C" fn(ctx: *mut crate::CUcontext) -> CUresult,
    /// `cuCtxSynchronize`: waits for the current context's work.
    pub cu_ctx_synchronize: unsafe extern "C" fn() -> CUresult,
    /// `cuDeviceGetName`.
    pub cu_device_get_name: unsafe extern "C" fn(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult,
    /// `cuDeviceGetUuid_v2`: a device's UUID, 16 bytes (what `nvidia-smi`
    /// and DCGM print as `GPU-xxxxxxxx-...`); `None` where the driver lacks
    /// it (only a label is lost).
    pub cu_device_get_uuid: Option<unsafe extern "C" fn(uuid: *mut [u8; 16], dev: CUdevice) -> CUresult>,
    /// `cuDeviceTotalMem_v2`: a device's memory, bytes.
    pub cu_device_total_mem: unsafe extern "C" fn(bytes: *mut usize, dev: CUdevice) -> CUresult,
    /// `cuModuleLoadData`: loads a module from PTX or a cubin image.
    pub cu_module_load_data: unsafe extern "C" fn(module: *mut crate::CUmodule, image: *const c_void) -> CUresult,
    /// `cuModuleGetFunction`.
    pub cu_module_get_function:
        unsafe extern "C" fn(f: *mut crate::CUfunction, module: crate::CUmodule, name: *const c_char) -> CUresult,
    /// `cuModuleUnload`.
    pub cu_module_unload: unsafe extern "C" fn(module: crate::CUmodule) -> CUresult,
    /// `cuStreamCreate`.
    pub cu_stream_create: unsafe extern "C" fn(stream: *mut crate::CUstream, flags: u32) -> CUresult,
    /// `cuStreamDestroy` (v2).
    pub cu_stream_destroy: unsafe extern "C" fn(stream: crate::CUstream) -> CUresult,
    /// `cuStreamSynchronize`.
    pub cu_stream_synchronize: unsafe extern "C" fn(stream: crate::CUstream) -> CUresult,
    /// `cuLaunchKernel`.
    #[allow(clippy::type_complexity)]
    pub cu_launch_kernel: unsafe extern "C" fn(
        f: crate::CUfunction,
        grid_x: u32,
        grid_y: u32,
        grid_z: u32,
        block_x: u32,
        block_y: u32,
        block_z: u32,
        shared_bytes: u32,
        stream: crate::CUstream,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) -> CUresult,
}

/// The driver's soname.
pub const DRIVER_SONAME: &str = "libcuda.so.1";

impl Driver {
    /// Loads `libcuda.so.1` from the default search path.
    pub fn load() -> Result<Self, LoadError> {
        let lib = crate::load_first(DRIVER_SONAME, &[DRIVER_SONAME.to_string()])?;
        let missing = |name: &str, e: libloading::Error| LoadError {
            library: DRIVER_SONAME,
            tried: vec![(format!("symbol {name}"), e.to_string())],
        };
        macro_rules! get {
            ($name:literal) => {
                // SAFETY: the symbol's C signature is the field's type, as
                // declared in cuda.h for CUDA 12 and 13.
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| missing($name, e))?
            };
        }
        Ok(Driver {
            cu_init: get!("cuInit"),
            cu_driver_get_version: get!("cuDriverGetVersion"),
            cu_device_get_count: get!("cuDeviceGetCount"),
            cu_device_get: get!("cuDeviceGet"),
            cu_device_get_attribute: get!("cuDeviceGetAttribute"),
            cu_device_get_name: get!("cuDeviceGetName"),
            // SAFETY: as for `get!`.
            cu_device_get_uuid: unsafe { lib.get(b"cuDeviceGetUuid_v2\0") }.ok().map(|f| *f),
            cu_device_total_mem: get!("cuDeviceTotalMem_v2"),
            cu_ctx_get_device: get!("cuCtxGetDevice"),
            cu_ctx_get_current: get!("cuCtxGetCurrent"),
            cu_ctx_get_id: get!("cuCtxGetId"),
            cu_stream_is_capturing: get!("cuStreamIsCapturing"),
            cu_ctx_push_current: get!("cuCtxPushCurrent_v2"),
            cu_ctx_pop_current: get!("cuCtxPopCurrent_v2"),
            cu_ctx_synchronize: get!("cuCtxSynchronize"),
            cu_module_load_data: get!("cuModuleLoadData"),
            cu_module_get_function: get!("cuModuleGetFunction"),
            cu_module_unload: get!("cuModuleUnload"),
            cu_stream_create: get!("cuStreamCreate"),
            cu_stream_destroy: get!("cuStreamDestroy_v2"),
            cu_stream_synchronize: get!("cuStreamSynchronize"),
            cu_launch_kernel: get!("cuLaunchKernel"),
            _lib: lib,
        })
    }
}
