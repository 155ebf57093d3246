//! Sampling mode's join: PM samples (device-wide counters over fixed
//! intervals) and kernel records (exact times) meet here.
//!
//! A sample's counters accrue while any kernel runs in it, so a kernel gets
//! its overlap's share of the sample's counts over the time kernels ran in
//! it (`busy`), not over the whole sample: a kernel followed by a gap reads
//! its own SM efficiency, not one diluted by the gap. That needs every
//! kernel overlapping a sample, so a sample is joined only once the
//! timeline before its end is decided (no kernel still to come can start
//! there) and its kernels wait for it, in memory bounded by
//! [`SampleJoin::new`]'s limits; what the bounds cost is counted.

use crate::model::path::PathId;
use crate::model::sampled::{Sample, SampledAcc};
use std::collections::{BTreeMap, VecDeque};

/// A kernel waiting for its samples.
#[derive(Debug, Clone)]
struct Pending {
    start: u64,
    end: u64,
    name: u32,
    path: PathId,
    /// Overlap-weighted shares of every sample it overlaps.
    all: SampledAcc,
    /// Samples wholly inside it: its own figure when there are enough.
    interior: SampledAcc,
}

/// A kernel whose samples are all in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Joined {
    pub name: u32,
    pub path: PathId,
    /// Its shares of the samples it overlaps (for range figures).
    pub all: SampledAcc,
    /// The samples wholly inside it, when at least the minimum.
    pub own: Option<SampledAcc>,
}

#[derive(Default)]
struct DeviceJoin {
    /// Samples not yet joined, by start.
    samples: VecDeque<Sample>,
    /// End of the latest sample received.
    watermark: u64,
    /// End of the latest sample joined.
    joined_until: u64,
    pending: Vec<Pending>,
}

/// Samples and kernels of every device, joined as the timeline is decided.
pub(crate) struct SampleJoin {
    min_kernel_samples: u32,
    max_samples: usize,
    max_pending: usize,
    devices: BTreeMap<u32, DeviceJoin>,
    /// Samples dropped unjoined to bound memory.
    pub expired: u64,
    /// Kernels no sample covered.
    pub unsampled: u64,
}

impl SampleJoin {
    /// Per device at most `max_samples` samples and `max_pending` kernels
    /// wait; kernels with `min_kernel_samples` whole samples inside get a
    /// figure of their own.
    pub(crate) fn new(min_kernel_samples: u32, max_samples: usize, max_pending: usize) -> Self {
        SampleJoin {
            min_kernel_samples: min_kernel_samples.max(1),
            max_samples: max_samples.max(1),
            max_pending: max_pending.max(1),
            devices: BTreeMap::new(),
            expired: 0,
            unsampled: 0,
        }
    }

    /// Samples of one decode (any devices, each device's in time order).
    pub(crate) fn samples(&mut self, samples: &[Sample]) {
        for s in samples {
            let d = self.devices.entry(s.device).or_default();
            if s.end <= d.watermark {
                continue;
            }
            d.watermark = s.end;
            d.samples.push_back(*s);
            if d.samples.len() > self.max_samples {
                d.samples.pop_front();
                self.expired += 1;
            }
        }
    }

    /// A kernel of `device` ran over `[start, end)`.
    pub(crate) fn kernel(&mut self, device: u32, start: u64, end: u64, name: u32, path: PathId) {
        let d = self.devices.entry(device).or_default();
        if end <= d.joined_until || d.pending.len() >= self.max_pending {
            // Its samples were joined already (it came too late), or there
            // is no room to wait.
            self.unsampled += 1;
            return;
        }
        d.pending.push(Pending { start, end, name, path, all: SampledAcc::default(), interior: SampledAcc::default() });
    }

