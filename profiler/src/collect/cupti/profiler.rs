//! The profiler's device side (`cupti_profiler_target.h`): initialisation,
//! chip names, device support and counter availability, shared by the
//! range profiler and PM sampling.

use super::{check, counters, missing, struct_size};
use crate::error::{Error, ErrorKind, Result};
use cupti_sys::{self as sys, sym, Cupti};
use std::ffi::{CStr, CString};

/// `cuptiProfilerInitialize` (may be called again: CUPTI counts).
pub(crate) fn initialize(cupti: &Cupti) -> Result<()> {
    let mut p = sys::CUpti_Profiler_Initialize_Params {
        structSize: struct_size!(sys::CUpti_Profiler_Initialize_Params, pPriv: *mut std::ffi::c_void),
        pPriv: std::ptr::null_mut(),
    };
    let f = sym!(cupti, cuptiProfilerInitialize).map_err(missing)?;
    // SAFETY: a valid params struct.
    counters(cupti, unsafe { f(&mut p) }, "cuptiProfilerInitialize")
}

/// `cuptiDeviceGetChipName`: the chip of device `index` (e.g. "GH100").
pub(crate) fn device_get_chip_name(cupti: &Cupti, index: usize) -> Result<CString> {
    let mut p = sys::CUpti_Device_GetChipName_Params {
        structSize: struct_size!(sys::CUpti_Device_GetChipName_Params, pChipName: *const std::ffi::c_char),
        pPriv: std::ptr::null_mut(),
        deviceIndex: index,
        pChipName: std::ptr::null(),
    };
    let f = sym!(cupti, cuptiDeviceGetChipName).map_err(missing)?;
    // SAFETY: a valid params struct; CUPTI returns a static string.
    check(cupti, unsafe { f(&mut p) }, "cuptiDeviceGetChipName")?;
    if p.pChipName.is_null() {
        return Err(Error::new(ErrorKind::Cupti, "cuptiDeviceGetChipName returned no name"));
    }
    // SAFETY: non-null, NUL-terminated, owned by CUPTI.
    Ok(unsafe { CStr::from_ptr(p.pChipName) }.to_owned())
}

/// `cuptiProfilerDeviceSupported`: how far device `dev` supports profiler
/// `api` (`CUPTI_PROFILER_*`), field by field.
pub(crate) fn device_supported(
    cupti: &Cupti,
    dev: i32,
    api: sys::CUpti_Profiler_API,
) -> Result<sys::CUpti_Profiler_DeviceSupported_Params> {
    // SAFETY: all-zero is a valid value for this plain params struct.
    let mut p: sys::CUpti_Profiler_DeviceSupported_Params = unsafe { std::mem::zeroed() };
    p.structSize = struct_size!(sys::CUpti_Profiler_DeviceSupported_Params, api: sys::CUpti_Profiler_API);
    p.cuDevice = dev;
    p.api = api;
    let f = sym!(cupti, cuptiProfilerDeviceSupported).map_err(missing)?;
    // SAFETY: a valid params struct.
    check(cupti, unsafe { f(&mut p) }, "cuptiProfilerDeviceSupported")?;
    Ok(p)
}

/// `cuptiProfilerGetCounterAvailability`: the counter availability image
/// of a context (asked for its size, then filled).
///
/// # Safety
/// `ctx` is a live CUDA context.
pub(crate) unsafe fn get_counter_availability(cupti: &Cupti, ctx: sys::CUcontext) -> Result<Vec<u8>> {
    let mut p = sys::CUpti_Profiler_GetCounterAvailability_Params {
        structSize: struct_size!(sys::CUpti_Profiler_GetCounterAvailability_Params, pCounterAvailabilityImage: *mut u8),
        pPriv: std::ptr::null_mut(),
        ctx,
        counterAvailabilityImageSize: 0,
        pCounterAvailabilityImage: std::ptr::null_mut(),
    };
    let f = sym!(cupti, cuptiProfilerGetCounterAvailability).map_err(missing)?;
    // SAFETY: the first call asks for the size (null image); ctx per this
    // function's contract.
    counters(cupti, unsafe { f(&mut p) }, "cuptiProfilerGetCounterAvailability")?;
    let mut image = vec![0u8; p.counterAvailabilityImageSize];
    p.pCounterAvailabilityImage = image.as_mut_ptr();
    // SAFETY: the image holds the size CUPTI asked for.
    counters(cupti, unsafe { f(&mut p) }, "cuptiProfilerGetCounterAvailability")?;
    Ok(image)
}
