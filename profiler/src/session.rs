//! A profiling session: the [`Profiler`] builder, the [`Session`] guard, and
//! everything between CUPTI and the aggregator.
//!
//! Threads: CUPTI calls `buffer_requested`/`buffer_completed` and the API
//! callback on the application's threads; they only take a buffer from the
//! pool, pass a pointer, or send a small event, and never block. One
//! decoder thread owns the [`Aggregator`]: it walks completed buffers with
//! CUPTI's cursor, applies host events, and builds the report at the end.

use crate::activity::pool::BufferPool;
use crate::activity::record::CuptiCursor;
pub(crate) use crate::aggregate::HostEvent;
use crate::aggregate::{AggregateOptions, Aggregator};
use crate::cupti;
use crate::device::DeviceTable;
use crate::error::{Error, ErrorKind, Result};
use crate::metrics::collector::{self, Collector};
use crate::metrics::{MetricSet, Selection};
use crate::ranges;
use crate::report::{Format, Report};
use crossbeam_channel::{bounded, select, unbounded, Receiver, Sender, TrySendError};
use cupti_sys::{self as sys, sym, Cupti};
use std::cell::Cell;
use std::ffi::{c_void, CStr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// Options of a session; [`Profiler::start`] begins it.
#[derive(Debug, Clone)]
#[must_use = "a Profiler does nothing until .start()"]
pub struct Profiler {
    buffer_size: usize,
    max_buffers: usize,
    host_queue: usize,
    trace_cap: usize,
    max_live_ranges: usize,
    output: Option<(PathBuf, Format)>,
    quiet: bool,
    memory_records: bool,
    sync_records: bool,
    attribution: bool,
    metrics: Option<MetricSet>,
    selection: Selection,
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler {
            buffer_size: 4 << 20,
            max_buffers: 16,
            host_queue: 1 << 18,
            trace_cap: 0,
            max_live_ranges: 100_000,
            output: None,
            quiet: false,
            memory_records: true,
            sync_records: true,
            attribution: true,
            metrics: None,
            selection: Selection::default(),
        }
    }
}

impl Profiler {
    /// Defaults: trace mode, 16 buffers of 4 MiB, no per-kernel trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes per activity buffer (64 KiB to 256 MiB; default 4 MiB).
    pub fn buffer_size(mut self, bytes: usize) -> Self {
        self.buffer_size = bytes;
        self
    }

    /// Buffers alive at once (1 to 1024; default 16). When all are full and
    /// not yet decoded, CUPTI drops records and the report counts them.
    pub fn max_buffers(mut self, n: usize) -> Self {
        self.max_buffers = n;
        self
    }

    /// Capacity of the queue of NVTX and launch events (default 262144).
    pub fn host_queue(mut self, n: usize) -> Self {
        self.host_queue = n;
        self
    }

    /// Keep per-kernel, per-range and per-copy records, at most `max` of
    /// each (for the Chrome trace and [`crate::report::Trace`]).
    pub fn keep_trace(mut self, max: usize) -> Self {
        self.trace_cap = max;
        self
    }

    /// Open range instances kept at once before the oldest closed ones are
    /// summarised (default 100000).
    pub fn max_live_ranges(mut self, n: usize) -> Self {
        self.max_live_ranges = n;
        self
    }

    /// Also write the report to `path` in `format` when the session ends,
    /// including at process exit if the guard was never dropped.
    pub fn output(mut self, path: impl Into<PathBuf>, format: Format) -> Self {
        self.output = Some((path.into(), format));
        self
    }

    /// Metrics mode: measure `set` with hardware counters on the launches
    /// [`Profiler::select`] picks (default: the first 3 of each kernel).
    /// Each measured launch is replayed once per pass and serialised.
    pub fn metrics(mut self, set: MetricSet) -> Self {
        self.metrics = Some(set);
        self
    }

    /// Which launches metrics mode measures.
    pub fn select(mut self, selection: Selection) -> Self {
        self.selection = selection;
        self
    }

