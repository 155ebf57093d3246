//! A profiling session: the [`Profiler`] builder and the [`Session`] guard.
//! It runs the pipeline: collection (CUPTI callbacks, on the program's
//! threads) feeds one decoder thread, which decodes completed buffers,
//! attributes and aggregates them with the host events, and builds the
//! report when the session stops.

use crate::aggregate::devices::DeviceTable;
use crate::aggregate::{AggregateOptions, Aggregator};
use crate::collect::debug::debug;
use crate::collect::metrics::{MetricSet, Selection};
use crate::collect::{self, panic_guard, CollectOptions, Collection, Ending, Outputs};
use crate::control::Demand;
use crate::decode::CuptiCursor;
use crate::error::{Error, ErrorKind, Result};
use crate::model::drops::Drops;
use crate::render::{fmt_ns, Format};
use crate::report::Report;
use crate::serve::{MetricsServer, Render};
use crossbeam_channel::{bounded, select, unbounded, Receiver, RecvTimeoutError, Sender};
use cupti_sys as sys;
use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
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
    device_memory: bool,
    sync_records: bool,
    attribution: bool,
    inherit_ranges: bool,
    calibrate: bool,
    metrics: Option<MetricSet>,
    selection: Selection,
    sampling: Option<u64>,
    trace_windows: Option<(u64, u64)>,
    prometheus: Option<String>,
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler {
            buffer_size: 4 << 20,
            max_buffers: 64,
            host_queue: 1 << 18,
            trace_cap: 0,
            max_live_ranges: 100_000,
            output: None,
            quiet: false,
            memory_records: true,
            device_memory: true,
            sync_records: true,
            attribution: true,
            inherit_ranges: true,
            calibrate: true,
            metrics: None,
            selection: Selection::default(),
            sampling: None,
            trace_windows: None,
            prometheus: None,
        }
    }
}

impl Profiler {
    /// Defaults: trace mode, up to 64 buffers of 4 MiB, no per-kernel trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes per activity buffer (64 KiB to 256 MiB; default 4 MiB).
    pub fn buffer_size(mut self, bytes: usize) -> Self {
        self.buffer_size = bytes;
        self
    }

    /// Buffers alive at once (1 to 1024; default 64, allocated as needed).
    /// When all are full and not yet decoded, CUPTI drops records and the
    /// report counts them. 64 threads launching 570 k tiny kernels a second
    /// on an H100 needed 64 (16 dropped a third of the records).
    pub fn max_buffers(mut self, n: usize) -> Self {
        self.max_buffers = n;
        self
    }

    /// How many NVTX and launch events a thread may have waiting for the
    /// decoder (default 262144); more are dropped and counted.
    pub fn host_queue(mut self, n: usize) -> Self {
        self.host_queue = n;
        self
    }

    /// Keep per-kernel, per-range and per-copy records, at most `max` of
    /// each (for the Chrome trace and [`crate::report::Trace`]; default 0:
    /// none).
    pub fn keep_trace(mut self, max: usize) -> Self {
        self.trace_cap = max;
        self
    }

    /// Range instances held at once (default 100000). A closed instance is
    /// folded into its range's totals, and freed, once its kernels, idle
    /// time and samples are in; the cap matters only when they are held
    /// back (a kernel record that never comes holds the timeline): then the
    /// oldest closed instances are summarised early and counted in the
    /// report's drops.
    pub fn max_live_ranges(mut self, n: usize) -> Self {
        self.max_live_ranges = n;
        self
    }

