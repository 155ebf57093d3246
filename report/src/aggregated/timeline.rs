//! The session's time in bins of equal width: launches, kernel time and
//! idle time by cause per bin, from which the report finds the session's
//! steady state when the program has no ranges to count calls of (start-up,
//! compilation and shutdown are the bins whose activity differs from the
//! rest). At most [`MAX_BINS`] bins: when the session outgrows them, pairs
//! merge and the width doubles.

use super::Piece;
use crate::model::idle::CAUSES;
use crate::model::sampled::{Sample, SampledAcc};

/// Host-to-device bytes per call from which copies are a batch's worth.
pub(crate) const BATCH_BYTES: u64 = 64 << 10;

/// Bins kept at most.
pub const MAX_BINS: usize = 256;
/// The first bins' width, ns.
const FIRST_WIDTH_NS: u64 = 10_000_000;
/// Times this long after the start are not a session's (a record with a
/// garbage timestamp must not stretch the bins over centuries).
const HORIZON_NS: u64 = 365 * 24 * 3600 * 1_000_000_000;

/// What happened in one bin.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bin {
    /// Launch calls.
    pub launches: u64,
    /// Kernel time (summed, not a union), ns.
    pub kernel_ns: u64,
    /// GPU idle time by cause, ns.
    pub idle: [u64; CAUSES],
    /// gpuscope's launch-callback time, ns.
    pub callback_ns: u64,
    /// A framework integration's hook time, ns.
    pub hook_ns: u64,
    /// Device memory allocations and releases.
    pub allocations: u64,
    /// See `allocations`.
    pub releases: u64,
    /// Copies, by their start.
    pub copies: u64,
    /// Of which from or to pageable host memory.
    pub pageable_copies: u64,
    /// Of which device to host.
    pub device_to_host_copies: u64,
    /// Of which host to device, of a batch's bytes or more (64 KiB): a
    /// loop's inputs, where the session's copy summary also holds a model's
    /// move at start-up.
    pub batch_copies: u64,
    /// Time inside a framework's compilation ranges (XLA's), summed over
    /// threads, ns: start-up, whatever the launches in it look like
    /// (autotuning launches kernels).
    pub compile_ns: u64,
    /// Launch-call time, over the calls timed, ns.
    pub call_ns: u64,
    /// See `call_ns`.
    pub calls_timed: u64,
    /// PM samples over the bin (sampling mode), by overlap.
    pub sampled: SampledAcc,
    /// On devices that ran communication: the union of all their kernels,
    /// of their compute kernels and of their communication kernels, ns
    /// (exposed communication is the first minus the second).
    pub comm_all_ns: u64,
    /// See `comm_all_ns`.
    pub comm_compute_ns: u64,
    /// See `comm_all_ns`.
    pub comm_ns: u64,
    /// CPU time of the threads that launch kernels, ns (all of them
    /// together; spread over the time between two readings).
    pub launching_cpu_ns: u64,
    /// Time covered by readings of that CPU time, ns.
    pub cpu_covered_ns: u64,
    /// Time host threads were blocked in CUDA synchronisations and blocking
    /// copies, ns.
    pub cuda_blocked_ns: u64,
    /// Time of the PM samples inside trace windows whose kernels are all
    /// known ([`Timeline::traced_sample`]), ns; 0 without windows.
    pub traced_ns: u64,
    /// Of it, the time some kernel ran (the kernels' union), ns.
    pub traced_busy_ns: u64,
    /// Those samples, by overlap: the engine's activity over the same time
    /// as `traced_busy_ns` (the engine counts as active between
    /// back-to-back kernels too).
    pub traced_sampled: SampledAcc,
}