    /// Record memcpy and memset operations (default on).
    pub fn memory_records(mut self, on: bool) -> Self {
        self.memory_records = on;
        self
    }

    /// Record host waits: stream, event and context synchronisation
    /// (default on).
    pub fn sync_records(mut self, on: bool) -> Self {
        self.sync_records = on;
        self
    }

    /// Attribute kernels to the launching thread and its NVTX ranges
    /// (default on). Off, no launch callback runs: kernels are still timed
    /// and counted, under "(no range)".
    pub fn launch_attribution(mut self, on: bool) -> Self {
        self.attribution = on;
        self
    }

    /// The activity kinds these options record.
    fn activity_kinds(&self) -> Vec<u32> {
        let mut k = vec![sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL];
        if self.memory_records {
            k.extend([sys::CUPTI_ACTIVITY_KIND_MEMCPY, sys::CUPTI_ACTIVITY_KIND_MEMSET]);
        }
        if self.sync_records {
            k.push(sys::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
        }
        k
    }

    /// No summary on stderr when the report is written at exit.
    pub fn quiet(mut self, quiet: bool) -> Self {
        self.quiet = quiet;
        self
    }

    fn validate(&self) -> Result<()> {
        let bad = |what: &str, v: usize, allowed: &str| {
            Err(Error::new(ErrorKind::InvalidConfig, format!("{what} = {v} is out of range; allowed: {allowed}")))
        };
        if !(64 << 10..=256 << 20).contains(&self.buffer_size) || self.buffer_size % 8 != 0 {
            return bad("buffer_size", self.buffer_size, "64 KiB to 256 MiB, a multiple of 8");
        }
        if !(1..=1024).contains(&self.max_buffers) {
            return bad("max_buffers", self.max_buffers, "1 to 1024");
        }
        if !(1024..=1 << 24).contains(&self.host_queue) {
            return bad("host_queue", self.host_queue, "1024 to 16777216");
        }
        if self.max_live_ranges == 0 {
            return bad("max_live_ranges", 0, "1 or more");
        }
        Ok(())
    }

    /// Starts profiling this process. Fails (and changes nothing) when
    /// CUPTI cannot be loaded, another tool holds it, or a session is
    /// already running.
    pub fn start(self) -> Result<Session> {
        self.validate()?;
        let mut active = ACTIVE.write().unwrap_or_else(|e| e.into_inner());
        if active.is_some() {
            return Err(Error::new(ErrorKind::SessionActive, "a gpuscope session is already running in this process"));
        }
        debug("start: loading CUPTI");
        let cupti = cupti::lib()?;
        debug("start: subscribing");
        let subscriber = subscribe(cupti)?;
        let (buf_tx, buf_rx) = unbounded();
        let (host_tx, host_rx) = bounded(self.host_queue);
        let (ctl_tx, ctl_rx) = unbounded();
        let shared = Arc::new(Shared {
            cupti,
            pool: BufferPool::new(self.buffer_size, self.max_buffers),
            buf_tx,
            host_tx,
            ctl_tx,
            host_dropped: AtomicU64::new(0),
            cupti_dropped: AtomicU64::new(0),
            start_ns: cupti::timestamp(cupti),
            subscriber,
            stopped: AtomicBool::new(false),
            options: self.clone(),
            collector: self.metrics.clone().map(|m| Collector::new(cupti, m, self.selection.clone())),
            pid: std::process::id(),
        });
        if let Some(c) = &shared.collector {
            if let Some(why) = c.status().disabled {
                eprintln!("gpuscope: hardware metrics are off for this session: {why}. Tracing continues.");
            }
        }
        let opts = AggregateOptions {
            trace_cap: self.trace_cap,
            max_live_ranges: self.max_live_ranges,
            metric_names: shared.collector.as_ref().map(|c| c.names().to_vec()).unwrap_or_default(),
            ..Default::default()
        };
        let decoder = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("gpuscope-decoder".into())
                .spawn(move || decode_loop(shared, opts, buf_rx, host_rx, ctl_rx))
                .map_err(|e| Error::new(ErrorKind::Io, format!("cannot start the decoder thread: {e}")))?
        };
        *active = Some(shared.clone());
        drop(active);
        debug("start: enabling callbacks and activity");
        if let Err(e) = enable(cupti, subscriber, &self) {
            let _ = finish(&shared, Some(decoder), false);
            return Err(e);
        }
        if shared.collector.is_some() {
            let s = shared.clone();
            // A thread of gpuscope's own: a panic there ends only that thread.
            let spawned = std::thread::Builder::new().name("gpuscope-metrics-hosts".into()).spawn(move || {
                if let Some(c) = &s.collector {
                    c.prepare_hosts();
                }
            });
            if spawned.is_err() {
                debug("metrics: no host setup thread; the first selected launch sets up");
                if let Some(c) = &shared.collector {
                    c.hosts_prepared();
                }
            }
        }
        debug("start: NVTX");
        ranges::install();
        debug("start: done");
        *DECODER.lock().unwrap_or_else(|e| e.into_inner()) = Some(decoder);
        register_atexit();
        Ok(Session { _priv: () })
    }
}

