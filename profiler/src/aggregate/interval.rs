//! A bounded union of time intervals: GPU busy time of a range.

/// Disjoint, sorted intervals; once more than `cap` are held, the earliest
/// are folded into running totals (kernels arrive roughly in time order, so
/// folded intervals are ones no later kernel overlaps).
#[derive(Debug, Clone, Default)]
pub(crate) struct IntervalUnion {
    spans: Vec<(u64, u64)>,
    folded_total: u64,
    folded_in_window: u64,
}

const CAP: usize = 256;

impl IntervalUnion {
    /// Adds `[start, end)`.
    pub(crate) fn add(&mut self, start: u64, end: u64) {
        if let Some((fs, fe)) = self.add_folding(start, end) {
            self.folded_total = self.folded_total.saturating_add(fe - fs);
            self.folded_in_window = self.folded_in_window.saturating_add(fe - fs);
        }
    }

    /// Adds `[start, end)`; the span folded out to keep the bound, if one
    /// was, is returned instead of counted (its caller accounts for it).
    pub(crate) fn add_folding(&mut self, start: u64, end: u64) -> Option<(u64, u64)> {
        if end <= start {
            return None;
        }
        // First span that ends at or after `start`: everything it and later
        // spans overlap merges into one.
        let i = self.spans.partition_point(|&(_, e)| e < start);
        let mut j = i;
        let (mut s, mut e) = (start, end);
        while j < self.spans.len() && self.spans[j].0 <= e {
            s = s.min(self.spans[j].0);
            e = e.max(self.spans[j].1);
            j += 1;
        }
        self.spans.splice(i..j, [(s, e)]);
        (self.spans.len() > CAP).then(|| self.spans.remove(0))
    }

    /// The spans still held, taken out (the folded ones were handed out by
    /// [`IntervalUnion::add_folding`]).
    pub(crate) fn take_spans(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.spans)
    }

    /// Total covered time (saturating: a folded span and a later one may
    /// overlap, so the sum can pass the clock's range).
    pub(crate) fn total(&self) -> u64 {
        self.spans.iter().fold(self.folded_total, |t, &(s, e)| t.saturating_add(e - s))
    }

    /// Covered time inside `[lo, hi)` (folded spans count whole).
    pub(crate) fn within(&self, lo: u64, hi: u64) -> u64 {
        self.spans
            .iter()
            .fold(self.folded_in_window, |t, &(s, e)| t.saturating_add(e.min(hi).saturating_sub(s.max(lo))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_and_out_of_order_intervals_merge() {
        let mut u = IntervalUnion::default();
        u.add(10, 20);
        u.add(30, 40);
        u.add(15, 32); // bridges both
        u.add(0, 5);
        u.add(50, 50); // empty, ignored
        assert_eq!(u.total(), 5 + 30);
        assert_eq!(u.within(12, 35), 23);
        assert_eq!(u.within(100, 200), 0);
    }

    #[test]
    fn many_disjoint_intervals_stay_bounded_and_exact_in_total() {
        let mut u = IntervalUnion::default();
        for i in 0..10_000u64 {
            u.add(i * 10, i * 10 + 3);
        }
        assert!(u.spans.len() <= CAP);
        assert_eq!(u.total(), 30_000);
    }

    #[test]
    fn a_span_overlapping_folded_ones_saturates_the_total() {
        let mut u = IntervalUnion::default();
        let half = 1u64 << 63;
        u.add(0, half);
        for i in 0..CAP as u64 {
            u.add(half + 2 + 2 * i, half + 3 + 2 * i);
        }
        // [0, 2^63) is folded; a span over it counts again.
        u.add(0, half + 1_000);
        assert_eq!(u.total(), u64::MAX);
        assert_eq!(u.within(0, u64::MAX), u64::MAX);
    }
}