    /// Serve the running session's figures so far at `http://ADDR/metrics`
    /// (`host:port`, or `:port` for every interface; `{rank}` is replaced by
    /// the process's rank, `{pid}` by its id; OpenMetrics, labelled with
    /// the rank and GPUs) for Prometheus to scrape. Each scrape is a
    /// [`Session::snapshot`]. If the address cannot be bound, the session
    /// says so once and profiles on without it.
    pub fn prometheus(mut self, addr: impl Into<String>) -> Self {
        self.prometheus = Some(addr.into());
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
    /// Each measured launch is replayed once per pass and serialised. With
    /// [`Profiler::sampling`] and [`Profiler::trace_windows`] (always-on),
    /// `set` is what a metrics pass asked of the live process measures
    /// (`gpuscope trigger PID --metrics 2s`; default: [`MetricSet::default`]).
    pub fn metrics(mut self, set: MetricSet) -> Self {
        self.metrics = Some(set);
        self
    }

    /// Sampling mode: hardware counters sampled device-wide every
    /// `interval` (CUPTI PM sampling, 1 us to 100 ms) while kernels are
    /// traced, joined to kernels and NVTX ranges by time. SM efficiency,
    /// occupancy, tensor activity and DRAM bandwidth at about trace-mode
    /// cost, at the interval's resolution: kernels spanning fewer than
    /// [`MIN_KERNEL_SAMPLES`](crate::sampling::MIN_KERNEL_SAMPLES)
    /// samples get range-level figures only. Not with [`Profiler::metrics`].
    /// After a sampling-mode session, no other session can start in the
    /// process (CUPTI 13.0 puts later kernel records on another clock).
    pub fn sampling(mut self, interval: Duration) -> Self {
        self.sampling = Some(interval.as_nanos().min(u64::MAX as u128) as u64);
        self
    }

    /// Sampling mode, always-on setting: kernel records only for the first
    /// `window` of every `period` (PM sampling and NVTX ranges all the
    /// time; launch callbacks stay subscribed, and between windows only
    /// count each launch for the ranges open at it). Kernel tables, GPU
    /// busy and idle time come from the traced windows; range instances
    /// that touch an untraced stretch are counted apart, with sampled
    /// figures over their wall windows and their launch counts. The
    /// report's `sampling.trace_windows` says how much was traced.
    /// `window`: 10 ms or more, less than `period` (at most an hour); or
    /// zero: no kernel or copy records at all, every range figure from PM
    /// samples over wall time.
    ///
    /// Cost: once kernel records have been on, CUPTI 13 keeps most of
    /// their per-launch cost after they are switched off (until CUPTI is
    /// detached at the session's stop), so windows do not cut tracing's
    /// cost on launch-bound programs (PyTorch loop on an H100: records
    /// on 1.08x, switched off again 1.08x). A window of zero never
    /// switches them on: the setting to leave on there (1.04x).
    ///
    /// The environment and C settings sample every
    /// [`ALWAYS_ON_INTERVAL_NS`](crate::sampling::ALWAYS_ON_INTERVAL_NS)
    /// with trace windows; here pass that to [`Profiler::sampling`].
    pub fn trace_windows(mut self, window: Duration, period: Duration) -> Self {
        let ns = |d: Duration| d.as_nanos().min(u64::MAX as u128) as u64;
        self.trace_windows = Some((ns(window), ns(period)));
        self
    }

    /// Which launches metrics mode measures (at least the first launch of
    /// each kernel that passes its filters: [`Selection::first`] of 1 or
    /// more, or [`Selection::all`]); in always-on mode, which launches a
    /// metrics pass asked of the live process measures, counted from the
    /// pass.
    pub fn select(mut self, selection: Selection) -> Self {
        self.selection = selection;
        self
    }

    /// Record memcpy and memset operations (default on).
    pub fn memory_records(mut self, on: bool) -> Self {
        self.memory_records = on;
        self
    }

    /// Record device memory allocations and releases (CUPTI's allocation
    /// records: every allocation in the process, any library's), for each
    /// device's live bytes and their peak (default on).
    pub fn device_memory(mut self, on: bool) -> Self {
        self.device_memory = on;
        self
    }

    /// Record host waits: stream, event and context synchronisation calls,
    /// timed from their API callbacks (default on).
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

    /// Kernels launched on a thread with no NVTX range of its own take the
    /// ranges open on the lead thread (default on): of the threads with
    /// ranges of their own open, the one whose outermost range is the
    /// oldest. So PyTorch's backward pass, launched by autograd's worker
    /// thread while the training loop waits in its `backward` range, lands
    /// there; ranges of NVIDIA libraries' domains (CCCL, cuBLAS, NCCL, ...)
    /// opened on such a thread nest under it. Off: strict per-thread NVTX
    /// semantics (such kernels fall under "(no range)").
    pub fn cross_thread_ranges(mut self, on: bool) -> Self {
        self.inherit_ranges = on;
        self
    }

    /// The activity kinds these options record.
    fn activity_kinds(&self) -> Vec<u32> {
        let mut k = vec![sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL];
        if self.memory_records {
            k.extend([sys::CUPTI_ACTIVITY_KIND_MEMCPY, sys::CUPTI_ACTIVITY_KIND_MEMSET]);
        }
        if self.device_memory {
            k.push(sys::CUPTI_ACTIVITY_KIND_MEMORY2);
        }
        k
    }

    /// No summary on stderr when the report is written at exit.
    pub fn quiet(mut self, quiet: bool) -> Self {
        self.quiet = quiet;
        self
    }

    /// Trace mode: measure what CUPTI's kernel records add to a launch call
    /// at the first launch, which waits for it (up to 2 s), so that
    /// gpuscope's own cost is taken out of idle time (default on). Off: the
    /// first launch does not wait, and only gpuscope's callback time is
    /// taken out (GPU busy reads lower on launch-bound programs).
    pub fn calibrate(mut self, on: bool) -> Self {
        self.calibrate = on;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |what: &str, v: usize, allowed: &str| {
            Err(Error::new(ErrorKind::InvalidConfig, format!("{what} = {v} is out of range; allowed: {allowed}")))
        };
        let capacity = [
            ("buffer_size", self.buffer_size),
            ("max_buffers", self.max_buffers),
            ("host_queue", self.host_queue),
            ("max_live_ranges", self.max_live_ranges),
        ];
        for (name, v) in capacity {
            if let Some(s) = crate::config::setting(name) {
                if let crate::config::Kind::Count { ok, .. } = s.kind {
                    if !ok(v) {
                        return bad(name, v, s.values);
                    }
                }
            }
        }
        // Each kernel's first launch is left out only by a count of 0 (short
        // of measuring every launch), which the other interfaces refuse too.
        if !self.selection.picks(0) {
            return bad("launch_count", 0, "1 or more, or all");
        }
        if let Some(addr) = &self.prometheus {
            if prometheus_addr(addr).is_none() {
                return Err(Error::new(
                    ErrorKind::InvalidConfig,
                    format!("prometheus = {addr:?} is not valid; allowed: {PROMETHEUS_ALLOWED}"),
                ));
            }
        }
        if let Some(ns) = self.sampling {
            if !crate::collect::sampling::INTERVALS_NS.contains(&ns) {
                return Err(Error::new(
                    ErrorKind::InvalidConfig,
                    format!("sampling interval = {ns} ns is out of range; allowed: 1 us to 100 ms"),
                ));
            }
            if self.metrics.is_some() && self.trace_windows.is_none() {
                return Err(Error::new(
                    ErrorKind::InvalidConfig,
                    "sampling and metrics mode cannot run together (both need the GPU's counters); pick one, or \
                     add trace windows: then the metrics are what a pass asked of the live process measures",
                ));
            }
        }
        if let Some((window, period)) = self.trace_windows {
            if self.sampling.is_none() {
                return Err(Error::new(
                    ErrorKind::InvalidConfig,
                    "trace windows need sampling mode (the untraced time is covered by PM samples)",
                ));
            }
            if !crate::collect::sampling::trace_windows_valid(window, period) {
                return Err(Error::new(
                    ErrorKind::InvalidConfig,
                    format!(
                        "trace windows = {} ms of every {} ms is not valid; allowed: a window of 0 (no kernel \
                         records) or of 10 ms or more, shorter than its period, a period of 10 to 3600000 ms",
                        window / 1_000_000,
                        period / 1_000_000
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Starts profiling this process. Fails (and changes nothing) when
    /// CUPTI cannot be loaded, another tool holds it, or a session is
    /// already running.
    pub fn start(self) -> Result<Session> {
        self.validate()?;
        if crate::collect::sampling::used() {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "a sampling-mode session ran in this process: after CUPTI's PM sampling, later sessions' kernel \
                 records are on another clock (CUPTI 13.0), so no other session can start here. Profile the rest \
                 in a new process",
            ));
        }
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        if running.is_some() {
            return Err(Error::new(ErrorKind::SessionActive, "a gpuscope session is already running in this process"));
        }
        let copts = CollectOptions {
            buffer_size: self.buffer_size,
            max_buffers: self.max_buffers,
            host_queue: self.host_queue,
            kinds: self.activity_kinds(),
            records: !matches!(self.trace_windows, Some((0, _))),
            attribution: self.attribution,
            host_waits: self.sync_records,
            metrics: self.metrics.clone().filter(|_| self.sampling.is_none()).map(|m| (m, self.selection.clone())),
            metrics_on_demand: (self.sampling.is_some() && self.trace_windows.is_some())
                .then(|| (self.metrics.clone().unwrap_or_default(), self.selection.clone())),
            sampling: self.sampling,
            exit_handler: Some(at_exit_after_cuda),
            // Kernel records cost every launch (trace mode, and sampling
            // mode with them on all the time): measured, to be taken out of
            // idle time. Metrics mode counts its own overhead; trace windows
            // switch records on and off. (It needs the launch callbacks to
            // find the first launch.)
            calibrate: self.calibrate && self.metrics.is_none() && self.trace_windows.is_none() && self.attribution,
        };
        collect::nvtx::set_inherit(self.inherit_ranges);
        let cuda_first = collect::cuda_in_use();
        let (collection, outputs) = collect::start(&copts)?;
        // After collection starts: CUPTI registers exit handlers of its own
        // as it attaches, and atexit runs the last registered first.
        register_atexit(cuda_first);
        // Before any record size is used or read: CUPTI 12's kernel records
        // are shorter.
        crate::decode::read_cupti_12_records(collect::cupti::is_cupti_12());
        let (trace_windows, trace_windows_off) = match self.trace_windows {
            // A window of 0 never switches records (CUPTI 12.9 hung in switches).
            Some((w, _)) if w > 0 && collect::cupti::is_cupti_12() => {
                let why = TRACE_WINDOWS_NEED_CUPTI_13.to_string();
                eprintln!("gpuscope: {why}");
                (None, Some(why))
            }
            w => (w, None),
        };
        let opts = AggregateOptions {
            trace_cap: self.trace_cap,
            max_live_ranges: self.max_live_ranges,
            metric_names: collection.collector.as_ref().map(|c| c.names().to_vec()).unwrap_or_default(),
            metrics_on_demand: collection.collector.as_ref().is_some_and(|c| c.is_on_demand()),
            start_ns: collection.start_ns,
            sampling: self.sampling.is_some(),
            trace_windows,
            trace_windows_off,
            max_pending_launches: pending_launches_bound(self.buffer_size, self.max_buffers),
            host_delay: self.sync_records
                && (self.metrics.is_none() || self.sampling.is_some())
                && (self.attribution || self.sampling.is_some()),
        };
        let (ctl_tx, ctl_rx) = unbounded();
        let decoder = {
            let c = collection.clone();
            std::thread::Builder::new()
                .name("gpuscope-decoder".into())
                // A panic left here ends the thread, never the program:
                // stop then says the report was lost to it.
                .spawn(move || {
                    panic_guard::catch(|| decode_loop(c, opts, outputs, ctl_rx));
                })
        };
        let decoder = match decoder {
            Ok(d) => d,
            Err(e) => {
                let _ = collect::stop(&collection, Ending::Stop);
                collect::clear();
                return Err(Error::new(ErrorKind::Io, format!("cannot start the decoder thread: {e}")));
            }
        };
        *running = Some(Running {
            collection,
            decoder,
            ctl_tx,
            output: self.output.clone(),
            quiet: self.quiet,
            inherit_ranges: self.inherit_ranges,
            // Only trace mode and sampling without windows calibrate:
            // another mode's reason stands.
            calibrate: self.calibrate || self.metrics.is_some() || self.trace_windows.is_some(),
            exporter: None,
            control: None,
            started: std::time::SystemTime::now(),
            paths_over_cap: crate::model::path::paths().over_cap(),
        });
        drop(running);
        if let Some(addr) = self.prometheus.as_deref().and_then(prometheus_addr) {
            let labels = process_labels();
            let render: Render = crate::serve::throttled(
                Box::new(move || {
                    snapshot().map(|r| r.to_openmetrics_labelled(&labels)).map_err(|e| e.message().to_string())
                }),
                crate::serve::MIN_REFRESH,
            );
            match MetricsServer::start(&addr, render) {
                Ok(server) => {
                    debug(&format!("prometheus: serving http://{}/metrics", server.addr()));
                    if let Some(r) = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                        r.exporter = Some(server);
                    }
                }
                Err(e) => eprintln!("gpuscope: {e}; profiling goes on without the Prometheus endpoint."),
            }
        }
        // Windows on demand switch kernel records, which CUPTI 12 is not
        // trusted to do (it hung a PyTorch process in such switches).
        if self.trace_windows.is_some() && !collect::cupti::is_cupti_12() {
            let path = crate::control::socket_path(std::process::id());
            match crate::control::ControlSocket::start(path, Box::new(ask)) {
                Ok(c) => {
                    if let Some(r) = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                        r.control = Some(c);
                    }
                }
                Err(e) => {
                    eprintln!("gpuscope: no trace windows on demand for this process ({e}); profiling goes on.")
                }
            }
        }
        debug("start: done");
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
    /// When only writing it failed, the error still holds the report
    /// ([`StopError::into_report`]).
    pub fn stop(self) -> std::result::Result<Report, StopError> {
        let r = stop_active();
        std::mem::forget(self);
        r
    }

    /// The report so far, the session running on: every record CUPTI holds
    /// (a forced flush), ranges with their closed instances (open ones, such
    /// as an outer `train` range, come when they close), no per-kernel
    /// trace.
    pub fn snapshot(&self) -> Result<Report> {
        snapshot()
    }

    /// Opens a trace window of `window` now (sampling mode with trace
    /// windows): kernel records for that long, in this session's report
    /// and the next scrapes. `Err` says why not: the session traces every
    /// kernel already, or a window asked for is still open (one at a time),
    /// or `window` is not 10 ms to 600 s. The same as `gpuscope trigger PID
    /// --trace SECONDS`.
    pub fn trace_window(&self, window: Duration) -> Result<String> {
        demand(Demand::Trace(window))
    }

    /// Takes a metrics pass of `window` now (sampling mode with trace
    /// windows): kernel records, and hardware metrics of the first launches
    /// of each kernel launched in it (SM efficiency, occupancy, DRAM,
    /// tensor and issue activity, as metrics mode measures them), in this
    /// session's report and the next scrapes. PM sampling pauses meanwhile
    /// (the two cannot share a GPU), and measured launches run one at a
    /// time. `Err` as for [`Session::trace_window`], or when the counters
    /// cannot be had. The same as `gpuscope trigger PID --metrics SECONDS`.
    pub fn metrics_pass(&self, window: Duration) -> Result<String> {
        demand(Demand::Metrics(window))
    }

    /// The address the Prometheus endpoint listens on, if one runs
    /// ([`Profiler::prometheus`]; the port the system chose for `:0`).
    pub fn prometheus_addr(&self) -> Option<std::net::SocketAddr> {
        let run = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        run.as_ref().and_then(|r| r.exporter.as_ref().map(|x| x.addr()))
    }

    /// The activity buffers' memory now and its bound.
    pub fn activity_buffers(&self) -> ActivityBuffers {
        let (bytes, bound_bytes) = collect::active().map_or((0, 0), |s| s.pool.bytes());
        ActivityBuffers { bytes: bytes as u64, bound_bytes: bound_bytes as u64 }
    }

    /// Asks CUPTI for the buffers completed so far (not partial ones).
    pub fn flush(&self) {
        if let Some(s) = collect::active() {
            s.flush(false);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Err(e) = stop_active() {
            eprintln!("gpuscope: {}", kept_elsewhere(&e));
        }
    }
}

/// Where no caller can take the report a failed write left (a dropped
/// session, the process's exit): a new file in the temporary folder gets
/// it, as JSON (every figure). What to tell the user.
fn kept_elsewhere(e: &StopError) -> String {
    let Some(r) = e.report() else { return e.error().to_string() };
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let path = std::env::temp_dir().join(format!("gpuscope-{}-{nanos}.json", std::process::id()));
    // A new file only: never through a link, never over another's file.
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, r.to_json().as_bytes()));
    match written {
        Ok(()) => format!("{}; the report is in {} instead", e.error(), path.display()),
        Err(w) => format!("{}; keeping it in {} failed too ({w}): the report is lost", e.error(), path.display()),
    }
}

/// Why [`Session::stop`] failed, with the session's report when it was
/// made and only writing it to [`Profiler::output`] failed: the report is
/// never lost to a full disk or a bad path.
#[derive(Debug)]
pub struct StopError {
    error: Error,
    report: Option<Box<Report>>,
}

impl StopError {
    /// What failed.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The report, when the session made one (writing it failed).
    pub fn report(&self) -> Option<&Report> {
        self.report.as_deref()
    }

    /// The report, when the session made one (writing it failed).
    pub fn into_report(self) -> Option<Report> {
        self.report.map(|r| *r)
    }
}

impl std::fmt::Display for StopError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.report {
            Some(_) => write!(f, "{} (the report is kept: StopError::into_report)", self.error),
            None => self.error.fmt(f),
        }
    }
}

impl std::error::Error for StopError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<Error> for StopError {
    fn from(error: Error) -> Self {
        StopError { error, report: None }
    }
}

impl From<StopError> for Error {
    fn from(e: StopError) -> Self {
        e.error
    }
}

/// Memory of the activity buffers ([`Session::activity_buffers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivityBuffers {
    /// Bytes allocated now: buffers held by CUPTI or waiting for the
    /// decoder.
    pub bytes: u64,
    /// At most `max_buffers` x `buffer_size`: when the decoder falls behind
    /// the buffers fill to this bound, and CUPTI drops (and the report
    /// counts) the records that find no buffer.
    pub bound_bytes: u64,
}