/// A running session. Dropping it stops profiling (writing the report if
/// [`Profiler::output`] was set); [`Session::stop`] also returns it.
#[must_use = "profiling stops when the session is dropped"]
pub struct Session {
    _priv: (),
}

impl Session {
    /// Stops profiling: flushes every buffer, detaches from CUPTI, and
    /// returns the report (also written if [`Profiler::output`] was set).
    pub fn stop(self) -> Result<Report> {
        let r = stop_active();
        std::mem::forget(self);
        r
    }

    /// Asks CUPTI for the buffers completed so far (not partial ones).
    pub fn flush(&self) {
        if let Some(s) = active() {
            if let Ok(f) = sym!(s.cupti, cuptiActivityFlushAll) {
                // SAFETY: no pointers; CUPTI is initialised.
                unsafe { f(0) };
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Err(e) = stop_active() {
            eprintln!("gpuscope: {e}");
        }
    }
}

pub(crate) struct Shared {
    cupti: &'static Cupti,
    pool: BufferPool,
    buf_tx: Sender<(usize, usize)>,
    host_tx: Sender<HostEvent>,
    ctl_tx: Sender<Control>,
    host_dropped: AtomicU64,
    cupti_dropped: AtomicU64,
    start_ns: u64,
    subscriber: sys::CUpti_SubscriberHandle,
    stopped: AtomicBool,
    options: Profiler,
    collector: Option<Collector>,
    pid: u32,
}

impl Shared {
    /// Queues a host event; never blocks (a full queue counts a drop).
    fn send(&self, e: HostEvent) {
        if let Err(TrySendError::Full(_)) = self.host_tx.try_send(e) {
            self.host_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

// SAFETY: the subscriber handle is an opaque id CUPTI accepts from any
// thread; the rest is Sync on its own.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

enum Control {
    Finish(u64, Sender<Report>),
}

static ACTIVE: RwLock<Option<Arc<Shared>>> = RwLock::new(None);
static DECODER: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);

fn active() -> Option<Arc<Shared>> {
    ACTIVE.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Sends a host event to the running session, if any; `make` gets CUPTI's
/// timestamp. Never blocks: a full queue counts a drop.
pub(crate) fn send_host_event(make: impl FnOnce(u64) -> HostEvent) {
    let guard = ACTIVE.read().unwrap_or_else(|e| e.into_inner());
    let Some(s) = guard.as_ref() else { return };
    s.send(make(cupti::timestamp(s.cupti)));
}

fn subscribe(cupti: &'static Cupti) -> Result<sys::CUpti_SubscriberHandle> {
    let mut handle: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
    let mut old = [0 as std::ffi::c_char; 256];
    let mut params = sys::CUpti_SubscriberParams {
        structSize: std::mem::size_of::<sys::CUpti_SubscriberParams>(),
        subscriberName: c"gpuscope".as_ptr(),
        oldSubscriberName: old.as_mut_ptr(),
        oldSubscriberSize: old.len(),
    };
    let f = sym!(cupti, cuptiSubscribe_v2).map_err(cupti::missing)?;
    // SAFETY: all pointers are valid for the call; `api_callback` has the
    // CUpti_CallbackFunc signature and catches every panic.
    let r = unsafe { f(&mut handle, Some(api_callback), std::ptr::null_mut(), &mut params) };
    if r == sys::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED {
        // SAFETY: CUPTI NUL-terminates within the buffer we gave it (zeroed).
        let holder = unsafe { CStr::from_ptr(old.as_ptr()) }.to_string_lossy().into_owned();
        let who = if holder.is_empty() {
            "another tool (Nsight Systems/Compute, torch.profiler, ...)".to_string()
        } else {
            format!("{holder:?}")
        };
        return Err(Error::new(
            ErrorKind::CuptiBusy,
            format!("CUPTI is already in use by {who}; only one CUPTI subscriber per process is possible, so gpuscope is not profiling"),
        ));
    }
    cupti::check(cupti, r, "cuptiSubscribe_v2")?;
    Ok(handle)
}

const DRIVER_LAUNCHES: &[u32] = &[
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    sys::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    sys::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
];

const RUNTIME_LAUNCHES: &[u32] = &[
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    sys::CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    sys::CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
];

/// Stream-capture begins: metrics mode closes its measurement window there
/// (stopping the range profiler during a capture would invalidate it).
const CAPTURE_BEGINS: &[(u32, u32)] = &[
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture),
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz),
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2),
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz),
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph),
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz),
    (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000),
    (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000),
    (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_v12030),
    (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_ptsz_v12030),
];

