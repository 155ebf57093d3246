//! Collection: the first stage. Everything that talks to CUPTI, the CUDA
//! driver and NVTX while the program runs: CUPTI's callbacks, the bounded
//! pool of activity buffers, the per-thread NVTX stacks, and metrics mode's
//! range profiler. What it collects leaves through two queues (completed
//! buffers, host events), drained by the session's decoder thread.

pub(crate) mod calibrate;
mod callbacks;
mod clock;
pub(crate) mod cupti;
pub(crate) mod debug;
pub(crate) mod declare;
pub(crate) mod driver;
mod held;
pub(crate) mod host;
mod lead;
pub(crate) mod libraries;
mod links;
pub(crate) mod metrics;
pub(crate) mod nvtx;
pub(crate) mod panic_guard;
pub(crate) mod pool;
pub(crate) mod python_stack;
mod queue;
pub(crate) mod sampling;
mod tally;
pub(crate) mod thread_cpu;

use crate::error::{Error, ErrorKind, Result};
use crate::model::event::HostEvent;
use crossbeam_channel::{unbounded, Receiver, Sender};
use cupti_sys::{self as sys, Cupti};
use debug::debug;
use held::{Gate, Gated};
use metrics::collector::Collector;
use metrics::{MetricSet, Selection};
use pool::BufferPool;
use sampling::Sampler;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What to collect.
#[derive(Debug, Clone)]
pub(crate) struct CollectOptions {
    /// Bytes per activity buffer.
    pub buffer_size: usize,
    /// Buffers alive at once.
    pub max_buffers: usize,
    /// Capacity of the host event queue.
    pub host_queue: usize,
    /// Activity kinds to enable.
    pub kinds: Vec<u32>,
    /// Kernel records on from the start. Off: trace windows of 0, no kind
    /// is enabled until a window is asked for (`gpuscope trigger`), since
    /// CUPTI keeps kernel records' per-launch cost after they are switched
    /// off.
    pub records: bool,
    /// Launch callbacks (thread and NVTX path of each kernel).
    pub attribution: bool,
    /// Host synchronisation calls timed (host waits).
    pub host_waits: bool,
    /// Metrics mode: what to measure, on which launches.
    pub metrics: Option<(MetricSet, Selection)>,
    /// Always-on (sampling with trace windows): metrics passes may be asked
    /// for while the session runs (a collector that measures nothing until
    /// then).
    pub metrics_on_demand: Option<(MetricSet, Selection)>,
    /// Sampling mode: PM sampling every this many ns.
    pub sampling: Option<u64>,
    /// Registered with `atexit` once per process, when the first device's
    /// sampling set-up has succeeded: CUDA is initialised by then, so it
    /// runs before CUDA's own exit handlers (and PM sampling's) and can
    /// still decode the last samples.
    pub exit_handler: Option<extern "C" fn()>,
    /// Time CUPTI's kernel records at the first launch (`calibrate`), and
    /// enable them only then.
    pub calibrate: bool,
}

/// The running collection: shared by CUPTI's callbacks (on the program's
/// threads) and the decoder.
pub(crate) struct Collection {
    pub(crate) cupti: &'static Cupti,
    pub(crate) pool: BufferPool,
    buf_tx: Sender<(usize, usize)>,
    /// Host events, a queue per sending thread.
    host: queue::HostQueues,
    host_dropped: AtomicU64,
    cupti_dropped: AtomicU64,
    /// CUPTI's clock when collection began.
    pub(crate) start_ns: u64,
    subscriber: sys::CUpti_SubscriberHandle,
    stopped: AtomicBool,
    opts: CollectOptions,
    /// Kernel records are on (sampling mode's trace windows turn them off;
    /// launch callbacks then only count the launch, [`tally`]).
    pub(crate) traced: AtomicBool,
    /// Held while switching records, and by stop.
    switching: Mutex<()>,
    /// Metrics mode's measurements.
    pub(crate) collector: Option<Collector>,
    /// Sampling mode's PM sampling.
    pub(crate) sampler: Option<Sampler>,
    /// The process that started it (a forked child inherits it, not CUPTI).
    pub(crate) pid: u32,
    /// This session among the process's (launch tallies tell theirs apart).
    pub(crate) id: u64,
    /// Its calibration at the first launch.
    calibration: calibrate::Pending,
    /// Panics caught in the process before it started (sessions follow
    /// each other, and NVTX events are handled between them).
    panics_before: u64,
    /// The callbacks and threads using it now; closed by stop before CUPTI
    /// detaches ([`held`]).
    calls: Gate,
}