/// The running session's pipeline.
struct Running {
    collection: Arc<Collection>,
    decoder: std::thread::JoinHandle<()>,
    ctl_tx: Sender<Control>,
    output: Option<(PathBuf, Format)>,
    quiet: bool,
    inherit_ranges: bool,
    /// Trace mode's first-launch calibration was asked for (`false`:
    /// turned off, which the report says).
    calibrate: bool,
    exporter: Option<MetricsServer>,
    /// The local control socket of a session with trace windows.
    control: Option<crate::control::ControlSocket>,
    /// When it started, by the file system's clock: a report file written
    /// since is another process's.
    started: std::time::SystemTime,
    /// Ranges the process's path table had refused before it started.
    paths_over_cap: u64,
}

enum Control {
    Finish(u64, Sender<Report>),
    Snapshot(Sender<Report>),
    /// A trace window or a metrics pass, asked for while the session runs.
    Demand(Demand, Sender<std::result::Result<String, String>>),
}

static RUNNING: Mutex<Option<Running>> = Mutex::new(None);

/// Launches kept waiting for their kernel record: more than the records
/// the buffer pool can hold undecoded, so that a decoder running behind
/// (records are decoded a buffer at a time, launch events one by one) never
/// forgets launches whose kernels are still on their way. A quarter more
/// leaves room for launches whose records CUPTI dropped (forgotten once
/// stale). The attributor's deque holds up to a quarter more slots again
/// (kernels that came behind a launch still waiting): for the default pool
/// under 2^21 slots of 48 bytes, ~100 MB at most.
fn pending_launches_bound(buffer_size: usize, max_buffers: usize) -> usize {
    let record = crate::decode::record_size(cupti_sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).unwrap_or(256);
    let in_flight = buffer_size / record * max_buffers;
    (in_flight + in_flight / 4).max(1 << 20)
}

