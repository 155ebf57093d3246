//! Attribution: the third stage. Joins each decoded kernel record with the
//! launch that made it (thread, NVTX path and range instance, seen by the
//! launch callback) and, in metrics mode, with its measured values, which
//! may arrive before or after the record.

use crate::decode::KernelActivity;
use crate::model::metrics::KernelMetrics;
use crate::model::path::{PathId, ROOT};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use waiting::Waiting;

mod waiting;

/// Where a launch came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaunchInfo {
    /// OS thread that launched (0: unknown).
    pub tid: u32,
    /// NVTX path open on it.
    pub path: PathId,
    /// Innermost open range instance (0: none).
    pub instance: u64,
    /// Measured in metrics mode: its values follow.
    pub profiled: bool,
    /// When the launch call was entered, ns on CUPTI's clock.
    pub ts: u64,
    /// A graph launch (all its kernels share it).
    pub graph: bool,
    /// The launch was seen (false: a kernel whose launch callback never
    /// ran, attributed to no range).
    pub seen: bool,
    /// `path` and `instance` are the lead thread's ranges, not `tid`'s.
    pub inherited: bool,
    /// When the program last left a CUDA call before this launch (a
    /// launch, or the end of a blocking copy or synchronisation, on any
    /// thread); 0: never.
    pub since: u64,
}

impl LaunchInfo {
    /// A kernel whose launch was not seen.
    pub(crate) const UNKNOWN: LaunchInfo = LaunchInfo {
        tid: 0,
        path: ROOT,
        instance: 0,
        profiled: false,
        ts: 0,
        graph: false,
        seen: false,
        inherited: false,
        since: 0,
    };
}

/// Kernels that are not the program's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Own {
    /// CUPTI's range profiler's (`WaitNs`).
    Measurement,
    /// gpuscope's launch-cost calibration.
    Calibration,
}

/// A kernel with its launch and measurements.
#[derive(Debug, Clone)]
pub(crate) struct Attributed {
    pub kernel: KernelActivity,
    pub launch: LaunchInfo,
    pub metrics: Option<KernelMetrics>,
}

/// Graph launches remembered at once (each may run many kernels, and no
/// record says which was the last).
const MAX_GRAPH_LAUNCHES: usize = 4096;

/// The joins in progress.
pub(crate) struct Attributor {
    /// Names of the metrics in measured values (empty: trace mode).
    metric_names: Vec<String>,
    max_pending: usize,
    launches: Waiting,
    graph_launches: BTreeMap<u32, LaunchInfo>,
    /// Measured values that came before their kernel record.
    pending_metrics: FxHashMap<u32, Option<Vec<f64>>>,
    /// Kernel records of measured launches waiting for their values.
    parked: FxHashMap<u32, (KernelActivity, LaunchInfo)>,
    /// CUPTI's own kernels (count, ns).
    pub(crate) profiler_kernels: (u64, u64),
    /// Kernels whose launch was not seen.
    pub(crate) unattributed: u64,
    /// Measured kernels whose values never came.
    pub(crate) missing_metrics: u64,
    /// The latest start of a kernel joined so far (CUPTI's clock).
    latest_kernel_start: u64,
}

/// When launches must be forgotten, one made this long before the latest
/// kernel seen so far started has most likely lost its record (tried in
/// turn until enough are gone). Records are decoded in the order CUPTI
/// filled its buffers, so a launch well before a decoded kernel's start
/// waits only if its stream was queued that long; launches after it may
/// still be in buffers not decoded yet, and are kept.
const STALE_LAUNCH_NS: [u64; 3] = [2_000_000_000, 200_000_000, 20_000_000];

impl Attributor {
    /// `metric_names`: the names of measured values (metrics mode);
    /// `max_pending`: launches kept waiting for their kernel.
    pub(crate) fn new(metric_names: Vec<String>, max_pending: usize) -> Self {
        Attributor {
            metric_names,
            max_pending,
            launches: Waiting::default(),
            graph_launches: BTreeMap::new(),
            pending_metrics: FxHashMap::default(),
            parked: FxHashMap::default(),
            profiler_kernels: (0, 0),
            unattributed: 0,
            missing_metrics: 0,
            latest_kernel_start: 0,
        }
    }