fn is_graph_launch(domain: u32, cbid: u32) -> bool {
    match domain {
        sys::CUPTI_CB_DOMAIN_DRIVER_API => {
            cbid == sys::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch
                || cbid == sys::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz
        }
        _ => {
            cbid == sys::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000
                || cbid == sys::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000
        }
    }
}

fn enable(cupti: &'static Cupti, sub: sys::CUpti_SubscriberHandle, p: &Profiler) -> Result<()> {
    let en = sym!(cupti, cuptiEnableCallback).map_err(cupti::missing)?;
    let lists =
        [(sys::CUPTI_CB_DOMAIN_DRIVER_API, DRIVER_LAUNCHES), (sys::CUPTI_CB_DOMAIN_RUNTIME_API, RUNTIME_LAUNCHES)];
    for (domain, list) in lists.into_iter().filter(|_| p.attribution) {
        for &cbid in list {
            // SAFETY: a valid subscriber; unknown cbids fail harmlessly.
            unsafe { en(1, sub, domain, cbid) };
        }
    }
    for &(domain, cbid) in CAPTURE_BEGINS.iter().filter(|_| p.metrics.is_some()) {
        // SAFETY: as above.
        unsafe { en(1, sub, domain, cbid) };
    }
    // A context's records (and measurements) are taken out before it is
    // destroyed: cudaDeviceReset or cuCtxDestroy before exit.
    // SAFETY: as above.
    unsafe { en(1, sub, sys::CUPTI_CB_DOMAIN_RESOURCE, sys::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) };
    if p.metrics.is_some() {
        // Metrics mode prepares each new context's range profiler early.
        // SAFETY: as above.
        unsafe { en(1, sub, sys::CUPTI_CB_DOMAIN_RESOURCE, sys::CUPTI_CBID_RESOURCE_CONTEXT_CREATED) };
    }
    let reg = sym!(cupti, cuptiActivityRegisterCallbacks).map_err(cupti::missing)?;
    // SAFETY: both callbacks have CUPTI's signatures and catch panics.
    cupti::check(
        cupti,
        unsafe { reg(Some(buffer_requested), Some(buffer_completed)) },
        "cuptiActivityRegisterCallbacks",
    )?;
    let act = sym!(cupti, cuptiActivityEnable).map_err(cupti::missing)?;
    for k in p.activity_kinds() {
        // SAFETY: plain integer argument.
        cupti::check(cupti, unsafe { act(k) }, "cuptiActivityEnable")?;
    }
    Ok(())
}