/// Why trace windows are off on CUPTI 12 (said once at start, and in the
/// report).
const TRACE_WINDOWS_NEED_CUPTI_13: &str = "trace windows are off with CUPTI 12: switching kernel records on and off \
     while PM sampling runs hung a PyTorch process there (2 of 5 runs on an H100, CUPTI 12.9; never on CUPTI 13), so \
     this sampling session traces every kernel. Fix: use CUPTI 13 (CUDA 13, or pip install nvidia-cuda-cupti)";

/// How often the decoder drains NVTX and launch events. At 5 ms, the
/// default queue (262144 events) overflows only above 50M events/s.
const HOST_POLL: Duration = Duration::from_millis(5);
/// How often the launching threads' CPU clocks are read.
const THREAD_CPU_EVERY: Duration = Duration::from_millis(20);

/// Sampling mode: how often completed activity records are fetched.
const SAMPLING_FLUSH: Duration = Duration::from_millis(200);

/// Trace windows: how often the threads' launch counts are collected (and
/// ended threads' forgotten). A count's launches are spread over its span,
/// from its first launch to its collection, so a span is kept within the
/// timeline's first bin width: collected once a second, a program's last
/// launches were spread over the idle second after them, and the steady
/// state of a program without ranges ran on to its exit.
const LAUNCH_COUNTS: Duration = Duration::from_millis(10);

/// Host events the decoder's drain vector keeps room for between bursts
/// (~3.5 MB).
const KEPT_HOST_EVENTS: usize = 1 << 16;

fn decode_loop(s: Arc<Collection>, opts: AggregateOptions, outputs: Outputs, ctl: Receiver<Control>) {
    let Outputs { buffers: bufs } = outputs;
    let mut last_flush = std::time::Instant::now();
    let mut last_counts = std::time::Instant::now();
    let windows = opts.trace_windows;
    let began = std::time::Instant::now();
    // A window asked for on demand: traced until then.
    let mut demand: Option<std::time::Instant> = None;
    // That window is a metrics pass.
    let mut metrics_pass = false;
    let mut agg = Aggregator::new(opts, DeviceTable::from_driver());
    let tally = HostTally::default();
    // The launching threads' CPU clocks, read every THREAD_CPU_EVERY: the
    // time between their CUDA calls, on a CPU or waiting.
    let mut clocks = collect::thread_cpu::ThreadClocks::default();
    let mut cpu_read_at: Option<(std::time::Instant, u64)> = None;
    let mut tids: Vec<u32> = Vec::new();
    let mut read_cpu = |agg: &mut Aggregator, force: bool| {
        if !force && cpu_read_at.is_some_and(|(at, _)| at.elapsed() < THREAD_CPU_EVERY) {
            return;
        }
        let now = collect::now(&s);
        if now == 0 {
            // No timestamp: nowhere to put the reading.
            return;
        }
        tids.clear();
        tids.extend(agg.launching_threads(now));
        let used = clocks.read(&tids);
        if let (Some((_, since)), Some(used)) = (cpu_read_at, used) {
            // At most the time between the readings: threads that overlap
            // (one per GPU) must not hide another interval's waiting.
            if now > since {
                agg.launching_cpu(since, now, used.min(now - since));
            }
        }
        cpu_read_at = Some((std::time::Instant::now(), now));
    };
    // Kept from one drain to the next (its memory reused), given back
    // after a burst.
    let taken = RefCell::new(Vec::new());
    let drain_host = |agg: &mut Aggregator| {
        let mut taken = taken.borrow_mut();
        let t0 = std::time::Instant::now();
        s.host_events(&mut taken);
        let t1 = std::time::Instant::now();
        let n = taken.len();
        let mut events = taken.drain(..).map(|(_, e)| e);
        apply_host_events(agg, &mut || events.next());
        drop(events);
        if n > 0 {
            tally.add(n, t1 - t0, t1.elapsed());
        }
        // Given back once a drain needs an eighth of it, keeping twice
        // that: drains that vary by less do not reallocate.
        if taken.capacity() > KEPT_HOST_EVENTS && n < taken.capacity() / 8 {
            taken.shrink_to((2 * n).max(KEPT_HOST_EVENTS));
        }
    };
    // Activity buffers decoded: how many, their bytes, the time it took.
    let buffers = Cell::new((0u64, 0u64, Duration::ZERO));
    // With GPUSCOPE_DEBUG=1: records walked by CUPTI alone, and the time.
    let walked = Cell::new((0u64, Duration::ZERO));
    let process = |agg: &mut Aggregator, (p, valid): (usize, usize)| {
        // Launch events precede their kernels' records: apply them first.
        drain_host(agg);
        let t0 = std::time::Instant::now();
        let mut cursor = CuptiCursor::new(s.cupti, p as *mut u8, valid);
        apply_buffer(agg, &mut cursor);
        let (n, bytes, took) = buffers.get();
        buffers.set((n + 1, bytes + valid as u64, took + t0.elapsed()));
        if collect::debug::on() {
            // CUPTI's walk over the records alone, after they were decoded,
            // to tell its cost from gpuscope's (debugging only).
            let t0 = std::time::Instant::now();
            let mut cursor = CuptiCursor::new(s.cupti, p as *mut u8, valid);
            let mut records = 0u64;
            while let Ok(Some(_)) = crate::decode::RecordCursor::next_record(&mut cursor) {
                records += 1;
            }
            let (n, took) = walked.get();
            walked.set((n + records, took + t0.elapsed()));
        }
        // SAFETY: CUPTI got this buffer from our pool and has completed it.
        unsafe { s.pool.give_back(p as *mut u8) };
    };
    // Every completed buffer and host event queued so far.
    let catch_up = |agg: &mut Aggregator| {
        while let Ok(b) = bufs.try_recv() {
            process(agg, b);
        }
        drain_host(agg);
    };
    loop {
        // The host queue is polled, never waited on: a receiver blocked on
        // it would make every launch callback pay a futex wake-up (measured:
        // +1.6 us per launch). Buffers and control messages are rare and do
        // wake the thread.
        drain_host(&mut agg);
        read_cpu(&mut agg, false);
        if let Some((window, period)) = windows {
            let now = std::time::Instant::now();
            demand = demand.filter(|until| now < *until);
            if metrics_pass && demand.is_none() {
                metrics_pass = false;
                // Launches queued before their values: the values join them.
                drain_host(&mut agg);
                end_metrics_pass(&s, &mut agg);
            }
            let on = tracing_wanted(now.duration_since(began), (window, period), demand.is_some());
            if let Some(ts) = collect::set_tracing(&s, on) {
                agg.tracing(on, ts);
                if !on {
                    // The window's last records, for the join and idle
                    // timeline that wait for them.
                    s.flush(false);
                }
            }
            if last_counts.elapsed() >= LAUNCH_COUNTS {
                s.collect_launch_counts();
                last_counts = std::time::Instant::now();
            }
        }
        if let Some(sampler) = &s.sampler {
            agg.samples(&sampler.decode());
            // Kernel records decide the timeline that samples wait for: a
            // program launching few kernels would fill no buffer for
            // minutes, so completed records are fetched every so often.
            if last_flush.elapsed() >= SAMPLING_FLUSH {
                s.flush(false);
                last_flush = std::time::Instant::now();
            }
        }
        select! {
            recv(bufs) -> b => if let Ok(b) = b { process(&mut agg, b) },
            recv(ctl) -> c => {
                let (end, reply) = match c {
                    Ok(Control::Finish(end, reply)) => (end, reply),
                    Ok(Control::Demand(asked, reply)) => {
                        let now = std::time::Instant::now();
                        let switchable = windows.is_some() && !collect::cupti::is_cupti_12();
                        let window = asked.window();
                        let mut answer =
                            accept_window(switchable, demand.filter(|u| now < *u).map(|u| u - now), window);
                        if let (Ok(_), Demand::Metrics(_)) = (&answer, asked) {
                            answer = start_metrics_pass(&s, window);
                        }
                        if answer.is_ok() {
                            demand = Some(now + window);
                            metrics_pass = matches!(asked, Demand::Metrics(_));
                            agg.window_on_demand();
                        }
                        let _ = reply.send(answer);
                        continue;
                    }
                    Ok(Control::Snapshot(reply)) => {
                        s.flush(true);
                        s.collect_launch_counts();
                        catch_up(&mut agg);
                        read_cpu(&mut agg, true);
                        let now = collect::now(&s);
                        if let Some(sampler) = &s.sampler {
                            agg.sampling_status(sampler.status());
                        }
                        let snap = panic_guard::catch(|| {
                            let mut snap = agg.snapshot(now);
                            add_lost(&mut snap.drops, s.lost());
                            Report::build(snap, s.start_ns, now)
                        });
                        // No reply: the asker says the snapshot failed.
                        if let Some(snap) = snap {
                            let _ = reply.send(snap);
                        }
                        continue;
                    }
                    Err(_) => return,
                };
                // Launch callbacks are off by now: every count is final.
                s.collect_launch_counts();
                let before = tally.clone();
                catch_up(&mut agg);
                read_cpu(&mut agg, true);
                // Not held while the report is built.
                drop(taken.take());
                debug(&format!("stop: decoder caught up: {}", tally.since(&before)));
                debug(&format!("stop: the session's host events: {}", tally.since(&HostTally::default())));
                if collect::debug::on() {
                    let (n, bytes, took) = buffers.get();
                    let cpu = collect::thread_cpu::own_cpu_ns().map_or("unknown".into(), |ns| {
                        let wall = began.elapsed().as_secs_f64();
                        format!("{:.2} s in {wall:.2} s ({:.0}%)", ns as f64 / 1e9, 100.0 * ns as f64 / 1e9 / wall.max(1e-9))
                    });
                    let (records, walk) = walked.get();
                    debug(&format!(
                        "stop: the decoder thread's CPU time {cpu}, the walk below included; {n} activity buffers \
                         ({:.1} MB) decoded in {:.1} ms; CUPTI's walk alone over their {records} records {:.1} ms",
                        bytes as f64 / 1e6,
                        took.as_secs_f64() * 1e3,
                        walk.as_secs_f64() * 1e3
                    ));
                }
                if let Some(sampler) = &s.sampler {
                    agg.samples(&sampler.decode());
                    agg.sampling_status(sampler.status());
                }
                add_lost(&mut agg.drops, s.lost());
                if let Some(report) = panic_guard::catch(|| Report::build(agg.finish(end), s.start_ns, end)) {
                    let _ = reply.send(report);
                }
                return;
            },
            default(HOST_POLL) => {},
        }
    }
}