    /// A kernel (or graph) launch API call.
    pub(crate) fn launch(&mut self, correlation_id: u32, info: LaunchInfo) {
        if info.graph {
            self.graph_launches.insert(correlation_id, info);
            if self.graph_launches.len() > MAX_GRAPH_LAUNCHES {
                self.graph_launches.pop_first();
            }
            return;
        }
        if self.launches.slots() >= self.max_pending + self.max_pending / 4 {
            // Kernels that came behind a launch still waiting left their
            // slots: only those go (at least a quarter of the bound each
            // time, as fewer than the bound are waiting).
            self.launches.forget(|_| false);
        }
        if self.launches.len() >= self.max_pending {
            // Launches that never produced a kernel (failed launches, records
            // CUPTI dropped): forget the stale ones, from the stalest, else
            // the oldest half.
            for stale in STALE_LAUNCH_NS {
                let horizon = self.latest_kernel_start.saturating_sub(stale);
                self.launches.forget(|l| l.ts < horizon);
                if self.launches.len() < self.max_pending * 3 / 4 {
                    break;
                }
            }
            if self.launches.len() >= self.max_pending * 3 / 4 {
                self.launches.forget_oldest(self.launches.len() / 2);
            }
        }
        self.launches.insert(correlation_id, info);
    }

    /// Launches waiting for their kernel.
    #[cfg(test)]
    pub(crate) fn pending_launches(&self) -> usize {
        self.launches.len()
    }

    /// Measured values of a launch (`None`: the measurement was discarded).
    /// Returns its kernel if the record came first.
    pub(crate) fn metrics(&mut self, correlation_id: u32, values: Option<Vec<f64>>) -> Option<Attributed> {
        match self.parked.remove(&correlation_id) {
            Some((kernel, launch)) => Some(self.join(kernel, launch, values)),
            None => {
                self.pending_metrics.insert(correlation_id, values);
                None
            }
        }
    }

    /// A kernel record. `is_profiler_kernel` tells CUPTI's own kernels
    /// (asked only of kernels with no launch seen, in metrics mode). `None`:
    /// the kernel waits for its measured values, or is CUPTI's own.
    /// A kernel record. `own`: what the kernel is when it is gpuscope's
    /// or CUPTI's rather than the program's (asked only of kernels whose
    /// launch was not seen).
    pub(crate) fn kernel(&mut self, k: &KernelActivity, own: impl FnOnce() -> Option<Own>) -> Option<Attributed> {
        self.latest_kernel_start = self.latest_kernel_start.max(k.start);
        let launch =
            self.launches.remove(k.correlation_id).or_else(|| self.graph_launches.get(&k.correlation_id).copied());
        let launch = match launch {
            Some(l) => l,
            None => {
                match own() {
                    // CUPTI's range profiler launches a `WaitNs` kernel of
                    // its own per measured range (single-pass mode):
                    // gpuscope's overhead, not the program's work, and no
                    // launch of the program's is behind it.
                    Some(Own::Measurement) if !self.metric_names.is_empty() => {
                        self.profiler_kernels.0 += 1;
                        self.profiler_kernels.1 = self.profiler_kernels.1.saturating_add(k.end.saturating_sub(k.start));
                        return None;
                    }
                    // gpuscope's calibration at the first launch.
                    Some(Own::Calibration) => return None,
                    _ => {}
                }
                self.unattributed += 1;
                LaunchInfo::UNKNOWN
            }
        };
        if !launch.profiled {
            return Some(Attributed { kernel: *k, launch, metrics: None });
        }
        match self.pending_metrics.remove(&k.correlation_id) {
            Some(values) => Some(self.join(*k, launch, values)),
            None => {
                self.parked.insert(k.correlation_id, (*k, launch));
                None
            }
        }
    }

    fn join(&self, kernel: KernelActivity, launch: LaunchInfo, values: Option<Vec<f64>>) -> Attributed {
        let metrics = values.map(|v| KernelMetrics::from_values(&self.metric_names, &v));
        Attributed { kernel: placed(kernel, &launch), launch, metrics }
    }

    /// Measured kernels whose values never came, reported without them.
    pub(crate) fn finish(&mut self) -> Vec<Attributed> {
        let parked = std::mem::take(&mut self.parked);
        self.missing_metrics += parked.len() as u64;
        parked
            .into_values()
            .map(|(kernel, launch)| Attributed { kernel: placed(kernel, &launch), launch, metrics: None })
            .collect()
    }
}