thread_local! {
    // Set while a runtime launch is in progress on this thread, so the
    // driver call it makes is not recorded a second time.
    static IN_RUNTIME_LAUNCH: Cell<bool> = const { Cell::new(false) };
}

unsafe extern "C" fn api_callback(
    _user: *mut c_void,
    domain: sys::CUpti_CallbackDomain,
    cbid: sys::CUpti_CallbackId,
    data: *const c_void,
) {
    let _ = std::panic::catch_unwind(|| {
        if data.is_null() {
            return;
        }
        if domain == sys::CUPTI_CB_DOMAIN_RESOURCE {
            if cbid == sys::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING {
                // SAFETY: resource callbacks pass a CUpti_ResourceData.
                let ctx = unsafe { &*(data as *const sys::CUpti_ResourceData) }.context;
                // A clone, not the guard: the flush below runs the buffer
                // callbacks, which read ACTIVE themselves.
                if let Some(s) = active() {
                    context_destroying(&s, ctx);
                }
            } else if cbid == sys::CUPTI_CBID_RESOURCE_CONTEXT_CREATED {
                // SAFETY: as above.
                let ctx = unsafe { &*(data as *const sys::CUpti_ResourceData) }.context;
                if let Some(s) = active() {
                    prepare_metrics(s, ctx);
                }
            }
            return;
        }
        if domain != sys::CUPTI_CB_DOMAIN_RUNTIME_API && domain != sys::CUPTI_CB_DOMAIN_DRIVER_API {
            return;
        }
        // SAFETY: for the API domains CUPTI passes a CUpti_CallbackData.
        let d = unsafe { &*(data as *const sys::CUpti_CallbackData) };
        let enter = d.callbackSite == sys::CUPTI_API_ENTER;
        if domain == sys::CUPTI_CB_DOMAIN_RUNTIME_API {
            let _ = IN_RUNTIME_LAUNCH.try_with(|f| f.set(enter));
        } else if IN_RUNTIME_LAUNCH.try_with(|f| f.get()).unwrap_or(false) {
            return;
        }
        // The exit of a launch this thread is not measuring (every exit in
        // trace mode) has nothing to do.
        if !enter && !collector::measuring_here() {
            return;
        }
        let guard = ACTIVE.read().unwrap_or_else(|e| e.into_inner());
        let Some(s) = guard.as_ref() else { return };
        if CAPTURE_BEGINS.contains(&(domain, cbid)) {
            if let (true, Some(c)) = (enter, &s.collector) {
                c.close_windows();
            }
            return;
        }
        let correlation_id = d.correlationId;
        if !enter {
            // A launch measured at entry: its kernel has run (replayed) by now.
            if let Some(c) = &s.collector {
                // A launch that failed ran no kernel: it has no range.
                let ret = d.functionReturnValue as *const i32;
                // SAFETY: at API exit CUPTI points this at the call's return
                // value (CUresult or cudaError_t, both 32-bit).
                let launched = ret.is_null() || unsafe { *ret } == 0;
                for (correlation_id, values) in c.on_exit(correlation_id, launched) {
                    s.send(HostEvent::KernelMetrics { correlation_id, values });
                }
            }
            return;
        }
        let ctx = ranges::current();
        let graph = is_graph_launch(domain, cbid);
        let profiled = s.collector.as_ref().is_some_and(|c| {
            // SAFETY: CUPTI passes the launch function's own params struct.
            let stream = unsafe { launch_stream(domain, cbid, d.functionParams) };
            c.on_enter(d.context, stream, d.symbolName, ctx.path, graph)
        });
        s.send(HostEvent::Launch {
            correlation_id,
            tid: ctx.tid,
            path: ctx.path,
            instance: ctx.instance,
            graph,
            profiled,
        });
    });
}

