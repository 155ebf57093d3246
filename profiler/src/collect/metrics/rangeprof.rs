//! Safe wrappers over CUPTI's range profiler (`cupti_range_profiler.h`) and
//! profiler host (`cupti_profiler_host.h`): a [`HostObject`] turns metric
//! names into a config image and counter values into metric values; a
//! [`ContextProfiler`] collects counters in one CUDA context. Both release
//! their CUPTI objects on drop.

use crate::collect::cupti::{self, host, profiler, range, tolerate};
use crate::error::{Error, ErrorKind, Result};
use cupti_sys::{self as sys, Cupti};
use std::ffi::{CStr, CString};

/// `cuptiProfilerInitialize`, once per process.
pub(crate) fn initialize(cupti: &Cupti) -> Result<()> {
    profiler::initialize(cupti)
}

/// The chip name of device `index` (e.g. "GH100").
pub(crate) fn chip_name(cupti: &Cupti, index: usize) -> Result<CString> {
    profiler::device_get_chip_name(cupti, index)
}

/// Whether the range profiler supports device `dev`; `Err` says why not.
pub(crate) fn device_supported(cupti: &Cupti, dev: i32) -> Result<()> {
    api_supported(cupti, dev, sys::CUPTI_PROFILER_RANGE_PROFILING, "range profiling")
}