/// A measured kernel where it ran. Kernel replay (metric sets of several
/// passes) leaves its record without timestamps (0, seen on the device):
/// the kernel ran inside its launch call, which the launch callback timed,
/// so it is placed there.
fn placed(mut k: KernelActivity, launch: &LaunchInfo) -> KernelActivity {
    if launch.profiled && launch.seen && (k.start == 0 || k.start < launch.ts) {
        let dur = k.end.saturating_sub(k.start);
        k.start = launch.ts;
        k.end = launch.ts.saturating_add(dur);
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_that_never_ran_are_forgotten_not_accumulated() {
        let mut a = Attributor::new(vec![], 1000);
        let info = LaunchInfo { tid: 1, seen: true, ..LaunchInfo::UNKNOWN };
        for i in 0..100_000u32 {
            a.launch(i, info);
        }
        assert!(a.pending_launches() <= 1000);
    }

    #[test]
    fn when_launches_must_be_forgotten_those_whose_records_were_dropped_go_first() {
        let mut a = Attributor::new(vec![], 1000);
        let old = LaunchInfo { tid: 1, seen: true, ts: 1_000, ..LaunchInfo::UNKNOWN };
        // 300 launches whose records CUPTI dropped.
        for id in 0..300u32 {
            a.launch(id, old);
        }
        // A kernel three seconds later, then 800 launches whose records are
        // still on their way (when 1000 are waiting, forgetting the oldest
        // half would forget 200 of them).
        let recent = LaunchInfo { ts: 3_000_000_000, ..old };
        a.launch(5_000, recent);
        assert!(a.kernel(&KernelActivity::sample(5_000, 3_000_000_100, 3_000_000_200), || None).is_some());
        for id in 10_000..10_800u32 {
            a.launch(id, recent);
        }
        for id in 10_000..10_800u32 {
            let k = KernelActivity::sample(id, 3_000_001_000, 3_000_002_000);
            assert!(a.kernel(&k, || None).is_some_and(|j| j.launch.seen), "launch {id} forgotten");
        }
        assert_eq!(a.unattributed, 0);
    }

    #[test]
    fn dropped_records_less_than_a_second_old_are_forgotten_before_launches_still_on_their_way() {
        // A decoder running behind with records dropped a moment ago (the
        // stress test's load): 400 launches 500 ms before the latest
        // decoded kernel lost their records; 700 later ones wait in buffers
        // (forgetting the oldest half would forget 100 of them).
        let mut a = Attributor::new(vec![], 1000);
        let dropped = LaunchInfo { tid: 1, seen: true, ts: 2_500_000_000, ..LaunchInfo::UNKNOWN };
        for id in 0..400u32 {
            a.launch(id, dropped);
        }
        let recent = LaunchInfo { ts: 3_000_000_000, ..dropped };
        a.launch(5_000, recent);
        assert!(a.kernel(&KernelActivity::sample(5_000, 3_000_000_100, 3_000_000_200), || None).is_some());
        for id in 10_000..10_700u32 {
            a.launch(id, recent);
        }
        for id in 10_000..10_700u32 {
            let k = KernelActivity::sample(id, 3_000_001_000, 3_000_002_000);
            assert!(a.kernel(&k, || None).is_some_and(|j| j.launch.seen), "launch {id} forgotten");
        }
        assert_eq!(a.unattributed, 0);
    }

    #[test]
    fn one_dropped_record_does_not_make_a_decoder_running_behind_forget_launches() {
        // Launch 0's record was dropped; the decoder runs 800 launches
        // behind: kernels leave slots behind launch 0 until they fill the
        // bound, with only 801 launches waiting.
        let mut a = Attributor::new(vec![], 1000);
        let base = LaunchInfo { tid: 1, seen: true, ts: 0, ..LaunchInfo::UNKNOWN };
        for id in 0..3000u32 {
            a.launch(id, LaunchInfo { ts: 1_000_000 + u64::from(id) * 1_000, ..base });
            if id > 800 {
                let k = id - 800;
                let t = 1_000_000 + u64::from(k) * 1_000;
                assert!(
                    a.kernel(&KernelActivity::sample(k, t + 500, t + 900), || None).is_some_and(|j| j.launch.seen),
                    "launch {k} forgotten"
                );
            }
        }
        assert_eq!(a.unattributed, 0);
    }

    #[test]
    fn launches_queued_behind_a_long_kernel_are_kept_while_there_is_room() {
        // Stream A: 11 launches behind a 5 s kernel; stream B: 3000
        // launches whose kernels come 1 ms apart.
        let mut a = Attributor::new(vec![], 1000);
        let base = LaunchInfo { tid: 1, seen: true, ts: 0, ..LaunchInfo::UNKNOWN };
        for id in 0..=10u32 {
            a.launch(id, LaunchInfo { ts: 1_000 + u64::from(id), ..base });
        }
        for id in 100..3100u32 {
            let t = u64::from(id) * 1_000_000;
            a.launch(id, LaunchInfo { ts: t, ..base });
            assert!(a.kernel(&KernelActivity::sample(id, t + 1_000, t + 2_000), || None).is_some());
        }
        for id in 0..=10u32 {
            let k = KernelActivity::sample(id, 5_000_000_000, 5_000_001_000);
            assert!(a.kernel(&k, || None).is_some_and(|j| j.launch.seen), "launch {id} forgotten");
        }
        assert_eq!(a.unattributed, 0);
    }

    #[test]
    fn a_decoder_a_million_launches_behind_joins_every_kernel() {
        let mut a = Attributor::new(vec![], 1 << 21);
        let base = LaunchInfo { tid: 1, seen: true, ts: 0, ..LaunchInfo::UNKNOWN };
        // Ids of 64 threads interleaved, their events merged a little out
        // of order.
        let ids: Vec<u32> = (0..1_200_000u32)
            .map(|i| {
                if i % 64 == 3 {
                    i + 1
                } else if i % 64 == 4 {
                    i - 1
                } else {
                    i
                }
            })
            .collect();
        for &id in &ids {
            a.launch(id, LaunchInfo { ts: u64::from(id) * 2_000, ..base });
        }
        // Kernels of one stream in launch order, stream after stream: most
        // removals far from the front.
        for s in 0..64u32 {
            for id in (s..1_200_000).step_by(64) {
                let k = KernelActivity::sample(id, u64::from(id) * 2_000 + 500, u64::from(id) * 2_000 + 900);
                assert!(a.kernel(&k, || None).is_some_and(|j| j.launch.seen), "launch {id} forgotten");
            }
        }
        assert_eq!(a.unattributed, 0);
        assert_eq!(a.pending_launches(), 0);
    }

    #[test]
    fn a_replayed_kernel_without_timestamps_is_placed_at_its_launch_call() {
        let mut a = Attributor::new(vec!["gpu__time_duration.sum".into()], 1000);
        let info = LaunchInfo { profiled: true, ts: 5_000, seen: true, ..LaunchInfo::UNKNOWN };
        a.launch(3, info);
        assert!(a.kernel(&KernelActivity::sample(3, 0, 0), || None).is_none(), "waits for its values");
        let j = a.metrics(3, Some(vec![700.0])).unwrap();
        assert_eq!((j.kernel.start, j.kernel.end), (5_000, 5_000));
        // A record with timestamps keeps them.
        a.launch(4, info);
        a.kernel(&KernelActivity::sample(4, 6_000, 6_700), || None);
        let j = a.metrics(4, Some(vec![700.0])).unwrap();
        assert_eq!((j.kernel.start, j.kernel.end), (6_000, 6_700));
    }

    #[test]
    fn graph_kernels_share_their_launch_and_unknown_ones_are_counted() {
        let mut a = Attributor::new(vec![], 1000);
        let info = LaunchInfo { tid: 3, path: 5, instance: 9, graph: true, seen: true, ..LaunchInfo::UNKNOWN };
        a.launch(12, info);
        for _ in 0..3 {
            assert_eq!(a.kernel(&KernelActivity::sample(12, 0, 10), || None).unwrap().launch, info);
        }
        assert_eq!(a.kernel(&KernelActivity::sample(99, 0, 10), || None).unwrap().launch, LaunchInfo::UNKNOWN);
        assert_eq!(a.unattributed, 1);
    }

    #[test]
    fn a_replayed_kernel_placed_at_a_launch_near_the_top_of_the_clock_ends_there() {
        let launch = LaunchInfo { seen: true, profiled: true, ts: u64::MAX - 10, ..LaunchInfo::UNKNOWN };
        let k = placed(KernelActivity::sample(1, 0, 100), &launch);
        assert_eq!((k.start, k.end), (u64::MAX - 10, u64::MAX));
    }
}
