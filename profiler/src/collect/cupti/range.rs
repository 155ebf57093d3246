//! The range profiler (`cupti_range_profiler.h`): counters per range in one
//! CUDA context.

use super::{check, counters, missing, struct_size};
use crate::error::Result;
use cupti_sys::{self as sys, sym, Cupti};
use std::ffi::{c_char, CStr, CString};

/// A range profiler object (see [`enable`]).
pub(crate) type Object = *mut sys::CUpti_RangeProfiler_Object;

/// `cuptiRangeProfilerEnable`: the range profiler of `ctx`. Release it with
/// [`disable`].
///
/// # Safety
/// `ctx` is a live CUDA context.
pub(crate) unsafe fn enable(cupti: &Cupti, ctx: sys::CUcontext) -> Result<Object> {
    let mut p = sys::CUpti_RangeProfiler_Enable_Params {
        structSize: struct_size!(sys::CUpti_RangeProfiler_Enable_Params, pRangeProfilerObject: Object),
        pPriv: std::ptr::null_mut(),
        ctx,
        pRangeProfilerObject: std::ptr::null_mut(),
    };
    let f = sym!(cupti, cuptiRangeProfilerEnable).map_err(missing)?;
    // SAFETY: valid params; ctx per this function's contract.
    counters(cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerEnable")?;
    Ok(p.pRangeProfilerObject)
}

/// `cuptiRangeProfilerGetCounterDataSize`: bytes of a counter data image
/// for `names`, with room for `max_ranges` ranges.
///
/// # Safety
/// `object` came from [`enable`] and is not yet disabled.
pub(crate) unsafe fn get_counter_data_size(
    cupti: &Cupti,
    object: Object,
    names: &[CString],
    max_ranges: usize,
) -> Result<usize> {
    let mut ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    // SAFETY: all-zero is valid for this plain params struct.
    let mut p: sys::CUpti_RangeProfiler_GetCounterDataSize_Params = unsafe { std::mem::zeroed() };
    p.structSize = struct_size!(sys::CUpti_RangeProfiler_GetCounterDataSize_Params, counterDataSize: usize);
    p.pRangeProfilerObject = object;
    p.pMetricNames = ptrs.as_mut_ptr();
    p.numMetrics = ptrs.len();
    p.maxNumOfRanges = max_ranges;
    p.maxNumRangeTreeNodes = max_ranges as u32;
    let f = sym!(cupti, cuptiRangeProfilerGetCounterDataSize).map_err(missing)?;
    // SAFETY: valid params; the names outlive the call; object per this
    // function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerGetCounterDataSize")?;
    Ok(p.counterDataSize)
}

/// `cuptiRangeProfilerCounterDataImageInitialize`: makes `image` (of
/// [`get_counter_data_size`] bytes) a blank counter data image.
///
/// # Safety
/// `object` came from [`enable`] and is not yet disabled.
pub(crate) unsafe fn counter_data_image_initialize(cupti: &Cupti, object: Object, image: &mut [u8]) -> Result<()> {
    let mut p = sys::CUpti_RangeProfiler_CounterDataImage_Initialize_Params {
        structSize: struct_size!(sys::CUpti_RangeProfiler_CounterDataImage_Initialize_Params, pCounterData: *mut u8),
        pPriv: std::ptr::null_mut(),
        pRangeProfilerObject: object,
        counterDataSize: image.len(),
        pCounterData: image.as_mut_ptr(),
    };
    let f = sym!(cupti, cuptiRangeProfilerCounterDataImageInitialize).map_err(missing)?;
    // SAFETY: the image is counterDataSize bytes; object per this
    // function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerCounterDataImageInitialize")
}

/// `cuptiRangeProfilerSetConfig`: auto ranges (one per kernel), one
/// nesting level, pass 0, with `config` and `image`.
///
/// # Safety
/// `object` came from [`enable`] and is not yet disabled. CUPTI keeps
/// pointers to `config` and `image`: both must stay where they are, alive
/// and otherwise untouched while the profiler runs, until the next
/// `set_config` or [`disable`].
pub(crate) unsafe fn set_config(
    cupti: &Cupti,
    object: Object,
    config: &[u8],
    image: &mut [u8],
    replay: sys::CUpti_ProfilerReplayMode,
    max_ranges_per_pass: usize,
) -> Result<()> {
    // SAFETY: all-zero is valid for this plain params struct.
    let mut p: sys::CUpti_RangeProfiler_SetConfig_Params = unsafe { std::mem::zeroed() };
    p.structSize = struct_size!(sys::CUpti_RangeProfiler_SetConfig_Params, targetNestingLevel: u16);
    p.pRangeProfilerObject = object;
    p.configSize = config.len();
    p.pConfig = config.as_ptr();
    p.counterDataImageSize = image.len();
    p.pCounterDataImage = image.as_mut_ptr();
    p.range = sys::CUPTI_AutoRange;
    p.replayMode = replay;
    p.maxRangesPerPass = max_ranges_per_pass;
    p.numNestingLevels = 1;
    p.minNestingLevel = 1;
    p.passIndex = 0;
    p.targetNestingLevel = 1;
    let f = sym!(cupti, cuptiRangeProfilerSetConfig).map_err(missing)?;
    // SAFETY: valid params; config, image and object per this function's
    // contract.
    counters(cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerSetConfig")
}

/// `cuptiRangeProfilerStart`: kernels launched from now on are measured.
///
/// # Safety
/// `object` came from [`enable`], is configured ([`set_config`]) and is not
/// yet disabled.
pub(crate) unsafe fn start(cupti: &Cupti, object: Object) -> Result<()> {
    let mut p = sys::CUpti_RangeProfiler_Start_Params {
        structSize: struct_size!(sys::CUpti_RangeProfiler_Start_Params, pRangeProfilerObject: Object),
        pPriv: std::ptr::null_mut(),
        pRangeProfilerObject: object,
    };
    let f = sym!(cupti, cuptiRangeProfilerStart).map_err(missing)?;
    // SAFETY: valid params; object per this function's contract.
    counters(cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerStart")
}

/// `cuptiRangeProfilerPushRange`: opens a range named `name`.
///
/// # Safety
/// `object` came from [`enable`], is started and is not yet disabled.
pub(crate) unsafe fn push_range(cupti: &Cupti, object: Object, name: &'static CStr) -> Result<()> {
    let mut p = sys::CUpti_RangeProfiler_PushRange_Params {
        structSize: struct_size!(sys::CUpti_RangeProfiler_PushRange_Params, pRangeName: *const c_char),
        pPriv: std::ptr::null_mut(),
        pRangeProfilerObject: object,
        pRangeName: name.as_ptr(),
    };
    let f = sym!(cupti, cuptiRangeProfilerPushRange).map_err(missing)?;
    // SAFETY: valid params; the name is static; object per this function's
    // contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerPushRange")
}

/// `cuptiRangeProfilerPopRange`: closes the innermost pushed range.
///
/// # Safety
/// `object` came from [`enable`], has a pushed range open and is not yet
/// disabled.
pub(crate) unsafe fn pop_range(cupti: &Cupti, object: Object) -> Result<()> {
    let mut p = sys::CUpti_RangeProfiler_PopRange_Params {
        structSize: struct_size!(sys::CUpti_RangeProfiler_PopRange_Params, pRangeProfilerObject: Object),
        pPriv: std::ptr::null_mut(),
        pRangeProfilerObject: object,
    };
    let f = sym!(cupti, cuptiRangeProfilerPopRange).map_err(missing)?;
    // SAFETY: valid params; object per this function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerPopRange")
}

/// `cuptiRangeProfilerStop`: stops measuring; whether all passes have been
/// submitted.
///
/// # Safety
/// `object` came from [`enable`], is started and is not yet disabled.
pub(crate) unsafe fn stop(cupti: &Cupti, object: Object) -> Result<bool> {
    // SAFETY: all-zero is valid for this plain params struct.
    let mut p: sys::CUpti_RangeProfiler_Stop_Params = unsafe { std::mem::zeroed() };
    p.structSize = struct_size!(sys::CUpti_RangeProfiler_Stop_Params, isAllPassSubmitted: u8);
    p.pRangeProfilerObject = object;
    let f = sym!(cupti, cuptiRangeProfilerStop).map_err(missing)?;
    // SAFETY: valid params; object per this function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerStop")?;
    Ok(p.isAllPassSubmitted != 0)
}

/// `cuptiRangeProfilerDecodeData`: decodes what was measured into the
/// configured image; returns the ranges dropped for lack of room.
///
/// # Safety
/// `object` came from [`enable`], is stopped and is not yet disabled.
pub(crate) unsafe fn decode_data(cupti: &Cupti, object: Object) -> Result<usize> {
    let mut p = sys::CUpti_RangeProfiler_DecodeData_Params {
        structSize: struct_size!(sys::CUpti_RangeProfiler_DecodeData_Params, numOfRangeDropped: usize),
        pPriv: std::ptr::null_mut(),
        pRangeProfilerObject: object,
        numOfRangeDropped: 0,
    };
    let f = sym!(cupti, cuptiRangeProfilerDecodeData).map_err(missing)?;
    // SAFETY: valid params; object per this function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerDecodeData")?;
    Ok(p.numOfRangeDropped)
}

/// `cuptiRangeProfilerGetCounterDataInfo`: ranges a decoded image holds.
///
/// # Safety
/// `image` is a counter data image CUPTI initialised.
pub(crate) unsafe fn get_counter_data_info(cupti: &Cupti, image: &[u8]) -> Result<usize> {
    let mut p = sys::CUpti_RangeProfiler_GetCounterDataInfo_Params {
        structSize: struct_size!(sys::CUpti_RangeProfiler_GetCounterDataInfo_Params, numTotalRanges: usize),
        pPriv: std::ptr::null_mut(),
        pCounterDataImage: image.as_ptr(),
        counterDataImageSize: image.len(),
        numTotalRanges: 0,
    };
    let f = sym!(cupti, cuptiRangeProfilerGetCounterDataInfo).map_err(missing)?;
    // SAFETY: valid params; image per this function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerGetCounterDataInfo")?;
    Ok(p.numTotalRanges)
}

/// `cuptiRangeProfilerCounterDataGetRangeInfo`: the name of range `index`
/// of a decoded image, its levels joined by `delimiter` (auto ranges are
/// ordinals "0", "1", ...).
///
/// # Safety
/// `image` is a counter data image CUPTI initialised.
pub(crate) unsafe fn counter_data_get_range_info(
    cupti: &Cupti,
    image: &[u8],
    index: usize,
    delimiter: &CStr,
) -> Result<String> {
    let mut p = sys::CUpti_RangeProfiler_CounterData_GetRangeInfo_Params {
        structSize: struct_size!(sys::CUpti_RangeProfiler_CounterData_GetRangeInfo_Params, rangeName: *const c_char),
        pPriv: std::ptr::null_mut(),
        pCounterDataImage: image.as_ptr(),
        counterDataImageSize: image.len(),
        rangeIndex: index,
        rangeDelimiter: delimiter.as_ptr(),
        rangeName: std::ptr::null(),
    };
    let f = sym!(cupti, cuptiRangeProfilerCounterDataGetRangeInfo).map_err(missing)?;
    // SAFETY: valid params; image per this function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerCounterDataGetRangeInfo")?;
    if p.rangeName.is_null() {
        return Ok(String::new());
    }
    // SAFETY: a NUL-terminated string owned by CUPTI.
    Ok(unsafe { CStr::from_ptr(p.rangeName) }.to_string_lossy().into_owned())
}

/// `cuptiRangeProfilerDisable`: releases the context's range profiler.
///
/// # Safety
/// `object` came from [`enable`], is disabled once and not used after.
pub(crate) unsafe fn disable(cupti: &Cupti, object: Object) -> Result<()> {
    let mut p = sys::CUpti_RangeProfiler_Disable_Params {
        structSize: struct_size!(sys::CUpti_RangeProfiler_Disable_Params, pRangeProfilerObject: Object),
        pPriv: std::ptr::null_mut(),
        pRangeProfilerObject: object,
    };
    let f = sym!(cupti, cuptiRangeProfilerDisable).map_err(missing)?;
    // SAFETY: valid params; object per this function's contract.
    check(cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerDisable")
}
