//! Sampling mode's collection: CUPTI's PM sampling on every device the
//! program uses, decoded by the session's decoder thread every few
//! milliseconds. A device is set up (~0.25 s on an H200) on a thread of gpuscope's,
//! begun when the program creates a context on it, at session start for
//! the starting thread's current context, or at the first launch into a
//! context made before the session; launches never wait for it, and
//! kernels that run before it is ready are reported unsampled. A device
//! the process makes no context on is left to other processes' profilers.

pub(crate) mod pmsampler;

use super::debug::debug;
use super::driver;
use super::Ending;
use crate::model::sampled::{Sample, SampledConfig, SamplingStatus};
use cupti_sys::Cupti;
use pmsampler::PmDevice;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Default interval between samples, ns. Reading a sample out of CUPTI
/// costs 40-60 us of gpuscope's decoder thread (measured on an H100, CUPTI
/// 13.0), so at 100 us decoding keeps up with about half a core; kernels of
/// 400 us and more get figures of their own.
pub const DEFAULT_INTERVAL_NS: u64 = 100_000;

/// Default interval with trace windows (the always-on setting), ns. The
/// decoder thread's work grows with the samples read (~20 us each for the
/// metrics evaluation, plus CUPTI's decode), and on a launch-bound PyTorch
/// loop 100 us samples cost steps several percent more than 1 ms ones
/// (measured on an H100). 1 ms still gives ranges of 10 ms and more figures
/// of their own.
pub const ALWAYS_ON_INTERVAL_NS: u64 = 1_000_000;

/// The interval when none is given: [`ALWAYS_ON_INTERVAL_NS`] with trace
/// windows, [`DEFAULT_INTERVAL_NS`] without.
pub fn default_interval_ns(trace_windows: bool) -> u64 {
    if trace_windows {
        ALWAYS_ON_INTERVAL_NS
    } else {
        DEFAULT_INTERVAL_NS
    }
}

/// Allowed intervals, ns: below 1 us CUPTI loses samples between decodes;
/// above 100 ms every kernel is shorter than a sample.
pub const INTERVALS_NS: std::ops::RangeInclusive<u64> = 1_000..=100_000_000;

/// Allowed trace-window lengths and periods, ns
/// ([`Profiler::trace_windows`](crate::Profiler::trace_windows)): tracing
/// is switched on the decoder's 5 ms poll, so shorter windows would be
/// mostly switching error.
pub const TRACE_WINDOWS_NS: std::ops::RangeInclusive<u64> = 10_000_000..=3_600_000_000_000;

/// Trace windows gpuscope takes: a window of 0 (no kernel records) or in
/// [`TRACE_WINDOWS_NS`], shorter than a period in it.
pub(crate) fn trace_windows_valid(window_ns: u64, period_ns: u64) -> bool {
    (window_ns == 0 || TRACE_WINDOWS_NS.contains(&window_ns))
        && TRACE_WINDOWS_NS.contains(&period_ns)
        && window_ns < period_ns
}

pub use crate::model::sampled::EXIT_DECODE_BOUND;

/// Whole samples inside a kernel for a figure of its own.
pub const MIN_KERNEL_SAMPLES: u32 = 4;

/// PM sampling ran in this process. After it, CUPTI 13.0 gave later
/// sessions activity records on another clock (device: every kernel of
/// the next session came "late", before the session began; with or without
/// `cuptiFinalize` between), so later sessions are refused.
static USED: AtomicBool = AtomicBool::new(false);

/// Whether PM sampling ran in this process.
pub(crate) fn used() -> bool {
    USED.load(Ordering::Acquire)
}

struct State {
    devices: Vec<PmDevice>,
    /// Samples decoded at stop, for the decoder's last call.
    leftover: Vec<Sample>,
    status: SamplingStatus,
    /// Said once why sampling is off.
    warned: bool,
    /// Sampling was stopped: decode to the end of the records.
    stopping: bool,
    /// Stop has run: no device is set up after it.
    closed: bool,
    /// When the devices were last decoded.
    last_decode: Instant,
    /// Paused for a metrics pass since then ([`Sampler::pause`]).
    paused_since: Option<Instant>,
}

/// How long the exit waits for a device's set-up in flight (it takes
/// ~0.25-0.45 s).
const SET_UP_WAIT_AT_EXIT: Duration = Duration::from_secs(2);