impl Gated for Collection {
    fn gate(&self) -> &Gate {
        &self.calls
    }
}

// SAFETY: the subscriber handle is an opaque id CUPTI accepts from any
// thread; the rest is Sync on its own.
unsafe impl Send for Collection {}
// SAFETY: as above.
unsafe impl Sync for Collection {}

/// What collection hands on: completed buffers (pointer, valid bytes);
/// host events are drained from the collection ([`Collection::host_events`]).
pub(crate) struct Outputs {
    pub buffers: Receiver<(usize, usize)>,
}

/// Records and events lost in collection, by cause.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Lost {
    pub cupti_records: u64,
    pub buffer_requests_refused: u64,
    pub host_events: u64,
    /// Panics caught in gpuscope's callbacks and threads ([`panic_guard`]).
    pub callback_panics: u64,
}

static ACTIVE: held::Slot<Collection> = held::Slot::new();

/// The next [`Collection::id`] (0 is none).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A number that changes when a session starts (never 0): per-thread flags
/// set in one session are told from the next's.
pub(super) fn session_epoch() -> u64 {
    NEXT_ID.load(Ordering::Relaxed)
}

/// Serialises [`start`]s: the slot's lock is not held while CUPTI loads.
static STARTING: Mutex<()> = Mutex::new(());

/// How long stop waits for callbacks in flight before it detaches CUPTI.
const CALLBACKS_WAIT: Duration = Duration::from_secs(10);

/// The running collection, if any (for the session; callbacks and
/// gpuscope's threads that call CUPTI [`hold`] it instead).
pub(crate) fn active() -> Option<Arc<Collection>> {
    ACTIVE.get()
}

/// The running collection, held while a callback or a thread of
/// gpuscope's uses it: no lock is kept, and stop waits for the hold to end
/// before CUPTI detaches ([`held`]). `None`: none runs, or it is stopping.
pub(crate) fn hold() -> Option<held::Held<Collection>> {
    held::hold(&ACTIVE)
}

/// ns per call of each part of a range event in the running session, if
/// any, each timed alone over `n` calls: a hold (taken and dropped), a
/// reading of the range clock, a queued event (under one hold); and
/// whether holds are light ([`held`]).
pub(crate) fn range_event_parts(n: usize) -> Option<([f64; 3], bool)> {
    let per = |f: &mut dyn FnMut()| {
        let t0 = std::time::Instant::now();
        for _ in 0..n {
            f();
        }
        t0.elapsed().as_nanos() as f64 / n.max(1) as f64
    };
    let hold_ns = per(&mut || drop(std::hint::black_box(hold())));
    let s = hold()?;
    let counter = s.host.counter();
    let clock_ns = per(&mut || {
        std::hint::black_box(if counter { clock::ticks() } else { cupti::timestamp(s.cupti) });
    });
    let send_ns = per(&mut || s.send(HostEvent::Pop { instance: 0, ts: 0 }));
    Some(([hold_ns, clock_ns, send_ns], held::light()))
}

/// Sends a host event to the running collection, if any; `make` gets
/// CUPTI's timestamp. Never blocks: a full queue counts a drop.
pub(crate) fn send_host_event(make: impl FnOnce(u64) -> HostEvent) {
    let Some(s) = hold() else { return };
    s.send(make(cupti::timestamp(s.cupti)));
}

/// Whether the calling thread has a CUDA context: CUDA is initialised and
/// its exit handlers are registered (a session started now registers its
/// own after them).
pub(crate) fn cuda_in_use() -> bool {
    driver::current_context().is_some()
}

/// Registers `h` with `atexit` the first time `once` is passed (a later
/// session's handler is the same function). `h` must catch its panics.
pub(crate) fn at_exit_once(once: &'static std::sync::Once, h: extern "C" fn()) {
    once.call_once(|| {
        // SAFETY: `h` is a plain extern "C" fn that catches its panics
        // (this function's contract).
        if unsafe { libc::atexit(h) } != 0 {
            debug::debug("no room for another exit handler: the session is not stopped at exit");
        }
    });
}

