//! Safe wrappers over CUPTI's range profiler (`cupti_range_profiler.h`) and
//! profiler host (`cupti_profiler_host.h`): a [`HostObject`] turns metric
//! names into a config image and counter values into metric values; a
//! [`ContextProfiler`] collects counters in one CUDA context. Both release
//! their CUPTI objects on drop.

use crate::collect::cupti::{self, check};
use crate::error::{Error, ErrorKind, Result};
use cupti_sys::{self as sys, sym, Cupti};
use std::ffi::{CStr, CString};

/// CUPTI's `*_STRUCT_SIZE`: up to the end of the last field, without the
/// trailing padding `size_of` counts (CUPTI rejects the padded size with
/// CUPTI_ERROR_INVALID_PARAMETER).
macro_rules! struct_size {
    ($t:ty, $last:ident: $ft:ty) => {
        std::mem::offset_of!($t, $last) + std::mem::size_of::<$ft>()
    };
}
pub(crate) use struct_size;

/// The error for `CUPTI_ERROR_INSUFFICIENT_PRIVILEGES` from `call`, with the fix.
pub(crate) fn no_permission(call: &str) -> Error {
    Error::new(
        ErrorKind::NoPermission,
        format!(
            "{call}: reading GPU performance counters is not permitted for this user \
             (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES). Fix: load the driver with \
             NVreg_RestrictProfilingToAdminUsers=0, or run with CAP_SYS_ADMIN (CAP_PERFMON on newer drivers)"
        ),
    )
}

/// The error for `CUPTI_ERROR_HARDWARE_BUSY` from `call`, with the fix.
pub(crate) fn counters_busy(call: &str) -> Error {
    Error::new(
        ErrorKind::CountersBusy,
        format!(
            "{call}: the GPU's performance counters are in use by another profiler \
             (Nsight Compute, Nsight Systems GPU metrics, DCGM profiling, or gpuscope metrics mode in \
             another process) (CUPTI_ERROR_HARDWARE_BUSY). Fix: let the other profiler finish, or pause \
             DCGM profiling (`dcgmi profile --pause`) while gpuscope measures"
        ),
    )
}

/// Like `check`, but the failures a user can fix (no counter permission,
/// counters held by another profiler) get messages with the fix.
pub(crate) fn counters(cupti: &Cupti, code: sys::CUptiResult, call: &str) -> Result<()> {
    match fixable(code, call) {
        Some(e) => Err(e),
        None => check(cupti, code, call),
    }
}

/// The error with a fix for `code`, if the user can fix it.
fn fixable(code: sys::CUptiResult, call: &str) -> Option<Error> {
    match code {
        sys::CUPTI_ERROR_INSUFFICIENT_PRIVILEGES => Some(no_permission(call)),
        sys::CUPTI_ERROR_HARDWARE_BUSY => Some(counters_busy(call)),
        _ => None,
    }
}

/// `cuptiProfilerInitialize`, once per process.
pub(crate) fn initialize(cupti: &Cupti) -> Result<()> {
    let mut p = sys::CUpti_Profiler_Initialize_Params {
        structSize: struct_size!(sys::CUpti_Profiler_Initialize_Params, pPriv: *mut std::ffi::c_void),
        pPriv: std::ptr::null_mut(),
    };
    let f = sym!(cupti, cuptiProfilerInitialize).map_err(cupti::missing)?;
    // SAFETY: a valid params struct.
    counters(cupti, unsafe { f(&mut p) }, "cuptiProfilerInitialize")
}

/// The chip name of device `index` (e.g. "GH100").
pub(crate) fn chip_name(cupti: &Cupti, index: usize) -> Result<CString> {
    let mut p = sys::CUpti_Device_GetChipName_Params {
        structSize: struct_size!(sys::CUpti_Device_GetChipName_Params, pChipName: *const std::ffi::c_char),
        pPriv: std::ptr::null_mut(),
        deviceIndex: index,
        pChipName: std::ptr::null(),
    };
    let f = sym!(cupti, cuptiDeviceGetChipName).map_err(cupti::missing)?;
    // SAFETY: a valid params struct; CUPTI returns a static string.
    check(cupti, unsafe { f(&mut p) }, "cuptiDeviceGetChipName")?;
    if p.pChipName.is_null() {
        return Err(Error::new(ErrorKind::Cupti, "cuptiDeviceGetChipName returned no name"));
    }
    // SAFETY: non-null, NUL-terminated, owned by CUPTI.
    Ok(unsafe { CStr::from_ptr(p.pChipName) }.to_owned())
}