impl Bin {
    /// Time the graphics engine was active in it by its PM samples, ns:
    /// its activity when no kernel record was taken (trace windows); the
    /// SMs' active time where the engine's was not sampled.
    pub fn sampled_busy_ns(&self) -> u64 {
        let s = &self.sampled;
        let (sum, weight) =
            if s.busy_weight > 0.0 { (s.busy_ns, s.busy_weight) } else { (s.efficiency_ns, s.efficiency_weight) };
        // The mean share over the samples that held it, for all the bin's
        // sampled time (configurations in turn hold it part of the time).
        if weight > 0.0 {
            (sum / weight / 100.0 * s.covered_ns) as u64
        } else {
            0
        }
    }

    fn add(&mut self, o: &Bin) {
        self.launches = self.launches.saturating_add(o.launches);
        self.kernel_ns = self.kernel_ns.saturating_add(o.kernel_ns);
        self.callback_ns = self.callback_ns.saturating_add(o.callback_ns);
        self.hook_ns = self.hook_ns.saturating_add(o.hook_ns);
        self.allocations = self.allocations.saturating_add(o.allocations);
        self.releases = self.releases.saturating_add(o.releases);
        self.copies = self.copies.saturating_add(o.copies);
        self.pageable_copies = self.pageable_copies.saturating_add(o.pageable_copies);
        self.device_to_host_copies = self.device_to_host_copies.saturating_add(o.device_to_host_copies);
        self.batch_copies = self.batch_copies.saturating_add(o.batch_copies);
        self.compile_ns = self.compile_ns.saturating_add(o.compile_ns);
        self.call_ns = self.call_ns.saturating_add(o.call_ns);
        self.calls_timed = self.calls_timed.saturating_add(o.calls_timed);
        self.sampled.merge(&o.sampled);
        self.comm_all_ns = self.comm_all_ns.saturating_add(o.comm_all_ns);
        self.comm_compute_ns = self.comm_compute_ns.saturating_add(o.comm_compute_ns);
        self.comm_ns = self.comm_ns.saturating_add(o.comm_ns);
        self.launching_cpu_ns = self.launching_cpu_ns.saturating_add(o.launching_cpu_ns);
        self.cpu_covered_ns = self.cpu_covered_ns.saturating_add(o.cpu_covered_ns);
        self.cuda_blocked_ns = self.cuda_blocked_ns.saturating_add(o.cuda_blocked_ns);
        self.traced_ns = self.traced_ns.saturating_add(o.traced_ns);
        self.traced_busy_ns = self.traced_busy_ns.saturating_add(o.traced_busy_ns);
        self.traced_sampled.merge(&o.traced_sampled);
        for (a, b) in self.idle.iter_mut().zip(o.idle) {
            *a = a.saturating_add(b);
        }
    }
}

/// The bins of one session.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// Where bin 0 starts, ns.
    pub start: u64,
    /// Every bin's width, ns.
    pub width: u64,
    /// The bins, from `start` on.
    pub bins: Vec<Bin>,
}

impl Timeline {
    /// No bin yet, bin 0 starting at `start`.
    pub fn new(start: u64) -> Self {
        Timeline { start, width: FIRST_WIDTH_NS, bins: Vec::new() }
    }

    /// The bin holding `t` (times before the start go to the first; `None`
    /// past the horizon).
    fn at(&mut self, t: u64) -> Option<&mut Bin> {
        if t.saturating_sub(self.start) > HORIZON_NS {
            return None;
        }
        let mut i = (t.saturating_sub(self.start) / self.width) as usize;
        while i >= MAX_BINS {
            self.merge();
            i = (t.saturating_sub(self.start) / self.width) as usize;
        }
        if self.bins.len() <= i {
            self.bins.resize(i + 1, Bin::default());
        }
        self.bins.get_mut(i)
    }

    fn merge(&mut self) {
        let merged = self
            .bins
            .chunks(2)
            .map(|c| {
                let mut b = c[0];
                if let Some(o) = c.get(1) {
                    b.add(o);
                }
                b
            })
            .collect();
        self.bins = merged;
        self.width = self.width.saturating_mul(2);
    }