/// At exit, before CUDA's own handlers: holds them back while a device's
/// sampling set-up is in flight, so that CUDA does not tear down under
/// CUPTI's calls. Makes no CUPTI call itself.
extern "C" fn wait_for_set_up() {
    let _ = std::panic::catch_unwind(|| {
        if let Some(s) = super::active().filter(|s| s.pid == std::process::id()) {
            if let Some(sampler) = &s.sampler {
                sampler.wait_for_set_ups(SET_UP_WAIT_AT_EXIT);
            }
        }
    });
}

/// The device of the calling thread's current context (one of the 64 a
/// sampler tells apart).
fn current_device() -> Option<u32> {
    driver::ctx_device().ok().filter(|dev| (0..64).contains(dev)).map(|dev| dev as u32)
}

/// PM sampling of one session.
pub(crate) struct Sampler {
    cupti: &'static Cupti,
    interval_ns: u64,
    /// Tells this session's sampler from earlier ones in the process.
    id: u64,
    /// Devices whose sampling was set up (or tried), one bit each (64).
    tried: AtomicU64,
    /// See [`crate::collect::CollectOptions::exit_handler`].
    exit_handler: Option<extern "C" fn()>,
    /// [`Sampler::stop`] has begun: a set-up that fails now failed because
    /// the session (or the process) was ending.
    ending: AtomicBool,
    /// Set-ups begun (their thread spawned or about to be) and not ended:
    /// the exit waits for them.
    set_ups: AtomicU32,
    /// Bumped when sampling resumes after a metrics pass: a launch thread's
    /// memory of having claimed its device is then stale (a set-up put
    /// off during the pass is claimed again).
    generation: AtomicU64,
    state: Mutex<State>,
}

