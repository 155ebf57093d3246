//! Measuring selected launches, from inside CUPTI's launch callback.
//!
//! At API entry a selected launch starts its context's range profiler (or
//! finds it still running from the previous selected launch); an unselected
//! launch stops it first. At API exit the launch's correlation id joins the
//! context's launch log; every `batch()` launches (and when the context is
//! destroyed or the session stops) the profiler is stopped, the ranges are
//! decoded, checked against the log's length and evaluated, and the image
//! is re-armed. Any failure to set up or collect (no permission, counters
//! busy, unsupported GPU, unknown metric) switches metrics off for the
//! session once, with one message; tracing goes on.

use super::rangeprof::{self, ContextProfiler, HostObject};
use super::{MetricSet, Selection};
use crate::collect::debug::debug;
use crate::collect::driver::{self, with_current};
use crate::error::{Error, Result};
use crate::model::metrics::{MetricsStatus, PhaseTimes};
use crate::model::names::demangle;
use crate::model::path::{paths, PathId};
use cupti_sys::{self as sys, Cupti};
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Fault injection for tests on machines where counters are permitted:
/// `GPUSCOPE_FAULT=insufficient-privileges` makes enabling the range
/// profiler fail as CUPTI does for an unprivileged user.
fn simulated_no_permission() -> bool {
    std::env::var("GPUSCOPE_FAULT").is_ok_and(|v| v == "insufficient-privileges")
}

fn timed<T>(acc: &mut u64, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let r = f();
    *acc += t.elapsed().as_nanos() as u64;
    r
}

/// A context's profiler and the launches it has measured since its last
/// decode, in launch order: range `i` of the next decode is `log[i]`'s.
struct Armed {
    device: i32,
    profiler: ContextProfiler,
    log: Vec<Logged>,
    /// Started and not yet stopped, by this OS thread: consecutive
    /// selected launches share one start/stop (each costs milliseconds).
    running_on: Option<u32>,
    /// A measured launch is between its API entry and exit.
    in_flight: bool,
    /// Another thread stopped the profiler while a measured launch was in
    /// flight: which range is whose is unknown, so the batch's values are
    /// discarded.
    tainted: bool,
    /// Counts starts: a launch logs itself only into the session it was
    /// measured in.
    session: u64,
}

/// One measured launch of a context's log.
#[derive(Clone, Copy)]
struct Logged {
    correlation_id: u32,
    /// The thread blocks it launched, where its API's parameters say.
    ctas: Option<u64>,
    /// Selected: its values are reported. An unselected launch is measured
    /// only to keep the profiler running for a selected one that follows
    /// (cheaper than a stop and a start), and its values are dropped.
    selected: bool,
}

/// What the selection rules say of a launch.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pick {
    /// Measure it and report its values.
    Selected,
    /// Not asked for, but it may run under the profiler.
    Unselected,
    /// Must not run under the profiler: a graph launch (several kernels,
    /// one call), a launch into a capturing stream, or one whose stream
    /// cannot be read.
    Never,
}

/// How long the end of a pass waits for measured launches in flight.
const DISARM_WAIT: Duration = Duration::from_secs(2);

/// The metric that counts a range's thread blocks (CTAs): each decoded
/// range is matched to the launch whose grid has that many.
const CTAS: &str = "sm__ctas_launched.sum";

/// A device's metric configuration.
struct Host {
    object: HostObject,
    /// Where [`CTAS`] is among its metrics, when it is measured.
    ctas: Option<usize>,
}

impl Host {
    /// The configuration of `metrics` and [`CTAS`] for `chip`; without
    /// [`CTAS`] where it would cost a replay pass more.
    fn new(cupti: &'static Cupti, chip: &CStr, availability: &[u8], metrics: &[String]) -> Result<Self> {
        if let Some(i) = metrics.iter().position(|m| m == CTAS) {
            return Ok(Host { object: HostObject::new(cupti, chip, availability, metrics)?, ctas: Some(i) });
        }
        let with: Vec<String> = metrics.iter().cloned().chain([CTAS.to_string()]).collect();
        let object = HostObject::new(cupti, chip, availability, &with)?;
        if object.passes() > 1 {
            let without = HostObject::new(cupti, chip, availability, metrics)?;
            if without.passes() < object.passes() {
                return Ok(Host { object: without, ctas: None });
            }
        }
        Ok(Host { object, ctas: Some(metrics.len()) })
    }
}

/// Where each element of `needle` lies in `hay` in every order-keeping
/// match of all of `needle` to equal elements of `hay`: `None` for an
/// element whose place differs between matches, and for all when there is
/// no match. Two greedy passes (the leftmost and the rightmost match): an
/// element sits at one place in every match exactly when both put it there.
fn embed(needle: &[u64], hay: &[u64]) -> Vec<Option<usize>> {
    let none = || vec![None; needle.len()];
    let mut left = Vec::with_capacity(needle.len());
    let mut j = 0;
    for &x in needle {
        let Some(at) = hay[j.min(hay.len())..].iter().position(|&h| h == x) else { return none() };
        left.push(j + at);
        j += at + 1;
    }
    let mut right = vec![0; needle.len()];
    let mut end = hay.len();
    for (i, &x) in needle.iter().enumerate().rev() {
        let Some(at) = hay[..end].iter().rposition(|&h| h == x) else { return none() };
        right[i] = at;
        end = at;
    }
    left.iter().zip(&right).map(|(&l, &r)| (l == r).then_some(l)).collect()
}