    /// Calls `f` on each bin `[start, end)` overlaps, with the overlap.
    fn spread(&mut self, start: u64, end: u64, mut f: impl FnMut(&mut Bin, u64)) {
        let mut t = start.max(self.start);
        // Most kernels and gaps lie in one bin.
        let (i, j) = ((t - self.start) / self.width, end.saturating_sub(self.start) / self.width);
        if i == j && end > t && (i as usize) < self.bins.len() {
            f(&mut self.bins[i as usize], end - t);
            return;
        }
        let end = end.min(self.start.saturating_add(HORIZON_NS));
        while t < end {
            // The bins may merge while `t`'s is found: look it up first.
            if self.at(t).is_none() {
                return;
            }
            let bin_end = self.start.saturating_add(((t - self.start) / self.width + 1).saturating_mul(self.width));
            let e = end.min(bin_end);
            if let Some(b) = self.at(t) {
                f(b, e - t);
            }
            t = e;
        }
    }

    /// A span of one of the session's communication unions
    /// (the runtime's `SessionComm`).
    pub fn comm_span(&mut self, u: super::Union, start: u64, end: u64) {
        use super::Union;
        self.spread(start, end, |b, ns| match u {
            Union::All => b.comm_all_ns = b.comm_all_ns.saturating_add(ns),
            Union::Compute => b.comm_compute_ns = b.comm_compute_ns.saturating_add(ns),
            Union::Comm => b.comm_ns = b.comm_ns.saturating_add(ns),
        });
    }

    /// A launch at `ts`; `call_ns`: a launch call's duration, 0 if untimed.
    pub fn launch(&mut self, ts: u64, callback_ns: u64, call_ns: u64) {
        if let Some(b) = self.at(ts) {
            b.launches = b.launches.saturating_add(1);
            b.callback_ns = b.callback_ns.saturating_add(callback_ns);
            if call_ns > 0 {
                b.call_ns = b.call_ns.saturating_add(call_ns);
                b.calls_timed += 1;
            }
        }
    }

    /// A device memory allocation (or release) at `ts`.
    pub fn device_memory(&mut self, ts: u64, alloc: bool) {
        if let Some(b) = self.at(ts) {
            if alloc {
                b.allocations += 1;
            } else {
                b.releases += 1;
            }
        }
    }

    /// A copy that started at `ts`; `host_to_device_bytes` is 0 for copies
    /// of other kinds.
    pub fn copy(&mut self, ts: u64, pageable: bool, device_to_host: bool, host_to_device_bytes: u64) {
        if let Some(b) = self.at(ts) {
            b.copies += 1;
            b.pageable_copies += pageable as u64;
            b.device_to_host_copies += device_to_host as u64;
            b.batch_copies += (host_to_device_bytes >= BATCH_BYTES) as u64;
        }
    }

    /// gpuscope's own instrumentation time outside a launch, at `ts`.
    pub fn own_cost(&mut self, ts: u64, ns: u64) {
        if let Some(b) = self.at(ts) {
            b.hook_ns = b.hook_ns.saturating_add(ns);
        }
    }

    /// `launches` counted without kernel records, made from `start` to
    /// `end`: each bin gets its share by overlap (all in `end`'s bin for an
    /// empty span).
    pub fn counted_launches(&mut self, start: u64, end: u64, launches: u64) {
        if end <= start {
            if let Some(b) = self.at(end) {
                b.launches = b.launches.saturating_add(launches);
            }
            return;
        }
        // Launches before the session's start are its first bin's.
        let start = start.max(self.start).min(end - 1);
        let len = (end - start) as u128;
        let mut given = 0u64;
        self.spread(start, end, |b, ns| {
            let n = (launches as u128 * ns as u128 / len) as u64;
            b.launches = b.launches.saturating_add(n);
            given = given.saturating_add(n);
        });
        // What rounding left goes to the last bin.
        let rest = launches.saturating_sub(given);
        if let Some(b) = self.at(end - 1).filter(|_| rest > 0) {
            b.launches = b.launches.saturating_add(rest);
        }
    }

