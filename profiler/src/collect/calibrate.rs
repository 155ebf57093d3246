//! What a launch call costs without CUPTI's kernel records and with them,
//! measured in the program's own process at its first launch: an empty
//! kernel launched back to back on a stream of gpuscope's, timed per launch
//! call, before kernel records are enabled and after. Records cannot be
//! measured off after they have been on: CUPTI keeps most of their
//! per-launch cost until it is detached. So a session that calibrates
//! enables kernel records here, at the first launch, not at its start (no
//! kernel can run before a launch).
//!
//! The launches are made on a thread of gpuscope's while the program's
//! thread waits in its launch callback: CUPTI gives a launch made inside
//! another launch's callback, on the same thread, the outer launch's
//! correlation id, which would misattribute the program's first kernel.
//!
//! Reports compare the program's own launch calls, timed on every launch,
//! with the plain launch measured here to take the profiler's time out of
//! idle time.

use super::callbacks::activity_kinds;
use super::debug::debug;
use super::driver::{self, with_current};
use super::panic_guard;
use super::Collection;
use crate::model::event::HostEvent;
use cupti_sys as sys;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// The empty kernel's name; its records are left out of the report.
pub(crate) const KERNEL: &str = "gpuscope_calibration";

/// PTX of the empty kernel (JIT-compiled by the driver for the device).
const PTX: &std::ffi::CStr =
    c".version 7.0\n.target sm_70\n.address_size 64\n\n.visible .entry gpuscope_calibration()\n{\n\tret;\n}\n";

/// Launches timed with and without records.
const TIMED: usize = 256;
/// Launches before each timed run: the first loads the function, the first
/// traced ones make CUPTI ask for its buffer.
const WARM: usize = 32;
/// How long the program's first launch waits for the measurement; past it,
/// records come on unmeasured and the program goes on.
const WAIT: Duration = Duration::from_secs(2);

thread_local! {
    /// This thread is calibrating: its launches are gpuscope's own.
    static CALIBRATING: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread's launch is gpuscope's own calibration.
pub(crate) fn in_progress_here() -> bool {
    CALIBRATING.try_with(Cell::get).unwrap_or(false)
}

/// The running session enables kernel records at its first launch, after
/// measuring (trace mode with launch callbacks): read on every launch, so
/// a plain flag rather than the session's state.
static ARMED: AtomicBool = AtomicBool::new(false);

/// Kernel records wait for the first launch: call [`at_first_launch`].
pub(crate) fn armed() -> bool {
    ARMED.load(Ordering::Acquire)
}

/// A session's calibration: run once, at its first launch.
pub(crate) struct Pending {
    once: Once,
}

impl Pending {
    /// `arm`: this session calibrates (and enables kernel records then).
    pub(crate) fn new(arm: bool) -> Self {
        ARMED.store(arm, Ordering::Release);
        Pending { once: Once::new() }
    }
}

/// The session stopped: nothing waits for a first launch.
pub(crate) fn disarm() {
    ARMED.store(false, Ordering::Release);
}

/// The function loaded in a context (by the context's id), kept for later
/// sessions: CUPTI may refer to its name after the module would be
/// unloaded.
static LOADED: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// The function for context `ctx`, loaded there once. Kept by the
/// context's id, not its address: a context made after another was
/// destroyed may have its address, where the old function is invalid.
fn function(ctx: usize) -> Result<sys::CUfunction, String> {
    // SAFETY: a live context (current here).
    let id =
        unsafe { driver::ctx_id(ctx as sys::CUcontext) }.map_err(|e| format!("the context's id is unknown ({e})"))?;
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, f)) = loaded.iter().find(|(c, _)| *c == id as usize) {
        return Ok(f as sys::CUfunction);
    }
    // The context is current (with_current).
    let module = driver::module_load_ptx(PTX).map_err(|e| format!("loading the calibration kernel failed ({e})"))?;
    // SAFETY: a module just loaded into the current context.
    let f = unsafe { driver::module_function(module, c"gpuscope_calibration") }
        .map_err(|e| format!("finding the calibration kernel failed ({e})"))?;
    loaded.push((id as usize, f as usize));
    Ok(f)
}

