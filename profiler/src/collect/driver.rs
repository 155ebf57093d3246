//! The few CUDA driver calls gpuscope makes itself: loading libcuda,
//! making a context current, and reading a device's attributes.

use crate::model::device::DeviceInfo;
use crate::model::occupancy::SmLimits;
use cupti_sys::driver::Driver;
use std::sync::OnceLock;

/// What gpuscope says, wherever it is asked to profile, when the NVIDIA
/// driver library does not load.
pub const NO_DRIVER: &str = "no NVIDIA driver found (libcuda.so.1 is not loadable), so there is no GPU to profile";

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
    Some(DeviceInfo {
        id: ordinal,
        name,
        sm_count: attr(s::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        limits,
        clock_khz: attr(s::CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
        memory_clock_khz: attr(s::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
        memory_bus_bits: attr(s::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
        memory_bytes: {
            let mut bytes = 0usize;
            // SAFETY: out pointer is a valid local; `dev` is a valid device.
            (unsafe { (d.cu_device_total_mem)(&mut bytes, dev) } == 0).then_some(bytes as u64)
        },
        uuid: d.cu_device_get_uuid.and_then(|get_uuid| {
            let mut b = [0u8; 16];
            // SAFETY: out pointer is 16 bytes, a CUuuid; `dev` is valid.
            (unsafe { get_uuid(&mut b, dev) } == 0).then(|| crate::model::device::gpu_uuid(&b))
        }),
    })
}
