//! The few CUDA driver calls gpuscope makes itself, as a result layer:
//! each call's `CUresult` becomes a `Result` ([`CudaError`]), and the
//! `unsafe` of calling through libcuda's pointers stays here. Calls taking
//! a raw handle are `unsafe fn`s whose contract is the handle's validity.

use crate::model::device::DeviceInfo;
use crate::model::occupancy::SmLimits;
use cupti_sys::driver::Driver;
use std::sync::OnceLock;

/// What gpuscope says, wherever it is asked to profile, when the NVIDIA
/// driver library does not load.
pub const NO_DRIVER: &str = "no NVIDIA driver found (libcuda.so.1 is not loadable), so there is no GPU to profile";

/// A CUDA driver call that failed: its `CUresult`, or no driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CudaError(pub i32);

/// `CUDA_ERROR_NOT_INITIALIZED`: before the program's `cuInit`.
pub(crate) const NOT_INITIALIZED: CudaError = CudaError(3);

/// What stands for a driver that did not load (not a `CUresult`).
const NO_LIBCUDA: CudaError = CudaError(-1);

impl std::fmt::Display for CudaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            NO_LIBCUDA => f.write_str("no CUDA driver"),
            CudaError(rc) => write!(f, "CUDA error {rc}"),
        }
    }
}

/// Driver results as `Result`s.
pub(crate) type CudaResult<T> = std::result::Result<T, CudaError>;

fn check(rc: cupti_sys::driver::CUresult) -> CudaResult<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(CudaError(rc))
    }
}

fn loaded() -> CudaResult<&'static Driver> {
    driver().ok_or(NO_LIBCUDA)
}

/// The device of the calling thread's current context.
pub(crate) fn ctx_device() -> CudaResult<i32> {
    let d = loaded()?;
    let mut dev = 0;
    // SAFETY: the out pointer is a valid local; without a current context
    // the call fails and nothing is read.
    check(unsafe { (d.cu_ctx_get_device)(&mut dev) })?;
    Ok(dev)
}

/// Devices the driver sees; [`NOT_INITIALIZED`] before the program's
/// `cuInit` (nothing is initialised by asking).
pub(crate) fn device_count() -> CudaResult<i32> {
    let d = loaded()?;
    let mut n = 0;
    // SAFETY: the out pointer is a valid local.
    check(unsafe { (d.cu_device_get_count)(&mut n) })?;
    Ok(n)
}

/// Whether `stream` is being captured into a graph: 0 (no), 1 (active), 2
/// (invalidated).
///
/// # Safety
/// `stream` is a live stream handle (or null, the legacy default stream).
pub(crate) unsafe fn stream_capture_status(stream: cupti_sys::CUstream) -> CudaResult<i32> {
    let d = loaded()?;
    let mut status = 0;
    // SAFETY: a valid out pointer; the stream per this function's contract.
    check(unsafe { (d.cu_stream_is_capturing)(stream, &mut status) })?;
    Ok(status)
}

/// Waits for the calling thread's current context's work.
pub(crate) fn ctx_synchronize() -> CudaResult<()> {
    let d = loaded()?;
    // SAFETY: no arguments; acts on the current context (fails without).
    check(unsafe { (d.cu_ctx_synchronize)() })
}

/// A context's id, unique for the life of the process.
///
/// # Safety
/// `ctx` is a live context.
pub(crate) unsafe fn ctx_id(ctx: cupti_sys::CUcontext) -> CudaResult<u64> {
    let d = loaded()?;
    let mut id = 0u64;
    // SAFETY: a valid out pointer; the context per this function's contract.
    check(unsafe { (d.cu_ctx_get_id)(ctx, &mut id) })?;
    Ok(id)
}

/// Loads a module from PTX text into the current context.
pub(crate) fn module_load_ptx(ptx: &std::ffi::CStr) -> CudaResult<cupti_sys::CUmodule> {
    let d = loaded()?;
    let mut module: cupti_sys::CUmodule = std::ptr::null_mut();
    // SAFETY: NUL-terminated text; a valid out pointer.
    check(unsafe { (d.cu_module_load_data)(&mut module, ptx.as_ptr().cast()) })?;
    Ok(module)
}

/// The function `name` of `module`.
///
/// # Safety
/// `module` is a loaded module of a live context.
pub(crate) unsafe fn module_function(
    module: cupti_sys::CUmodule,
    name: &std::ffi::CStr,
) -> CudaResult<cupti_sys::CUfunction> {
    let d = loaded()?;
    let mut f: cupti_sys::CUfunction = std::ptr::null_mut();
    // SAFETY: a valid out pointer, a NUL-terminated name; the module per
    // this function's contract.
    check(unsafe { (d.cu_module_get_function)(&mut f, module, name.as_ptr()) })?;
    Ok(f)
}

/// Launches `f`, which takes no parameters, as one block of `threads`
/// threads into `stream`.
///
/// # Safety
/// `f` is a function of the current context taking no parameters, and
/// `stream` a live stream of it.
pub(crate) unsafe fn launch_no_params(
    f: cupti_sys::CUfunction,
    threads: u32,
    stream: cupti_sys::CUstream,
) -> CudaResult<()> {
    let d = loaded()?;
    let none = std::ptr::null_mut();
    // SAFETY: per this function's contract; no parameters, so null arrays.
    check(unsafe { (d.cu_launch_kernel)(f, 1, 1, 1, threads, 1, 1, 0, stream, none, none) })
}