/// Host events the decoder took from the threads' queues and folded, and
/// the time each took (for `GPUSCOPE_DEBUG=1`'s account of stop).
#[derive(Default, Clone)]
struct HostTally {
    events: Cell<u64>,
    drained: Cell<Duration>,
    folded: Cell<Duration>,
}

impl HostTally {
    fn add(&self, events: usize, drained: Duration, folded: Duration) {
        self.events.set(self.events.get() + events as u64);
        self.drained.set(self.drained.get() + drained);
        self.folded.set(self.folded.get() + folded);
    }

    /// What was added since `then`, in words.
    fn since(&self, then: &HostTally) -> String {
        let n = self.events.get() - then.events.get();
        let (d, f) = (self.drained.get() - then.drained.get(), self.folded.get() - then.folded.get());
        let rate = |t: Duration| if t.is_zero() { 0.0 } else { n as f64 / t.as_secs_f64() / 1e6 };
        format!(
            "{n} events, taken from the queues in {:.1} ms ({:.2} M/s), folded in {:.1} ms ({:.2} M/s)",
            d.as_secs_f64() * 1e3,
            rate(d),
            f.as_secs_f64() * 1e3,
            rate(f)
        )
    }
}

/// Whether kernel records are wanted `elapsed` into a session of trace
/// windows `(window, period)` (ns): in the first `window` of every
/// `period`, and while a window asked for is open (`demanded`).
fn tracing_wanted(elapsed: Duration, (window, period): (u64, u64), demanded: bool) -> bool {
    demanded || (elapsed.as_nanos() % period.max(1) as u128) < window as u128
}

/// The answer to a trace window of `window` asked for: taken, or why not
/// (`switchable`: the session has trace windows and a CUPTI that switches
/// records; `open`: what is left of the last window asked for).
fn accept_window(switchable: bool, open: Option<Duration>, window: Duration) -> std::result::Result<String, String> {
    if !switchable {
        return Err("this session takes no trace windows on demand: it traces every kernel already (no \
                    --trace-windows, or CUPTI 12, where switching records hung a PyTorch process)"
            .into());
    }
    if let Some(left) = open {
        return Err(format!("a trace window asked for is open for {:.1} s more: one at a time", left.as_secs_f64()));
    }
    Ok(format!(
        "kernel records on for {:.2} s: in the report at exit and in the next scrapes (CUPTI keeps part of the \
         records' per-launch cost until the session ends)",
        window.as_secs_f64()
    ))
}

/// Starts a metrics pass of `window` in an always-on session: PM sampling
/// gives the counters up, and the first launches of each kernel are
/// measured from now. What was done, or why not.
fn start_metrics_pass(s: &Collection, window: Duration) -> std::result::Result<String, String> {
    let Some(c) = s.collector.as_ref().filter(|c| c.is_on_demand()) else {
        return Err("this session takes no metrics passes on demand (an always-on session does: --mode sampling \
                    --trace-windows ...)"
            .into());
    };
    if let Some(sampler) = &s.sampler {
        sampler.pause();
    }
    if let Err(why) = c.arm() {
        if let Some(sampler) = &s.sampler {
            sampler.resume();
        }
        return Err(why);
    }
    Ok(format!(
        "hardware metrics of the first {} launches of each kernel for {:.2} s, with kernel records (PM sampling \
         paused meanwhile; measured launches are serialised): in the report at exit and in the next scrapes",
        crate::collect::metrics::Selection::default().first_launches(),
        window.as_secs_f64()
    ))
}

/// Ends the metrics pass: the values measured join their launches, and PM
/// sampling takes the counters back.
fn end_metrics_pass(s: &Collection, agg: &mut Aggregator) {
    if let Some(c) = s.collector.as_ref() {
        for (correlation_id, values) in c.disarm() {
            agg.host_event(crate::model::event::HostEvent::KernelMetrics { correlation_id, values });
        }
    }
    if let Some(sampler) = &s.sampler {
        sampler.resume();
    }
}

/// The NVTX and launch events `next` gives, into the aggregate. A panic (a
/// bug) loses the event it happened on, counted in the report's drops, not
/// the session: the boundary is set up once per batch, and after a panic
/// the rest of the batch goes on.
fn apply_host_events(agg: &mut Aggregator, next: &mut dyn FnMut() -> Option<crate::model::event::HostEvent>) {
    let mut done = false;
    while !done {
        done = panic_guard::catch(|| {
            while let Some(e) = next() {
                panic_guard::fault("decoder-event");
                agg.host_event(e);
            }
        })
        .is_some();
    }
}

/// One activity buffer's records into the aggregate; a panic loses the
/// rest of that buffer's records (counted), not the session.
fn apply_buffer(agg: &mut Aggregator, cursor: &mut dyn crate::decode::RecordCursor) {
    panic_guard::catch(|| {
        panic_guard::fault("decoder-buffer");
        agg.buffer(cursor)
    });
}