/// Whether the range profiler supports device `dev`; `Err` says why not.
pub(crate) fn device_supported(cupti: &Cupti, dev: i32) -> Result<()> {
    api_supported(cupti, dev, sys::CUPTI_PROFILER_RANGE_PROFILING, "range profiling")
}

/// Whether profiler `api` (`CUPTI_PROFILER_*`, called `what`) supports
/// device `dev`; `Err` says why not.
pub(crate) fn api_supported(cupti: &Cupti, dev: i32, api: sys::CUpti_Profiler_API, what: &str) -> Result<()> {
    // SAFETY: all-zero is a valid value for this plain params struct.
    let mut p: sys::CUpti_Profiler_DeviceSupported_Params = unsafe { std::mem::zeroed() };
    p.structSize = struct_size!(sys::CUpti_Profiler_DeviceSupported_Params, api: sys::CUpti_Profiler_API);
    p.cuDevice = dev;
    p.api = api;
    let f = sym!(cupti, cuptiProfilerDeviceSupported).map_err(cupti::missing)?;
    // SAFETY: a valid params struct.
    check(cupti, unsafe { f(&mut p) }, "cuptiProfilerDeviceSupported")?;
    if p.isSupported == sys::CUPTI_PROFILER_CONFIGURATION_SUPPORTED {
        return Ok(());
    }
    let mut why = Vec::new();
    for (what, v) in [
        ("architecture", p.architecture),
        ("SLI", p.sli),
        ("vGPU", p.vGpu),
        ("confidential compute", p.confidentialCompute),
        ("CMP", p.cmp),
        ("WSL", p.wsl),
    ] {
        if v != sys::CUPTI_PROFILER_CONFIGURATION_SUPPORTED && v != sys::CUPTI_PROFILER_CONFIGURATION_UNKNOWN {
            why.push(what);
        }
    }
    Err(Error::new(
        ErrorKind::Unsupported,
        format!("device {dev} does not support CUPTI {what} (unsupported: {})", why.join(", ")),
    ))
}

/// The counter availability image of a context.
pub(crate) fn counter_availability(cupti: &Cupti, ctx: sys::CUcontext) -> Result<Vec<u8>> {
    let mut p = sys::CUpti_Profiler_GetCounterAvailability_Params {
        structSize: struct_size!(sys::CUpti_Profiler_GetCounterAvailability_Params, pCounterAvailabilityImage: *mut u8),
        pPriv: std::ptr::null_mut(),
        ctx,
        counterAvailabilityImageSize: 0,
        pCounterAvailabilityImage: std::ptr::null_mut(),
    };
    let f = sym!(cupti, cuptiProfilerGetCounterAvailability).map_err(cupti::missing)?;
    // SAFETY: first call asks for the size (null image).
    counters(cupti, unsafe { f(&mut p) }, "cuptiProfilerGetCounterAvailability")?;
    let mut image = vec![0u8; p.counterAvailabilityImageSize];
    p.pCounterAvailabilityImage = image.as_mut_ptr();
    // SAFETY: the image holds the size CUPTI asked for.
    counters(cupti, unsafe { f(&mut p) }, "cuptiProfilerGetCounterAvailability")?;
    Ok(image)
}

/// A profiler host object with a set of metrics added: their config image,
/// its pass count, and evaluation of counter data.
pub(crate) struct HostObject {
    cupti: &'static Cupti,
    ptr: *mut sys::CUpti_Profiler_Host_Object,
    names: Vec<CString>,
    config: Vec<u8>,
    passes: usize,
}

// SAFETY: the host object is used under the metrics state's mutex only.
unsafe impl Send for HostObject {}

impl HostObject {
    /// Host object of the range profiler for `chip`, with `metrics` added
    /// (`availability` may be empty for chips CUPTI knows). Unknown metric
    /// names fail here, with CUPTI's error.
    pub(crate) fn new(cupti: &'static Cupti, chip: &CStr, availability: &[u8], metrics: &[String]) -> Result<Self> {
        Self::of_type(cupti, sys::CUPTI_PROFILER_TYPE_RANGE_PROFILER, chip, availability, metrics)
    }