/// A context was created: set up its range profiler on a thread of its
/// own, overlapping the program's start-up (see `Collector::prepare`).
fn prepare_metrics(s: Arc<Shared>, ctx: sys::CUcontext) {
    if s.collector.is_none() || ctx.is_null() {
        return;
    }
    debug("metrics: a context was created");
    let key = ctx as usize;
    // A thread of gpuscope's own: a panic there ends only that thread.
    let spawned = std::thread::Builder::new().name("gpuscope-metrics-setup".into()).spawn(move || {
        if let Some(c) = &s.collector {
            crate::device::with_current(key, || c.prepare(key as sys::CUcontext));
        }
    });
    if spawned.is_err() {
        debug("metrics: no setup thread; the first selected launch sets up");
    }
}

/// Context `ctx` is about to be destroyed: wait for its work, then take
/// out every record CUPTI holds (partial buffers too) and what metrics mode
/// measured in it, while the context still exists.
fn context_destroying(s: &Shared, ctx: sys::CUcontext) {
    debug("context destroy: flush");
    if !ctx.is_null() {
        if let Some(d) = crate::device::driver() {
            // SAFETY: CUPTI passes a context that is still alive at
            // DESTROY_STARTING; the call has no pointer arguments.
            crate::device::with_current(ctx as usize, || unsafe { (d.cu_ctx_synchronize)() });
        }
    }
    if let Ok(f) = sym!(s.cupti, cuptiActivityFlushAll) {
        // SAFETY: a plain flag; the buffer callbacks it runs catch panics.
        unsafe { f(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) };
    }
    if let Some(c) = &s.collector {
        for (correlation_id, values) in c.context_destroyed(ctx) {
            s.send(HostEvent::KernelMetrics { correlation_id, values });
        }
    }
}