/// What collection lost, added to the report's drops.
fn add_lost(drops: &mut Drops, lost: collect::Lost) {
    drops.cupti_records += lost.cupti_records;
    drops.buffer_requests_refused += lost.buffer_requests_refused;
    drops.host_events += lost.host_events;
    drops.callback_panics += lost.callback_panics;
}

/// [`ask`] for the public API: the length checked, errors typed.
fn demand(d: Demand) -> Result<String> {
    if !crate::control::DEMAND_WINDOWS.contains(&d.window()) {
        return Err(Error::new(
            ErrorKind::InvalidConfig,
            format!("a window of {:?} on demand: allowed are 10 ms to 600 s", d.window()),
        ));
    }
    ask(d).map_err(|e| Error::new(ErrorKind::Unsupported, e))
}

/// How long a snapshot may take before the asker gives up.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(10);

/// Asks the running session for a trace window or a metrics pass
/// (sampling mode with trace windows): what was done, or why not.
fn ask(demand: Demand) -> std::result::Result<String, String> {
    let ctl = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|r| r.ctl_tx.clone());
    let ctl = ctl.ok_or("no gpuscope session is running")?;
    let (tx, rx) = bounded(1);
    ctl.send(Control::Demand(demand, tx)).map_err(|_| "the session is ending")?;
    rx.recv_timeout(SNAPSHOT_WAIT).map_err(|_| "the session did not answer".to_string())?
}

/// The running session's report so far (see [`Session::snapshot`]).
fn snapshot() -> Result<Report> {
    let run = RUNNING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|r| (r.ctl_tx.clone(), r.paths_over_cap, r.calibrate));
    let no_session = || Error::new(ErrorKind::NotRunning, "no gpuscope session is running");
    let (ctl, paths_over_cap, calibrate) = run.ok_or_else(no_session)?;
    let (tx, rx) = bounded(1);
    ctl.send(Control::Snapshot(tx)).map_err(|_| no_session())?;
    let mut report = rx.recv_timeout(SNAPSHOT_WAIT).map_err(|e| match e {
        RecvTimeoutError::Timeout => Error::new(
            ErrorKind::Io,
            format!("gpuscope's decoder thread gave no snapshot within {} s", SNAPSHOT_WAIT.as_secs()),
        ),
        RecvTimeoutError::Disconnected => no_session(),
    })?;
    if let Some(s) = collect::active() {
        add_host_side(&mut report, &s);
    }
    say_calibrate_off(&mut report.profiler_cost, calibrate);
    add_paths_over_cap(&mut report, paths_over_cap);
    Ok(report)
}

/// What the report takes from the program's side rather than the decoder:
/// metrics mode's status and the declared FLOPs and work.
fn add_host_side(report: &mut Report, s: &Collection) {
    // A collector on demand that took no pass measured nothing.
    report.metrics = s.collector.as_ref().map(|c| c.status()).filter(|m| m.passes_on_demand > 0 || !is_on_demand(s));
    report.declared = collect::declare::all();
    report.frameworks = collect::libraries::frameworks_loaded();
    report.host = collect::host::host_name();
}

fn is_on_demand(s: &Collection) -> bool {
    s.collector.as_ref().is_some_and(|c| c.is_on_demand())
}

/// The variables launchers set to a process's rank, in the order they are
/// read: the global ranks of torchrun and `torch.distributed` (`RANK`),
/// Open MPI, MPICH and Intel MPI (`PMI_RANK`), Slurm's `srun`, MVAPICH;
/// last `LOCAL_RANK`, which is unique only within one node.
pub const RANK_VARIABLES: [&str; 6] =
    ["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "MV2_COMM_WORLD_RANK", "LOCAL_RANK"];

/// This process's rank: the first of [`RANK_VARIABLES`] set to a
/// non-negative integer (`None`: not launched as one of several ranks).
pub fn rank(get: &dyn Fn(&str) -> Option<String>) -> Option<u32> {
    RANK_VARIABLES.iter().find_map(|v| get(v)?.trim().parse().ok())
}

/// `{pid}` and `{rank}` ([`rank`]; 0 when none is set) substituted in
/// `template`.
pub fn expand_output(template: &str, pid: u32, get: &dyn Fn(&str) -> Option<String>) -> String {
    let rank = rank(get).unwrap_or(0);
    template.replace("{pid}", &pid.to_string()).replace("{rank}", &rank.to_string())
}

/// What [`Profiler::prometheus`] takes, for messages.
pub(crate) const PROMETHEUS_ALLOWED: &str = "HOST:PORT or :PORT, e.g. 0.0.0.0:9400 or :9400 ({rank} is replaced)";

/// `HOST:PORT` or `:PORT` (every interface), with `{pid}` and `{rank}` of
/// this process filled in, as an address to bind; `None` if the port is no
/// port.
pub(crate) fn prometheus_addr(v: &str) -> Option<String> {
    listen_addr(&expand_output(v, std::process::id(), &|k| std::env::var(k).ok()))
}

/// `HOST:PORT` or `:PORT` (every interface) as an address to bind, if the
/// port is a port.
pub(crate) fn listen_addr(v: &str) -> Option<String> {
    let (host, port) = v.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    Some(format!("{host}:{port}"))
}

/// Why a session with `calibrate` off has no calibration.
const CALIBRATE_OFF: &str = "turned off (calibrate=off): CUPTI's record cost is not measured, and only gpuscope's \
                             callback time is taken out of idle time";

/// A report of a session with `calibrate` off says why it has no
/// calibration.
fn say_calibrate_off(cost: &mut gpuscope_report::report::ProfilerCost, calibrate: bool) {
    if !calibrate && cost.calibration.is_none() {
        cost.not_calibrated = Some(CALIBRATE_OFF.into());
    }
}

/// The ranges the path table refused while the session ran.
fn add_paths_over_cap(report: &mut Report, before: u64) {
    report.drops.ranges_over_path_cap = crate::model::path::paths().over_cap().saturating_sub(before);
}

/// Labels for every exported series: the process's rank where a launcher
/// set one (torchrun, MPI, Slurm) and its host.
fn process_labels() -> Vec<(String, String)> {
    let mut labels = fleet_labels(&|v| std::env::var(v).ok(), &|p| std::fs::read_to_string(p).ok());
    if let Some(rank) = rank(&|v| std::env::var(v).ok()) {
        labels.push(("rank".to_string(), rank.to_string()));
    }
    let mut host = [0u8; 256];
    // SAFETY: gethostname writes at most the buffer's length.
    if unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len()) } == 0 {
        let end = host.iter().position(|&b| b == 0).unwrap_or(host.len());
        labels.push(("host".to_string(), String::from_utf8_lossy(&host[..end]).into_owned()));
    }
    labels
}

/// Where Kubernetes puts a pod's namespace (its service account's).
const K8S_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Labels that join the process's series to a fleet's others: `hpc_job`
/// (Slurm's job id, else torchelastic's run id; dcgm-exporter's name for
/// its HPC job mapping, and not `job`, which Prometheus sets to the scrape
/// job), and on Kubernetes `pod` and `namespace` (as dcgm-exporter labels
/// them): from `POD_NAME` and
/// `POD_NAMESPACE` (the downward API's usual names), else the pod's host
/// name and its service account's namespace file. `get` reads a variable,
/// `read` a file.
pub(crate) fn fleet_labels(
    get: &dyn Fn(&str) -> Option<String>,
    read: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let set = |v: &str| get(v).map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    let mut labels = Vec::new();
    // torchrun's run id is "none" unless --rdzv-id is given: no job's.
    let run_id = set("TORCHELASTIC_RUN_ID").filter(|id| id != "none");
    if let Some(job) = set("SLURM_JOB_ID").or(run_id) {
        labels.push(("hpc_job".to_string(), job));
    }
    let on_k8s = set("KUBERNETES_SERVICE_HOST").is_some();
    if let Some(pod) = set("POD_NAME").or_else(|| set("HOSTNAME").filter(|_| on_k8s)) {
        labels.push(("pod".to_string(), pod));
    }
    let file = || read(K8S_NAMESPACE_FILE).map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    if let Some(ns) = set("POD_NAMESPACE").or_else(|| file().filter(|_| on_k8s)) {
        labels.push(("namespace".to_string(), ns));
    }
    labels
}