/// Median host time of `n` launches of `f` into `stream`, ns.
fn timed(f: sys::CUfunction, stream: sys::CUstream, n: usize) -> Result<u64, String> {
    let launch = || {
        // SAFETY: `f` takes no parameters; a live stream of this context.
        unsafe { driver::launch_no_params(f, 32, stream) }
            .map_err(|e| format!("launching the calibration kernel failed ({e})"))
    };
    for _ in 0..WARM {
        launch()?;
    }
    // SAFETY: a live stream. A failure shows in the launches after it.
    let _ = unsafe { driver::stream_synchronize(stream) };
    let mut t = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        let r = launch();
        t.push(t0.elapsed().as_nanos() as u64);
        r?;
    }
    // SAFETY: as above. As after the warm-up: a failure would have shown in
    // the launches.
    let _ = unsafe { driver::stream_synchronize(stream) };
    t.sort_unstable();
    Ok(t[n / 2])
}

/// Times launches without records, enables the session's kinds, times them
/// with. The context is current. `Err`: why not (records are then enabled
/// by the caller).
fn measure(s: &Collection, ctx: usize) -> Result<(u64, u64), String> {
    let f = function(ctx)?;
    let stream = driver::stream_create_non_blocking().map_err(|e| format!("creating a stream failed ({e})"))?;
    let r = timed(f, stream, TIMED).and_then(|plain| {
        records_on(s)?;
        Ok((plain, timed(f, stream, TIMED)?))
    });
    // SAFETY: our stream, its work synchronised.
    let _ = unsafe { driver::stream_destroy(stream) };
    r
}

/// Turns the session's kinds on, unless it has stopped or is stopping (a
/// measurement that outlived [`WAIT`]): under the lock stop holds, tried
/// rather than waited for, since the program's thread may be inside a CUDA
/// call that stop's flush waits on.
fn records_on(s: &Collection) -> Result<(), String> {
    let Ok(_switching) = s.switching.try_lock() else { return Err("the session is stopping".into()) };
    if s.stopped.load(Ordering::Acquire) {
        return Err("the session stopped".into());
    }
    activity_kinds(s.cupti, &s.opts.kinds, true).map_err(|e| e.to_string())
}

/// Disarms when dropped: a panic while calibrating must not leave every
/// later launch trying again.
struct Disarm;

impl Drop for Disarm {
    fn drop(&mut self) {
        disarm();
    }
}

/// Measures on a thread of gpuscope's, waiting at most [`WAIT`].
fn on_own_thread(s: std::sync::Arc<Collection>, ctx: usize) -> Result<(u64, u64), String> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let spawned = std::thread::Builder::new().name("gpuscope-calibrate".into()).spawn(move || {
        let _ = CALIBRATING.try_with(|c| c.set(true));
        let measured = panic_guard::catch(|| with_current(ctx, || measure(&s, ctx)));
        let _ = tx.send(measured.unwrap_or_else(|| Err("the measurement panicked".into())));
    });
    if let Err(e) = spawned {
        return Err(format!("no thread to measure on: {e}"));
    }
    rx.recv_timeout(WAIT).unwrap_or_else(|_| Err(format!("the measurement took over {} s", WAIT.as_secs())))
}

/// At a launch's entry on the program's thread: the first one measures
/// (other threads' first launches wait for it), then kernel records are on.
/// `capturing`: the launch goes into a stream being captured, where loading
/// a module could invalidate the capture.
pub(crate) fn at_first_launch(s: &std::sync::Arc<Collection>, ctx: sys::CUcontext, capturing: bool) {
    s.calibration.once.call_once(|| {
        let _disarm = Disarm;
        let began = Instant::now();
        let r = if ctx.is_null() {
            Err("the first launch had no context".to_string())
        } else if capturing {
            Err("the first launch was into a stream being captured".to_string())
        } else {
            on_own_thread(s.clone(), ctx as usize)
        };
        let event = match r {
            Ok((plain, traced)) => {
                debug(&format!(
                    "calibration: launch call {plain} ns without kernel records, {traced} ns with (took {:?})",
                    began.elapsed()
                ));
                HostEvent::Calibrated {
                    record_ns: traced.saturating_sub(plain).min(u32::MAX as u64) as u32,
                    plain_ns: plain.min(u32::MAX as u64) as u32,
                    traced_ns: traced.min(u32::MAX as u64) as u32,
                }
            }
            Err(why) => {
                debug(&format!("calibration: {why}"));
                // Records on all the same (a no-op if measuring enabled them).
                if let Err(e) = records_on(s) {
                    debug(&format!("calibration: enabling kernel records: {e}"));
                }
                HostEvent::NotCalibrated { why }
            }
        };
        s.send(event);
    });
}
