//! Idle time per GPU, for a process that drives several. The session's
//! timeline unions every device's kernels (a gap there is time no GPU
//! worked), which hides a GPU that sat idle while another worked. Once a
//! second device runs a kernel, each device gets a timeline of its own; the
//! first device's starts as a copy of the session's, which until then held
//! only its kernels. A process with one GPU pays nothing.
//!
//! Launch callbacks do not say their device, so a device's timeline decides
//! its gaps up to the session's watermark (the oldest launch whose kernel
//! has not arrived, on any device).

use super::idle::{IdleTracker, Launched, Piece};
use super::timeline::Timeline;
use super::windows::Untraced;
use crate::model::idle::CAUSES;
use std::collections::BTreeMap;

/// Devices given timelines of their own; kernels of devices past it count
/// only in the session's (a node has at most 16 GPUs).
pub(crate) const MAX_DEVICES: usize = 64;

/// One device's timeline.
#[derive(Clone)]
pub(crate) struct DeviceTimeline {
    idle: IdleTracker,
    /// Its idle time by cause, ns.
    pub total: [u64; CAUSES],
    /// Its kernel and idle time in bins (launch figures are not its own).
    pub timeline: Timeline,
}

impl DeviceTimeline {
    /// Decided time some kernel of the device ran, ns.
    pub(crate) fn busy_ns(&self) -> u64 {
        self.idle.busy_ns
    }

    /// A copy with what is known at `until` decided (see
    /// [`IdleTracker::settle`]): for a report while the session runs, in
    /// which a GPU that stopped working would otherwise read busy.
    pub(crate) fn settled(&self, until: u64, untraced: &Untraced) -> DeviceTimeline {
        let mut d = self.clone();
        let mut pieces = Vec::new();
        d.idle.settle(until, untraced, &mut |p| pieces.push(p));
        d.credit(&pieces);
        d
    }

    fn credit(&mut self, pieces: &[Piece]) {
        for p in pieces {
            self.total[p.cause] = self.total[p.cause].saturating_add(p.end - p.start);
        }
        self.timeline.idle(pieces);
    }
}

/// Per-device timelines of one session.
#[derive(Default)]
pub(crate) struct PerDevice {
    /// The device of the session's first kernel.
    pub first: Option<u32>,
    /// Empty until a second device runs a kernel.
    pub devices: BTreeMap<u32, DeviceTimeline>,
    /// Kernels of devices past [`MAX_DEVICES`].
    pub over_cap: u64,
}