fn stop_active() -> std::result::Result<Report, StopError> {
    stop_active_at(Ending::Stop).map(|(r, _)| r)
}

/// What became of the report at exit.
enum Written {
    /// Not asked for.
    No,
    /// Written there.
    To(PathBuf),
    /// Not written: the process launched no kernel.
    Empty,
}

fn stop_active_at(ending: Ending) -> std::result::Result<(Report, Written), StopError> {
    let at_exit = ending != Ending::Stop;
    let Some(run) = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return Err(Error::new(ErrorKind::NotRunning, "no gpuscope session is running").into());
    };
    // The endpoints first: their answers ask the decoder, which finish
    // ends.
    if let Some(x) = run.exporter {
        x.stop();
    }
    if let Some(c) = run.control {
        c.stop();
    }
    let mut report = finish(run.collection, run.decoder, run.ctl_tx, ending)?;
    report.cross_thread.inherit = run.inherit_ranges;
    say_calibrate_off(&mut report.profiler_cost, run.calibrate);
    add_paths_over_cap(&mut report, run.paths_over_cap);
    let mut written = Written::No;
    if let Some((path, format)) = &run.output {
        if at_exit && report.launched_nothing() {
            // A process that never launched (a data-loader worker, a
            // launcher) must not write an empty report over one that did.
            written = Written::Empty;
        } else {
            let path = if at_exit { unclaimed(path, run.started) } else { path.clone() };
            if let Err(error) = report.write(&path, *format) {
                return Err(StopError { error, report: Some(Box::new(report)) });
            }
            // The caller may edit the report (declare FLOPs): it analyses
            // afresh rather than from the analysis this write made.
            report.forget_analysis();
            written = Written::To(path);
        }
    }
    Ok((report, written))
}

/// `path`, or when another process wrote it since `since` (several
/// processes given one output name), the same name with this process's id
/// before the extension: no process's report overwrites another's.
fn unclaimed(path: &std::path::Path, since: std::time::SystemTime) -> PathBuf {
    let taken = std::fs::metadata(path).and_then(|m| m.modified()).is_ok_and(|t| t >= since);
    if !taken {
        return path.to_path_buf();
    }
    with_pid(path, std::process::id())
}

/// `dir/name.json` as `dir/name.PID.json`.
pub(crate) fn with_pid(path: &std::path::Path, pid: u32) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{pid}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{pid}"),
    };
    path.with_file_name(name)
}

/// Stops collection, drains the decoder and builds the report.
fn finish(
    s: Arc<Collection>,
    decoder: std::thread::JoinHandle<()>,
    ctl_tx: Sender<Control>,
    ending: Ending,
) -> Result<Report> {
    let stopped = collect::stop(&s, ending);
    debug("stop: report");
    let end = collect::now(&s);
    let (tx, rx) = bounded(1);
    let report = if ctl_tx.send(Control::Finish(end, tx)).is_ok() { rx.recv().ok() } else { None };
    debug("stop: report made");
    let _ = decoder.join();
    collect::clear();
    stopped?;
    let mut report = report.ok_or_else(|| {
        Error::new(
            ErrorKind::Io,
            "gpuscope's decoder thread ended without a report: it panicked (a bug in gpuscope; please report it \
             with GPUSCOPE_DEBUG=1's output). The program was not affected",
        )
    })?;
    add_host_side(&mut report, &s);
    Ok(report)
}

/// Ends the running session at process exit and writes its report;
/// `driver_whole`: CUDA's own exit handlers have not run yet.
fn end_at_exit(driver_whole: bool) {
    let _ = std::panic::catch_unwind(|| {
        let quiet = {
            let run = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
            let Some(r) = run.as_ref() else { return };
            // A forked child inherits the parent's session but not its
            // CUPTI state or decoder thread: it writes nothing.
            if r.collection.pid != std::process::id() {
                return;
            }
            r.quiet
        };
        match stop_active_at(Ending::Exit { driver_whole }) {
            Ok((r, Written::To(path))) if !quiet => {
                let seen = if r.kernels.is_empty() {
                    format!("{} kernel launches counted without kernel records", r.launches_seen())
                } else {
                    format!(
                        "{} kernel launches ({} distinct, {} of GPU time)",
                        r.launches_seen(),
                        r.kernels.len(),
                        fmt_ns(r.total_kernel_ns())
                    )
                };
                eprintln!("gpuscope: {seen}; report written to {}", path.display());
            }
            Ok((_, Written::Empty)) => {
                // Data-loader workers and launchers: `gpuscope run` reports
                // on the processes that used the GPU.
                debug(&format!("process {} launched no kernel: no report written", std::process::id()));
            }
            Ok(_) => {}
            Err(e) => eprintln!("gpuscope: at exit: {}", kept_elsewhere(&e)),
        }
    });
}

/// The exit handler registered at session start when the program had no
/// CUDA context yet (under `CUDA_INJECTION64_PATH` the session starts
/// inside CUDA's initialisation): CUDA registers its own exit handlers
/// after it, and they run first, so no CUPTI call beyond the flush is made
/// here.
extern "C" fn at_exit() {
    end_at_exit(false);
}

/// The exit handler registered once CUDA is initialised (at session start
/// when the program already had a context, and in sampling mode when a
/// device's sampling set-up begins): it runs before CUDA's own, so the
/// session's last PM samples are decoded.
extern "C" fn at_exit_after_cuda() {
    end_at_exit(true);
}