    /// PM samples: each bin gets the share of a sample it overlaps.
    pub fn samples(&mut self, samples: &[Sample]) {
        for s in samples {
            self.sample(s, |b| &mut b.sampled);
        }
    }

    /// A PM sample inside a trace window whose kernels are all known (no
    /// gap across a window's edge overlaps it), with the GPU idle for
    /// `idle_ns` of it: its time, busy time and engine activity, into
    /// [`Bin::traced_ns`], [`Bin::traced_busy_ns`] and
    /// [`Bin::traced_sampled`] (also given to [`Timeline::samples`]).
    pub fn traced_sample(&mut self, s: &Sample, idle_ns: u64) {
        let len = s.len().max(1);
        let busy = len.saturating_sub(idle_ns);
        self.sample(s, |b| &mut b.traced_sampled);
        self.spread(s.start, s.end, |b, ns| {
            b.traced_ns = b.traced_ns.saturating_add(ns);
            b.traced_busy_ns = b.traced_busy_ns.saturating_add((busy as u128 * ns as u128 / len as u128) as u64);
        });
    }

    fn sample(&mut self, s: &Sample, into: fn(&mut Bin) -> &mut SampledAcc) {
        let len = s.len().max(1) as f64;
        let (eff, busy) = (s.sm_efficiency_pct as f64, s.gr_active_pct as f64);
        self.spread(s.start, s.end, |b, ns| into(b).add(s, ns as f64 / len, ns as f64, eff, busy));
    }

    /// The threads that launch kernels used `ns` of CPU time from `start`
    /// to `end` (two readings of their clocks), spread evenly over it.
    pub fn launching_cpu(&mut self, start: u64, end: u64, ns: u64) {
        // A reading before the session's start covers its first bin; one
        // of no length covers nothing.
        let start = start.max(self.start);
        if end <= start {
            return;
        }
        let len = (end - start) as u128;
        let mut given = 0u64;
        self.spread(start, end, |b, part| {
            let n = (ns as u128 * part as u128 / len) as u64;
            b.launching_cpu_ns = b.launching_cpu_ns.saturating_add(n);
            b.cpu_covered_ns = b.cpu_covered_ns.saturating_add(part);
            given = given.saturating_add(n);
        });
        if let Some(b) = self.at(end - 1).filter(|_| ns > given) {
            b.launching_cpu_ns = b.launching_cpu_ns.saturating_add(ns - given);
        }
    }

    /// A host thread was blocked in a CUDA synchronisation or a blocking
    /// copy from `start` to `end`.
    pub fn cuda_blocked(&mut self, start: u64, end: u64) {
        self.spread(start, end, |b, ns| b.cuda_blocked_ns = b.cuda_blocked_ns.saturating_add(ns));
    }

    /// A kernel ran from `start` to `end`.
    pub fn kernel(&mut self, start: u64, end: u64) {
        self.spread(start, end, |b, ns| b.kernel_ns = b.kernel_ns.saturating_add(ns));
    }

    /// A framework's compilation range over `[start, end)`.
    pub fn compile(&mut self, start: u64, end: u64) {
        self.spread(start, end, |b, ns| b.compile_ns = b.compile_ns.saturating_add(ns));
    }

    /// Idle time by cause over `[start, end)`: whole bins inside it, and
    /// the overlapped share of bins across its ends (a bin's share of the
    /// part of it before `session_end`, where its time lies).
    pub fn idle_between(&self, start: u64, end: u64, session_end: u64) -> [u64; CAUSES] {
        let mut out = [0u64; CAUSES];
        for (i, b) in self.bins.iter().enumerate() {
            let b0 = self.start.saturating_add((i as u64).saturating_mul(self.width));
            let b1 = b0.saturating_add(self.width).min(session_end.max(b0.saturating_add(1)));
            let overlap = b1.min(end).saturating_sub(b0.max(start));
            if overlap == 0 {
                continue;
            }
            let len = (b1 - b0).max(1) as u128;
            for (o, &v) in out.iter_mut().zip(&b.idle) {
                *o = o.saturating_add((v as u128 * overlap as u128 / len).min(u64::MAX as u128) as u64);
            }
        }
        out
    }