impl Sampler {
    /// Samples every `interval_ns` once devices are in use; `exit_handler`
    /// is registered before the first device's set-up begins
    /// ([`Sampler::register_exit_handler`]).
    pub(crate) fn new(cupti: &'static Cupti, interval_ns: u64, exit_handler: Option<extern "C" fn()>) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Sampler {
            cupti,
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            interval_ns,
            tried: AtomicU64::new(0),
            exit_handler,
            ending: AtomicBool::new(false),
            set_ups: AtomicU32::new(0),
            generation: AtomicU64::new(0),
            state: Mutex::new(State {
                devices: Vec::new(),
                leftover: Vec::new(),
                status: SamplingStatus { interval_ns, min_kernel_samples: MIN_KERNEL_SAMPLES, ..Default::default() },
                warned: false,
                stopping: false,
                closed: false,
                last_decode: Instant::now(),
                paused_since: None,
            }),
        }
    }

    /// At a launch's API entry into `ctx` (current on this thread): the
    /// device whose sampling this launch is the first to find not set up,
    /// which the caller then sets up on a thread of gpuscope's ([`set_up`]
    /// takes ~0.4 s; the launch does not wait, and its kernels go
    /// unsampled, counted as `kernels_unsampled`). A thread-local
    /// comparison once this thread has launched into `ctx`.
    ///
    /// [`set_up`]: Sampler::set_up
    pub(crate) fn claim_at_launch(&self, ctx: cupti_sys::CUcontext) -> Option<u32> {
        thread_local! {
            // (sampler, generation, context) of this thread's last launch
            // whose device was claimed.
            static SEEN: Cell<(u64, u64, usize)> = const { Cell::new((0, 0, 0)) };
        }
        let key = (self.id, self.generation.load(Ordering::Acquire), ctx as usize);
        if ctx.is_null() || SEEN.try_with(|c| c.get() == key).unwrap_or(false) {
            return None;
        }
        let dev = current_device()?;
        let _ = SEEN.try_with(|c| c.set(key));
        self.claim(dev).then_some(dev)
    }

    /// Registers [`wait_for_set_up`] once per process: called on the
    /// program's thread that is about to start a device's set-up, before
    /// the set-up thread exists. CUDA is initialised then (a context
    /// exists), so at exit it runs before CUDA's own handlers and holds
    /// them back while a set-up is in flight (seen once: an abort from an
    /// exception thrown inside CUPTI, a program ending ~0.6 s after its
    /// first launch). The handler that decodes the last samples is
    /// registered once a set-up has succeeded ([`Sampler::set_up`]).
    pub(crate) fn register_exit_handler(&self) {
        static ONCE: std::sync::Once = std::sync::Once::new();
        if self.exit_handler.is_some() {
            super::at_exit_once(&ONCE, wait_for_set_up);
        }
    }

    /// Waits until no device's set-up is in flight (the state's lock is
    /// free), at most `limit`.
    fn wait_for_set_ups(&self, limit: Duration) {
        // A set-up that has not taken the lock yet finds this and makes
        // no CUPTI call.
        self.ending.store(true, Ordering::Release);
        let deadline = Instant::now() + limit;
        while self.set_ups.load(Ordering::Acquire) > 0 {
            if Instant::now() >= deadline {
                debug("sampling: at exit, a device's set-up was still running after the wait's bound");
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A device's set-up is about to start on a thread of gpuscope's.
    pub(crate) fn set_up_begins(&self) {
        self.set_ups.fetch_add(1, Ordering::AcqRel);
    }

    /// That set-up has ended (or its thread never started).
    pub(crate) fn set_up_ends(&self) {
        let _ = self.set_ups.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Claims device `dev`'s set-up: true the first time, and never once
    /// sampling has stopped.
    fn claim(&self, dev: u32) -> bool {
        let bit = 1u64 << dev;
        self.tried.load(Ordering::Acquire) & bit == 0 && self.tried.fetch_or(bit, Ordering::AcqRel) & bit == 0
    }

    /// Sets up sampling on the device of the calling thread's current
    /// context, unless it was claimed already. For a thread of gpuscope's
    /// (see [`Sampler::set_up`]).
    pub(crate) fn set_up_current(&self) {
        if let Some(dev) = current_device().filter(|&dev| self.claim(dev)) {
            self.set_up(dev);
        }
    }

    /// Sets up sampling on device `dev`, claimed by the caller. Takes
    /// ~0.4-0.5 s of CUPTI calls, so it runs on a thread of gpuscope's,
    /// never in a launch callback, with a context of `dev` current.
    pub(crate) fn set_up(&self, dev: u32) {
        // Locked throughout, as when this ran at the first launch: another
        // device's decode is not interleaved with this one's set-up, and
        // stop waits for a set-up in progress. Only gpuscope's threads take
        // this lock (the decoder, set-ups, stop).
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.status.disabled.is_some() || st.closed {
            return;
        }
        if self.ending.load(Ordering::Acquire) {
            // The process is exiting: no CUPTI call now.
            st.status.disabled = Some(format!(
                "the session ended before device {dev}'s sampling was set up (CUPTI takes ~0.25 s from the \
                 device's first launch): nothing was sampled there"
            ));
            return;
        }
        if st.paused_since.is_some() {
            // A metrics pass holds the counters: the first launch after
            // it claims the device again (`resume` bumps the generation).
            self.tried.fetch_and(!(1u64 << dev), Ordering::AcqRel);
            return;
        }
        debug("sampling: enabling a device");
        let started = PmDevice::new(self.cupti, dev, self.interval_ns).and_then(|mut p| p.start().map(|()| p));
        match started {
            Ok(p) => {
                debug("sampling: device sampling");
                USED.store(true, Ordering::Release);
                // Only now: CUPTI's PM sampling registers exit handlers of
                // its own while a device is set up, and this one must run
                // before them (atexit runs the last registered first).
                // Registered during exit (a set-up that ended while
                // `wait_for_set_up` held the exit back) it still runs: the
                // C library runs handlers added while it runs them.
                if let Some(h) = self.exit_handler {
                    static ONCE: std::sync::Once = std::sync::Once::new();
                    super::at_exit_once(&ONCE, h);
                }
                if st.status.configs.is_empty() {
                    let configs = p.configs();
                    let mut metrics: Vec<String> = Vec::new();
                    for m in configs.iter().flatten() {
                        if !metrics.contains(m) {
                            metrics.push(m.clone());
                        }
                    }
                    st.status.metrics = metrics;
                    st.status.configs =
                        configs.into_iter().map(|metrics| SampledConfig { metrics, samples: 0 }).collect();
                    st.status.figures_missing = p.missing().iter().map(|m| m.to_string()).collect();
                }
                st.status.devices.push(dev);
                st.devices.push(p);
            }
            Err(e) if self.ending.load(Ordering::Acquire) => {
                // Not a fault to warn about: the program ended first.
                st.status.disabled = Some(format!(
                    "the session ended while device {dev}'s sampling was being set up (CUPTI takes ~0.25 s from \
                     the device's first launch): nothing was sampled there (CUPTI then said: {e})"
                ));
            }
            Err(e) => Self::give_up_locked(&mut st, dev, &e.to_string()),
        }
    }

    /// Sampling on `dev` could not be set up: said once; the session's
    /// sampling is off from then on, devices already sampling keep on
    /// (their figures stay right, the report says which devices were
    /// sampled).
    pub(crate) fn give_up(&self, dev: u32, why: &str) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Self::give_up_locked(&mut st, dev, why);
    }

    fn give_up_locked(st: &mut State, dev: u32, why: &str) {
        let why = format!("device {dev}: {why}");
        if !std::mem::replace(&mut st.warned, true) {
            eprintln!("gpuscope: sampled hardware metrics are off for this session: {why}. Tracing continues.");
        }
        st.status.disabled = Some(why);
    }

    /// Decodes every device's new samples once enough are due
    /// ([`pmsampler::decode_every`]), and all of them once sampling has
    /// stopped (the decoder thread asks every few milliseconds).
    pub(crate) fn decode(&self) -> Vec<Sample> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = std::mem::take(&mut st.leftover);
        if !st.stopping && st.last_decode.elapsed() < pmsampler::decode_every(self.interval_ns) {
            return out;
        }
        Self::decode_locked(&mut st, &mut out, None);
        out
    }

    /// Decodes every device (to the end of their records once stopping,
    /// until `deadline` if given: at exit) into `out`.
    fn decode_locked(st: &mut State, out: &mut Vec<Sample>, deadline: Option<Instant>) {
        // Timed from here: the lock may have waited for a device's set-up
        // (~0.4 s), which is not decoding.
        let t = Instant::now();
        st.last_decode = t;
        let mut failed = None;
        let to_end = st.stopping;
        for p in &mut st.devices {
            match p.decode(to_end, deadline) {
                Ok(d) => {
                    st.status.overflows += d.overflow as u64;
                    st.status.decode_data_ns += d.decode_ns;
                    st.status.evaluate_ns += d.evaluate_ns;
                    st.status.samples += d.samples.len() as u64;
                    st.status.switches += d.switches;
                    st.status.switch_ns += d.switch_ns;
                    st.status.failed_switches += d.failed_switches;
                    st.status.tail_lost |= d.cut_short;
                    for (c, n) in st.status.configs.iter_mut().zip(&d.per_config) {
                        c.samples += n;
                    }
                    out.extend(d.samples);
                }
                Err(e) => failed = Some(format!("device {}: {e}", p.device())),
            }
        }
        if let Some(why) = failed {
            let devices = Self::stop_sampling(st, why);
            if deadline.is_some() {
                // At exit nothing is released (that would call CUPTI).
                std::mem::forget(devices);
            }
        }
        st.status.decode_ns += t.elapsed().as_nanos() as u64;
    }

    /// Stops sampling everywhere and releases the devices (before CUPTI
    /// detaches); the samples still in their buffers are decoded now and
    /// handed out by the next [`Sampler::decode`].
    ///
    /// At process exit ([`Ending::Exit`]) nothing is released. The last
    /// samples are decoded only when the driver is whole: from the exit handler
    /// registered after CUDA initialised, which therefore runs before
    /// CUDA's own and finds the driver whole; decoding stops after
    /// [`EXIT_DECODE_BOUND`] (waiting for a set-up or switch in flight
    /// comes on top). Otherwise no CUPTI call is made (the driver may be
    /// tearing down: seen, a PyTorch process that never exited) and the
    /// samples not yet decoded are reported lost.
    pub(crate) fn stop(&self, ending: Ending) {
        let at_exit = ending != Ending::Stop;
        // No device is claimed after this, and a set-up claimed before
        // finds `closed` once it has the lock.
        self.tried.store(u64::MAX, Ordering::Release);
        self.ending.store(true, Ordering::Release);
        if ending == (Ending::Exit { driver_whole: false }) {
            // A decode or set-up in progress is waited for; then no device
            // is left to decode, and none is ever dropped (that would call
            // CUPTI during exit).
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.closed = true;
            st.status.tail_lost = !st.devices.is_empty();
            std::mem::forget(std::mem::take(&mut st.devices));
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.closed = true;
        if let Some(since) = st.paused_since.take() {
            st.status.paused_ns += since.elapsed().as_nanos() as u64;
        }
        for p in &mut st.devices {
            if let Err(e) = p.stop() {
                debug(&format!("sampling: stop: {e}"));
            }
        }
        st.stopping = true;
        let mut last = std::mem::take(&mut st.leftover);
        if at_exit {
            let t = Instant::now();
            let before = last.len();
            Self::decode_locked(&mut st, &mut last, Some(t + EXIT_DECODE_BOUND));
            st.status.exit_samples = (last.len() - before) as u64;
            st.status.exit_decode_ns = t.elapsed().as_nanos() as u64;
            // Not released at exit: no CUPTI call beyond the decode.
            std::mem::forget(std::mem::take(&mut st.devices));
        } else {
            Self::decode_locked(&mut st, &mut last, None);
            st.devices.clear();
        }
        st.leftover = last;
    }

    /// Gives every device's counters to a metrics pass: sampling stops and
    /// what was sampled is decoded (handed out by the next
    /// [`Sampler::decode`]); no device is set up until [`Sampler::resume`].
    pub(crate) fn pause(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.closed || st.paused_since.is_some() {
            return;
        }
        let mut failed = None;
        let mut got = Vec::new();
        for p in &mut st.devices {
            match p.suspend() {
                Ok(d) => got.push(d),
                Err(e) => failed = Some(format!("device {}: pausing for a metrics pass: {e}", p.device())),
            }
        }
        for d in got {
            st.status.samples += d.samples.len() as u64;
            for (c, n) in st.status.configs.iter_mut().zip(&d.per_config) {
                c.samples += n;
            }
            st.leftover.extend(d.samples);
        }
        if let Some(why) = failed {
            drop(Self::stop_sampling(&mut st, why));
        }
        st.paused_since = Some(Instant::now());
    }

    /// Samples again after [`Sampler::pause`], each device in the
    /// configuration it had.
    pub(crate) fn resume(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(since) = st.paused_since.take() else { return };
        st.status.paused_ns += since.elapsed().as_nanos() as u64;
        self.generation.fetch_add(1, Ordering::AcqRel);
        if st.closed {
            return;
        }
        let mut failed = None;
        for p in &mut st.devices {
            if let Err(e) = p.resume() {
                failed = Some(format!("device {}: sampling again after a metrics pass: {e}", p.device()));
            }
        }
        if let Some(why) = failed {
            drop(Self::stop_sampling(&mut st, why));
        }
    }

    /// A device failed: sampling stops altogether, said once; what was
    /// decoded stays. The devices are handed back for the caller to
    /// release (dropped) or, at exit, to keep from CUPTI (forgotten).
    #[must_use = "dropping the devices releases them through CUPTI"]
    fn stop_sampling(st: &mut State, why: String) -> Vec<PmDevice> {
        if !std::mem::replace(&mut st.warned, true) {
            eprintln!("gpuscope: sampled hardware metrics stopped: {why}. Tracing continues.");
        }
        st.status.disabled = Some(why);
        std::mem::take(&mut st.devices)
    }

    /// How sampling went.
    pub(crate) fn status(&self) -> SamplingStatus {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).status.clone()
    }
}

/// The examples' `tiny` kernel on device 0, for the GPU tests of sampling.
#[cfg(test)]
pub(crate) struct Tiny {
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
    func: cudarc::driver::CudaFunction,
    counter: cudarc::driver::CudaSlice<i32>,
}

#[cfg(test)]
impl Tiny {
    pub(crate) fn new() -> Self {
        let ctx = cudarc::driver::CudaContext::new(0).expect("a CUDA device");
        let stream = ctx.default_stream();
        let ptx = include_str!("../../../../examples/kernels/kernels.ptx");
        let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx)).expect("the examples' kernels load");
        let func = module.load_function("tiny").expect("tiny");
        let counter = stream.alloc_zeros::<i32>(1).expect("a counter");
        Tiny { stream, func, counter }
    }

    /// One launch of `blocks` blocks of `threads`.
    pub(crate) fn launch(&mut self, blocks: u32, threads: u32) {
        use cudarc::driver::{LaunchConfig, PushKernelArg};
        let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
        let mut l = self.stream.launch_builder(&self.func);
        l.arg(&mut self.counter);
        // SAFETY: tiny(int*), with a device int.
        unsafe { l.launch(cfg) }.expect("tiny launches");
    }

    /// Waits for the launches.
    pub(crate) fn sync(&self) {
        self.stream.synchronize().expect("the launches ran");
    }
}