    /// The timeline is decided before `decided`: joins every sample that
    /// ends by then and hands out the kernels whose samples are all in.
    pub(crate) fn advance(&mut self, decided: u64, out: &mut Vec<Joined>) {
        let min_own = self.min_kernel_samples as u64;
        for d in self.devices.values_mut() {
            let limit = decided.min(d.watermark);
            // Nothing to join: nothing to hand out either (kernels are done
            // only once samples after them are joined).
            if !d.samples.front().is_some_and(|s| s.end <= limit) {
                continue;
            }
            d.pending.sort_unstable_by_key(|k| k.start);
            // Sweep: samples in time order, kernels entering the active set
            // by start and leaving it once they end before the sample.
            let mut next = 0;
            let mut active: Vec<usize> = Vec::new();
            while d.samples.front().is_some_and(|s| s.end <= limit) {
                let Some(s) = d.samples.pop_front() else { break };
                while next < d.pending.len() && d.pending[next].start < s.end {
                    active.push(next);
                    next += 1;
                }
                active.retain(|&i| d.pending[i].end > s.start);
                let busy = busy_within(s.start, s.end, active.iter().map(|&i| (d.pending[i].start, d.pending[i].end)));
                d.joined_until = s.end;
                if busy == 0 {
                    continue;
                }
                let len = s.len() as f64;
                // Counters accrue while kernels run: over their time the SM
                // efficiency is the sample's scaled to it.
                // (NaN when the sample's configuration did not hold it:
                // `min` would make that 100.)
                let efficiency = s.sm_efficiency_pct as f64 * len / busy as f64;
                let efficiency = if efficiency.is_finite() { efficiency.min(100.0) } else { f64::NAN };
                // The engine is active while kernels run: over their time
                // it says nothing.
                let engine = f64::NAN;
                for &i in &active {
                    let k = &mut d.pending[i];
                    let overlap = k.end.min(s.end).saturating_sub(k.start.max(s.start));
                    if overlap == 0 {
                        continue;
                    }
                    k.all.add(&s, overlap as f64 / busy as f64, overlap as f64, efficiency, engine);
                    if k.start <= s.start && k.end >= s.end {
                        k.interior.add(&s, overlap as f64 / busy as f64, overlap as f64, efficiency, engine);
                    }
                }
            }
            // A kernel is done once no sample still to come overlaps it.
            let until = d.joined_until;
            let unsampled = &mut self.unsampled;
            d.pending.retain(|k| {
                if k.end > until {
                    return true;
                }
                if k.all.covered_ns > 0.0 {
                    let own = (k.interior.samples >= min_own).then_some(k.interior);
                    out.push(Joined { name: k.name, path: k.path, all: k.all, own });
                } else {
                    *unsampled += 1;
                }
                false
            });
        }
    }

    /// The session ended at `end`: joins what can be, and hands out every
    /// kernel still waiting with the samples it got.
    pub(crate) fn finish(&mut self, end: u64, out: &mut Vec<Joined>) {
        self.advance(end, out);
        let min_own = self.min_kernel_samples as u64;
        for d in self.devices.values_mut() {
            for k in d.pending.drain(..) {
                if k.all.covered_ns > 0.0 {
                    let own = (k.interior.samples >= min_own).then_some(k.interior);
                    out.push(Joined { name: k.name, path: k.path, all: k.all, own });
                } else {
                    self.unsampled += 1;
                }
            }
            d.samples.clear();
        }
    }

    /// Kernels waiting now.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.devices.values().map(|d| d.pending.len()).sum()
    }
}

