//! Sampling mode's trace windows: the stretches of the session in which
//! kernel records were off. Idle time and range figures that need the
//! kernel timeline are not taken from them.

use std::collections::VecDeque;

/// Untraced stretches held at once; older ones are folded into
/// `folded_until` (anything starting before it is taken as touching one).
const MAX_HELD: usize = 1 << 12;

/// The untraced stretches of a session so far, in time order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Untraced {
    closed: VecDeque<(u64, u64)>,
    /// Tracing has been off since then.
    open: Option<u64>,
    /// End of the latest stretch folded out of `closed`.
    folded_until: u64,
    /// Closed stretches: how many, and their total length (ns).
    closed_count: u64,
    closed_ns: u64,
}

impl Untraced {
    /// Tracing went off at `ts`.
    pub(crate) fn off(&mut self, ts: u64) {
        if self.open.is_none() {
            self.open = Some(ts);
        }
    }

    /// Tracing came back on at `ts`.
    pub(crate) fn on(&mut self, ts: u64) {
        let Some(start) = self.open.take() else { return };
        self.closed_count += 1;
        self.closed_ns = self.closed_ns.saturating_add(ts.saturating_sub(start));
        if ts > start {
            self.closed.push_back((start, ts));
        }
        if self.closed.len() > MAX_HELD {
            if let Some((_, e)) = self.closed.pop_front() {
                self.folded_until = self.folded_until.max(e);
            }
        }
    }

    /// Whether `[lo, hi)` overlaps an untraced stretch (an empty span: lies
    /// in one).
    pub(crate) fn touches(&self, lo: u64, hi: u64) -> bool {
        let hi = hi.max(lo.saturating_add(1));
        if lo < self.folded_until || self.open.is_some_and(|o| hi > o) {
            return true;
        }
        // The first stretch ending after `lo` is the only candidate.
        let i = self.closed.partition_point(|&(_, e)| e <= lo);
        self.closed.get(i).is_some_and(|&(s, _)| s < hi)
    }

    /// Calls `f` on each part of `[lo, hi)` that no untraced stretch
    /// covers (before the folded stretches' end counts as covered).
    pub(crate) fn traced_parts(&self, lo: u64, hi: u64, mut f: impl FnMut(u64, u64)) {
        let mut t = lo.max(self.folded_until);
        let end = self.open.map_or(hi, |o| hi.min(o));
        let i = self.closed.partition_point(|&(_, e)| e <= t);
        for &(s, e) in self.closed.iter().skip(i) {
            if s >= end {
                break;
            }
            if s > t {
                f(t, s);
            }
            t = t.max(e);
        }
        if end > t {
            f(t, end);
        }
    }

    /// Whether tracing went off inside `(lo, hi]`: a window closed while a
    /// kernel spanning it ran.
    pub(crate) fn went_off_within(&self, lo: u64, hi: u64) -> bool {
        if self.open.is_some_and(|o| lo < o && o <= hi) {
            return true;
        }
        let i = self.closed.partition_point(|&(s, _)| s <= lo);
        self.closed.get(i).is_some_and(|&(s, _)| s <= hi)
    }

    /// Stretches that ended (each followed by a traced window), and the
    /// total untraced time if the session ends at `end` (ns).
    pub(crate) fn totals(&self, end: u64) -> (u64, u64) {
        let open = self.open.map_or(0, |o| end.saturating_sub(o));
        (self.closed_count, self.closed_ns.saturating_add(open))
    }

    /// Whether tracing has ever been off.
    pub(crate) fn any(&self) -> bool {
        self.open.is_some() || self.closed_count > 0
    }

    /// Since when tracing has been off, if it is.
    pub(crate) fn off_since(&self) -> Option<u64> {
        self.open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_told_by_whether_they_touch_an_untraced_stretch() {
        let mut u = Untraced::default();
        assert!(!u.touches(0, 100));
        u.off(100);
        u.on(200);
        u.off(300);
        u.on(400);
        assert!(!u.touches(0, 100), "ends where the stretch starts");
        assert!(u.touches(50, 150));
        assert!(u.touches(150, 160), "inside");
        assert!(!u.touches(200, 300), "between stretches");
        assert!(u.touches(250, 350));
        assert!(u.touches(0, 1000), "spans both");
        assert!(!u.touches(400, 500));
        assert!(u.touches(150, 150), "an empty span inside one");
        u.off(600);
        assert_eq!(u.off_since(), Some(600));
        assert_eq!(u.totals(1000), (2, 100 + 100 + 400));
        assert!(u.touches(500, 700), "overlaps the open stretch");
        assert!(!u.touches(500, 600));
    }

    #[test]
    fn the_traced_parts_of_a_span_are_what_no_stretch_covers() {
        let mut u = Untraced::default();
        u.off(100);
        u.on(200);
        u.off(300);
        u.on(400);
        let parts = |u: &Untraced, lo, hi| {
            let mut v = Vec::new();
            u.traced_parts(lo, hi, |a, b| v.push((a, b)));
            v
        };
        assert_eq!(parts(&u, 0, 1000), [(0, 100), (200, 300), (400, 1000)]);
        assert_eq!(parts(&u, 150, 250), [(200, 250)], "from inside a stretch");
        assert_eq!(parts(&u, 120, 180), [], "inside one");
        assert_eq!(parts(&u, 250, 260), [(250, 260)], "between");
        u.off(600);
        assert_eq!(parts(&u, 350, 900), [(400, 600)], "the open stretch covers the rest");
    }

    #[test]
    fn a_window_closing_inside_a_span_is_told() {
        let mut u = Untraced::default();
        assert!(!u.went_off_within(0, 1000));
        u.off(100);
        u.on(200);
        assert!(u.went_off_within(90, 150), "ran across the close");
        assert!(u.went_off_within(90, 100), "ended at the close");
        assert!(!u.went_off_within(100, 150), "began at the close: launched after it");
        assert!(!u.went_off_within(200, 300), "inside the next window");
        u.off(400);
        assert!(u.went_off_within(350, 5000), "across the open stretch's start");
        assert!(!u.went_off_within(410, 5000), "after it");
        assert!(u.went_off_within(0, 1000), "spans both");
    }

    #[test]
    fn memory_is_bounded_and_old_spans_count_as_untraced() {
        let mut u = Untraced::default();
        for i in 0..(MAX_HELD as u64 + 10) {
            u.off(i * 100 + 50);
            u.on(i * 100 + 60);
        }
        assert!(u.closed.len() <= MAX_HELD);
        assert!(u.touches(0, 10), "before the folded stretches: taken as touching");
        let last = (MAX_HELD as u64 + 9) * 100;
        assert!(!u.touches(last, last + 40));
        assert!(u.touches(last + 55, last + 56));
    }

    #[test]
    fn an_empty_span_at_the_top_of_the_clock_is_told_like_any_other() {
        let mut u = Untraced::default();
        assert!(!u.touches(u64::MAX, u64::MAX));
        u.off(u64::MAX - 1);
        assert!(u.touches(u64::MAX, u64::MAX));
    }
}
