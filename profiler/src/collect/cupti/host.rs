//! The profiler host (`cupti_profiler_host.h`): metric names into a config
//! image, counter data into metric values.

use super::{check, missing, struct_size};
use crate::error::Result;
use cupti_sys::{self as sys, sym, Cupti};
use std::ffi::{c_char, CStr, CString};

/// `cuptiProfilerHostInitialize`: a host object of profiler `kind`
/// (`CUPTI_PROFILER_TYPE_*`) for `chip`; `availability` may be empty for
/// chips CUPTI knows. Release it with [`deinitialize`].
pub(crate) fn initialize(
    cupti: &Cupti,
    kind: sys::CUpti_ProfilerType,
    chip: &CStr,
    availability: &[u8],
) -> Result<*mut sys::CUpti_Profiler_Host_Object> {
    let mut p = sys::CUpti_Profiler_Host_Initialize_Params {
        structSize: struct_size!(sys::CUpti_Profiler_Host_Initialize_Params, pHostObject: *mut sys::CUpti_Profiler_Host_Object),
        pPriv: std::ptr::null_mut(),
        profilerType: kind,
        pChipName: chip.as_ptr(),
        pCounterAvailabilityImage: if availability.is_empty() { std::ptr::null() } else { availability.as_ptr() },
        pHostObject: std::ptr::null_mut(),
    };
    let f = sym!(cupti, cuptiProfilerHostInitialize).map_err(missing)?;
    // SAFETY: valid params; chip and image outlive the call.
    check(cupti, unsafe { f(&mut p) }, "cuptiProfilerHostInitialize")?;
    Ok(p.pHostObject)
}

/// `cuptiProfilerHostConfigAddMetrics`: adds `names` to the host object's
/// configuration. An unknown name fails.
///
/// # Safety
/// `host` came from [`initialize`] and is not yet released.
pub(crate) unsafe fn config_add_metrics(
    cupti: &Cupti,
    host: *mut sys::CUpti_Profiler_Host_Object,
    names: &[CString],
) -> Result<()> {
    let mut ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let mut p = sys::CUpti_Profiler_Host_ConfigAddMetrics_Params {
        structSize: struct_size!(sys::CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics: usize),
        pPriv: std::ptr::null_mut(),
        pHostObject: host,
        ppMetricNames: ptrs.as_mut_ptr(),
        numMetrics: ptrs.len(),
    };
    let f = sym!(cupti, cuptiProfilerHostConfigAddMetrics).map_err(missing)?;
    // SAFETY: valid params; the names outlive the call; host per this
    // function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiProfilerHostConfigAddMetrics")
}

/// `cuptiProfilerHostGetConfigImageSize`: bytes of the host object's config
/// image.
///
/// # Safety
/// `host` came from [`initialize`] and is not yet released.
pub(crate) unsafe fn get_config_image_size(cupti: &Cupti, host: *mut sys::CUpti_Profiler_Host_Object) -> Result<usize> {
    // SAFETY: all-zero is valid for this plain params struct.
    let mut p: sys::CUpti_Profiler_Host_GetConfigImageSize_Params = unsafe { std::mem::zeroed() };
    p.structSize = struct_size!(sys::CUpti_Profiler_Host_GetConfigImageSize_Params, configImageSize: usize);
    p.pHostObject = host;
    let f = sym!(cupti, cuptiProfilerHostGetConfigImageSize).map_err(missing)?;
    // SAFETY: valid params; host per this function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiProfilerHostGetConfigImageSize")?;
    Ok(p.configImageSize)
}

/// `cuptiProfilerHostGetConfigImage`: writes the config image into `image`
/// (of [`get_config_image_size`] bytes).
///
/// # Safety
/// `host` came from [`initialize`] and is not yet released.
pub(crate) unsafe fn get_config_image(
    cupti: &Cupti,
    host: *mut sys::CUpti_Profiler_Host_Object,
    image: &mut [u8],
) -> Result<()> {
    // SAFETY: all-zero is valid for this plain params struct.
    let mut p: sys::CUpti_Profiler_Host_GetConfigImage_Params = unsafe { std::mem::zeroed() };
    p.structSize = struct_size!(sys::CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage: *mut u8);
    p.pHostObject = host;
    p.pConfigImage = image.as_mut_ptr();
    p.configImageSize = image.len();
    let f = sym!(cupti, cuptiProfilerHostGetConfigImage).map_err(missing)?;
    // SAFETY: the buffer holds configImageSize bytes; host per this
    // function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiProfilerHostGetConfigImage")
}