    /// Host object for profiler `kind` (`CUPTI_PROFILER_TYPE_*`).
    pub(crate) fn of_type(
        cupti: &'static Cupti,
        kind: sys::CUpti_ProfilerType,
        chip: &CStr,
        availability: &[u8],
        metrics: &[String],
    ) -> Result<Self> {
        let mut p = sys::CUpti_Profiler_Host_Initialize_Params {
            structSize: struct_size!(sys::CUpti_Profiler_Host_Initialize_Params, pHostObject: *mut sys::CUpti_Profiler_Host_Object),
            pPriv: std::ptr::null_mut(),
            profilerType: kind,
            pChipName: chip.as_ptr(),
            // Known chips need no availability image (CUPTI wants one only
            // for chips newer than itself).
            pCounterAvailabilityImage: if availability.is_empty() { std::ptr::null() } else { availability.as_ptr() },
            pHostObject: std::ptr::null_mut(),
        };
        let init = sym!(cupti, cuptiProfilerHostInitialize).map_err(cupti::missing)?;
        // SAFETY: valid params; chip and image outlive the call.
        check(cupti, unsafe { init(&mut p) }, "cuptiProfilerHostInitialize")?;
        let mut host = HostObject { cupti, ptr: p.pHostObject, names: Vec::new(), config: Vec::new(), passes: 0 };
        host.names = metrics
            .iter()
            .map(|m| CString::new(m.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|_| Error::new(ErrorKind::InvalidConfig, "a metric name contains a NUL byte"))?;
        let mut ptrs: Vec<*const std::ffi::c_char> = host.names.iter().map(|n| n.as_ptr()).collect();
        let mut add = sys::CUpti_Profiler_Host_ConfigAddMetrics_Params {
            structSize: struct_size!(sys::CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics: usize),
            pPriv: std::ptr::null_mut(),
            pHostObject: host.ptr,
            ppMetricNames: ptrs.as_mut_ptr(),
            numMetrics: ptrs.len(),
        };
        let f = sym!(cupti, cuptiProfilerHostConfigAddMetrics).map_err(cupti::missing)?;
        // SAFETY: valid params; names outlive the call.
        let r = unsafe { f(&mut add) };
        if r != sys::CUPTI_SUCCESS {
            let known = host.base_metrics().unwrap_or_default();
            let mut msg = format!("cannot collect metrics ({})", cupti::result_name(cupti, r));
            for m in metrics {
                let base = m.split('.').next().unwrap_or(m);
                if !known.is_empty() && !known.iter().any(|k| k == base) {
                    msg.push_str(&format!(
                        "; unknown metric {m:?}, close names: {}",
                        super::closest(base, &known, 3).join(", ")
                    ));
                }
            }
            return Err(Error::new(ErrorKind::InvalidConfig, msg));
        }
        // SAFETY: all-zero is valid for these plain params structs.
        let mut size: sys::CUpti_Profiler_Host_GetConfigImageSize_Params = unsafe { std::mem::zeroed() };
        size.structSize = struct_size!(sys::CUpti_Profiler_Host_GetConfigImageSize_Params, configImageSize: usize);
        size.pHostObject = host.ptr;
        let f = sym!(cupti, cuptiProfilerHostGetConfigImageSize).map_err(cupti::missing)?;
        // SAFETY: valid params.
        check(cupti, unsafe { f(&mut size) }, "cuptiProfilerHostGetConfigImageSize")?;
        host.config = vec![0u8; size.configImageSize];
        // SAFETY: as above.
        let mut get: sys::CUpti_Profiler_Host_GetConfigImage_Params = unsafe { std::mem::zeroed() };
        get.structSize = struct_size!(sys::CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage: *mut u8);
        get.pHostObject = host.ptr;
        get.pConfigImage = host.config.as_mut_ptr();
        get.configImageSize = host.config.len();
        let f = sym!(cupti, cuptiProfilerHostGetConfigImage).map_err(cupti::missing)?;
        // SAFETY: the buffer holds configImageSize bytes.
        check(cupti, unsafe { f(&mut get) }, "cuptiProfilerHostGetConfigImage")?;
        let mut passes = sys::CUpti_Profiler_Host_GetNumOfPasses_Params {
            structSize: struct_size!(sys::CUpti_Profiler_Host_GetNumOfPasses_Params, numOfPasses: usize),
            pPriv: std::ptr::null_mut(),
            configImageSize: host.config.len(),
            pConfigImage: host.config.as_mut_ptr(),
            numOfPasses: 0,
        };
        let f = sym!(cupti, cuptiProfilerHostGetNumOfPasses).map_err(cupti::missing)?;
        // SAFETY: valid params over our config image.
        check(cupti, unsafe { f(&mut passes) }, "cuptiProfilerHostGetNumOfPasses")?;
        host.passes = passes.numOfPasses;
        Ok(host)
    }

    /// The chip's base metric names (counters, ratios, throughputs).
    fn base_metrics(&self) -> Result<Vec<String>> {
        let f = sym!(self.cupti, cuptiProfilerHostGetBaseMetrics).map_err(cupti::missing)?;
        let mut out = Vec::new();
        for ty in [sys::CUPTI_METRIC_TYPE_COUNTER, sys::CUPTI_METRIC_TYPE_RATIO, sys::CUPTI_METRIC_TYPE_THROUGHPUT] {
            let mut p = sys::CUpti_Profiler_Host_GetBaseMetrics_Params {
                structSize: struct_size!(sys::CUpti_Profiler_Host_GetBaseMetrics_Params, numMetrics: usize),
                pPriv: std::ptr::null_mut(),
                pHostObject: self.ptr,
                metricType: ty,
                ppMetricNames: std::ptr::null_mut(),
                numMetrics: 0,
            };
            // SAFETY: valid params; CUPTI sets ppMetricNames to its own array.
            check(self.cupti, unsafe { f(&mut p) }, "cuptiProfilerHostGetBaseMetrics")?;
            for i in 0..p.numMetrics {
                // SAFETY: CUPTI returned an array of numMetrics C strings.
                let n = unsafe { *p.ppMetricNames.add(i) };
                if !n.is_null() {
                    // SAFETY: a NUL-terminated string owned by CUPTI.
                    out.push(unsafe { CStr::from_ptr(n) }.to_string_lossy().into_owned());
                }
            }
        }
        Ok(out)
    }

    /// The metrics added, in evaluation order.
    pub(crate) fn names(&self) -> &[CString] {
        &self.names
    }

    /// Its config image.
    pub(crate) fn config(&self) -> &[u8] {
        &self.config
    }

    /// Replay passes each profiled kernel needs.
    pub(crate) fn passes(&self) -> usize {
        self.passes
    }

    /// Metric values of range `range` of a decoded counter data image, in
    /// the order the metrics were given.
    pub(crate) fn evaluate(&self, image: &[u8], range: usize) -> Result<Vec<f64>> {
        let mut ptrs: Vec<*const std::ffi::c_char> = self.names.iter().map(|n| n.as_ptr()).collect();
        let mut values = vec![0f64; ptrs.len()];
        let mut p = sys::CUpti_Profiler_Host_EvaluateToGpuValues_Params {
            structSize: struct_size!(sys::CUpti_Profiler_Host_EvaluateToGpuValues_Params, pMetricValues: *mut f64),
            pPriv: std::ptr::null_mut(),
            pHostObject: self.ptr,
            pCounterDataImage: image.as_ptr(),
            counterDataImageSize: image.len(),
            rangeIndex: range,
            ppMetricNames: ptrs.as_mut_ptr(),
            numMetrics: ptrs.len(),
            pMetricValues: values.as_mut_ptr(),
        };
        let f = sym!(self.cupti, cuptiProfilerHostEvaluateToGpuValues).map_err(cupti::missing)?;
        // SAFETY: valid params; all buffers outlive the call.
        check(self.cupti, unsafe { f(&mut p) }, "cuptiProfilerHostEvaluateToGpuValues")?;
        Ok(values)
    }
}

impl Drop for HostObject {
    fn drop(&mut self) {
        let mut p = sys::CUpti_Profiler_Host_Deinitialize_Params {
            structSize: struct_size!(sys::CUpti_Profiler_Host_Deinitialize_Params, pHostObject: *mut sys::CUpti_Profiler_Host_Object),
            pPriv: std::ptr::null_mut(),
            pHostObject: self.ptr,
        };
        if let Ok(f) = sym!(self.cupti, cuptiProfilerHostDeinitialize) {
            // SAFETY: our host object, released once.
            unsafe { f(&mut p) };
        }
    }
}

/// The range profiler of one context, set up for auto ranges (one per
/// kernel), replaying kernels only when the metrics need several passes.
pub(crate) struct ContextProfiler {
    cupti: &'static Cupti,
    object: *mut sys::CUpti_RangeProfiler_Object,
    image: Vec<u8>,
    config: Vec<u8>,
    max_ranges: usize,
    replay: sys::CUpti_ProfilerReplayMode,
    /// Push a range after each start and pop it before each stop: CUPTI
    /// 12.9's auto ranges count only kernels launched inside a pushed range
    /// (0 ranges for 5 launches without one, 5 with one; CUPTI 13 counts 5
    /// either way: docs/cupti-findings.md).
    push_range: bool,
    /// The pushed range is open.
    pushed: bool,
}

// SAFETY: used under the metrics state's mutex only.
unsafe impl Send for ContextProfiler {}

impl ContextProfiler {
    /// Enables the range profiler on `ctx` for `host`'s metrics, room for
    /// `max_ranges` kernels between decodes.
    pub(crate) fn new(
        cupti: &'static Cupti,
        ctx: sys::CUcontext,
        host: &HostObject,
        metrics: &[String],
        max_ranges: usize,
    ) -> Result<Self> {
        let mut en = sys::CUpti_RangeProfiler_Enable_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_Enable_Params, pRangeProfilerObject: *mut sys::CUpti_RangeProfiler_Object),
            pPriv: std::ptr::null_mut(),
            ctx,
            pRangeProfilerObject: std::ptr::null_mut(),
        };
        let f = sym!(cupti, cuptiRangeProfilerEnable).map_err(cupti::missing)?;
        // SAFETY: valid params; ctx comes from CUPTI's callback data.
        counters(cupti, unsafe { f(&mut en) }, "cuptiRangeProfilerEnable")?;
        // One pass needs no replay: the kernel runs once, as it would
        // unprofiled ("user replay" with a single pass). Several passes
        // need kernel replay, which saves and restores memory per pass.
        let replay = if host.passes() <= 1 { sys::CUPTI_UserReplay } else { sys::CUPTI_KernelReplay };
        let mut me = ContextProfiler {
            cupti,
            object: en.pRangeProfilerObject,
            image: Vec::new(),
            config: host.config.clone(),
            max_ranges,
            replay,
            push_range: cupti::is_cupti_12(),
            pushed: false,
        };
        let names: Vec<CString> = metrics.iter().filter_map(|m| CString::new(m.as_str()).ok()).collect();
        let mut ptrs: Vec<*const std::ffi::c_char> = names.iter().map(|n| n.as_ptr()).collect();
        // SAFETY: all-zero is valid for this plain params struct.
        let mut sz: sys::CUpti_RangeProfiler_GetCounterDataSize_Params = unsafe { std::mem::zeroed() };
        sz.structSize = struct_size!(sys::CUpti_RangeProfiler_GetCounterDataSize_Params, counterDataSize: usize);
        sz.pRangeProfilerObject = me.object;
        sz.pMetricNames = ptrs.as_mut_ptr();
        sz.numMetrics = ptrs.len();
        sz.maxNumOfRanges = max_ranges;
        sz.maxNumRangeTreeNodes = max_ranges as u32;
        let f = sym!(cupti, cuptiRangeProfilerGetCounterDataSize).map_err(cupti::missing)?;
        // SAFETY: valid params; names outlive the call.
        check(cupti, unsafe { f(&mut sz) }, "cuptiRangeProfilerGetCounterDataSize")?;
        me.image = vec![0u8; sz.counterDataSize];
        me.reset()?;
        Ok(me)
    }

    /// Re-initialises the counter data image and applies the config: after
    /// creation and after each decode.
    pub(crate) fn reset(&mut self) -> Result<()> {
        let mut init = sys::CUpti_RangeProfiler_CounterDataImage_Initialize_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_CounterDataImage_Initialize_Params, pCounterData: *mut u8),
            pPriv: std::ptr::null_mut(),
            pRangeProfilerObject: self.object,
            counterDataSize: self.image.len(),
            pCounterData: self.image.as_mut_ptr(),
        };
        let f = sym!(self.cupti, cuptiRangeProfilerCounterDataImageInitialize).map_err(cupti::missing)?;
        // SAFETY: the image is counterDataSize bytes.
        check(self.cupti, unsafe { f(&mut init) }, "cuptiRangeProfilerCounterDataImageInitialize")?;
        // SAFETY: all-zero is valid for this plain params struct.
        let mut cfg: sys::CUpti_RangeProfiler_SetConfig_Params = unsafe { std::mem::zeroed() };
        cfg.structSize = struct_size!(sys::CUpti_RangeProfiler_SetConfig_Params, targetNestingLevel: u16);
        cfg.pRangeProfilerObject = self.object;
        cfg.configSize = self.config.len();
        cfg.pConfig = self.config.as_ptr();
        cfg.counterDataImageSize = self.image.len();
        cfg.pCounterDataImage = self.image.as_mut_ptr();
        cfg.range = sys::CUPTI_AutoRange;
        cfg.replayMode = self.replay;
        cfg.maxRangesPerPass = self.max_ranges;
        cfg.numNestingLevels = 1;
        cfg.minNestingLevel = 1;
        cfg.passIndex = 0;
        cfg.targetNestingLevel = 1;
        let f = sym!(self.cupti, cuptiRangeProfilerSetConfig).map_err(cupti::missing)?;
        // SAFETY: config and image live in self, as long as the object.
        counters(self.cupti, unsafe { f(&mut cfg) }, "cuptiRangeProfilerSetConfig")
    }

    /// Starts collecting: kernels launched until [`stop`](Self::stop) are
    /// replayed and measured, one range each.
    pub(crate) fn start(&mut self) -> Result<()> {
        let mut p = sys::CUpti_RangeProfiler_Start_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_Start_Params, pRangeProfilerObject: *mut sys::CUpti_RangeProfiler_Object),
            pPriv: std::ptr::null_mut(),
            pRangeProfilerObject: self.object,
        };
        let f = sym!(self.cupti, cuptiRangeProfilerStart).map_err(cupti::missing)?;
        // SAFETY: valid params.
        counters(self.cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerStart")?;
        if self.push_range {
            let mut push = sys::CUpti_RangeProfiler_PushRange_Params {
                structSize: struct_size!(sys::CUpti_RangeProfiler_PushRange_Params, pRangeName: *const std::ffi::c_char),
                pPriv: std::ptr::null_mut(),
                pRangeProfilerObject: self.object,
                pRangeName: c"gpuscope".as_ptr(),
            };
            let f = sym!(self.cupti, cuptiRangeProfilerPushRange).map_err(cupti::missing)?;
            // SAFETY: valid params; the name is a static C string.
            check(self.cupti, unsafe { f(&mut push) }, "cuptiRangeProfilerPushRange")?;
            self.pushed = true;
        }
        Ok(())
    }

    /// Stops collecting.
    pub(crate) fn stop(&mut self) -> Result<()> {
        if std::mem::take(&mut self.pushed) {
            let mut pop = sys::CUpti_RangeProfiler_PopRange_Params {
                structSize: struct_size!(sys::CUpti_RangeProfiler_PopRange_Params, pRangeProfilerObject: *mut sys::CUpti_RangeProfiler_Object),
                pPriv: std::ptr::null_mut(),
                pRangeProfilerObject: self.object,
            };
            let f = sym!(self.cupti, cuptiRangeProfilerPopRange).map_err(cupti::missing)?;
            // SAFETY: valid params; pops the range start pushed.
            check(self.cupti, unsafe { f(&mut pop) }, "cuptiRangeProfilerPopRange")?;
        }
        // SAFETY: all-zero is valid for this plain params struct.
        let mut p: sys::CUpti_RangeProfiler_Stop_Params = unsafe { std::mem::zeroed() };
        p.structSize = struct_size!(sys::CUpti_RangeProfiler_Stop_Params, isAllPassSubmitted: u8);
        p.pRangeProfilerObject = self.object;
        let f = sym!(self.cupti, cuptiRangeProfilerStop).map_err(cupti::missing)?;
        // SAFETY: valid params.
        check(self.cupti, unsafe { f(&mut p) }, "cuptiRangeProfilerStop")
    }

    /// Decodes what was collected into the image; returns the names of the
    /// ranges it holds (auto ranges are ordinals "0", "1", ...) and the
    /// number CUPTI dropped for lack of room.
    pub(crate) fn decode(&mut self) -> Result<(Vec<String>, usize)> {
        let mut d = sys::CUpti_RangeProfiler_DecodeData_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_DecodeData_Params, numOfRangeDropped: usize),
            pPriv: std::ptr::null_mut(),
            pRangeProfilerObject: self.object,
            numOfRangeDropped: 0,
        };
        let f = sym!(self.cupti, cuptiRangeProfilerDecodeData).map_err(cupti::missing)?;
        // SAFETY: valid params.
        check(self.cupti, unsafe { f(&mut d) }, "cuptiRangeProfilerDecodeData")?;
        let mut info = sys::CUpti_RangeProfiler_GetCounterDataInfo_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_GetCounterDataInfo_Params, numTotalRanges: usize),
            pPriv: std::ptr::null_mut(),
            pCounterDataImage: self.image.as_ptr(),
            counterDataImageSize: self.image.len(),
            numTotalRanges: 0,
        };
        let f = sym!(self.cupti, cuptiRangeProfilerGetCounterDataInfo).map_err(cupti::missing)?;
        // SAFETY: valid params over our image.
        check(self.cupti, unsafe { f(&mut info) }, "cuptiRangeProfilerGetCounterDataInfo")?;
        let mut names = Vec::with_capacity(info.numTotalRanges);
        let f = sym!(self.cupti, cuptiRangeProfilerCounterDataGetRangeInfo).map_err(cupti::missing)?;
        for i in 0..info.numTotalRanges {
            let mut r = sys::CUpti_RangeProfiler_CounterData_GetRangeInfo_Params {
                structSize: struct_size!(sys::CUpti_RangeProfiler_CounterData_GetRangeInfo_Params, rangeName: *const std::ffi::c_char),
                pPriv: std::ptr::null_mut(),
                pCounterDataImage: self.image.as_ptr(),
                counterDataImageSize: self.image.len(),
                rangeIndex: i,
                rangeDelimiter: c"/".as_ptr(),
                rangeName: std::ptr::null(),
            };
            // SAFETY: valid params over our image.
            check(self.cupti, unsafe { f(&mut r) }, "cuptiRangeProfilerCounterDataGetRangeInfo")?;
            let name = if r.rangeName.is_null() {
                String::new()
            } else {
                // SAFETY: a NUL-terminated string owned by CUPTI.
                unsafe { CStr::from_ptr(r.rangeName) }.to_string_lossy().into_owned()
            };
            names.push(name);
        }
        Ok((names, d.numOfRangeDropped))
    }

    /// The decoded counter data image.
    pub(crate) fn image(&self) -> &[u8] {
        &self.image
    }
}