impl PerDevice {
    /// A kernel on `device` over `[start, end)`. `session`: the session's
    /// idle timeline (before it takes this kernel), time bins and idle
    /// totals, copied for the first device when a second one appears (only
    /// the bins' idle time is read per device).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn kernel(
        &mut self,
        device: u32,
        correlation_id: u32,
        start: u64,
        end: u64,
        launch: Option<Launched>,
        session: (&IdleTracker, &Timeline, &[u64; CAUSES]),
    ) {
        let first = *self.first.get_or_insert(device);
        if self.devices.is_empty() {
            if device == first {
                return;
            }
            let (idle, timeline, total) = session;
            self.devices.insert(
                first,
                DeviceTimeline { idle: idle.without_launches(), total: *total, timeline: timeline.clone() },
            );
        }
        if !self.devices.contains_key(&device) {
            if self.devices.len() >= MAX_DEVICES {
                self.over_cap += 1;
                return;
            }
            let (idle, timeline, _) = session;
            // From the session's start: the device idled until its first
            // kernel, while the host did whatever the session's timeline
            // knows of (its synchronisations and copies still undecided).
            let fresh = DeviceTimeline {
                idle: idle.for_new_device(timeline.start),
                total: [0; CAUSES],
                timeline: Timeline::new(timeline.start),
            };
            self.devices.insert(device, fresh);
        }
        let d = self.devices.get_mut(&device).expect("inserted above");
        d.idle.kernel(correlation_id, start, end, launch);
        d.timeline.kernel(start, end);
    }

    /// A copy ran on `device`'s GPU over `[start, end)`.
    pub(crate) fn copy(&mut self, device: u32, start: u64, end: u64) {
        if let Some(d) = self.devices.get_mut(&device) {
            d.idle.copy(start, end);
        }
    }

    /// The host waited in a synchronisation over `[start, end)`: every
    /// device's gaps then are its wait.
    pub(crate) fn sync(&mut self, start: u64, end: u64) {
        for d in self.devices.values_mut() {
            d.idle.sync(start, end);
        }
    }

    /// The host was in a copy call over `[start, end)` (its GPU is not
    /// known from the call): every device's gaps then are the copy's.
    pub(crate) fn host_copy(&mut self, start: u64, end: u64) {
        for d in self.devices.values_mut() {
            d.idle.copy(start, end);
        }
    }

    /// gpuscope's own cost held a program's thread `ns` at `ts` (see
    /// [`IdleTracker::host_cost`]).
    pub(crate) fn host_cost(&mut self, ts: u64, ns: u64) {
        for d in self.devices.values_mut() {
            d.idle.host_cost(ts, ns);
        }
    }

    /// See [`IdleTracker::host_waited`].
    pub(crate) fn host_waited(&mut self, ts: u64) {
        for d in self.devices.values_mut() {
            d.idle.host_waited(ts);
        }
    }

    /// gpuscope's own measurement held a thread over `[start, end)`.
    pub(crate) fn overhead(&mut self, start: u64, end: u64) {
        for d in self.devices.values_mut() {
            d.idle.overhead(start, end);
        }
    }

    /// Decides each device's gaps up to `watermark` (the session's).
    pub(crate) fn advance(&mut self, watermark: Option<u64>, untraced: &Untraced) {
        let mut pieces = Vec::new();
        for d in self.devices.values_mut() {
            pieces.clear();
            d.idle.advance_to(watermark, untraced, &mut |p| pieces.push(p));
            d.credit(&pieces);
        }
    }

    /// Decides everything up to the session's end.
    pub(crate) fn finish(&mut self, end_ns: u64, untraced: &Untraced) {
        let mut pieces = Vec::new();
        for d in self.devices.values_mut() {
            pieces.clear();
            d.idle.finish(end_ns, untraced, &mut |p| pieces.push(p));
            d.credit(&pieces);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::idle::{HOST, SYNC};

    fn at(ts: u64) -> Option<Launched> {
        Some(Launched { ts, graph: false, since: 0, kernel: super::super::idle::NO_KERNEL })
    }

    /// Kernels `(device, start, end)`, each launched 1 us before it starts,
    /// folded as the aggregator does; returns the session's idle total and
    /// the per-device timelines.
    fn run(kernels: &[(u32, u64, u64)], syncs: &[(u64, u64)], end_ns: u64) -> ([u64; CAUSES], PerDevice) {
        let untraced = Untraced::default();
        let mut session = IdleTracker::new(0);
        let mut timeline = Timeline::new(0);
        let mut total = [0u64; CAUSES];
        let mut per = PerDevice::default();
        let credit = |pieces: &[Piece], total: &mut [u64; CAUSES], timeline: &mut Timeline| {
            for p in pieces {
                total[p.cause] += p.end - p.start;
            }
            timeline.idle(pieces);
        };
        for &(s, e) in syncs {
            session.sync(s, e);
            per.sync(s, e);
        }
        for (i, &(device, start, end)) in kernels.iter().enumerate() {
            let launch = at(start - 1_000);
            session.launch(i as u32, start - 1_000, false);
            per.kernel(device, i as u32, start, end, launch, (&session, &timeline, &total));
            session.kernel(i as u32, start, end, launch);
            timeline.kernel(start, end);
            let mut pieces = Vec::new();
            session.advance(&untraced, &mut |p| pieces.push(p));
            credit(&pieces, &mut total, &mut timeline);
            per.advance(session.watermark(), &untraced);
        }
        let mut pieces = Vec::new();
        session.finish(end_ns, &untraced, &mut |p| pieces.push(p));
        credit(&pieces, &mut total, &mut timeline);
        per.finish(end_ns, &untraced);
        (total, per)
    }

    #[test]
    fn one_device_gets_no_timeline_of_its_own() {
        let (total, per) = run(&[(0, 10_000, 20_000), (0, 30_000, 40_000)], &[], 50_000);
        assert!(per.devices.is_empty());
        assert_eq!(total.iter().sum::<u64>(), 50_000 - 20_000);
    }

    #[test]
    fn each_device_s_idle_time_is_its_own_and_the_session_s_is_their_intersection() {
        // GPU 0 works 0.1-1.0 ms, GPU 1 only 0.1-0.3 ms, while the host
        // waits for GPU 0 from 0.3 ms; the session ends at 1.5 ms. Each
        // kernel is launched 1 us before it starts.
        let (total, per) = run(&[(0, 100_000, 1_000_000), (1, 100_000, 300_000)], &[(300_000, 1_000_000)], 1_500_000);
        // No GPU busy: before 0.1 ms and after 1.0 ms.
        assert_eq!(total.iter().sum::<u64>(), 100_000 + 500_000);
        let d0 = &per.devices[&0];
        let d1 = &per.devices[&1];
        assert_eq!(d0.total.iter().sum::<u64>(), 100_000 + 500_000);
        assert_eq!(d0.busy_ns(), 900_000);
        assert_eq!(d1.busy_ns(), 200_000);
        // GPU 1 idled from 0.3 ms to the end: the host was in the
        // synchronisation until 1.0 ms (and resumed within 0.1 ms), then
        // did work of its own to the session's end.
        assert_eq!(d1.total.iter().sum::<u64>(), 1_500_000 - 200_000);
        assert_eq!(d1.total[SYNC], 700_000 + 100_000, "the wait, and the resume window after it");
        assert_eq!(d1.total[HOST], 99_000 + 400_000, "before its first launch, and after the wait");
        // Every device's time is busy or idle.
        for d in per.devices.values() {
            assert_eq!(d.busy_ns() + d.total.iter().sum::<u64>(), 1_500_000);
            assert_eq!(d.timeline.bins.iter().flat_map(|b| b.idle).sum::<u64>(), d.total.iter().sum::<u64>());
        }
    }

    #[test]
    fn the_first_device_keeps_what_the_session_decided_before_the_second_appeared() {
        // GPU 0 alone for 3 ms (with gaps), then GPU 1 joins.
        let (total, per) = run(
            &[(0, 100_000, 1_000_000), (0, 1_200_000, 3_000_000), (1, 3_000_000, 4_000_000), (0, 3_100_000, 3_500_000)],
            &[],
            4_000_000,
        );
        let d0 = &per.devices[&0];
        assert_eq!(d0.busy_ns(), 900_000 + 1_800_000 + 400_000);
        assert_eq!(d0.busy_ns() + d0.total.iter().sum::<u64>(), 4_000_000);
        assert_eq!(per.devices[&1].busy_ns(), 1_000_000);
        assert_eq!(per.devices[&1].total.iter().sum::<u64>(), 3_000_000);
        assert_eq!(total.iter().sum::<u64>(), 100_000 + 200_000);
    }

    #[test]
    fn devices_past_the_cap_are_counted_not_tracked() {
        let kernels: Vec<(u32, u64, u64)> =
            (0..MAX_DEVICES as u32 + 3).map(|d| (d, 10_000 + d as u64 * 10_000, 15_000 + d as u64 * 10_000)).collect();
        let (_, per) = run(&kernels, &[], 10_000_000);
        assert_eq!(per.devices.len(), MAX_DEVICES);
        assert_eq!(per.over_cap, 3);
    }

    #[test]
    fn a_gpu_that_stopped_working_reads_idle_while_the_session_runs() {
        // GPU 1 works once at 0.1 ms; GPU 0 goes on until 10 ms. Before the
        // session ends, GPU 1's gap after its kernel has no kernel of its
        // own to close it: the session's decided time does.
        let untraced = Untraced::default();
        let mut session = IdleTracker::new(0);
        let (timeline, mut total) = (Timeline::new(0), [0u64; CAUSES]);
        let mut per = PerDevice::default();
        let kernels =
            [(0, 100_000, 200_000), (1, 100_000, 300_000), (0, 9_000_000, 9_500_000), (0, 9_600_000, 10_000_000)];
        for (i, &(device, start, end)) in kernels.iter().enumerate() {
            session.launch(i as u32, start - 1_000, false);
            per.kernel(device, i as u32, start, end, at(start - 1_000), (&session, &timeline, &total));
            session.kernel(i as u32, start, end, at(start - 1_000));
            session.advance(&untraced, &mut |p| total[p.cause] += p.end - p.start);
            per.advance(session.watermark(), &untraced);
        }
        let until = session.decided_until();
        assert!(until >= 9_500_000, "the session decided its earlier gaps: {until}");
        let d1 = per.devices[&1].settled(until, &untraced);
        assert_eq!(d1.busy_ns(), 200_000);
        assert_eq!(d1.busy_ns() + d1.total.iter().sum::<u64>(), until);
        // GPU 0 is busy at that time: only what came before is decided.
        let d0 = per.devices[&0].settled(until, &untraced);
        assert_eq!(d0.busy_ns() + d0.total.iter().sum::<u64>(), until);
        assert_eq!(per.devices[&1].busy_ns() + per.devices[&1].total.iter().sum::<u64>(), 100_000, "unsettled");
    }
}