/// Queues a range event (a push or a pop) of the calling thread: with
/// kernel records off, first the launches it counted since its last range
/// event, so they land on the instance they were made in while it is open.
pub(crate) fn send_range_event(make: impl FnOnce(u64) -> HostEvent) {
    let Some(s) = hold() else { return };
    if !s.traced.load(Ordering::Relaxed) {
        let ts = cupti::timestamp(s.cupti);
        tally::flush(s.id, ts, |e| s.send(e));
        s.send(make(ts));
        return;
    }
    // The CPU's counter where it can be: the decoder turns it into ns.
    s.send(make(if s.host.counter() { clock::ticks() } else { cupti::timestamp(s.cupti) }));
}

impl Collection {
    /// Queues a host event; never blocks (a full queue counts a drop).
    fn send(&self, e: HostEvent) {
        if !self.host.send(e) {
            self.host_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every host event queued so far, merged by time ([`queue`]), into
    /// `into` (cleared first), each with its merge key.
    pub(crate) fn host_events(&self, into: &mut Vec<(u64, HostEvent)>) {
        self.host.drain_into(into)
    }

    /// Queues every thread's launch count between trace windows so far
    /// ([`tally`]).
    pub(crate) fn collect_launch_counts(&self) {
        tally::collect(self.id, cupti::timestamp(self.cupti), |e| self.send(e));
    }

    /// Hands a completed buffer to the decoder.
    fn completed(&self, buffer: *mut u8, valid: usize) {
        // Unbounded, but at most max_buffers pointers can ever be in flight.
        let _ = self.buf_tx.send((buffer as usize, valid));
    }

    /// What was lost so far.
    pub(crate) fn lost(&self) -> Lost {
        Lost {
            cupti_records: self.cupti_dropped.load(Ordering::Relaxed),
            buffer_requests_refused: self.pool.refused(),
            host_events: self.host_dropped.load(Ordering::Relaxed),
            callback_panics: panic_guard::caught().saturating_sub(self.panics_before),
        }
    }

    /// Asks CUPTI for the buffers completed so far (`forced`: partial ones
    /// too).
    pub(crate) fn flush(&self, forced: bool) {
        let flag = if forced { sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED } else { 0 };
        // Counted in the gate: a flush from the decoder or the program
        // never races CUPTI's detaching; after stop there is nothing left.
        self.calls.within(|| {
            // A flush CUPTI refuses hands over nothing; the next one will.
            cupti::tolerate(cupti::activity::flush_all(self.cupti, flag), "flushing activity buffers");
        });
    }
}

/// Starts collecting: loads CUPTI, subscribes, enables callbacks and
/// activity kinds. Fails (changing nothing) when CUPTI cannot be loaded,
/// another tool holds it, or a collection is already running.
pub(crate) fn start(opts: &CollectOptions) -> Result<(Arc<Collection>, Outputs)> {
    let _starting = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    if active().is_some() {
        return Err(Error::new(ErrorKind::SessionActive, "a gpuscope session is already running in this process"));
    }
    // Without a driver CUPTI is moot: say that, not that CUPTI is missing.
    if driver::driver().is_none() {
        return Err(Error::new(ErrorKind::NoDevice, driver::NO_DRIVER));
    }
    // Before any callback can run.
    panic_guard::install_hook();
    debug::report_crashes();
    debug("start: loading CUPTI");
    let cupti = cupti::lib()?;
    debug("start: subscribing");
    let subscriber = callbacks::subscribe(cupti)?;
    let (buf_tx, buffers) = unbounded();
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let collection = Arc::new(Collection {
        cupti,
        pool: BufferPool::new(opts.buffer_size, opts.max_buffers),
        buf_tx,
        host: queue::HostQueues::timed(
            id,
            opts.host_queue,
            clock::Anchors::new(Box::new(move || cupti::timestamp(cupti))),
        ),
        host_dropped: AtomicU64::new(0),
        cupti_dropped: AtomicU64::new(0),
        start_ns: cupti::timestamp(cupti),
        subscriber,
        stopped: AtomicBool::new(false),
        opts: opts.clone(),
        traced: AtomicBool::new(opts.records),
        switching: Mutex::new(()),
        collector: match &opts.metrics {
            Some((m, s)) => Some(Collector::new(cupti, m.clone(), s.clone())),
            None => opts.metrics_on_demand.clone().map(|(m, s)| Collector::on_demand(cupti, m, s)),
        },
        sampler: opts.sampling.map(|interval| Sampler::new(cupti, interval, opts.exit_handler)),
        pid: std::process::id(),
        id,
        calibration: calibrate::Pending::new(opts.calibrate && opts.records),
        panics_before: panic_guard::caught(),
        calls: Gate::default(),
    });
    if let Some(why) = collection.collector.as_ref().and_then(|c| c.status().disabled) {
        eprintln!("gpuscope: hardware metrics are off for this session: {why}. Tracing continues.");
    }
    ACTIVE.set(Some(collection.clone()));
    debug("start: enabling callbacks and activity");
    if let Err(e) = callbacks::enable(cupti, subscriber, opts) {
        if let Err(stopping) = stop(&collection, Ending::Stop) {
            debug(&format!("start: undoing: {stopping}"));
        }
        clear();
        return Err(e);
    }
    if collection.sampler.is_some() {
        if let (Some(ctx), Some(held)) = (driver::current_context(), hold()) {
            // The program already has a context on this thread: its
            // device's sampling is set up before start returns (~0.4 s),
            // so the program's next steps run at full speed rather than
            // waiting in the driver behind the set-up (other devices' are
            // set up at their context's creation or first launch).
            if let Some(setup) = callbacks::prepare_sampling(&held, ctx, None) {
                drop(held);
                if setup.join().is_err() {
                    debug("start: the sampling set-up thread ended early");
                }
            }
        }
    }
    // A collector on demand builds its configuration at its first pass.
    let prepared = collection.collector.as_ref().filter(|c| !c.is_on_demand());
    if let (Some(_), Some(c)) = (prepared, hold().and_then(|h| h.again())) {
        // The thread holds the collection: stop waits for it before CUPTI
        // detaches.
        let spawned = std::thread::Builder::new().name("gpuscope-metrics-hosts".into()).spawn(move || {
            if let Some(m) = &c.collector {
                if panic_guard::catch(|| m.prepare_hosts()).is_none() {
                    // Stop waits for this thread to be done.
                    m.hosts_prepared();
                }
            }
        });
        if spawned.is_err() {
            debug("metrics: no host setup thread; the first selected launch sets up");
            if let Some(m) = &collection.collector {
                m.hosts_prepared();
            }
        }
    }
    debug("start: NVTX");
    nvtx::install();
    watch_forks();
    Ok((collection, Outputs { buffers }))
}

/// Counts the process's forks while a session runs (PyTorch's DataLoader
/// forks its workers): the report says whether the program loads data in
/// other processes.
fn watch_forks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    extern "C" fn forked() {
        // In the parent, after the fork: an ordinary thread again.
        panic_guard::catch(|| send_host_event(|ts| HostEvent::Forked { ts }));
    }
    ONCE.call_once(|| {
        // SAFETY: `forked` is a plain extern "C" fn that catches panics;
        // the other two handlers are none.
        unsafe { libc::pthread_atfork(None, Some(forked), None) };
    });
}

/// How a session ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The program stopped it: everything is released and CUPTI detached.
    Stop,
    /// The process is exiting: nothing is released or finalized.
    /// `driver_whole`: from the exit handler registered once CUDA was
    /// initialised, which runs before CUDA's own, so the last PM samples
    /// can still be decoded.
    Exit {
        /// See [`Ending::Exit`].
        driver_whole: bool,
    },
}

