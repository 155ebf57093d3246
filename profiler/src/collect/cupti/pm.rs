//! PM sampling (`cupti_pmsampling.h`): counters sampled on a whole device
//! at a fixed interval into a hardware buffer, decoded into counter data
//! images.

use super::{check, counters, missing, struct_size};
use crate::error::Result;
use cupti_sys::{self as sys, sym, Cupti};
use std::ffi::{c_char, CString};

/// A PM sampling object (see [`enable`]).
pub(crate) type Object = *mut sys::CUpti_PmSampling_Object;

/// What one [`decode_data`] call did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decoded {
    /// Why decoding stopped (`CUPTI_PM_SAMPLING_DECODE_STOP_REASON_*`).
    pub stop_reason: sys::CUpti_PmSampling_DecodeStopReason,
    /// Samples were lost before this decode.
    pub overflow: bool,
}

/// `cuptiPmSamplingGetCounterAvailability`: the counter availability image
/// of `device` for PM sampling (asked for its size, then filled).
pub(crate) fn get_counter_availability(cupti: &Cupti, device: u32) -> Result<Vec<u8>> {
    let mut p = sys::CUpti_PmSampling_GetCounterAvailability_Params {
        structSize: struct_size!(sys::CUpti_PmSampling_GetCounterAvailability_Params, pCounterAvailabilityImage: *mut u8),
        pPriv: std::ptr::null_mut(),
        deviceIndex: device as usize,
        counterAvailabilityImageSize: 0,
        pCounterAvailabilityImage: std::ptr::null_mut(),
    };
    let f = sym!(cupti, cuptiPmSamplingGetCounterAvailability).map_err(missing)?;
    // SAFETY: the first call asks for the size (null image).
    counters(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingGetCounterAvailability")?;
    let mut image = vec![0u8; p.counterAvailabilityImageSize];
    p.pCounterAvailabilityImage = image.as_mut_ptr();
    // SAFETY: the image holds the size CUPTI asked for.
    counters(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingGetCounterAvailability")?;
    Ok(image)
}

/// `cuptiPmSamplingEnable`: PM sampling on `device`. Release it with
/// [`disable`].
pub(crate) fn enable(cupti: &Cupti, device: u32) -> Result<Object> {
    let mut p = sys::CUpti_PmSampling_Enable_Params {
        structSize: struct_size!(sys::CUpti_PmSampling_Enable_Params, pPmSamplingObject: Object),
        pPriv: std::ptr::null_mut(),
        deviceIndex: device as usize,
        pPmSamplingObject: std::ptr::null_mut(),
    };
    let f = sym!(cupti, cuptiPmSamplingEnable).map_err(missing)?;
    // SAFETY: a valid params struct.
    counters(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingEnable")?;
    Ok(p.pPmSamplingObject)
}

/// `cuptiPmSamplingSetConfig`: samples `config`'s counters every
/// `interval_ns` into a hardware buffer of `hardware_buffer` bytes, the
/// oldest samples kept when it fills.
///
/// # Safety
/// `object` came from [`enable`] and is not yet disabled.
pub(crate) unsafe fn set_config(
    cupti: &Cupti,
    object: Object,
    config: &[u8],
    hardware_buffer: usize,
    interval_ns: u64,
) -> Result<()> {
    let mut p = sys::CUpti_PmSampling_SetConfig_Params {
        structSize: struct_size!(
            sys::CUpti_PmSampling_SetConfig_Params,
            hwBufferAppendMode: sys::CUpti_PmSampling_HardwareBuffer_AppendMode
        ),
        pPriv: std::ptr::null_mut(),
        pPmSamplingObject: object,
        configSize: config.len(),
        pConfig: config.as_ptr(),
        hardwareBufferSize: hardware_buffer,
        samplingInterval: interval_ns,
        triggerMode: sys::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL,
        // Oldest kept: an overflow is reported, not silently replaced.
        hwBufferAppendMode: sys::CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST,
    };
    let f = sym!(cupti, cuptiPmSamplingSetConfig).map_err(missing)?;
    // SAFETY: valid params; the config outlives the call; object per this
    // function's contract.
    counters(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingSetConfig")
}

/// `cuptiPmSamplingGetCounterDataSize`: bytes of a counter data image for
/// `names` with room for `max_samples` samples.
///
/// # Safety
/// `object` came from [`enable`] and is not yet disabled.
pub(crate) unsafe fn get_counter_data_size(
    cupti: &Cupti,
    object: Object,
    names: &[CString],
    max_samples: u32,
) -> Result<usize> {
    let mut ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let mut p = sys::CUpti_PmSampling_GetCounterDataSize_Params {
        structSize: struct_size!(sys::CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize: usize),
        pPriv: std::ptr::null_mut(),
        pPmSamplingObject: object,
        pMetricNames: ptrs.as_mut_ptr(),
        numMetrics: ptrs.len(),
        maxSamples: max_samples,
        counterDataSize: 0,
    };
    let f = sym!(cupti, cuptiPmSamplingGetCounterDataSize).map_err(missing)?;
    // SAFETY: valid params; the names outlive the call; object per this
    // function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingGetCounterDataSize")?;
    Ok(p.counterDataSize)
}

/// `cuptiPmSamplingCounterDataImageInitialize`: makes `image` (of
/// [`get_counter_data_size`] bytes) a blank counter data image.
///
/// # Safety
/// `object` came from [`enable`] and is not yet disabled.
pub(crate) unsafe fn counter_data_image_initialize(cupti: &Cupti, object: Object, image: &mut [u8]) -> Result<()> {
    let mut p = sys::CUpti_PmSampling_CounterDataImage_Initialize_Params {
        structSize: struct_size!(sys::CUpti_PmSampling_CounterDataImage_Initialize_Params, pCounterData: *mut u8),
        pPriv: std::ptr::null_mut(),
        pPmSamplingObject: object,
        counterDataSize: image.len(),
        pCounterData: image.as_mut_ptr(),
    };
    let f = sym!(cupti, cuptiPmSamplingCounterDataImageInitialize).map_err(missing)?;
    // SAFETY: the image holds counterDataSize bytes; object per this
    // function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingCounterDataImageInitialize")
}

/// `cuptiPmSamplingStart`: sampling begins.
///
/// # Safety
/// `object` came from [`enable`], is configured ([`set_config`]) and is not
/// yet disabled.
pub(crate) unsafe fn start(cupti: &Cupti, object: Object) -> Result<()> {
    let mut p = sys::CUpti_PmSampling_Start_Params {
        structSize: struct_size!(sys::CUpti_PmSampling_Start_Params, pPmSamplingObject: Object),
        pPriv: std::ptr::null_mut(),
        pPmSamplingObject: object,
    };
    let f = sym!(cupti, cuptiPmSamplingStart).map_err(missing)?;
    // SAFETY: valid params; object per this function's contract.
    counters(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingStart")
}

/// `cuptiPmSamplingStop`: sampling ends; what was sampled can still be
/// decoded.
///
/// # Safety
/// `object` came from [`enable`], is started and is not yet disabled.
pub(crate) unsafe fn stop(cupti: &Cupti, object: Object) -> Result<()> {
    let mut p = sys::CUpti_PmSampling_Stop_Params {
        structSize: struct_size!(sys::CUpti_PmSampling_Stop_Params, pPmSamplingObject: Object),
        pPriv: std::ptr::null_mut(),
        pPmSamplingObject: object,
    };
    let f = sym!(cupti, cuptiPmSamplingStop).map_err(missing)?;
    // SAFETY: valid params; object per this function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingStop")
}

/// `cuptiPmSamplingDecodeData`: moves samples from the hardware buffer
/// into `image`. `CUPTI_ERROR_OUT_OF_MEMORY` (the error's
/// [`cupti_code`](crate::error::Error::cupti_code)) means the hardware
/// buffer overflowed.
///
/// # Safety
/// `object` came from [`enable`] and is not yet disabled; `image` is a
/// counter data image initialised for it.
pub(crate) unsafe fn decode_data(cupti: &Cupti, object: Object, image: &mut [u8]) -> Result<Decoded> {
    let mut p = sys::CUpti_PmSampling_DecodeData_Params {
        structSize: struct_size!(sys::CUpti_PmSampling_DecodeData_Params, overflow: u8),
        pPriv: std::ptr::null_mut(),
        pPmSamplingObject: object,
        pCounterDataImage: image.as_mut_ptr(),
        counterDataImageSize: image.len(),
        decodeStopReason: 0,
        overflow: 0,
    };
    let f = sym!(cupti, cuptiPmSamplingDecodeData).map_err(missing)?;
    // SAFETY: valid params over the image; object and image per this
    // function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingDecodeData")?;
    Ok(Decoded { stop_reason: p.decodeStopReason, overflow: p.overflow != 0 })
}

/// `cuptiPmSamplingGetCounterDataInfo`: completed samples a decoded image
/// holds.
///
/// # Safety
/// `image` is a counter data image CUPTI initialised.
pub(crate) unsafe fn get_counter_data_info(cupti: &Cupti, image: &[u8]) -> Result<usize> {
    let mut p = sys::CUpti_PmSampling_GetCounterDataInfo_Params {
        structSize: struct_size!(sys::CUpti_PmSampling_GetCounterDataInfo_Params, numCompletedSamples: usize),
        pPriv: std::ptr::null_mut(),
        pCounterDataImage: image.as_ptr(),
        counterDataImageSize: image.len(),
        numTotalSamples: 0,
        numPopulatedSamples: 0,
        numCompletedSamples: 0,
    };
    let f = sym!(cupti, cuptiPmSamplingGetCounterDataInfo).map_err(missing)?;
    // SAFETY: valid params; image per this function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingGetCounterDataInfo")?;
    Ok(p.numCompletedSamples)
}

/// `cuptiPmSamplingCounterDataGetSampleInfo`: start and end (CUPTI's
/// clock, ns) of sample `index` of a decoded image.
///
/// # Safety
/// `object` came from [`enable`] and is not yet disabled; `image` is a
/// counter data image CUPTI initialised for it.
pub(crate) unsafe fn counter_data_get_sample_info(
    cupti: &Cupti,
    object: Object,
    image: &[u8],
    index: usize,
) -> Result<(u64, u64)> {
    let mut p = sys::CUpti_PmSampling_CounterData_GetSampleInfo_Params {
        structSize: struct_size!(sys::CUpti_PmSampling_CounterData_GetSampleInfo_Params, endTimestamp: u64),
        pPriv: std::ptr::null_mut(),
        pPmSamplingObject: object,
        pCounterDataImage: image.as_ptr(),
        counterDataImageSize: image.len(),
        sampleIndex: index,
        startTimestamp: 0,
        endTimestamp: 0,
    };
    let f = sym!(cupti, cuptiPmSamplingCounterDataGetSampleInfo).map_err(missing)?;
    // SAFETY: valid params over the image; object and image per this
    // function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingCounterDataGetSampleInfo")?;
    Ok((p.startTimestamp, p.endTimestamp))
}

/// `cuptiPmSamplingDisable`: releases the device's PM sampling.
///
/// # Safety
/// `object` came from [`enable`], is disabled once and not used after.
pub(crate) unsafe fn disable(cupti: &Cupti, object: Object) -> Result<()> {
    let mut p = sys::CUpti_PmSampling_Disable_Params {
        structSize: struct_size!(sys::CUpti_PmSampling_Disable_Params, pPmSamplingObject: Object),
        pPriv: std::ptr::null_mut(),
        pPmSamplingObject: object,
    };
    let f = sym!(cupti, cuptiPmSamplingDisable).map_err(missing)?;
    // SAFETY: valid params; object per this function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingDisable")
}
