//! PM samples inside trace windows, set against the kernels' union over the
//! same time. The graphics engine counts as active between back-to-back
//! kernels too, so its sampled share exceeds the kernels'; the ratio of the
//! two, measured where both are known, turns the engine's activity between
//! windows into the kernels' measure (the report's
//! `session_steady.windows`).
//!
//! A sample waits until the idle timeline is decided over it; the decided
//! gaps it overlaps then say how long the GPU idled in it. A sample that a
//! gap across a window's edge overlaps is left out: that gap is not
//! classified, and kernels launched before the window, without records, may
//! have run in it while the queue the host filled ahead drained.
//!
//! The gaps are the session's, where no GPU of the process ran a kernel, and
//! a sample is one device's: once samples of a second device come, the
//! ratio is not measured (each device's own idle timeline would be needed).

use super::timeline::Timeline;
use crate::model::sampled::Sample;
use std::collections::VecDeque;

/// Samples waiting at most (16 s of 1 ms samples); past it the oldest is
/// dropped, which only leaves it out of the ratio.
const MAX_WAITING: usize = 16_384;
/// Decided gaps kept at most.
const MAX_GAPS: usize = 65_536;
/// Gaps are kept this long after they are decided: a sample can arrive
/// after its time was (PM decoding lags by up to a few seconds).
const KEEP_GAPS_NS: u64 = 10_000_000_000;

/// Samples inside windows and the decided gaps they are judged by.
#[derive(Debug, Default)]
pub(crate) struct TracedSamples {
    waiting: VecDeque<Sample>,
    /// Decided gaps inside windows, by start: start, end, and whether it
    /// was classified (idle) or not (unknown).
    gaps: VecDeque<(u64, u64, bool)>,
    /// Gaps ending before this were dropped: a sample starting before it
    /// cannot be judged.
    dropped_until: u64,
    /// The device whose samples came first; `Some(None)` once another's came
    /// (nothing measured from then on).
    device: Option<Option<u32>>,
}

impl TracedSamples {
    /// Samples wholly inside trace windows.
    pub(crate) fn samples<'a>(&mut self, samples: impl IntoIterator<Item = &'a Sample>) {
        for s in samples {
            match *self.device.get_or_insert(Some(s.device)) {
                Some(d) if d == s.device => {}
                Some(_) => {
                    self.device = Some(None);
                    self.waiting.clear();
                    return;
                }
                None => return,
            }
            if self.waiting.len() >= MAX_WAITING {
                self.waiting.pop_front();
            }
            self.waiting.push_back(*s);
        }
    }

    /// A decided gap in traced time: idle (`classified`), or unknown (one
    /// across a window's edge).
    pub(crate) fn gap(&mut self, start: u64, end: u64, classified: bool) {
        if end <= start {
            return;
        }
        if self.gaps.len() >= MAX_GAPS {
            if let Some((_, e, _)) = self.gaps.pop_front() {
                self.dropped_until = self.dropped_until.max(e);
            }
        }
        // Nearly in order: from the back.
        let i = crate::sorted_deque::partition_point_from_back(&self.gaps, |g| g.0 <= start);
        self.gaps.insert(i, (start, end, classified));
    }

    /// Judges the samples that end by `decided` (the idle timeline decided
    /// until then) into `timeline`, and drops gaps too old to be needed.
    pub(crate) fn settle(&mut self, decided: u64, timeline: &mut Timeline) {
        while let Some(s) = self.waiting.front().copied().filter(|s| s.end <= decided) {
            self.waiting.pop_front();
            if let Some(idle) = self.idle_in(s.start, s.end) {
                timeline.traced_sample(&s, idle);
            }
        }
        let keep_from = decided.saturating_sub(KEEP_GAPS_NS);
        while let Some(&(_, e, _)) = self.gaps.front().filter(|g| g.1 < keep_from) {
            self.gaps.pop_front();
            self.dropped_until = self.dropped_until.max(e);
        }
    }

    /// The idle time in `[start, end)`, or `None` where a gap of unknown
    /// content overlaps it or its gaps were dropped.
    fn idle_in(&self, start: u64, end: u64) -> Option<u64> {
        if start < self.dropped_until {
            return None;
        }
        // Gaps do not overlap, so their ends are in order too.
        let i = self.gaps.partition_point(|g| g.1 <= start);
        let mut idle = 0u64;
        for &(s, e, classified) in self.gaps.iter().skip(i) {
            if s >= end {
                break;
            }
            if !classified {
                return None;
            }
            idle = idle.saturating_add(e.min(end) - s.max(start));
        }
        Some(idle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn samples_wait_for_their_gaps_and_those_across_a_window_edge_leave_them_out() {
        let mut t = TracedSamples::default();
        let mut tl = Timeline::new(0);
        t.samples(&Sample::flat_every(MS, 0, 0, 4 * MS, 90.0, 50.0));
        // Decided until 2 ms: an idle gap of 0.25 ms in the first sample.
        t.gap(MS / 2, 3 * MS / 4, true);
        t.settle(2 * MS, &mut tl);
        assert_eq!((tl.bins[0].traced_ns, tl.bins[0].traced_busy_ns), (2 * MS, 2 * MS - MS / 4));
        // An unknown gap in the third sample, decided late: it is left out.
        t.gap(2 * MS + MS / 10, 2 * MS + MS / 5, false);
        t.settle(4 * MS, &mut tl);
        assert_eq!((tl.bins[0].traced_ns, tl.bins[0].traced_busy_ns), (3 * MS, 3 * MS - MS / 4));
        let f = tl.bins[0].traced_sampled.figures().expect("three samples");
        assert_eq!((f.covered_ns, f.gpu_busy_pct), (3 * MS, Some(90.0)));
        assert!(t.waiting.is_empty());
    }

    #[test]
    fn a_second_device_s_samples_stop_the_measure() {
        let mut t = TracedSamples::default();
        let mut tl = Timeline::new(0);
        t.samples(&[Sample::flat(0, 0, MS, 50.0, 10.0)]);
        t.samples(&[Sample::flat(1, 0, MS, 50.0, 10.0)]);
        t.samples(&[Sample::flat(0, MS, 2 * MS, 50.0, 10.0)]);
        t.settle(u64::MAX, &mut tl);
        assert!(tl.bins.iter().all(|b| b.traced_ns == 0), "the session's gaps are no one device's");
    }

    #[test]
    fn memory_is_bounded_and_samples_older_than_the_kept_gaps_are_left_out() {
        let mut t = TracedSamples::default();
        let mut tl = Timeline::new(0);
        for i in 0..(MAX_GAPS as u64 + 10) {
            t.gap(i * 10, i * 10 + 5, true);
        }
        assert_eq!(t.gaps.len(), MAX_GAPS);
        t.samples(&[Sample::flat(0, 0, 50, 50.0, 10.0)]);
        t.settle(u64::MAX, &mut tl);
        assert!(tl.bins.iter().all(|b| b.traced_ns == 0), "its gaps were dropped");
        assert!(t.gaps.is_empty(), "all older than kept");
        for i in 0..(MAX_WAITING as u64 + 5) {
            t.samples(&[Sample::flat(0, i * MS, (i + 1) * MS, 50.0, 10.0)]);
        }
        assert_eq!(t.waiting.len(), MAX_WAITING);
    }
}