/// Waits for `stream`'s work.
///
/// # Safety
/// `stream` is a live stream.
pub(crate) unsafe fn stream_synchronize(stream: cupti_sys::CUstream) -> CudaResult<()> {
    let d = loaded()?;
    // SAFETY: per this function's contract.
    check(unsafe { (d.cu_stream_synchronize)(stream) })
}

/// A new stream of the current context that does not wait on the legacy
/// default stream (`CU_STREAM_NON_BLOCKING`).
pub(crate) fn stream_create_non_blocking() -> CudaResult<cupti_sys::CUstream> {
    let d = loaded()?;
    let mut stream: cupti_sys::CUstream = std::ptr::null_mut();
    // SAFETY: a valid out pointer; 1 = CU_STREAM_NON_BLOCKING.
    check(unsafe { (d.cu_stream_create)(&mut stream, 1) })?;
    Ok(stream)
}

/// Destroys `stream`.
///
/// # Safety
/// `stream` is a stream gpuscope created, not used after this.
pub(crate) unsafe fn stream_destroy(stream: cupti_sys::CUstream) -> CudaResult<()> {
    let d = loaded()?;
    // SAFETY: per this function's contract.
    check(unsafe { (d.cu_stream_destroy)(stream) })
}

/// libcuda, loaded once.
pub(crate) fn driver() -> Option<&'static Driver> {
    static DRIVER: OnceLock<Option<Driver>> = OnceLock::new();
    DRIVER.get_or_init(|| Driver::load().ok()).as_ref()
}

/// Runs `f` with `ctx` current on this thread (CUPTI's range profiler and
/// `cuCtxSynchronize` act on the current context), then restores the
/// thread's previous context.
pub(crate) fn with_current<T>(ctx: usize, f: impl FnOnce() -> T) -> T {
    let Some(d) = driver() else { return f() };
    // SAFETY: `ctx` is a live context (CUPTI handed it to gpuscope).
    let pushed = unsafe { (d.cu_ctx_push_current)(ctx as cupti_sys::CUcontext) } == 0;
    let r = f();
    if pushed {
        let mut old: cupti_sys::CUcontext = std::ptr::null_mut();
        // SAFETY: pops what was pushed above.
        unsafe { (d.cu_ctx_pop_current)(&mut old) };
    }
    r
}

/// The calling thread's current context, if it has one. Initialises
/// nothing: before the program's `cuInit` there is none.
pub(crate) fn current_context() -> Option<cupti_sys::CUcontext> {
    let d = driver()?;
    let mut ctx: cupti_sys::CUcontext = std::ptr::null_mut();
    // SAFETY: the out pointer is a valid local.
    let rc = unsafe { (d.cu_ctx_get_current)(&mut ctx) };
    (rc == 0 && !ctx.is_null()).then_some(ctx)
}

/// A device's attributes from the driver; `None` when they cannot be read.
pub(crate) fn query(ordinal: u32) -> Option<DeviceInfo> {
    let d = driver()?;
    let mut dev = 0;
    // SAFETY: out pointer is a valid local. Kernels ran, so cuInit was done.
    if unsafe { (d.cu_device_get)(&mut dev, ordinal as i32) } != 0 {
        return None;
    }
    let attr = |a: cupti_sys::CUdevice_attribute| -> Option<u32> {
        let mut v = 0;
        // SAFETY: out pointer is a valid local; `dev` is a valid device.
        (unsafe { (d.cu_device_get_attribute)(&mut v, a, dev) } == 0).then_some(v as u32)
    };
    use cupti_sys as s;
    let limits = SmLimits {
        cc_major: attr(s::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        cc_minor: attr(s::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        warp_size: attr(s::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
        max_threads_per_sm: attr(s::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
        max_blocks_per_sm: attr(s::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
        max_threads_per_block: attr(s::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        regs_per_sm: attr(s::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
        regs_per_block: attr(s::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
        smem_per_sm: attr(s::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
        smem_per_block_optin: attr(s::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        reserved_smem_per_block: attr(s::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)?,
    };
    let mut name = [0 as std::ffi::c_char; 256];
    // SAFETY: the buffer holds 256 bytes, as passed.
    unsafe { (d.cu_device_get_name)(name.as_mut_ptr(), name.len() as i32, dev) };
    // SAFETY: the driver NUL-terminates within the buffer (zeroed anyway).
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
    let uuid = d.cu_device_get_uuid.and_then(|get_uuid| {
        let mut b = [0u8; 16];
        // SAFETY: out pointer is 16 bytes, a CUuuid; `dev` is valid.
        (unsafe { get_uuid(&mut b, dev) } == 0).then(|| crate::model::device::gpu_uuid(&b))
    });
    let links = uuid.as_deref().and_then(super::links::links);
    let mut info = DeviceInfo::new(ordinal, name, attr(s::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?, limits);
    info.clock_khz = attr(s::CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    info.memory_clock_khz = attr(s::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    info.memory_bus_bits = attr(s::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    info.memory_bytes = {
        let mut bytes = 0usize;
        // SAFETY: out pointer is a valid local; `dev` is a valid device.
        (unsafe { (d.cu_device_total_mem)(&mut bytes, dev) } == 0).then_some(bytes as u64)
    };
    info.nvlinks = links.and_then(|l| l.nvlinks);
    info.pcie = links.and_then(|l| l.pcie);
    info.uuid = uuid;
    Some(info)
}