#[cfg(test)]
mod tests {
    use super::Tiny;
    use crate::collect::{self, CollectOptions};
    use std::time::{Duration, Instant};

    /// Kernel records and PM sampling every `interval_ns`; metrics passes
    /// on demand if `on_demand`.
    fn sampling_options(interval_ns: u64, on_demand: bool) -> CollectOptions {
        CollectOptions {
            buffer_size: 1 << 20,
            max_buffers: 8,
            host_queue: 1 << 16,
            kinds: vec![cupti_sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL],
            records: true,
            attribution: true,
            host_waits: false,
            metrics: None,
            metrics_on_demand: on_demand.then(Default::default),
            sampling: Some(interval_ns),
            exit_handler: None,
            calibrate: false,
        }
    }

    /// Launches until `sampler` has set its device up (5 s at most).
    fn until_sampled(sampler: &super::Sampler, tiny: &mut Tiny) {
        let began = Instant::now();
        while sampler.status().devices.is_empty() && began.elapsed() < Duration::from_secs(5) {
            tiny.launch(1, 32);
            tiny.sync();
        }
    }

    /// The program's first launch after a sampling session starts does not
    /// wait for its device's sampling set-up (~0.4 s of CUPTI calls), which
    /// happens on a thread of gpuscope's; sampling is on soon after.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn the_first_launch_does_not_wait_for_its_devices_sampling_set_up() {
        let mut tiny = Tiny::new();
        tiny.launch(1, 32);
        tiny.sync();
        let opts = sampling_options(100_000, false);
        let (c, _outputs) = collect::start(&opts).expect("collection starts");
        let t = Instant::now();
        tiny.launch(1, 32);
        let first = t.elapsed();
        // The set-up finishes on its own thread while the program goes on.
        let sampler = c.sampler.as_ref().expect("sampling mode");
        until_sampled(sampler, &mut tiny);
        let status = sampler.status();
        collect::stop(&c, collect::Ending::Stop).expect("collection stops");
        collect::clear();
        assert!(first < Duration::from_millis(100), "the first launch call took {first:?}");
        assert_eq!(status.devices, vec![0], "device 0 sampled: {status:?}");
        assert!(status.disabled.is_none(), "{status:?}");
    }

    /// A metrics pass asked for on demand takes the device's counters from
    /// PM sampling (which cannot run beside the range profiler), measures
    /// the first launches of the kernel, and gives them back: sampling goes
    /// on after it.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn a_metrics_pass_takes_the_counters_from_sampling_and_gives_them_back() {
        use crate::model::event::HostEvent;
        let mut tiny = Tiny::new();
        tiny.launch(1, 32);
        tiny.sync();
        let opts = sampling_options(1_000_000, true);
        let (c, _outputs) = collect::start(&opts).expect("collection starts");
        let sampler = c.sampler.as_ref().expect("sampling mode");
        let collector = c.collector.as_ref().expect("a collector on demand");
        until_sampled(sampler, &mut tiny);
        sampler.pause();
        let armed = collector.arm();
        for _ in 0..5 {
            tiny.launch(4, 64);
        }
        tiny.sync();
        let mut values = collector.disarm();
        let mut events = Vec::new();
        c.host_events(&mut events);
        for (_, e) in events {
            if let HostEvent::KernelMetrics { correlation_id, values: v } = e {
                values.push((correlation_id, v));
            }
        }
        sampler.resume();
        let after = Instant::now();
        let mut sampled_again = 0;
        while sampled_again == 0 && after.elapsed() < Duration::from_secs(3) {
            tiny.launch(1, 32);
            tiny.sync();
            std::thread::sleep(Duration::from_millis(20));
            sampled_again += sampler.decode().len();
        }
        let (status, metrics) = (sampler.status(), collector.status());
        collect::stop(&c, collect::Ending::Stop).expect("collection stops");
        collect::clear();
        assert_eq!(armed, Ok(()), "the counters were free for the pass");
        assert!(metrics.disabled.is_none() && status.disabled.is_none(), "{metrics:?} {status:?}");
        let measured = values.iter().filter(|(_, v)| v.is_some()).count();
        assert_eq!(measured, 3, "the first 3 launches of the kernel: {values:?} {metrics:?}");
        assert_eq!(metrics.passes_on_demand, 1);
        assert!(status.paused_ns > 0, "{status:?}");
        assert!(sampled_again > 0, "sampling goes on after the pass: {status:?}");
    }
}