/// The stream a kernel launch API call targets, read from its parameters;
/// `None` for launch APIs whose parameters gpuscope does not decode.
///
/// # Safety
/// `params` is the `functionParams` CUPTI passed for `(domain, cbid)`.
unsafe fn launch_stream(domain: u32, cbid: u32, params: *const c_void) -> Option<sys::CUstream> {
    if params.is_null() {
        return None;
    }
    // SAFETY (all reads): per this function's contract, `params` points to
    // the `<api>_params` struct of this callback id.
    unsafe {
        match (domain, cbid) {
            (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
            | (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz) => {
                Some((*(params as *const sys::cuLaunchKernel_params)).hStream)
            }
            (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel)
            | (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz) => {
                Some((*(params as *const sys::cuLaunchCooperativeKernel_params)).hStream)
            }
            (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx)
            | (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) => {
                let cfg = (*(params as *const sys::cuLaunchKernelEx_params)).config;
                (!cfg.is_null()).then(|| (*cfg).hStream)
            }
            (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
            | (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000) => {
                Some((*(params as *const sys::cudaLaunchKernel_v7000_params)).stream as sys::CUstream)
            }
            (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060)
            | (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060) => {
                let cfg = (*(params as *const sys::cudaLaunchKernelExC_v11060_params)).config;
                (!cfg.is_null()).then(|| (*cfg).stream as sys::CUstream)
            }
            _ => None,
        }
    }
}

unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let _ = std::panic::catch_unwind(|| {
        let (p, n) = match active().and_then(|s| s.pool.take().map(|p| (p, s.pool.buffer_size()))) {
            Some(x) => x,
            // No buffer: CUPTI drops the records and counts them.
            None => (std::ptr::null_mut(), 0),
        };
        // SAFETY: CUPTI passes valid out pointers.
        unsafe {
            *buffer = p;
            *size = n;
            *max_records = 0;
        }
    });
}

unsafe extern "C" fn buffer_completed(ctx: sys::CUcontext, stream: u32, buffer: *mut u8, size: usize, valid: usize) {
    let _ = std::panic::catch_unwind(|| {
        let Some(s) = active() else {
            if !buffer.is_null() && size > 0 {
                // Late buffer after the session: free it (pool layout).
                // SAFETY: every buffer we hand out is size bytes, align 8.
                unsafe { std::alloc::dealloc(buffer, std::alloc::Layout::from_size_align_unchecked(size, 8)) };
            }
            return;
        };
        if let Ok(f) = sym!(s.cupti, cuptiActivityGetNumDroppedRecords) {
            let mut n = 0usize;
            // SAFETY: out pointer is valid; ctx/stream come from CUPTI.
            if unsafe { f(ctx, stream, &mut n) } == sys::CUPTI_SUCCESS {
                s.cupti_dropped.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        if buffer.is_null() {
            return;
        }
        // The decoder walks it and gives it back to the pool. Unbounded,
        // but at most max_buffers pointers can ever be in flight.
        let _ = s.buf_tx.send((buffer as usize, valid));
    });
}

/// How often the decoder drains NVTX and launch events. At 5 ms, the
/// default queue (262144 events) overflows only above 50M events/s.
const HOST_POLL: Duration = Duration::from_millis(5);

fn decode_loop(
    s: Arc<Shared>,
    opts: AggregateOptions,
    bufs: Receiver<(usize, usize)>,
    host: Receiver<HostEvent>,
    ctl: Receiver<Control>,
) {
    let mut agg = Aggregator::new(opts, DeviceTable::from_driver());
    let drain_host = |agg: &mut Aggregator| {
        while let Ok(e) = host.try_recv() {
            agg.host_event(e);
        }
    };
    let process = |agg: &mut Aggregator, (p, valid): (usize, usize)| {
        // Launch events precede their kernels' records: apply them first.
        while let Ok(e) = host.try_recv() {
            agg.host_event(e);
        }
        let mut cursor = CuptiCursor { cupti: s.cupti, buf: p as *mut u8, valid, record: std::ptr::null_mut() };
        agg.buffer(&mut cursor);
        // SAFETY: CUPTI got this buffer from our pool and has completed it.
        unsafe { s.pool.give_back(p as *mut u8) };
    };
    loop {
        // The host queue is polled, never waited on: a receiver blocked on
        // it would make every launch callback pay a futex wake-up (measured:
        // +1.6 us per launch). Buffers and control messages are rare and do
        // wake the thread.
        drain_host(&mut agg);
        select! {
            recv(bufs) -> b => if let Ok(b) = b { process(&mut agg, b) },
            recv(ctl) -> c => {
                let Ok(Control::Finish(end, reply)) = c else { return };
                while let Ok(b) = bufs.try_recv() { process(&mut agg, b); }
                drain_host(&mut agg);
                agg.drops.cupti_records += s.cupti_dropped.load(Ordering::Relaxed);
                agg.drops.buffer_requests_refused += s.pool.refused();
                agg.drops.host_events += s.host_dropped.load(Ordering::Relaxed);
                let report = agg.finish(s.start_ns, end);
                let _ = reply.send(report);
                return;
            },
            default(HOST_POLL) => {},
        }
    }
}

/// `GPUSCOPE_DEBUG=1`: each step of start, stop and metrics setup on
/// stderr, with milliseconds since the first step, to tell where a hang or
/// failure inside CUPTI happens and what the program waits for.
pub(crate) fn debug(step: &str) {
    static ON: std::sync::OnceLock<Option<std::time::Instant>> = std::sync::OnceLock::new();
    let on = ON.get_or_init(|| std::env::var("GPUSCOPE_DEBUG").is_ok_and(|v| v == "1").then(std::time::Instant::now));
    if let Some(t0) = on {
        eprintln!("gpuscope[debug] {:>9.3} ms: {step}", t0.elapsed().as_secs_f64() * 1e3);
    }
}

fn stop_active() -> Result<Report> {
    stop_active_at(false)
}

fn stop_active_at(at_exit: bool) -> Result<Report> {
    let Some(s) = active() else {
        return Err(Error::new(ErrorKind::SessionActive, "no gpuscope session is running"));
    };
    let decoder = DECODER.lock().unwrap_or_else(|e| e.into_inner()).take();
    let report = finish(&s, decoder, at_exit)?;
    if let Some((path, format)) = &s.options.output {
        report.write(path, *format)?;
    }
    Ok(report)
}

/// Detaches from CUPTI, drains the decoder and builds the report.
fn finish(s: &Arc<Shared>, decoder: Option<std::thread::JoinHandle<()>>, at_exit: bool) -> Result<Report> {
    if s.stopped.swap(true, Ordering::AcqRel) {
        return Err(Error::new(ErrorKind::SessionActive, "the session is already stopping"));
    }
    let c = s.cupti;
    debug("stop: callbacks off");
    if let Ok(f) = sym!(c, cuptiEnableDomain) {
        // SAFETY: plain arguments; the subscriber is ours and still valid.
        unsafe {
            f(0, s.subscriber, sys::CUPTI_CB_DOMAIN_DRIVER_API);
            f(0, s.subscriber, sys::CUPTI_CB_DOMAIN_RUNTIME_API);
        }
    }
    debug("stop: flush");
    if let Ok(f) = sym!(c, cuptiActivityFlushAll) {
        // SAFETY: a plain flag; the buffer callbacks it runs catch panics.
        unsafe { f(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) };
    }
    debug("stop: activity off");
    if let Ok(f) = sym!(c, cuptiActivityDisable) {
        for k in s.options.activity_kinds() {
            // SAFETY: a plain activity kind this session enabled.
            unsafe { f(k) };
        }
    }
    if let Ok(f) = sym!(c, cuptiActivityFlushAll) {
        // SAFETY: as the flush above.
        unsafe { f(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) };
    }
    if let Some(col) = &s.collector {
        // Launches measured since the last batch: decode them now, before
        // the decoder's final drain.
        debug("stop: metrics decode");
        for (correlation_id, values) in col.flush() {
            s.send(HostEvent::KernelMetrics { correlation_id, values });
        }
        debug("stop: metrics off");
        col.shutdown();
    }
    if let Ok(f) = sym!(c, cuptiUnsubscribe) {
        // SAFETY: our subscriber, unsubscribed once (`stopped` guards).
        unsafe { f(s.subscriber) };
    }
    // Detach CUPTI from the driver entirely: left attached it keeps costing
    // each launch after the session (seen: +1.5 us per tiny launch on H100).
    // Not at process exit: nothing runs after, and the driver may be
    // tearing down already.
    if !at_exit {
        debug("stop: finalize");
        if let Ok(f) = sym!(c, cuptiFinalize) {
            // SAFETY: no arguments; our subscriber is gone and every buffer
            // has been flushed.
            unsafe { f() };
        }
    }
    debug("stop: report");
    let end = cupti::timestamp(c);
    let (tx, rx) = bounded(1);
    let report = if s.ctl_tx.send(Control::Finish(end, tx)).is_ok() { rx.recv().ok() } else { None };
    if let Some(d) = decoder {
        let _ = d.join();
    }
    nvtx_rs::tool::set_handler(None);
    *ACTIVE.write().unwrap_or_else(|e| e.into_inner()) = None;
    let mut report = report.ok_or_else(|| Error::new(ErrorKind::Io, "the decoder thread ended without a report"))?;
    report.metrics = s.collector.as_ref().map(|c| c.status());
    Ok(report)
}

fn register_atexit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        extern "C" fn at_exit() {
            let _ = std::panic::catch_unwind(|| {
                let Some(s) = active() else { return };
                // A forked child inherits the parent's session but not its
                // CUPTI state or decoder thread: it writes nothing.
                if s.pid != std::process::id() {
                    return;
                }
                let output = s.options.output.clone();
                let quiet = s.options.quiet;
                match stop_active_at(true) {
                    Ok(r) if !quiet => {
                        if let Some((path, _)) = output {
                            let launches: u64 = r.kernels.iter().map(|k| k.stats.launches).sum();
                            eprintln!(
                                "gpuscope: {launches} kernel launches ({} distinct, {} of GPU time); report written to {}",
                                r.kernels.len(),
                                crate::report::fmt_ns(r.total_kernel_ns()),
                                path.display()
                            );
                        }
                    }
                    Ok(_) => {}
                    Err(e) => eprintln!("gpuscope: at exit: {e}"),
                }
            });
        }
        // SAFETY: at_exit is a plain extern "C" fn that catches panics.
        unsafe { libc::atexit(at_exit) };
    });
}