/// The range of each logged launch, from the thread blocks each launch's
/// grid has (`grids`) and each decoded range counted (`ctas`), both in
/// launch order: where the counts place a launch the same way however
/// extra ranges (kernels the log does not know) or missing ones fall.
fn place(grids: &[u64], ctas: &[u64]) -> Vec<Option<usize>> {
    if ctas.len() >= grids.len() {
        return embed(grids, ctas);
    }
    let mut out = vec![None; grids.len()];
    for (range, at) in embed(ctas, grids).into_iter().enumerate() {
        if let Some(i) = at {
            out[i] = Some(range);
        }
    }
    out
}

/// Unselected launches measured in a row, before the profiler has timed a
/// start, a stop and a measured launch of its own.
const LINGER_DEFAULT: usize = 16;
/// The most unselected launches measured in a row.
const LINGER_MAX: usize = 64;

/// How many unselected launches in a row are measured rather than stopping
/// the profiler: as many as cost what a stop and a start cost, from the
/// session's mean restart (a start after the process's first, and a stop)
/// and mean measured launch, once both have been timed.
fn linger_limit(restart_ns: Option<u64>, launch_ns: Option<u64>) -> usize {
    match (restart_ns, launch_ns) {
        (Some(restart), Some(launch)) => ((restart / launch.max(1)) as usize).min(LINGER_MAX),
        _ => LINGER_DEFAULT,
    }
}

impl Armed {
    /// Unselected launches measured since the last selected one (a session
    /// starts with a selected launch, so at most the linger limit).
    fn lingered(&self) -> usize {
        self.log.iter().rev().take_while(|l| !l.selected).count()
    }

    fn stop(&mut self, times: &mut PhaseTimes) -> Result<()> {
        if self.running_on.take().is_some() {
            timed(&mut times.stop, || self.profiler.stop())?;
        }
        Ok(())
    }
}

/// Measured launches decoded at once by default: the room of each
/// context's counter data image. Starting the profiler costs more the more
/// room the image has (docs/contributing/cupti-findings.md). A context keeps the size it
/// was configured with: resizing its image between decodes made every later
/// batch mismatch.
const BATCH: usize = 64;

/// The most launches one decode may hold (`GPUSCOPE_METRICS_BATCH`).
pub(crate) const MAX_BATCH: usize = 1024;

/// Measured launches per decode, and the room of each context's image:
/// [`BATCH`], or `GPUSCOPE_METRICS_BATCH` (1 to [`MAX_BATCH`]). 1 stops the
/// profiler after every measured launch, so no two measured kernels share
/// a start/stop: each is measured alone, as Nsight Compute measures it.
fn batch() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| match std::env::var("GPUSCOPE_METRICS_BATCH") {
        Err(_) => BATCH,
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_BATCH).contains(&n) => n,
            _ => {
                eprintln!(
                    "gpuscope: GPUSCOPE_METRICS_BATCH={v:?} is not valid; allowed: 1 to {MAX_BATCH}. Using {BATCH}."
                );
                BATCH
            }
        },
    })
}

struct State {
    initialized: bool,
    /// The profiler has been started once in this process (the first
    /// start costs ~225 ms; later ones ~5 ms).
    warmed: bool,
    /// A stream capture has begun: no start/stop outside a launch since.
    captures_seen: bool,
    /// Time of the starts after the process's first, and their count.
    restart_ns: u64,
    restarts: u64,
    /// Measured launch calls that returned (their time is `time_ns.launch`).
    measured_calls: u64,
    /// The session is ending: set nothing up any more.
    shut: bool,
    hosts: HashMap<i32, Host>,
    contexts: HashMap<usize, Armed>,
    /// Per kernel symbol seen at launch: its name's index in `counts` and
    /// whether the name passes the filter. Decided once per kernel, not
    /// per launch.
    kernels: HashMap<usize, (usize, bool)>,
    /// Name index by demangled name: the same kernel in several modules
    /// or contexts counts once.
    name_ids: HashMap<String, usize>,
    /// Matching launches so far, per name index ("first N" counts these).
    counts: Vec<u64>,
    /// Whether a path passes the NVTX filter, per path.
    paths_pass: HashMap<PathId, bool>,
    /// Values decoded when a session was ended by an unmeasured launch,
    /// handed out with the next measured launch's (or at the end).
    ready: Vec<(u32, Option<Vec<f64>>)>,
    status: MetricsStatus,
}

/// Metrics collection for one session.
pub(crate) struct Collector {
    cupti: &'static Cupti,
    metrics: MetricSet,
    selection: Selection,
    /// Set once the host-side setup started at session start has finished
    /// (or given up).
    hosts_ready: (Mutex<bool>, Condvar),
    /// The session is stopping: the host-setup thread stops waiting.
    shutting: AtomicBool,
    /// Launches between API entry and exit that are not measured: while
    /// one is, no other thread starts measuring (its kernel would fall in
    /// the measured ranges).
    unmeasured: AtomicU32,
    /// Launches are measured: always in metrics mode; during a metrics pass
    /// asked for on demand otherwise.
    armed: AtomicBool,
    /// A collector for passes on demand ([`Collector::on_demand`]): nothing
    /// is set up before a pass, and every context's range profiler is
    /// released after it (PM sampling cannot run beside it).
    on_demand: bool,
    state: Mutex<State>,
}

