//! The time of the host events sent most often, NVTX pushes and pops: the
//! CPU's time-stamp counter (a few ns a read, where CUPTI's timestamp takes
//! about 35: a `clock_gettime` behind a library call), where the kernel
//! keeps time by it (so it ticks at one rate on every core, in every power
//! state). Such a time is marked ([`TICKS`]) and turned into CUPTI's clock
//! when the decoder takes the events: between two readings of both clocks,
//! the previous take's (or the session's start's) and this one's, taken
//! after the events were ([`Anchors`]). Consecutive takes share a reading,
//! so converted times never step back from one take to the next.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Set in a timestamp read from the time-stamp counter: ticks, not ns.
pub(crate) const TICKS: u64 = 1 << 63;

/// The time-stamp counter, marked [`TICKS`].
#[cfg(target_arch = "x86_64")]
pub(crate) fn ticks() -> u64 {
    // SAFETY: RDTSC reads a register; every x86-64 CPU has it.
    let t = unsafe { core::arch::x86_64::_rdtsc() };
    t | TICKS
}

/// The time-stamp counter, marked [`TICKS`] (none off x86-64: never read,
/// [`counter_usable`] says no).
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn ticks() -> u64 {
    TICKS
}

/// Whether the kernel keeps time by the counter (it checked that the
/// counter is synchronised across cores and runs at a constant rate) and
/// the CPU says it never stops.
fn counter_usable() -> bool {
    static USABLE: OnceLock<bool> = OnceLock::new();
    *USABLE.get_or_init(|| {
        let source = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
        let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        cfg!(target_arch = "x86_64")
            && source.is_ok_and(|s| s.trim() == "tsc")
            && flags.lines().find(|l| l.starts_with("flags")).is_some_and(|l| {
                let has = |f: &str| l.split_whitespace().any(|w| w == f);
                has("constant_tsc") && has("nonstop_tsc")
            })
    })
}

/// One reading of both clocks: the counter (unmarked) halfway through a
/// reading of the other.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pair {
    ticks: u64,
    ns: u64,
}

/// Readings taken for one [`Pair`]: the narrowest is kept (one the thread
/// was preempted in, or a clock's slow first call, is wide).
const READINGS: usize = 5;

/// The narrowest of [`READINGS`] readings; `None`: the clock failed (reads
/// 0).
fn pair(ns: &dyn Fn() -> u64) -> Option<Pair> {
    let mut best: Option<(u64, Pair)> = None;
    for _ in 0..READINGS {
        let before = ticks() & !TICKS;
        let n = ns();
        let after = ticks() & !TICKS;
        if n == 0 {
            return None;
        }
        let width = after.saturating_sub(before);
        if best.map_or(true, |(w, _)| width < w) {
            best = Some((width, Pair { ticks: before + width / 2, ns: n }));
        }
    }
    best.map(|(_, p)| p)
}

/// How long two readings must be apart for the counter's rate: ±50 ns of
/// reading error over 1 ms is 100 ppm, 0.1 us across a millisecond.
const BASELINE: Duration = Duration::from_millis(1);

/// Turns a session's counter readings into its clock.
pub(crate) struct Anchors {
    ns: Box<dyn Fn() -> u64 + Send + Sync>,
    /// The reading at the session's start; `None`: range events are timed
    /// in ns.
    first: Option<Pair>,
    /// The last take's reading and the rate used up to it.
    last: Mutex<Option<(Pair, f64)>>,
}

impl Anchors {
    /// Anchors on clock `ns` (CUPTI's), read now: range events are timed
    /// by the counter where it can be.
    pub(crate) fn new(ns: Box<dyn Fn() -> u64 + Send + Sync>) -> Self {
        let first = counter_usable().then(|| pair(&*ns)).flatten();
        Anchors { ns, first, last: Mutex::new(None) }
    }

    /// No counter: times are all in ns.
    #[cfg(test)]
    pub(crate) fn none() -> Self {
        Anchors { ns: Box::new(|| 0), first: None, last: Mutex::new(None) }
    }

    /// Whether range events are timed by the counter ([`ticks`]).
    pub(crate) fn counter(&self) -> bool {
        self.first.is_some()
    }