impl Drop for ContextProfiler {
    fn drop(&mut self) {
        let mut p = sys::CUpti_RangeProfiler_Disable_Params {
            structSize: struct_size!(sys::CUpti_RangeProfiler_Disable_Params, pRangeProfilerObject: *mut sys::CUpti_RangeProfiler_Object),
            pPriv: std::ptr::null_mut(),
            pRangeProfilerObject: self.object,
        };
        if let Ok(f) = sym!(self.cupti, cuptiRangeProfilerDisable) {
            // SAFETY: our object, disabled once.
            unsafe { f(&mut p) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_failures_a_user_can_fix_name_the_fix() {
        let busy = fixable(sys::CUPTI_ERROR_HARDWARE_BUSY, "cuptiRangeProfilerStart").expect("busy is fixable");
        assert_eq!(busy.kind(), ErrorKind::CountersBusy);
        for part in ["cuptiRangeProfilerStart", "in use by another profiler", "HARDWARE_BUSY", "dcgmi profile --pause"]
        {
            assert!(busy.message().contains(part), "{part}: {}", busy.message());
        }
        let denied = fixable(sys::CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, "cuptiRangeProfilerEnable").expect("fixable");
        assert_eq!(denied.kind(), ErrorKind::NoPermission);
        assert!(denied.message().contains("NVreg_RestrictProfilingToAdminUsers=0"));
        assert!(fixable(sys::CUPTI_SUCCESS, "x").is_none());
        assert!(fixable(sys::CUPTI_ERROR_UNKNOWN, "x").is_none());
    }
}