/// `cuptiProfilerHostGetNumOfPasses`: replay passes a config image needs.
pub(crate) fn get_num_of_passes(cupti: &Cupti, config: &mut [u8]) -> Result<usize> {
    let mut p = sys::CUpti_Profiler_Host_GetNumOfPasses_Params {
        structSize: struct_size!(sys::CUpti_Profiler_Host_GetNumOfPasses_Params, numOfPasses: usize),
        pPriv: std::ptr::null_mut(),
        configImageSize: config.len(),
        pConfigImage: config.as_mut_ptr(),
        numOfPasses: 0,
    };
    let f = sym!(cupti, cuptiProfilerHostGetNumOfPasses).map_err(missing)?;
    // SAFETY: valid params over the caller's config image.
    check(cupti, unsafe { f(&mut p) }, "cuptiProfilerHostGetNumOfPasses")?;
    Ok(p.numOfPasses)
}

/// `cuptiProfilerHostGetBaseMetrics`: the chip's base metric names of type
/// `ty` (`CUPTI_METRIC_TYPE_*`).
///
/// # Safety
/// `host` came from [`initialize`] and is not yet released.
pub(crate) unsafe fn get_base_metrics(
    cupti: &Cupti,
    host: *mut sys::CUpti_Profiler_Host_Object,
    ty: sys::CUpti_MetricType,
) -> Result<Vec<String>> {
    let mut p = sys::CUpti_Profiler_Host_GetBaseMetrics_Params {
        structSize: struct_size!(sys::CUpti_Profiler_Host_GetBaseMetrics_Params, numMetrics: usize),
        pPriv: std::ptr::null_mut(),
        pHostObject: host,
        metricType: ty,
        ppMetricNames: std::ptr::null_mut(),
        numMetrics: 0,
    };
    let f = sym!(cupti, cuptiProfilerHostGetBaseMetrics).map_err(missing)?;
    // SAFETY: valid params; CUPTI sets ppMetricNames to its own array; host
    // per this function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiProfilerHostGetBaseMetrics")?;
    let mut out = Vec::with_capacity(p.numMetrics);
    for i in 0..p.numMetrics {
        // SAFETY: CUPTI returned an array of numMetrics C strings.
        let n = unsafe { *p.ppMetricNames.add(i) };
        if !n.is_null() {
            // SAFETY: a NUL-terminated string owned by CUPTI.
            out.push(unsafe { CStr::from_ptr(n) }.to_string_lossy().into_owned());
        }
    }
    Ok(out)
}

/// `cuptiProfilerHostEvaluateToGpuValues`: the values of `names` in range
/// (or sample) `range` of a decoded counter data image, into `values` (one
/// per name).
///
/// # Safety
/// `host` came from [`initialize`] and is not yet released; `image` is a
/// counter data image CUPTI initialised and decoded.
pub(crate) unsafe fn evaluate_to_gpu_values(
    cupti: &Cupti,
    host: *mut sys::CUpti_Profiler_Host_Object,
    image: &[u8],
    range: usize,
    names: &[CString],
    values: &mut [f64],
) -> Result<()> {
    assert_eq!(names.len(), values.len(), "one value per metric name");
    let mut ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let mut p = sys::CUpti_Profiler_Host_EvaluateToGpuValues_Params {
        structSize: struct_size!(sys::CUpti_Profiler_Host_EvaluateToGpuValues_Params, pMetricValues: *mut f64),
        pPriv: std::ptr::null_mut(),
        pHostObject: host,
        pCounterDataImage: image.as_ptr(),
        counterDataImageSize: image.len(),
        rangeIndex: range,
        ppMetricNames: ptrs.as_mut_ptr(),
        numMetrics: ptrs.len(),
        pMetricValues: values.as_mut_ptr(),
    };
    let f = sym!(cupti, cuptiProfilerHostEvaluateToGpuValues).map_err(missing)?;
    // SAFETY: valid params; all buffers outlive the call and `values` has
    // room for numMetrics; host and image per this function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiProfilerHostEvaluateToGpuValues")
}

/// `cuptiProfilerHostDeinitialize`: releases a host object.
///
/// # Safety
/// `host` came from [`initialize`], is released once, and is not used
/// after.
pub(crate) unsafe fn deinitialize(cupti: &Cupti, host: *mut sys::CUpti_Profiler_Host_Object) -> Result<()> {
    let mut p = sys::CUpti_Profiler_Host_Deinitialize_Params {
        structSize: struct_size!(sys::CUpti_Profiler_Host_Deinitialize_Params, pHostObject: *mut sys::CUpti_Profiler_Host_Object),
        pPriv: std::ptr::null_mut(),
        pHostObject: host,
    };
    let f = sym!(cupti, cuptiProfilerHostDeinitialize).map_err(missing)?;
    // SAFETY: valid params; host per this function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiProfilerHostDeinitialize")
}