/// Whether profiler `api` (`CUPTI_PROFILER_*`, called `what`) supports
/// device `dev`; `Err` says why not.
pub(crate) fn api_supported(cupti: &Cupti, dev: i32, api: sys::CUpti_Profiler_API, what: &str) -> Result<()> {
    let p = profiler::device_supported(cupti, dev, api)?;
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

/// The counter availability image of `ctx`, the calling thread's current
/// context (a launch's, or one gpuscope made current).
pub(crate) fn counter_availability(cupti: &Cupti, ctx: sys::CUcontext) -> Result<Vec<u8>> {
    // SAFETY: the caller's context is live: it is current on this thread.
    unsafe { profiler::get_counter_availability(cupti, ctx) }
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
        // Known chips need no availability image (CUPTI wants one only for
        // chips newer than itself).
        let ptr = host::initialize(cupti, kind, chip, availability)?;
        // Owned from here: dropped (released) on every error below.
        let mut me = HostObject { cupti, ptr, names: Vec::new(), config: Vec::new(), passes: 0 };
        me.names = metrics
            .iter()
            .map(|m| CString::new(m.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|_| Error::new(ErrorKind::InvalidConfig, "a metric name contains a NUL byte"))?;
        // SAFETY: our host object, live until drop.
        if let Err(e) = unsafe { host::config_add_metrics(cupti, me.ptr, &me.names) } {
            let Some(code) = e.cupti_code() else { return Err(e) };
            let known = me.base_metrics().unwrap_or_default();
            let mut msg = format!("cannot collect metrics ({})", cupti::result_name(cupti, code));
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
        // SAFETY: as above.
        let size = unsafe { host::get_config_image_size(cupti, me.ptr) }?;
        me.config = vec![0u8; size];
        // SAFETY: as above.
        unsafe { host::get_config_image(cupti, me.ptr, &mut me.config) }?;
        me.passes = host::get_num_of_passes(cupti, &mut me.config)?;
        Ok(me)
    }

    /// The chip's base metric names (counters, ratios, throughputs).
    fn base_metrics(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for ty in [sys::CUPTI_METRIC_TYPE_COUNTER, sys::CUPTI_METRIC_TYPE_RATIO, sys::CUPTI_METRIC_TYPE_THROUGHPUT] {
            // SAFETY: our host object, live until drop.
            out.extend(unsafe { host::get_base_metrics(self.cupti, self.ptr, ty) }?);
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
    ///
    /// # Safety
    /// `image` is a counter data image CUPTI initialised (a
    /// [`ContextProfiler`]'s or a PM sampler's, decoded).
    pub(crate) unsafe fn evaluate(&self, image: &[u8], range: usize) -> Result<Vec<f64>> {
        let mut values = vec![0f64; self.names.len()];
        // SAFETY: our host object, live until drop; the image per this
        // function's contract.
        unsafe { host::evaluate_to_gpu_values(self.cupti, self.ptr, image, range, &self.names, &mut values) }?;
        Ok(values)
    }
}

impl Drop for HostObject {
    fn drop(&mut self) {
        // SAFETY: our host object, released once, here.
        tolerate(unsafe { host::deinitialize(self.cupti, self.ptr) }, "releasing a metrics host object");
    }
}

/// The range profiler of one context, set up for auto ranges (one per
/// kernel), replaying kernels only when the metrics need several passes.
pub(crate) struct ContextProfiler {
    cupti: &'static Cupti,
    object: range::Object,
    /// The counter data image and config CUPTI was given at `set_config`:
    /// never reallocated while the object lives.
    image: Vec<u8>,
    config: Vec<u8>,
    max_ranges: usize,
    replay: sys::CUpti_ProfilerReplayMode,
    /// Push a range after each start and pop it before each stop: CUPTI
    /// 12.9's auto ranges count only kernels launched inside a pushed range
    /// (0 ranges for 5 launches without one, 5 with one; CUPTI 13 counts 5
    /// either way: docs/contributing/cupti-findings.md).
    push_range: bool,
    /// The pushed range is open.
    pushed: bool,
}

// SAFETY: used under the metrics state's mutex only.
unsafe impl Send for ContextProfiler {}

impl ContextProfiler {
    /// Enables the range profiler on `ctx` (the calling thread's current
    /// context) for `host`'s metrics, room for `max_ranges` kernels between
    /// decodes.
    pub(crate) fn new(
        cupti: &'static Cupti,
        ctx: sys::CUcontext,
        host: &HostObject,
        max_ranges: usize,
    ) -> Result<Self> {
        // SAFETY: the caller's context is live: it is current on this thread.
        let object = unsafe { range::enable(cupti, ctx) }?;
        // One pass needs no replay: the kernel runs once, as it would
        // unprofiled ("user replay" with a single pass). Several passes
        // need kernel replay, which saves and restores memory per pass.
        let replay = if host.passes() <= 1 { sys::CUPTI_UserReplay } else { sys::CUPTI_KernelReplay };
        // Owned from here: disabled on drop, on every error below too.
        let mut me = ContextProfiler {
            cupti,
            object,
            image: Vec::new(),
            config: host.config.clone(),
            max_ranges,
            replay,
            push_range: cupti::is_cupti_12(),
            pushed: false,
        };
        // SAFETY: our object, enabled until drop.
        let size = unsafe { range::get_counter_data_size(cupti, me.object, host.names(), max_ranges) }?;
        me.image = vec![0u8; size];
        me.reset()?;
        Ok(me)
    }

    /// Re-initialises the counter data image and applies the config: after
    /// creation and after each decode.
    pub(crate) fn reset(&mut self) -> Result<()> {
        // SAFETY: our object, enabled until drop.
        unsafe { range::counter_data_image_initialize(self.cupti, self.object, &mut self.image) }?;
        // SAFETY: our object; the config and image live in self, as long as
        // the object, and are never reallocated or written while it runs.
        unsafe {
            range::set_config(self.cupti, self.object, &self.config, &mut self.image, self.replay, self.max_ranges)
        }
    }

    /// Whether a measured kernel runs once, as it would unprofiled (one
    /// pass), rather than being replayed per pass.
    pub(crate) fn runs_once(&self) -> bool {
        self.replay == sys::CUPTI_UserReplay
    }

    /// Starts collecting: kernels launched until [`stop`](Self::stop) are
    /// replayed and measured, one range each.
    pub(crate) fn start(&mut self) -> Result<()> {
        // SAFETY: our object, configured by `reset`, enabled until drop.
        unsafe { range::start(self.cupti, self.object) }?;
        if self.push_range {
            // SAFETY: our object, started just now.
            unsafe { range::push_range(self.cupti, self.object, c"gpuscope") }?;
            self.pushed = true;
        }
        Ok(())
    }

    /// Stops collecting.
    pub(crate) fn stop(&mut self) -> Result<()> {
        if std::mem::take(&mut self.pushed) {
            // SAFETY: our object; pops the range `start` pushed.
            unsafe { range::pop_range(self.cupti, self.object) }?;
        }
        // SAFETY: our object, started (callers stop only what they started).
        unsafe { range::stop(self.cupti, self.object) }.map(|_all_passes| ())
    }

    /// Decodes what was collected into the image; returns the names of the
    /// ranges it holds (auto ranges are ordinals "0", "1", ...) and the
    /// number CUPTI dropped for lack of room.
    pub(crate) fn decode(&mut self) -> Result<(Vec<String>, usize)> {
        // SAFETY: our object, stopped by the caller, enabled until drop.
        let dropped = unsafe { range::decode_data(self.cupti, self.object) }?;
        // SAFETY: our image, initialised by `reset`.
        let ranges = unsafe { range::get_counter_data_info(self.cupti, &self.image) }?;
        let names = (0..ranges)
            // SAFETY: as above.
            .map(|i| unsafe { range::counter_data_get_range_info(self.cupti, &self.image, i, c"/") })
            .collect::<Result<Vec<_>>>()?;
        Ok((names, dropped))
    }

    /// The decoded counter data image (one CUPTI initialised: see
    /// [`HostObject::evaluate`]).
    pub(crate) fn image(&self) -> &[u8] {
        &self.image
    }
}

impl Drop for ContextProfiler {
    fn drop(&mut self) {
        // SAFETY: our object, disabled once, here.
        tolerate(unsafe { range::disable(self.cupti, self.object) }, "disabling a context's range profiler");
    }
}