/// Registers the session's exit handler once per process and kind;
/// `cuda_first`: CUDA was initialised before the session started.
fn register_atexit(cuda_first: bool) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    static ONCE_AFTER_CUDA: std::sync::Once = std::sync::Once::new();
    if cuda_first {
        collect::at_exit_once(&ONCE_AFTER_CUDA, at_exit_after_cuda);
    } else {
        collect::at_exit_once(&ONCE, at_exit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibrate_off_reaches_the_profiler_from_every_interface_and_the_report_says_so() {
        let off = format!("{:?}", Profiler::new().calibrate(false));
        assert!(off.contains("calibrate: false"), "{off}");
        // C's settings string and Python's keyword.
        let by_name = crate::config::apply_all(Profiler::new(), "gpuscope_config.settings", "calibrate=off").unwrap();
        assert_eq!(format!("{by_name:?}"), off);
        // The environment (and gpuscope run's flag, which sets it).
        let get = |k: &str| (k == "GPUSCOPE_CALIBRATE").then(|| "off".to_string());
        let env = crate::config::EnvConfig::from_vars(&get, 1).unwrap().registry;
        assert!(format!("{env:?}").contains("calibrate: false"));
        let bad = |k: &str| (k == "GPUSCOPE_CALIBRATE").then(|| "later".to_string());
        let e = crate::config::EnvConfig::from_vars(&bad, 1).unwrap_err().to_string();
        assert_eq!(e, "GPUSCOPE_CALIBRATE=\"later\" is not valid; allowed: on, off");
        let mut c = gpuscope_report::report::ProfilerCost::default();
        c.not_calibrated = Some("no kernel was launched in the session".into());
        say_calibrate_off(&mut c, true);
        assert_eq!(c.not_calibrated.as_deref(), Some("no kernel was launched in the session"), "on: as it was");
        say_calibrate_off(&mut c, false);
        assert!(c.not_calibrated.as_deref().is_some_and(|w| w.contains("calibrate=off")));
    }

    #[test]
    fn a_window_on_demand_traces_for_its_length_one_at_a_time() {
        let ms = Duration::from_millis;
        // Windows of 0 every second: nothing traced unless asked for.
        assert!(!tracing_wanted(ms(1500), (0, 1_000_000_000), false));
        assert!(tracing_wanted(ms(1500), (0, 1_000_000_000), true));
        // Windows of 100 ms: the first 100 ms of each second.
        assert!(tracing_wanted(ms(2050), (100_000_000, 1_000_000_000), false));
        assert!(!tracing_wanted(ms(2150), (100_000_000, 1_000_000_000), false));
        let ok = accept_window(true, None, Duration::from_secs(5)).expect("taken");
        assert!(ok.contains("5.00 s"), "{ok}");
        let busy = accept_window(true, Some(ms(2500)), Duration::from_secs(5)).unwrap_err();
        assert!(busy.contains("2.5 s more") && busy.contains("one at a time"), "{busy}");
        let all = accept_window(false, None, Duration::from_secs(5)).unwrap_err();
        assert!(all.contains("no trace windows on demand"), "{all}");
    }

    #[test]
    fn fleet_labels_come_from_the_launcher_and_kubernetes() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |v: &str| pairs.iter().find(|(k, _)| *k == v).map(|(_, x)| x.to_string())
        };
        let ns = |p: &str| (p == K8S_NAMESPACE_FILE).then(|| "training\n".to_string());
        let none = |_: &str| None;
        let slurm = fleet_labels(&env(&[("SLURM_JOB_ID", "4242"), ("TORCHELASTIC_RUN_ID", "x")]), &ns);
        assert_eq!(slurm, [("hpc_job".to_string(), "4242".to_string())], "Slurm's id first; no pod off Kubernetes");
        let k8s = fleet_labels(
            &env(&[
                ("TORCHELASTIC_RUN_ID", "run-7"),
                ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
                ("HOSTNAME", "trainer-0"),
            ]),
            &ns,
        );
        let want = [("hpc_job", "run-7"), ("pod", "trainer-0"), ("namespace", "training")];
        assert_eq!(k8s, want.map(|(k, v)| (k.to_string(), v.to_string())));
        let downward = fleet_labels(&env(&[("POD_NAME", "p"), ("POD_NAMESPACE", "n"), ("SLURM_JOB_ID", " ")]), &none);
        assert_eq!(downward, [("pod", "p"), ("namespace", "n")].map(|(k, v)| (k.to_string(), v.to_string())));
        assert!(fleet_labels(&env(&[("HOSTNAME", "laptop")]), &ns).is_empty());
        assert!(fleet_labels(&env(&[("TORCHELASTIC_RUN_ID", "none")]), &ns).is_empty(), "torchrun's default id");
    }

    #[test]
    fn a_process_that_launched_no_kernel_is_told_from_one_that_did() {
        use crate::aggregate::devices::DeviceTable;
        use crate::model::event::HostEvent;
        use crate::model::path::{paths, ROOT};
        let fresh = || Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        let empty = Report::build(fresh().finish(1_000), 0, 1_000);
        assert!(empty.launched_nothing());
        let mut a = fresh();
        let path = paths().intern(ROOT, 0, "child-step");
        a.host_event(HostEvent::Push { instance: 1, parent: 0, path, tid: 1, ts: 0 });
        a.host_event(HostEvent::Pop { instance: 1, ts: 10 });
        let ranges_only = Report::build(a.finish(1_000), 0, 1_000);
        assert!(ranges_only.launched_nothing(), "ranges without launches are still nothing to report");
        let mut with_kernel = empty.clone();
        with_kernel.ranges.clear();
        let mut k: crate::report::KernelSummary = serde_json::from_str(
            r#"{"name":"k","display_name":"k","launches":1,"total_ns":10,"mean_ns":10,"min_ns":10,"max_ns":10,"theoretical_occupancy_pct":null,"occupancy_limiter":null}"#,
        )
        .unwrap();
        k.stats.launches = 1;
        with_kernel.kernels.push(k);
        assert!(!with_kernel.launched_nothing());
    }

    #[test]
    fn a_decoder_panic_loses_one_event_or_buffer_not_the_session() {
        use crate::aggregate::devices::DeviceTable;
        use crate::model::event::HostEvent;
        use crate::model::path::{paths, ROOT};
        let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        let path = paths().intern(ROOT, 0, "decoder-panic-step");
        let before = panic_guard::caught();
        panic_guard::inject(Some("decoder-event"));
        let mut one = vec![HostEvent::Push { instance: 1, parent: 0, path, tid: 1, ts: 0 }].into_iter();
        apply_host_events(&mut a, &mut || one.next());
        panic_guard::inject(Some("decoder-buffer"));
        apply_buffer(&mut a, &mut crate::decode::LayoutCursor::new(&[]));
        panic_guard::inject(None);
        assert_eq!(panic_guard::caught() - before, 2, "both panics caught and counted");
        // The decoder goes on: later events count.
        let mut later = vec![
            HostEvent::Push { instance: 2, parent: 0, path, tid: 1, ts: 10 },
            HostEvent::Pop { instance: 2, ts: 20 },
        ]
        .into_iter();
        apply_host_events(&mut a, &mut || later.next());
        let r = Report::build(a.finish(100), 0, 100);
        let g = r.ranges.iter().find(|g| g.path.to_string() == "decoder-panic-step").expect("the range");
        assert_eq!((g.count, g.wall_ns), (1, 10));
    }

    #[test]
    fn a_report_file_another_process_wrote_since_the_start_is_not_overwritten() {
        let dir = std::env::temp_dir().join(format!("gpuscope-unclaimed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.json");
        let before = std::time::SystemTime::now() - Duration::from_secs(5);
        assert_eq!(unclaimed(&path, before), path, "no file yet: the name as given");
        std::fs::write(&path, "{}").unwrap();
        let mine = with_pid(&path, std::process::id());
        assert_eq!(unclaimed(&path, before), mine, "written since: this process's own name");
        let later = std::time::SystemTime::now() + Duration::from_secs(5);
        assert_eq!(unclaimed(&path, later), path, "an older file (an earlier run) is replaced");
        assert_eq!(with_pid(std::path::Path::new("/x/r"), 7), std::path::Path::new("/x/r.7"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_selection_that_skips_first_launches_and_a_bad_endpoint_are_refused() {
        let refused = |p: Profiler| p.validate().unwrap_err().message().to_string();
        assert_eq!(
            refused(Profiler::new().select(Selection::default().first(0))),
            "launch_count = 0 is out of range; allowed: 1 or more, or all"
        );
        assert!(Profiler::new().select(Selection::default().first(0).every(1)).validate().is_ok(), "every launch");
        assert!(Profiler::new().select(Selection::all()).validate().is_ok());
        for bad in ["9400", "host:port", ""] {
            let m = refused(Profiler::new().prometheus(bad));
            assert!(m.starts_with(&format!("prometheus = {bad:?} is not valid; allowed: HOST:PORT")), "{m}");
        }
        assert!(Profiler::new().prometheus(":9400").validate().is_ok());
        let rank_4 = |v: &str| (v == "RANK").then(|| "4".to_string());
        assert_eq!(listen_addr(&expand_output(":9{rank}00", 1, &rank_4)).as_deref(), Some("0.0.0.0:9400"));
        let m = refused(Profiler::new().max_buffers(0));
        assert_eq!(m, "max_buffers = 0 is out of range; allowed: buffers, 1 to 1024");
    }

    #[test]
    fn launches_wait_for_more_records_than_the_pool_can_hold() {
        let record = crate::decode::record_size(cupti_sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).unwrap();
        let d = Profiler::default();
        let held = d.buffer_size / record * d.max_buffers;
        assert!(pending_launches_bound(d.buffer_size, d.max_buffers) > held);
        let (size, n) = (256 << 20, 1024);
        assert!(pending_launches_bound(size, n) > size / record * n);
        assert_eq!(pending_launches_bound(64 << 10, 1), 1 << 20);
    }
}