    /// Idle time, spread over the bins by cause.
    pub fn idle(&mut self, pieces: &[Piece]) {
        for p in pieces {
            self.spread(p.start, p.end, |b, ns| b.idle[p.cause] = b.idle[p.cause].saturating_add(ns));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_merge_in_pairs_and_keep_their_sums() {
        let mut t = Timeline::new(1_000);
        t.launch(1_000, 5, 0);
        t.kernel(1_000, 1_000 + 25_000_000);
        assert_eq!(t.bins.len(), 3);
        assert_eq!(t.bins.iter().map(|b| b.kernel_ns).collect::<Vec<_>>(), [10_000_000, 10_000_000, 5_000_000]);
        // Far past MAX_BINS bins of 10 ms: merges until it fits.
        t.launch(1_000 + 10_000_000 * 1000, 0, 0);
        assert!(t.bins.len() <= MAX_BINS);
        assert_eq!(t.width, 40_000_000);
        assert_eq!(t.bins.iter().map(|b| b.launches).sum::<u64>(), 2);
        assert_eq!(t.bins.iter().map(|b| b.kernel_ns).sum::<u64>(), 25_000_000);
        assert_eq!(t.bins[0].kernel_ns, 25_000_000);
        t.idle(&[Piece { start: 0, end: 50_001_000, cause: 0, before: crate::aggregated::NO_KERNEL }]);
        assert_eq!((t.bins[0].idle[0], t.bins[1].idle[0]), (40_000_000, 10_000_000), "clipped to the start");
    }

    #[test]
    fn launching_cpu_time_is_spread_over_the_time_between_readings() {
        let mut t = Timeline::new(0);
        // 25 ms of CPU read over 25 ms: 10, 10 and 5 in 10 ms bins, each
        // covered for as long.
        t.launching_cpu(0, 25_000_000, 25_000_000);
        assert_eq!(t.bins.iter().map(|b| b.launching_cpu_ns).collect::<Vec<_>>(), [10_000_000, 10_000_000, 5_000_000]);
        assert_eq!(t.bins.iter().map(|b| b.cpu_covered_ns).collect::<Vec<_>>(), [10_000_000, 10_000_000, 5_000_000]);
        // What rounding leaves goes to the last bin; a reading of no length
        // adds nothing.
        t.launching_cpu(0, 30_000_000, 10);
        assert_eq!(t.bins.iter().map(|b| b.launching_cpu_ns).sum::<u64>(), 25_000_010);
        assert_eq!(t.bins[0].launching_cpu_ns, 10_000_003);
        t.launching_cpu(5_000_000, 5_000_000, 7);
        assert_eq!(t.bins.iter().map(|b| b.launching_cpu_ns).sum::<u64>(), 25_000_010);
        t.cuda_blocked(8_000_000, 12_000_000);
        assert_eq!((t.bins[0].cuda_blocked_ns, t.bins[1].cuda_blocked_ns), (2_000_000, 2_000_000));
    }

    #[test]
    fn counted_launches_are_spread_over_the_time_they_were_made_in() {
        let mut t = Timeline::new(0);
        // 1000 launches over 25 ms: 400, 400 and 200 in 10 ms bins.
        t.counted_launches(0, 25_000_000, 1000);
        assert_eq!(t.bins.iter().map(|b| b.launches).collect::<Vec<_>>(), [400, 400, 200]);
        // 10 over 30 ms: 3 each and the remainder in the last bin.
        let mut t = Timeline::new(0);
        t.counted_launches(0, 30_000_000, 10);
        assert_eq!(t.bins.iter().map(|b| b.launches).collect::<Vec<_>>(), [3, 3, 4]);
        t.counted_launches(15_000_000, 15_000_000, 5);
        assert_eq!(t.bins[1].launches, 8);
    }

    #[test]
    fn samples_are_shared_among_the_bins_they_overlap() {
        let mut t = Timeline::new(0);
        // One 20 ms sample from 5 to 25 ms, the engine active 50%: bins of
        // 10 ms get 5, 10 and 5 ms of it.
        t.samples(&[Sample::flat(0, 5_000_000, 25_000_000, 50.0, 30.0)]);
        let busy: Vec<u64> = t.bins.iter().map(Bin::sampled_busy_ns).collect();
        assert_eq!(busy, [2_500_000, 5_000_000, 2_500_000]);
        let f = t.bins[1].sampled.figures().expect("covered");
        assert_eq!((f.gpu_busy_pct, f.covered_ns), (Some(50.0), 10_000_000));
    }

    #[test]
    fn traced_samples_keep_their_time_busy_time_and_engine_apart_and_merge() {
        let mut t = Timeline::new(0);
        // Samples of 1 ms over 0-30 ms, the engine active 80%; those from 5
        // to 25 ms traced, the GPU idle 0.25 ms of each.
        let all = Sample::flat_every(1_000_000, 0, 0, 30_000_000, 80.0, 30.0);
        t.samples(&all);
        for s in all.iter().filter(|s| s.start >= 5_000_000 && s.end <= 25_000_000) {
            t.traced_sample(s, 250_000);
        }
        assert_eq!(t.bins.iter().map(|b| b.traced_ns).collect::<Vec<_>>(), [5_000_000, 10_000_000, 5_000_000]);
        assert_eq!(t.bins.iter().map(|b| b.traced_busy_ns).collect::<Vec<_>>(), [3_750_000, 7_500_000, 3_750_000]);
        let traced: Vec<u64> = t.bins.iter().map(|b| b.traced_sampled.figures().map_or(0, |f| f.covered_ns)).collect();
        assert_eq!(traced, [5_000_000, 10_000_000, 5_000_000]);
        assert_eq!(t.bins[1].sampled.figures().map(|f| f.covered_ns), Some(10_000_000), "all samples as before");
        // Far past MAX_BINS bins: pairs merge, sums kept.
        t.launch(10_000_000 * 1000, 0, 0);
        assert_eq!((t.bins[0].traced_ns, t.bins[0].traced_busy_ns), (20_000_000, 15_000_000));
        let f = t.bins[0].traced_sampled.figures().expect("merged");
        assert_eq!((f.covered_ns, f.gpu_busy_pct), (20_000_000, Some(80.0)));
    }

    #[test]
    fn a_timeline_starting_at_the_top_of_the_clock_keeps_its_time() {
        let start = u64::MAX - 10;
        let mut t = Timeline::new(start);
        t.kernel(start, u64::MAX);
        t.launch(start, 0, 0);
        assert_eq!((t.bins.len(), t.bins[0].kernel_ns, t.bins[0].launches), (1, 10, 1));
    }

    #[test]
    fn idle_between_takes_a_bin_cut_by_the_session_s_end_whole() {
        // 10 ms bins; the session ends at 15 ms, idle from 11 to 15 ms.
        let mut t = Timeline::new(0);
        t.kernel(0, 11_000_000);
        t.idle(&[Piece { start: 11_000_000, end: 15_000_000, cause: 0, before: crate::aggregated::NO_KERNEL }]);
        assert_eq!(t.idle_between(10_000_000, 15_000_000, 15_000_000)[0], 4_000_000);
        // A quarter of a whole bin's idle time, for a quarter of it.
        assert_eq!(t.idle_between(10_000_000, 12_500_000, 20_000_000)[0], 1_000_000);
    }
}
