//! How far gpuscope's own cost has delayed the program's host, for the
//! idle time it is to blame for. Tracing makes every launch call slower
//! (CUPTI's kernel records and gpuscope's callback), and a framework
//! integration's hooks take time outside launches. That time delays every
//! later call of the host until the host next waits for the GPU: after a
//! synchronisation (or blocking copy) that waited, the host runs at the
//! GPU's pace again, and the delay built up before it is gone. The GPU
//! idles for the delay only where it ran dry waiting for the host: an idle
//! gap ended by a launch is the profiler's for at most the delay built up
//! by then, which that gap then takes up.
//!
//! So a program whose host runs ahead and waits for the GPU every step
//! (XLA's runtime) is charged one launch's cost a step, not every
//! launch's, while a launch-bound loop, whose GPU waits for every launch,
//! is charged them all.

use std::collections::VecDeque;

/// A synchronisation this long or longer waited for the GPU (an idle
/// stream's returns within a few microseconds).
pub(crate) const WAITED_NS: u64 = 20_000;

/// Cost points kept before they are applied (1 MiB); past it the oldest
/// is applied early, charged to a gap it may follow (at a launch rate the
/// kernel records lag that far behind).
const MAX_POINTS: usize = 1 << 16;

/// A point's cost that marks a wait for the GPU instead.
const WAIT: u64 = u64::MAX;

/// The host's delay from gpuscope's cost, over time.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostDelay {
    /// Costs (time, ns) and waits (time, [`WAIT`]) not yet applied, by
    /// time.
    points: VecDeque<(u64, u64)>,
    /// The delay built up by the points applied, ns.
    delay: u64,
    /// Where the points applied end.
    applied_until: u64,
}

impl HostDelay {
    /// gpuscope held the host `ns` at `ts`.
    pub(crate) fn cost(&mut self, ts: u64, ns: u64) {
        if ns > 0 {
            self.insert(ts, ns.min(WAIT - 1));
        }
    }

    /// The host waited for the GPU until `end` (`start` to `end`: a wait
    /// [`WAITED_NS`] or longer; shorter calls found the GPU done).
    pub(crate) fn wait(&mut self, start: u64, end: u64) {
        if end.saturating_sub(start) >= WAITED_NS {
            self.insert(end, WAIT);
        }
    }

    /// The host was held in a call until `t` for as long as a wait (a
    /// launch call blocked on a full launch queue): the GPU set its pace.
    pub(crate) fn waited_at(&mut self, t: u64) {
        self.insert(t, WAIT);
    }

    fn insert(&mut self, ts: u64, ns: u64) {
        if ts < self.applied_until {
            // Late (another thread's queue): its time is decided. A cost
            // still delays what follows; a wait would clear costs that
            // came after it, so it is left out (charging more, not less).
            if ns != WAIT {
                self.apply(ns);
            }
            return;
        }
        if self.points.len() >= MAX_POINTS {
            if let Some((t, n)) = self.points.pop_front() {
                self.applied_until = t;
                self.apply(n);
            }
        }
        // Nearly in order: from the back.
        let i = self.points.iter().rposition(|&(t, _)| t <= ts).map_or(0, |i| i + 1);
        self.points.insert(i, (ts, ns));
    }

    fn apply(&mut self, ns: u64) {
        self.delay = if ns == WAIT { 0 } else { self.delay.saturating_add(ns) };
    }

    /// The delay at `t`, with every point up to it applied.
    pub(crate) fn at(&mut self, t: u64) -> u64 {
        while let Some(&(ts, ns)) = self.points.front() {
            if ts > t {
                break;
            }
            self.points.pop_front();
            self.apply(ns);
        }
        self.applied_until = self.applied_until.max(t);
        self.delay
    }

    /// The GPU waited `ns` of the delay: taken up.
    pub(crate) fn spend(&mut self, ns: u64) {
        self.delay = self.delay.saturating_sub(ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_build_up_until_a_wait_and_gaps_take_them_up() {
        let mut d = HostDelay::default();
        for i in 0..10 {
            d.cost(100 + i, 5);
        }
        assert_eq!(d.at(105), 30, "only the points up to the time");
        assert_eq!(d.at(200), 50);
        d.spend(20);
        assert_eq!(d.at(200), 30);
        // A wait for the GPU: the host runs at its pace again.
        d.wait(300, 300 + WAITED_NS);
        d.cost(400 + WAITED_NS, 7);
        assert_eq!(d.at(350), 30, "the wait not reached yet");
        assert_eq!(d.at(500 + WAITED_NS), 7);
        // A short call did not wait.
        d.wait(600 + WAITED_NS, 601 + WAITED_NS);
        assert_eq!(d.at(700 + WAITED_NS), 7);
    }

    #[test]
    fn points_out_of_order_and_late_ones_still_count() {
        let mut d = HostDelay::default();
        d.cost(20, 2);
        d.cost(10, 1);
        d.wait(0, 15 + WAITED_NS);
        d.cost(30 + WAITED_NS, 4);
        assert_eq!(d.at(16), 1, "in time order: the later point and the wait still ahead");
        assert_eq!(d.at(30 + WAITED_NS), 4, "the wait cleared the first two");
        d.cost(5, 8);
        assert_eq!(d.at(40 + WAITED_NS), 12, "a late point applies at once");
        d.wait(0, 1 + WAITED_NS);
        assert_eq!(d.at(50 + WAITED_NS), 12, "a late wait clears nothing that came after it");
        d.waited_at(60 + WAITED_NS);
        assert_eq!(d.at(60 + WAITED_NS), 0, "a launch call that blocked");
    }

    #[test]
    fn points_stay_bounded() {
        let mut d = HostDelay::default();
        for i in 0..(MAX_POINTS as u64 + 100) {
            d.cost(i, 1);
        }
        assert_eq!(d.points.len(), MAX_POINTS);
        assert_eq!(d.at(u64::MAX - 1), MAX_POINTS as u64 + 100, "nothing lost");
    }
}