/// Stops collecting: callbacks off, every buffer flushed (partial ones
/// too), metrics decoded and released, CUPTI detached. The decoder drains
/// the outputs afterwards. At process exit CUPTI is not finalized.
pub(crate) fn stop(s: &Collection, ending: Ending) -> Result<()> {
    let at_exit = ending != Ending::Stop;
    if s.stopped.swap(true, Ordering::AcqRel) {
        return Err(Error::new(ErrorKind::SessionActive, "the session is already stopping"));
    }
    let c = s.cupti;
    // A trace-window switch in progress finishes first; none starts after.
    let _switching = s.switching.lock().unwrap_or_else(|e| e.into_inner());
    calibrate::disarm();
    debug("stop: callbacks off");
    for domain in [sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_CB_DOMAIN_RUNTIME_API] {
        // SAFETY: our subscriber, subscribed until below.
        let r = unsafe { cupti::callback::enable_domain(c, false, s.subscriber, domain) };
        cupti::tolerate(r, "stop: callbacks off");
    }
    debug("stop: flush");
    s.flush(true);
    debug("stop: activity off");
    cupti::tolerate(callbacks::activity_kinds(c, &s.opts.kinds, false), "stop: activity off");
    s.flush(true);
    if let Some(col) =
        s.collector.as_ref().filter(|c| c.is_on_demand() && ending == (Ending::Exit { driver_whole: false }))
    {
        // At exit, CUDA may be torn down: a pass in flight is left as it
        // is, with no CUPTI call.
        col.abandon();
    } else if let Some(col) = &s.collector {
        // Launches measured since the last batch: decode them now, before
        // the decoder's final drain.
        debug("stop: metrics decode");
        for (correlation_id, values) in col.flush() {
            s.send(HostEvent::KernelMetrics { correlation_id, values });
        }
        debug("stop: metrics off");
        col.shutdown();
    }
    if let Some(sampler) = &s.sampler {
        // Released before CUPTI detaches; its last samples wait for the
        // decoder.
        debug("stop: sampling off");
        sampler.stop(ending);
    }
    // SAFETY: our subscriber, unsubscribed once (`stopped` guards).
    cupti::tolerate(unsafe { cupti::callback::unsubscribe(c, s.subscriber) }, "stop: unsubscribing");
    // No callback is delivered now; those already running finish before
    // CUPTI detaches, and any that comes to the gate later does nothing
    // (held.rs). At exit nothing is finalized, so nothing is waited for.
    debug("stop: waiting for callbacks in flight");
    let none_inside = s.calls.close(if at_exit { Duration::ZERO } else { CALLBACKS_WAIT });
    // Detach CUPTI from the driver entirely: left attached it keeps costing
    // each launch after the session (seen: +1.5 us per tiny launch on H100).
    // Not at process exit: nothing runs after, and the driver may be
    // tearing down already.
    if !at_exit && none_inside {
        debug("stop: finalize");
        // SAFETY: our subscriber is gone, every buffer has been flushed, and
        // no callback or thread of gpuscope's is inside the gate or can
        // enter it.
        cupti::tolerate(unsafe { cupti::callback::finalize(c) }, "stop: finalize");
    } else if !at_exit {
        debug(&format!(
            "stop: a callback was still running after {} s; CUPTI stays attached rather than detach under it",
            CALLBACKS_WAIT.as_secs()
        ));
    }
    Ok(())
}