/// Whether a launch runs under the range profiler.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Measured {
    /// No: it runs as in trace mode.
    Not,
    /// Yes, and its values are reported.
    Selected,
    /// Yes, to keep the profiler running for a selected launch that may
    /// follow; its values are dropped.
    Lingering,
}

/// A launch measured from its API entry to its exit.
#[derive(Clone, Copy)]
struct Pending {
    /// Its context.
    ctx: usize,
    /// The context's session it runs in.
    session: u64,
    /// Its values are reported.
    selected: bool,
    /// Its grid's thread blocks.
    ctas: Option<u64>,
}

/// What the launch callback knows of a launch at its API entry.
#[derive(Clone, Copy)]
pub(crate) struct LaunchSite {
    /// The context it launches into.
    pub(crate) ctx: sys::CUcontext,
    /// Its stream and its grid's thread blocks (CTAs), where gpuscope reads
    /// the launch API's parameters.
    pub(crate) target: Option<(sys::CUstream, u64)>,
    /// CUPTI's kernel symbol name (NUL-terminated, or NULL).
    pub(crate) symbol: *const c_char,
    /// The NVTX path open at the launch.
    pub(crate) path: PathId,
    /// A graph launch (never measured).
    pub(crate) graph: bool,
}

thread_local! {
    // The launch this thread started measuring at API entry.
    static PENDING: Cell<Option<Pending>> = const { Cell::new(None) };
    static STARTED_AT: Cell<Option<std::time::Instant>> = const { Cell::new(None) };
    // This thread is inside a launch call that is not measured.
    static UNMEASURED_HERE: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is leaving a launch that was not measured (metrics
/// mode); clears the mark.
pub(crate) fn take_unmeasured_here() -> bool {
    UNMEASURED_HERE.try_with(|u| u.replace(false)).unwrap_or(false)
}

/// Whether this thread started measuring a launch at API entry that its
/// API exit has yet to log. Most exits have nothing to do: they return on
/// this, before taking any lock.
pub(crate) fn measuring_here() -> bool {
    PENDING.try_with(|p| p.get().is_some()).unwrap_or(false)
}

/// A decoded batch joined to its launch log.
struct Joined {
    /// Per logged launch: its values, for a selected launch whose range is
    /// known.
    values: Vec<Option<Vec<f64>>>,
    /// Each range's thread blocks, when counted.
    ctas: Vec<u64>,
    /// Ranges were placed by thread blocks because their number differed
    /// from the log's.
    realigned: bool,
}

/// Joins `ranges` decoded ranges to the launches of `log`. One range per
/// launch, in launch order, when the counts agree; where each range's
/// thread-block count is measured, it must also equal its launch's grid,
/// and when the number of ranges differs (a kernel ran that the log does
/// not know, or one was lost) the counts place what they can ([`place`]).
/// Values of unselected launches are not reported.
fn join(host: &Host, profiler: &ContextProfiler, log: &[Logged], ranges: usize, reported: usize) -> Result<Joined> {
    // SAFETY (evaluations): the profiler's own image, decoded just now.
    let evaluate = |range: usize| unsafe { host.object.evaluate(profiler.image(), range) };
    let grids: Option<Vec<u64>> = log.iter().map(|l| l.ctas).collect();
    let (Some(k), Some(grids)) = (host.ctas, grids) else {
        // Nothing to check by: by position, or not at all.
        let values = if ranges == log.len() {
            log.iter().enumerate().map(|(i, l)| l.selected.then(|| evaluate(i)).transpose()).collect::<Result<_>>()?
        } else {
            vec![None; log.len()]
        };
        return Ok(Joined { values, ctas: Vec::new(), realigned: false });
    };
    let mut all = (0..ranges).map(evaluate).collect::<Result<Vec<_>>>()?;
    let ctas: Vec<u64> = all.iter().map(|v| v.get(k).map_or(u64::MAX, |c| c.round() as u64)).collect();
    let values = place(&grids, &ctas)
        .into_iter()
        .zip(log)
        .map(|(range, l)| {
            let v = range.filter(|_| l.selected).map(|r| std::mem::take(&mut all[r]));
            v.map(|mut v| {
                v.truncate(reported);
                v
            })
        })
        .collect();
    Ok(Joined { values, ctas, realigned: ranges != log.len() })
}

impl Collector {
    pub(crate) fn new(cupti: &'static Cupti, metrics: MetricSet, selection: Selection) -> Self {
        let status = MetricsStatus { metrics: metrics.names().to_vec(), ..Default::default() };
        Collector {
            cupti,
            metrics,
            selection,
            hosts_ready: (Mutex::new(false), Condvar::new()),
            shutting: AtomicBool::new(false),
            unmeasured: AtomicU32::new(0),
            armed: AtomicBool::new(true),
            on_demand: false,
            state: Mutex::new(State {
                initialized: false,
                warmed: false,
                captures_seen: false,
                restart_ns: 0,
                restarts: 0,
                measured_calls: 0,
                shut: false,
                hosts: HashMap::new(),
                contexts: HashMap::new(),
                kernels: HashMap::new(),
                name_ids: HashMap::new(),
                counts: Vec::new(),
                paths_pass: HashMap::new(),
                ready: Vec::new(),
                status,
            }),
        }
    }

    /// A collector of the default metrics for passes asked for while an
    /// always-on session runs ([`Collector::arm`], [`Collector::disarm`]):
    /// it measures nothing until armed.
    pub(crate) fn on_demand(cupti: &'static Cupti, set: MetricSet, selection: Selection) -> Self {
        let mut c = Collector::new(cupti, set, selection);
        c.armed = AtomicBool::new(false);
        c.on_demand = true;
        // No host-setup thread: a pass builds the configuration it needs.
        c.hosts_prepared();
        c
    }

    /// Whether this collector measures on demand only.
    pub(crate) fn is_on_demand(&self) -> bool {
        self.on_demand
    }

    /// Starts a pass: from now the first launches of each kernel
    /// ([`Selection::default`], counted from this pass) are measured.
    /// `Err`: metrics are off for this session, and why.
    pub(crate) fn arm(&self) -> std::result::Result<(), String> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(why) = &st.status.disabled {
            return Err(format!("hardware metrics are off for this session: {why}"));
        }
        st.counts.iter_mut().for_each(|c| *c = 0);
        st.status.passes_on_demand += 1;
        self.armed.store(true, Ordering::Release);
        Ok(())
    }

    /// Ends a pass: no launch is measured from now, what was measured is
    /// decoded (its values returned), and every context's range profiler is
    /// released, so that PM sampling can take the device again.
    pub(crate) fn disarm(&self) -> Vec<(u32, Option<Vec<f64>>)> {
        {
            // Under the lock: a launch that read `armed` before this finds
            // it false once it has the lock (`enter` looks again).
            let _st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            self.armed.store(false, Ordering::Release);
        }
        // A measured launch between its API entry and exit runs under its
        // context's profiler: wait for it (bounded), so that neither the
        // decode nor the release below pulls the profiler from under it.
        let deadline = Instant::now() + DISARM_WAIT;
        loop {
            let busy = {
                let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
                st.contexts.values().any(|a| a.in_flight)
            };
            if !busy {
                break;
            }
            if Instant::now() >= deadline {
                debug("metrics: a measured launch was still in flight when the pass ended");
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let out = self.flush();
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        let contexts: Vec<(usize, Armed)> = st.contexts.drain().collect();
        for (ctx, mut armed) in contexts {
            // Stopped, then disabled; both act on the context: current.
            with_current(ctx, || {
                if let Err(e) = armed.stop(&mut st.status.time_ns) {
                    debug(&format!("metrics: stopping a context's profiler after a pass: {e}"));
                }
                drop(armed)
            });
        }
        out
    }

    /// At process exit with CUDA possibly torn down: measures nothing more
    /// and lets go of every context's profiler and host object without a
    /// CUPTI call (what a pass in flight measured is lost).
    pub(crate) fn abandon(&self) {
        self.armed.store(false, Ordering::Release);
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.shut = true;
        std::mem::forget(std::mem::take(&mut st.contexts));
        std::mem::forget(std::mem::take(&mut st.hosts));
    }

    /// Whether launches are measured now.
    pub(crate) fn is_armed(&self) -> bool {
        self.armed.load(Ordering::Acquire)
    }

    /// The metric names, in value order.
    pub(crate) fn names(&self) -> &[String] {
        self.metrics.names()
    }

    /// Disables every context's range profiler and frees the host objects
    /// (before CUPTI is finalized).
    pub(crate) fn shutdown(&self) {
        // CUPTI is finalized next: the host-setup thread must be out of it.
        self.shutting.store(true, Ordering::Relaxed);
        self.wait_hosts_prepared(Duration::from_secs(10));
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.shut = true;
        let contexts: Vec<(usize, Armed)> = st.contexts.drain().collect();
        for (ctx, armed) in contexts {
            // Disabling acts on the context: make it current.
            with_current(ctx, || drop(armed));
        }
        st.hosts.clear();
    }

    pub(crate) fn status(&self) -> MetricsStatus {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).status.clone()
    }

    /// Sets up the range profiler of `ctx` (the calling thread's current
    /// context) on first use.
    fn context<'a>(&self, st: &'a mut State, ctx: sys::CUcontext) -> Result<&'a mut ContextProfiler> {
        let key = ctx as usize;
        if !st.initialized {
            // Needs an initialised driver, so it waits for the first launch:
            // a session may start before the program touches CUDA.
            let t = Instant::now();
            rangeprof::initialize(self.cupti)?;
            st.initialized = true;
            st.status.time_ns.setup_host += t.elapsed().as_nanos() as u64;
        }
        if !st.contexts.contains_key(&key) {
            if driver::driver().is_none() {
                return Err(Error::new(crate::error::ErrorKind::LibraryNotFound, "libcuda.so.1 could not be loaded"));
            }
            // The launch's context is current.
            let dev = driver::ctx_device().unwrap_or(0);
            rangeprof::device_supported(self.cupti, dev)?;
            if !st.hosts.contains_key(&dev) {
                let t = Instant::now();
                let chip = rangeprof::chip_name(self.cupti, dev as usize)?;
                let avail = rangeprof::counter_availability(self.cupti, ctx)?;
                let host = Host::new(self.cupti, &chip, &avail, self.metrics.names())?;
                st.status.passes = host.object.passes();
                st.hosts.insert(dev, host);
                st.status.time_ns.setup_host += t.elapsed().as_nanos() as u64;
            }
            let host = &st.hosts[&dev];
            if simulated_no_permission() {
                return Err(crate::collect::cupti::no_permission("cuptiRangeProfilerEnable"));
            }
            let cp = ContextProfiler::new(self.cupti, ctx, &host.object, batch())?;
            let armed = Armed {
                device: dev,
                profiler: cp,
                log: Vec::with_capacity(batch()),
                running_on: None,
                in_flight: false,
                session: 0,
                tainted: false,
            };
            st.contexts.insert(key, armed);
        }
        Ok(&mut st.contexts.get_mut(&key).expect("inserted above").profiler)
    }

    /// Builds every device's host object (the metric configuration, ~200 ms)
    /// on a thread of gpuscope's own at session start, once the program has
    /// initialised the driver, so that it overlaps the program's context
    /// creation. gpuscope never initialises the driver itself: a program
    /// that forks before using CUDA must keep CUDA usable in the child.
    /// Failures are left for the first selected launch to meet and report.
    pub(crate) fn prepare_hosts(&self) {
        let built = self.build_hosts();
        {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if let (false, Some((hosts, ns))) = (st.shut, built) {
                st.initialized = true;
                st.status.time_ns.setup_host += ns;
                for (dev, host) in hosts {
                    st.status.passes = host.object.passes();
                    st.hosts.entry(dev).or_insert(host);
                }
            }
        }
        self.hosts_prepared();
    }

    /// The host-setup thread is done (or was never started).
    pub(crate) fn hosts_prepared(&self) {
        let (done, cv) = &self.hosts_ready;
        *done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }

    /// Waits (at most `limit`) for the host-setup thread to be done.
    fn wait_hosts_prepared(&self, limit: Duration) {
        let (done, cv) = &self.hosts_ready;
        let g = done.lock().unwrap_or_else(|e| e.into_inner());
        let _ = cv.wait_timeout_while(g, limit, |d| !*d);
    }

    fn build_hosts(&self) -> Option<(HashMap<i32, Host>, u64)> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let devices = loop {
            // Before the program's cuInit: not initialised (nothing is by
            // asking).
            match driver::device_count() {
                Ok(n) => break n,
                Err(driver::NOT_INITIALIZED) if Instant::now() < deadline && !self.shutting.load(Ordering::Relaxed) => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(_) => return None,
            }
        };
        debug("metrics: the program initialised the driver; building the metric configuration");
        let t = Instant::now();
        rangeprof::initialize(self.cupti).ok()?;
        debug("metrics: profiler initialised");
        let mut hosts = HashMap::new();
        for dev in 0..devices {
            let chip = rangeprof::chip_name(self.cupti, dev as usize).ok()?;
            debug("metrics: chip name read");
            hosts.insert(dev, Host::new(self.cupti, &chip, &[], self.metrics.names()).ok()?);
        }
        debug("metrics: metric configuration built");
        Some((hosts, t.elapsed().as_nanos() as u64))
    }

    /// Sets up `ctx`'s range profiler ahead of its first selected launch,
    /// and pays the process's first start, which costs ~225 ms, with an
    /// empty start/stop. Runs on a thread of its own right after the
    /// context is created, so both overlap the program's own start-up
    /// (module loading, allocations, library handles) instead of stalling
    /// its first measured launch. `ctx` must be current on this thread.
    ///
    /// Launches wait for the state lock meanwhile, so no kernel runs while
    /// the empty window is open.
    pub(crate) fn prepare(&self, ctx: sys::CUcontext) {
        // The host objects being built at session start: wait for them
        // rather than build them twice (this is gpuscope's own thread).
        self.wait_hosts_prepared(Duration::from_secs(10));
        debug("metrics: context setup waits for the collector");
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        if st.shut || st.status.disabled.is_some() || ctx.is_null() || st.contexts.contains_key(&(ctx as usize)) {
            return;
        }
        debug("metrics: context setup begins");
        let armed = self.timed_context(st, ctx);
        if let Err(e) = armed {
            Self::disable(st, &e);
            return;
        }
        debug("metrics: context set up");
        // Starting and stopping while a stream captures would invalidate
        // the capture.
        if st.warmed || st.captures_seen {
            return;
        }
        st.warmed = true;
        let a = st.contexts.get_mut(&(ctx as usize)).expect("set up above");
        let t = &mut st.status.time_ns;
        let warmed = timed(&mut t.start, || a.profiler.start()).and_then(|()| timed(&mut t.stop, || a.profiler.stop()));
        st.status.profiler_starts += 1;
        if let Err(e) = warmed {
            Self::disable(st, &e);
        }
        debug("metrics: first start and stop paid");
    }

    /// `context`, its time added to `setup` (the context's share) and
    /// `setup_host` (the metric configuration's, when built here).
    fn timed_context(&self, st: &mut State, ctx: sys::CUcontext) -> Result<()> {
        let (t, host_before) = (Instant::now(), st.status.time_ns.setup_host);
        let r = self.context(st, ctx).map(|_| ());
        let host = st.status.time_ns.setup_host - host_before;
        st.status.time_ns.setup += (t.elapsed().as_nanos() as u64).saturating_sub(host);
        r
    }

    /// Mean cost of a restart: a start after the process's first, and a
    /// stop.
    fn restart_mean(st: &State) -> Option<u64> {
        let stops = st.status.profiler_starts.max(1);
        (st.restarts > 0).then(|| st.restart_ns / st.restarts + st.status.time_ns.stop / stops)
    }

    /// Mean time of a measured launch call.
    fn launch_mean(st: &State) -> Option<u64> {
        (st.measured_calls > 0).then(|| st.status.time_ns.launch / st.measured_calls)
    }

    fn disable(st: &mut State, e: &Error) {
        if st.status.disabled.is_none() {
            eprintln!("gpuscope: hardware metrics are off for this session: {e}. Tracing continues.");
            st.status.disabled = Some(e.to_string());
        }
        st.contexts.clear();
    }

    /// At a launch's API entry: measure it? If so the context's profiler is
    /// running (started now, or still running from the previous measured
    /// launch). An unselected launch stops a running profiler first, so it
    /// is never measured, unless few launches have passed since the last
    /// selected one: then measuring it costs less than a stop and a start.
    pub(crate) fn on_enter(&self, launch: &LaunchSite) -> Measured {
        if !self.armed.load(Ordering::Acquire) {
            return Measured::Not;
        }
        // Counted as in flight unmeasured from before the decision, so that
        // no other thread can start measuring in between.
        self.unmeasured.fetch_add(1, Ordering::SeqCst);
        let measured = self.enter(launch);
        if measured == Measured::Not {
            let _ = UNMEASURED_HERE.try_with(|u| u.set(true));
        } else {
            self.unmeasured_exit();
        }
        measured
    }

    /// An unmeasured launch has left its API call.
    pub(crate) fn unmeasured_exit(&self) {
        let _ = self.unmeasured.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    fn enter(&self, launch: &LaunchSite) -> Measured {
        let ctx = launch.ctx;
        let t = Instant::now();
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        st.status.time_ns.launch_waits += t.elapsed().as_nanos() as u64;
        // Looked at again under the lock: a pass may have ended meanwhile.
        if st.status.disabled.is_some() || ctx.is_null() || !self.armed.load(Ordering::Acquire) {
            return Measured::Not;
        }
        let key = ctx as usize;
        // SAFETY: gettid has no preconditions (the raw system call: glibc
        // has a wrapper only from 2.30 on, and wheels run on older ones).
        let me = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        let (running_on, in_flight, lingered, runs_once) = st
            .contexts
            .get(&key)
            .map_or((None, false, 0, false), |a| (a.running_on, a.in_flight, a.lingered(), a.profiler.runs_once()));
        let other_thread = running_on.is_some_and(|t| t != me);
        // Another thread's launch is in flight: its unmeasured launch (this
        // one counts itself once), or its measured one, whose range this
        // launch's kernel could take (this thread has none in flight).
        let busy = self.unmeasured.load(Ordering::SeqCst) > 1 || in_flight;
        let mut pick = self.selects(st, launch);
        // Not with kernel replay, nor when each launch is to be measured
        // alone.
        let may_linger = !busy
            && running_on == Some(me)
            && runs_once
            && batch() > 1
            && lingered < linger_limit(Self::restart_mean(st), Self::launch_mean(st));
        if pick == Pick::Selected || (pick == Pick::Unselected && may_linger) {
            pick = self.measurable(st, launch, pick);
        }
        if pick == Pick::Never || busy || (pick == Pick::Unselected && !may_linger) {
            if pick == Pick::Selected {
                st.status.skipped_busy += 1;
            }
            if let Some(a) = st.contexts.get_mut(&key) {
                if a.in_flight && other_thread {
                    a.tainted = true;
                }
            }
            self.end_session(st, key);
            return Measured::Not;
        }
        if other_thread {
            // The other thread's measured launches are done: their ranges
            // are decoded now, and this thread measures from here.
            self.end_session(st, key);
            if st.status.disabled.is_some() {
                return Measured::Not;
            }
        }
        let armed = self.timed_context(st, ctx);
        let started = armed.and_then(|()| {
            let a = st.contexts.get_mut(&key).expect("set up above");
            if a.running_on.is_none() {
                let before = st.status.time_ns.start;
                timed(&mut st.status.time_ns.start, || a.profiler.start())?;
                st.status.profiler_starts += 1;
                if st.warmed {
                    st.restart_ns += st.status.time_ns.start - before;
                    st.restarts += 1;
                }
                a.running_on = Some(me);
                a.session += 1;
                st.warmed = true;
            }
            a.in_flight = true;
            Ok(())
        });
        match started {
            Ok(()) => {
                let session = st.contexts.get(&key).map_or(0, |a| a.session);
                let ctas = launch.target.map(|(_, ctas)| ctas);
                let pending = Pending { ctx: key, session, selected: pick == Pick::Selected, ctas };
                PENDING.with(|p| p.set(Some(pending)));
                STARTED_AT.with(|t| t.set(Some(Instant::now())));
                if pick == Pick::Selected {
                    Measured::Selected
                } else {
                    Measured::Lingering
                }
            }
            Err(e) => {
                Self::disable(st, &e);
                Measured::Not
            }
        }
    }

    /// The selection rules, applied to one launch: its name, its NVTX path
    /// and its rank among the launches of its kernel.
    fn selects(&self, st: &mut State, launch: &LaunchSite) -> Pick {
        let LaunchSite { symbol, path, graph, .. } = *launch;
        if graph {
            st.status.skipped_graph_launches += 1;
            return Pick::Never;
        }
        let (id, name_passes) = *st.kernels.entry(symbol as usize).or_insert_with(|| {
            let name = if symbol.is_null() {
                String::new()
            } else {
                // SAFETY: CUPTI's symbolName is a NUL-terminated string.
                demangle(&unsafe { CStr::from_ptr(symbol) }.to_string_lossy())
            };
            let passes = self.selection.matches_kernel(&name);
            let next = st.name_ids.len();
            let id = *st.name_ids.entry(name).or_insert(next);
            if id == st.counts.len() {
                st.counts.push(0);
            }
            (id, passes)
        });
        if !name_passes {
            return Pick::Unselected;
        }
        if self.selection.filters_paths()
            && !*st
                .paths_pass
                .entry(path)
                .or_insert_with(|| self.selection.matches_path(&paths().path(path).to_string()))
        {
            return Pick::Unselected;
        }
        let nth = &mut st.counts[id];
        let pick = self.selection.picks(*nth);
        *nth += 1;
        if pick {
            Pick::Selected
        } else {
            Pick::Unselected
        }
    }

    /// `pick`, or [`Pick::Never`] when the launch must not run under the
    /// profiler (its stream is unknown or capturing). Skips are counted for
    /// selected launches.
    fn measurable(&self, st: &mut State, launch: &LaunchSite, pick: Pick) -> Pick {
        let Some((stream, _)) = launch.target else {
            if pick == Pick::Selected {
                st.status.skipped_unsupported_api += 1;
            }
            return Pick::Never;
        };
        let capture = match driver::driver() {
            None => 0,
            // SAFETY: `stream` is the launch's own stream handle.
            Some(_) => unsafe { driver::stream_capture_status(stream) }.unwrap_or(-1),
        };
        if capture != 0 {
            if pick == Pick::Selected {
                st.status.skipped_capturing += 1;
            }
            return Pick::Never;
        }
        pick
    }

    /// At the API exit of a launch this thread started measuring (the
    /// kernel has been replayed and measured): stops the profiler and logs
    /// the launch. Returns the metric values of every launch whose batch
    /// was decoded now (`None` values: discarded).
    pub(crate) fn on_exit(&self, correlation_id: u32, ran: bool) -> Vec<(u32, Option<Vec<f64>>)> {
        let Some(Pending { ctx, session, selected, ctas }) = PENDING.with(|p| p.take()) else {
            return Vec::new();
        };
        // A selected launch's record waits for a metrics event; an
        // unselected one's must not get one.
        let lost = || if selected && ran { vec![(correlation_id, None)] } else { Vec::new() };
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *st;
        let Some(armed) = st.contexts.get_mut(&ctx) else { return lost() };
        armed.in_flight = false;
        st.status.time_ns.launch += STARTED_AT.with(|t| t.take()).map_or(0, |t| t.elapsed().as_nanos() as u64);
        st.measured_calls += 1;
        let mut out = std::mem::take(&mut st.ready);
        if armed.session != session || armed.running_on.is_none() {
            // Another thread ended the session while this launch was in
            // it: which range was its is unknown.
            if selected && ran {
                st.status.mismatches += 1;
            }
            out.extend(lost());
            return out;
        }
        if !ran {
            return out;
        }
        armed.log.push(Logged { correlation_id, ctas, selected });
        // With kernel replay each measured launch is decoded on its own: on
        // a PyTorch loop, sessions of several replayed launches left CUPTI's
        // heap corrupt (its thread crashed at the next forced activity
        // flush); one launch per session ran clean, and no slower.
        if armed.log.len() >= batch() || !armed.profiler.runs_once() {
            out.extend(self.decode(st, ctx));
        }
        out
    }

    /// Stops a context's profiler, decoding what it measured since it was
    /// started: a counter data image never holds ranges of two start/stop
    /// sessions. (When it did, on a PyTorch loop whose launches switch
    /// between two threads, values landed on neighbouring launches, 20 to
    /// 70 points off; measured one session per decode they agree with
    /// Nsight Compute: bench/metrics/validate.sh.)
    fn end_session(&self, st: &mut State, ctx: usize) {
        let Some(a) = st.contexts.get_mut(&ctx) else { return };
        if a.running_on.is_none() {
            return;
        }
        if a.log.is_empty() {
            if let Err(e) = a.stop(&mut st.status.time_ns) {
                Self::disable(st, &e);
            }
            return;
        }
        let values = self.decode(st, ctx);
        st.ready.extend(values);
    }

    /// Decodes a context's measured launches and joins them with its log.
    fn decode(&self, st: &mut State, ctx: usize) -> Vec<(u32, Option<Vec<f64>>)> {
        let Some(armed) = st.contexts.get_mut(&ctx) else { return Vec::new() };
        let log = std::mem::take(&mut armed.log);
        let tainted = std::mem::take(&mut armed.tainted);
        if log.is_empty() {
            return Vec::new();
        }
        let host = st.hosts.get(&armed.device);
        let reported = self.metrics.names().len();
        let times = &mut st.status.time_ns;
        let measured = (|| -> Result<Option<Joined>> {
            armed.stop(times)?;
            let (ranges, dropped) = timed(&mut times.decode, || armed.profiler.decode())?;
            let joined = match host {
                Some(h) if dropped == 0 && !tainted => {
                    Some(timed(&mut times.evaluate, || join(h, &armed.profiler, &log, ranges.len(), reported))?)
                }
                _ => None,
            };
            if ranges.len() != log.len() || joined.is_none() {
                debug(&format!(
                    "metrics: {} ranges decoded for {} launches ({} placed by thread blocks), {dropped} dropped, \
                     tainted {tainted}, host ready {}",
                    ranges.len(),
                    log.len(),
                    joined.as_ref().map_or(0, |j| j.values.iter().flatten().count()),
                    host.is_some(),
                ));
                if let Some(j) = &joined {
                    debug(&format!(
                        "metrics: launches' thread blocks {:?}",
                        log.iter().map(|l| l.ctas).collect::<Vec<_>>()
                    ));
                    debug(&format!("metrics: ranges' thread blocks {:?}", j.ctas));
                }
            }
            timed(&mut times.rearm, || armed.profiler.reset())?;
            Ok(joined)
        })();
        st.status.lingered_launches += log.iter().filter(|l| !l.selected).count() as u64;
        let selected = log.iter().enumerate().filter(|(_, l)| l.selected);
        let out: Vec<(u32, Option<Vec<f64>>)> = match measured {
            Ok(Some(joined)) => {
                if joined.realigned {
                    st.status.realigned_launches +=
                        selected.clone().filter(|(i, _)| joined.values[*i].is_some()).count() as u64;
                }
                let mut values = joined.values;
                selected.map(|(i, l)| (l.correlation_id, values[i].take())).collect()
            }
            Ok(None) => selected.map(|(_, l)| (l.correlation_id, None)).collect(),
            Err(e) => {
                Self::disable(st, &e);
                return selected.map(|(_, l)| (l.correlation_id, None)).collect();
            }
        };
        st.status.profiled_launches += out.iter().filter(|(_, v)| v.is_some()).count() as u64;
        st.status.mismatches += out.iter().filter(|(_, v)| v.is_none()).count() as u64;
        out
    }

    /// Stops every running profiler (before a stream capture begins); what
    /// was measured stays logged for the next decode.
    pub(crate) fn close_windows(&self) {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *guard;
        st.captures_seen = true;
        let keys: Vec<usize> = st.contexts.keys().copied().collect();
        for ctx in keys {
            with_current(ctx, || self.end_session(st, ctx));
        }
    }

    /// Decodes what every context still holds; for session end.
    pub(crate) fn flush(&self) -> Vec<(u32, Option<Vec<f64>>)> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *st;
        let keys: Vec<usize> = st.contexts.keys().copied().collect();
        let mut out = std::mem::take(&mut st.ready);
        out.extend(keys.into_iter().flat_map(|k| with_current(k, || self.decode(st, k))));
        out
    }

    /// A context is about to be destroyed: decode what it measured and
    /// release its range profiler while it still exists.
    pub(crate) fn context_destroyed(&self, ctx: sys::CUcontext) -> Vec<(u32, Option<Vec<f64>>)> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *st;
        let key = ctx as usize;
        if !st.contexts.contains_key(&key) {
            return Vec::new();
        }
        with_current(key, || {
            let out = self.decode(st, key);
            st.contexts.remove(&key);
            out
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_placed_by_thread_blocks() {
        // One range per launch, counts agree: by position.
        assert_eq!(place(&[7, 231, 7], &[7, 231, 7]), vec![Some(0), Some(1), Some(2)]);
        // Same number, a count differs: no range can be told.
        assert_eq!(place(&[7, 231, 7], &[7, 230, 7]), vec![None; 3]);
        // An extra range (a kernel the log does not know) between launches.
        assert_eq!(place(&[64, 231, 7], &[64, 1, 231, 7]), vec![Some(0), Some(2), Some(3)]);
        // An extra range like its neighbour: that neighbour's place is
        // ambiguous, the others are not.
        assert_eq!(place(&[64, 231, 7], &[64, 64, 231, 7]), vec![None, Some(2), Some(3)]);
        // A lost range: the launches that still have one are placed.
        assert_eq!(place(&[64, 1, 231], &[64, 231]), vec![Some(0), None, Some(1)]);
        assert_eq!(place(&[64, 64, 231], &[64, 231]), vec![None, None, Some(1)]);
        // No order-keeping match: nothing.
        assert_eq!(place(&[64, 231], &[231, 64, 5]), vec![None, None]);
        assert_eq!(place(&[], &[3]), Vec::<Option<usize>>::new());
        assert_eq!(place(&[3], &[]), vec![None]);
    }

    #[test]
    fn lingering_is_bounded_by_what_a_restart_costs() {
        let ms = |v: u64| Some(v * 1_000_000);
        // Before a restart and a measured launch are timed: the default.
        assert_eq!(linger_limit(None, None), LINGER_DEFAULT);
        assert_eq!(linger_limit(None, ms(1)), LINGER_DEFAULT);
        assert_eq!(linger_limit(ms(23), None), LINGER_DEFAULT);
        // A restart of 23 ms, 1 ms per measured launch.
        assert_eq!(linger_limit(ms(23), ms(1)), 23);
        // Kernel replay: 14 ms per launch, less than two per restart.
        assert_eq!(linger_limit(ms(23), ms(14)), 1);
        // A slow start never lets it run unbounded.
        assert_eq!(linger_limit(ms(100_000), ms(1)), LINGER_MAX);
        assert_eq!(linger_limit(ms(23), Some(0)), LINGER_MAX);
    }
}
