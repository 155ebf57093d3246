//! The time of the host events sent most often, NVTX pushes and pops: the
//! CPU's time-stamp counter (a few ns a read, where CUPTI's timestamp takes
//! about 35: a `clock_gettime` behind a library call), where the kernel
//! keeps time by it (so it ticks at one rate on every core, in every power
//! state). Such a time is marked ([`TICKS`]) and turned into CUPTI's clock
//! when the decoder takes the events: against two readings of both clocks,
//! one at the session's start and one at the take ([`Anchors`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Set in a timestamp read from the time-stamp counter: ticks, not ns.
pub(crate) const TICKS: u64 = 1 << 63;

/// Whether range events are timed by the counter (set when a session
/// starts, from [`counter_usable`]).
static COUNTER: AtomicBool = AtomicBool::new(false);

/// The time-stamp counter.
#[cfg(target_arch = "x86_64")]
fn ticks() -> u64 {
    // SAFETY: RDTSC reads a register; every x86-64 CPU has it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn ticks() -> u64 {
    0
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

/// A range event's time: counter ticks marked [`TICKS`], or `ns()` where
/// the counter cannot be used.
pub(crate) fn range_time(ns: impl FnOnce() -> u64) -> u64 {
    if COUNTER.load(Ordering::Relaxed) {
        ticks() | TICKS
    } else {
        ns()
    }
}

/// One reading of both clocks: the counter halfway through a reading of
/// the other.
#[derive(Debug, Clone, Copy)]
struct Pair {
    ticks: u64,
    ns: u64,
}

fn pair(ns: &dyn Fn() -> u64) -> Pair {
    let before = ticks();
    let ns = ns();
    let after = ticks();
    Pair { ticks: before + (after.saturating_sub(before)) / 2, ns }
}

/// How long the two readings must be apart for the counter's rate: ±40 ns
/// of reading error over 1 ms is 40 ppm, 0.2 us over a 5 ms take.
const BASELINE: Duration = Duration::from_millis(1);

/// Turns a session's counter readings into its clock.
pub(crate) struct Anchors {
    ns: Box<dyn Fn() -> u64 + Send + Sync>,
    first: Option<Pair>,
}

impl Anchors {
    /// Anchors on clock `ns` (CUPTI's), read now: range events are timed
    /// by the counter from now where it can be.
    pub(crate) fn new(ns: Box<dyn Fn() -> u64 + Send + Sync>) -> Self {
        let on = counter_usable();
        let first = on.then(|| pair(&*ns));
        COUNTER.store(on, Ordering::Relaxed);
        Anchors { ns, first }
    }

    /// No counter readings to turn (times are all in ns already).
    pub(crate) fn none() -> Self {
        Anchors { ns: Box::new(|| 0), first: None }
    }

    /// A conversion of the ticks read before now (the events waiting).
    pub(crate) fn now(&self) -> Convert {
        let Some(first) = self.first else { return Convert { last: None, ns_per_tick: 0.0 } };
        let mut last = pair(&*self.ns);
        let elapsed = last.ns.saturating_sub(first.ns);
        if elapsed < BASELINE.as_nanos() as u64 {
            std::thread::sleep(BASELINE - Duration::from_nanos(elapsed));
            last = pair(&*self.ns);
        }
        let ns_per_tick = match last.ticks.checked_sub(first.ticks) {
            Some(t) if t > 0 => last.ns.saturating_sub(first.ns) as f64 / t as f64,
            _ => 0.0,
        };
        Convert { last: Some(last), ns_per_tick }
    }
}

/// Counter ticks into ns of the session's clock.
pub(crate) struct Convert {
    last: Option<Pair>,
    ns_per_tick: f64,
}

impl Convert {
    /// `ts` in ns: as it is unless it is marked [`TICKS`].
    pub(crate) fn ns(&self, ts: u64) -> u64 {
        if ts & TICKS == 0 {
            return ts;
        }
        let Some(last) = self.last else { return 0 };
        let t = ts & !TICKS;
        if t <= last.ticks {
            last.ns.saturating_sub(((last.ticks - t) as f64 * self.ns_per_tick) as u64)
        } else {
            last.ns.saturating_add(((t - last.ticks) as f64 * self.ns_per_tick) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_between_two_takes_land_between_their_times() {
        let start = std::time::Instant::now();
        let ns = move || start.elapsed().as_nanos() as u64 + 1_000_000_000;
        let anchors = Anchors { ns: Box::new(ns), first: Some(pair(&ns)) };
        let before = ns();
        std::thread::sleep(Duration::from_millis(3));
        let marked = ticks() | TICKS;
        let after = ns();
        let c = anchors.now();
        let got = c.ns(marked);
        if cfg!(target_arch = "x86_64") && counter_usable() {
            assert!(got >= before && got <= after + 1_000, "{before} <= {got} <= {after}");
        }
        assert_eq!(c.ns(12345), 12345, "a time in ns stays as it is");
    }

    #[test]
    fn without_the_counter_times_are_the_clock_s_and_unmarked() {
        let anchors = Anchors { ns: Box::new(|| 7), first: None };
        assert_eq!(anchors.now().ns(42), 42);
        assert_eq!(anchors.now().ns(TICKS | 5), 0, "a marked time without anchors cannot be placed");
    }
}