/// Turns kernel records on or off (sampling mode's trace windows). The
/// launch callbacks stay subscribed: switching them while the program's
/// threads are in CUDA calls crashed PyTorch processes on the device
/// (segfaults, corrupted tensors after the session); off, they only
/// count launches ([`tally`]). Returns CUPTI's clock at the switch, after records came on or
/// went off. `None`: nothing changed (already so, or the session is
/// stopping).
pub(crate) fn set_tracing(s: &Collection, on: bool) -> Option<u64> {
    let _switching = s.switching.lock().unwrap_or_else(|e| e.into_inner());
    if s.traced.load(Ordering::Acquire) == on || s.stopped.load(Ordering::Acquire) {
        return None;
    }
    if on {
        // Launches are seen before their kernels can have records.
        s.traced.store(true, Ordering::Release);
    }
    // Allocation records stay on between windows: live bytes are a running
    // sum.
    let windowed: Vec<u32> = s.opts.kinds.iter().copied().filter(|&k| k != sys::CUPTI_ACTIVITY_KIND_MEMORY2).collect();
    if let Err(e) = callbacks::activity_kinds(s.cupti, &windowed, on) {
        debug(&format!("trace windows: switching {}: {e}", if on { "on" } else { "off" }));
        s.traced.store(!on, Ordering::Release);
        return None;
    }
    s.traced.store(on, Ordering::Release);
    Some(cupti::timestamp(s.cupti))
}

/// Forgets the stopped collection: NVTX events go nowhere, a new session
/// may start.
pub(crate) fn clear() {
    gpuscope_nvtx::tool::set_handler(None);
    ACTIVE.set(None);
}

/// CUPTI's clock now (ns), as activity records read it.
pub(crate) fn now(s: &Collection) -> u64 {
    cupti::timestamp(s.cupti)
}