    /// A conversion of the counter readings taken before now (every event
    /// taken so far was sent before this call).
    pub(crate) fn now(&self) -> Convert {
        let Some(first) = self.first else { return Convert { from: None, ns_per_tick: 0.0 } };
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let (from, rate_before) = last.unwrap_or((first, 0.0));
        let Some(mut to) = pair(&*self.ns) else {
            // The clock failed: on from the last reading at the last rate.
            return Convert { from: Some(from), ns_per_tick: rate_before };
        };
        let elapsed = to.ns.saturating_sub(first.ns);
        if elapsed < BASELINE.as_nanos() as u64 {
            // A take right after the start (a session stopped at once):
            // too short a baseline for the rate.
            std::thread::sleep(BASELINE - Duration::from_nanos(elapsed));
            to = pair(&*self.ns).unwrap_or(to);
        }
        let rate = |a: Pair, b: Pair| match (b.ticks.checked_sub(a.ticks), b.ns.checked_sub(a.ns)) {
            (Some(t), Some(n)) if t > 0 && n >= BASELINE.as_nanos() as u64 => Some(n as f64 / t as f64),
            _ => None,
        };
        // This take's own segment where it is long enough, else the
        // session's whole span so far.
        let ns_per_tick = rate(from, to).or_else(|| rate(first, to)).unwrap_or(rate_before);
        *last = Some((to, ns_per_tick));
        Convert { from: Some(from), ns_per_tick }
    }
}

/// Counter readings into ns of the session's clock.
pub(crate) struct Convert {
    /// Where the segment starts (`None`: nothing to convert).
    from: Option<Pair>,
    ns_per_tick: f64,
}

impl Convert {
    /// `ts` in ns: as it is unless it is marked [`TICKS`].
    pub(crate) fn ns(&self, ts: u64) -> u64 {
        if ts & TICKS == 0 {
            return ts;
        }
        let Some(from) = self.from else { return 0 };
        let t = ts & !TICKS;
        let ns = from.ns as f64 + (t as f64 - from.ticks as f64) * self.ns_per_tick;
        // Saturating: a reading before the clock's zero reads 0.
        ns.max(0.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    /// A clock in ns from now on (nonzero).
    fn clock() -> impl Fn() -> u64 + Send + Sync + Copy + 'static {
        let start = Instant::now();
        move || start.elapsed().as_nanos() as u64 + 1_000_000_000
    }

    #[test]
    fn ticks_read_between_takes_land_between_the_clock_readings_around_them() {
        if !counter_usable() {
            return;
        }
        let ns = clock();
        let anchors = Anchors::new(Box::new(ns));
        let mut last = 0;
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(2));
            let before = ns();
            let marked = ticks();
            let after = ns();
            let got = anchors.now().ns(marked);
            assert!(got + 200 >= before && got <= after + 200, "{before} <= {got} <= {after}");
            assert!(got > last, "later readings convert to later times");
            last = got;
        }
        assert_eq!(anchors.now().ns(12345), 12345, "a time in ns stays as it is");
    }

    #[test]
    fn a_slow_first_clock_call_does_not_skew_the_start() {
        if !counter_usable() {
            return;
        }
        let ns = clock();
        let slow = AtomicBool::new(true);
        // CUPTI's first timestamp call took 350-400 us on the H200.
        let first_slow = move || {
            if slow.swap(false, Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(400));
            }
            ns()
        };
        let anchors = Anchors::new(Box::new(first_slow));
        let before = ns();
        let marked = ticks();
        let after = ns();
        std::thread::sleep(Duration::from_millis(3));
        let got = anchors.now().ns(marked);
        assert!(got + 2_000 >= before && got <= after + 2_000, "{before} <= {got} <= {after}");
    }

    #[test]
    fn without_the_counter_or_a_clock_times_are_in_ns() {
        let failing = Anchors::new(Box::new(|| 0));
        assert!(!failing.counter(), "a clock that reads 0 cannot anchor the counter");
        assert_eq!(failing.now().ns(42), 42);
        let none = Anchors::none();
        assert!(!none.counter());
        assert_eq!(none.now().ns(TICKS | 5), 0, "a marked time without anchors cannot be placed");
    }
}