/// Length of the union of `intervals` within `[start, end)`.
fn busy_within(start: u64, end: u64, intervals: impl Iterator<Item = (u64, u64)>) -> u64 {
    let mut clipped: Vec<(u64, u64)> =
        intervals.map(|(s, e)| (s.max(start), e.min(end))).filter(|(s, e)| e > s).collect();
    clipped.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(u64, u64)> = None;
    for (s, e) in clipped {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::path::ROOT;

    fn figures(j: &Joined) -> (f64, f64) {
        let f = j.all.figures().expect("covered");
        (f.sm_efficiency_pct.unwrap_or(f64::NAN), f.achieved_occupancy_pct.unwrap_or(f64::NAN))
    }

    #[test]
    fn a_long_kernel_reads_the_samples_inside_it_and_gets_its_own_figure() {
        let mut j = SampleJoin::new(4, 1 << 16, 1 << 16);
        j.samples(&Sample::flat_run(0, 0, 200, 80.0, 40.0));
        j.kernel(0, 20, 120, 1, ROOT);
        let mut out = Vec::new();
        j.advance(1000, &mut out);
        assert_eq!(out.len(), 1);
        let (eff, occ) = figures(&out[0]);
        assert!((eff - 80.0).abs() < 1e-9 && (occ - 40.0).abs() < 1e-4, "{eff} {occ}");
        let own = out[0].own.expect("10 whole samples inside");
        assert_eq!(own.samples, 10);
        assert_eq!(own.covered_ns, 100.0);
    }

    #[test]
    fn a_gap_in_a_sample_does_not_dilute_the_kernels_around_it() {
        // One 10 ns sample, 60% efficient over its whole length, in which
        // kernels ran 6 ns of 10: over their own time they were 100%
        // efficient.
        let mut j = SampleJoin::new(4, 64, 64);
        j.samples(&[Sample::flat(0, 0, 10, 60.0, 50.0)]);
        j.kernel(0, 0, 3, 1, ROOT);
        j.kernel(0, 7, 10, 2, ROOT);
        let mut out = Vec::new();
        j.advance(10, &mut out);
        assert_eq!(out.len(), 2);
        for k in &out {
            assert!((figures(k).0 - 100.0).abs() < 1e-9);
            assert!(k.own.is_none(), "a 3 ns kernel gets no figure of its own");
            // Each has half of the sample's bytes: its share of busy time.
            assert!((k.all.dram_bytes - 500.0).abs() < 1e-6);
        }
    }

    #[test]
    fn concurrent_kernels_share_a_sample() {
        let mut j = SampleJoin::new(1, 64, 64);
        j.samples(&Sample::flat_run(0, 0, 40, 90.0, 30.0));
        j.kernel(0, 0, 40, 1, ROOT);
        j.kernel(0, 10, 30, 2, ROOT);
        let mut out = Vec::new();
        j.advance(100, &mut out);
        out.sort_by_key(|k| k.name);
        assert_eq!(out[0].all.covered_ns, 40.0);
        assert_eq!(out[1].all.covered_ns, 20.0);
        // Both read the device's 90% over the time they ran.
        assert!((figures(&out[0]).0 - 90.0).abs() < 1e-9);
        assert!((figures(&out[1]).0 - 90.0).abs() < 1e-9);
    }

    #[test]
    fn kernels_wait_until_the_timeline_and_their_samples_are_in() {
        let mut j = SampleJoin::new(1, 64, 64);
        j.kernel(0, 5, 25, 1, ROOT);
        let mut out = Vec::new();
        j.advance(1000, &mut out);
        assert!(out.is_empty(), "no samples yet");
        j.samples(&Sample::flat_run(0, 0, 20, 50.0, 50.0));
        j.advance(1000, &mut out);
        assert!(out.is_empty(), "its last sample has not come");
        j.samples(&Sample::flat_run(0, 20, 40, 50.0, 50.0));
        j.advance(15, &mut out);
        assert!(out.is_empty(), "the timeline after 15 is not decided: another kernel may overlap");
        j.advance(40, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].all.covered_ns, 20.0);
        assert_eq!(j.waiting(), 0);
    }

    #[test]
    fn devices_are_joined_apart() {
        let mut j = SampleJoin::new(1, 64, 64);
        j.samples(&Sample::flat_run(0, 0, 100, 20.0, 10.0));
        j.samples(&Sample::flat_run(1, 0, 100, 70.0, 60.0));
        j.kernel(0, 0, 50, 1, ROOT);
        j.kernel(1, 0, 50, 2, ROOT);
        let mut out = Vec::new();
        j.advance(100, &mut out);
        out.sort_by_key(|k| k.name);
        assert!((figures(&out[0]).0 - 20.0).abs() < 1e-9);
        assert!((figures(&out[1]).0 - 70.0).abs() < 1e-9);
    }

    #[test]
    fn memory_stays_bounded_and_losses_are_counted() {
        let mut j = SampleJoin::new(1, 100, 10);
        // Nothing decided: samples pile up to the bound, then expire.
        j.samples(&Sample::flat_run(0, 0, 10_000, 50.0, 50.0));
        assert_eq!(j.expired, 900);
        for i in 0..20 {
            j.kernel(0, 9_000 + i * 10, 9_005 + i * 10, 1, ROOT);
        }
        assert_eq!(j.unsampled, 10, "kernels over the bound are counted, not kept");
        let mut out = Vec::new();
        j.finish(20_000, &mut out);
        assert_eq!(out.len(), 10);
        // A kernel before the first sample, after the end: no figure.
        let mut j = SampleJoin::new(1, 100, 10);
        j.samples(&Sample::flat_run(0, 100, 200, 50.0, 50.0));
        j.kernel(0, 300, 400, 1, ROOT);
        let mut out = Vec::new();
        j.finish(500, &mut out);
        assert!(out.is_empty());
        assert_eq!(j.unsampled, 1);
    }

    #[test]
    fn a_kernel_after_its_samples_were_joined_is_counted_unsampled() {
        let mut j = SampleJoin::new(1, 64, 64);
        j.samples(&Sample::flat_run(0, 0, 100, 50.0, 50.0));
        let mut out = Vec::new();
        j.advance(100, &mut out);
        j.kernel(0, 10, 20, 1, ROOT);
        assert_eq!(j.unsampled, 1);
    }

    #[test]
    fn busy_time_is_the_union_within_the_window() {
        assert_eq!(busy_within(0, 10, [(0, 3), (2, 5), (7, 20)].into_iter()), 8);
        assert_eq!(busy_within(0, 10, std::iter::empty()), 0);
        assert_eq!(busy_within(5, 10, [(0, 4)].into_iter()), 0);
    }
}
