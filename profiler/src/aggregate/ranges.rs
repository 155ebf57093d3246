//! NVTX range instances while they are open (and until their kernels have
//! run), summed per path once finished.

use super::calls::Figures;
use super::comm::CommOverlap;
use super::idle::Piece;
use super::interval::IntervalUnion;
use super::windows::Untraced;
use crate::model::path::{paths, PathId};
use crate::model::sampled::{Sample, SampledAcc};
use rustc_hash::FxHashMap;
use std::collections::{BTreeSet, VecDeque};

/// Nesting levels a launch or kernel counts for, at most. A parent chain
/// is a tree in a correct stream of events; this bound (and stopping at an
/// instance that is its own parent) keeps a corrupt one from looping
/// forever (found by the `aggregate` fuzz target, `fuzz/`).
const MAX_DEPTH: usize = 4096;

/// One opening of a push/pop range.
pub(crate) struct Instance {
    pub parent: u64,
    pub path: PathId,
    pub tid: u32,
    pub start: u64,
    pub end: Option<u64>,
    /// GPU time of the kernels launched inside it (nested ranges included).
    pub busy: IntervalUnion,
    /// Its launches, idle time, copies, ... (`wall`, `busy` and
    /// `in_window` are filled in when it is folded).
    pub fig: Figures,
    /// Sampling mode: samples over its window, per device.
    pub sampled: Vec<(u32, SampledAcc)>,
    /// Devices its kernels ran on (bit per ordinal below 64).
    pub devices: u64,
    /// Communication and compute per device, from its first communication
    /// kernel or second device on (until then `busy` is the one device's
    /// compute, and seeds it).
    pub comm: Option<Box<CommOverlap>>,
    /// Model FLOPs counted inside it (nested ranges included).
    pub flops: f64,
    /// Left out of the report (`HostEvent::Discard`).
    pub discarded: bool,
    /// A framework allocator's figures at its start and at its end.
    pub framework: [Option<FrameworkSample>; 2],
    /// When the last launch made inside it (not in a nested range)
    /// returned, ns; 0: none.
    pub last_return: u64,
    /// Idle time decided while it was open and after its last launch
    /// returned (start, end, cause): counted once a later launch inside it
    /// or its close says it was inside. A range may close at an earlier
    /// time than its close is sent (the Python stack's closes when its last
    /// launch returned, known only at the next launch outside it): the
    /// gap after it is not its.
    pub pending_idle: VecDeque<(u64, u64, crate::model::idle::Cause)>,
}

/// Idle pieces an open instance holds undecided; past it the oldest is
/// counted.
const PENDING_IDLE: usize = 64;

impl Instance {
    /// Counts its pending idle time up to `until`; with `close`, forgets
    /// the rest.
    fn settle_idle(&mut self, until: u64, close: bool) {
        let fig = &mut self.fig;
        self.pending_idle.retain_mut(|(s, e, cause)| {
            let upto = (*e).min(until);
            if upto > *s {
                fig.idle[*cause] = fig.idle[*cause].saturating_add(upto - *s);
                *s = upto;
            }
            !close && *e > *s
        });
    }
}

/// A framework allocator's figures at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameworkSample {
    /// Bytes in use by tensors.
    pub allocated: u64,
    /// Bytes held from the device.
    pub reserved: u64,
    /// High-water mark of `allocated`.
    pub peak: u64,
}

pub(crate) use gpuscope_report::aggregated::RangeAcc;

/// A finished instance, for the trace and its device memory.
pub(crate) struct Finished {
    pub path: PathId,
    pub tid: u32,
    pub start: u64,
    pub end: u64,
    /// Left out of the report (`HostEvent::Discard`).
    pub discarded: bool,
}

/// Removes from `open` ((start, id) pairs) the instances that ended by
/// `t`. Only those that started by `t` can have: the rest of the set is not
/// walked. (Walking all of it was called for every kernel record once the
/// idle timeline was full: a quarter of the decoder's time with 100000 live
/// instances, and the decoder fell behind 64 launching threads.)
fn forget_ended(open: &mut BTreeSet<(u64, u64)>, instances: &Instances, t: u64) {
    let ended: Vec<(u64, u64)> = open
        .range(..=(t, u64::MAX))
        .filter(|(_, id)| instances.get(id).map_or(true, |i| i.end.is_some_and(|e| e <= t)))
        .copied()
        .collect();
    for k in ended {
        open.remove(&k);
    }
}

/// Adds a finished instance (ended at `end`) to its path's totals; one that
/// touched untraced time counts apart, with its sampled figures only.
fn fold(acc: &mut RangeAcc, i: &Instance, end: u64, untraced: &Untraced) {
    if i.discarded {
        return;
    }
    if let [start, Some(e)] = i.framework {
        let f = acc.framework.get_or_insert_with(Default::default);
        f.allocated_at_end_bytes = e.allocated;
        f.reserved_at_end_bytes = e.reserved;
        f.peak_allocated_bytes = e.peak;
        if let Some(s) = start {
            f.calls += 1;
            f.allocated_at_start_bytes = s.allocated;
            f.max_growth_bytes = f.max_growth_bytes.max(e.allocated.saturating_sub(s.allocated));
            if e.peak > s.peak {
                f.peak_inside_bytes = Some(f.peak_inside_bytes.unwrap_or(0).max(e.peak));
            }
        }
    }
    let mut sampled = SampledAcc::default();
    for (d, s) in &i.sampled {
        if i.devices == 0 || (*d < 64 && i.devices & (1 << d) != 0) {
            sampled.merge(s);
        }
    }
    acc.sampled_wall.merge(&sampled);
    let gpus = (i.devices.count_ones() as usize).min(acc.gpus.len() - 1);
    if gpus > 0 {
        acc.gpus[gpus] = acc.gpus[gpus].saturating_add(end.saturating_sub(i.start).max(1));
    }
    if untraced.touches(i.start, end) {
        acc.untraced_count += 1;
        acc.untraced_wall = acc.untraced_wall.saturating_add(end - i.start);
        acc.untraced_launches = acc.untraced_launches.saturating_add(i.fig.launches);
        let (launches, graph_launches) = (i.fig.launches, i.fig.graph_launches);
        acc.untraced_graph_launches = acc.untraced_graph_launches.saturating_add(graph_launches);
        let fig = Figures { wall: end - i.start, launches, graph_launches, ..Default::default() };
        if let Some(at) = acc.untraced_calls.add(i.start, &fig) {
            acc.untraced_sampled_first.insert(at, sampled);
        }
        return;
    }
    let comm = i.comm.as_ref().map(|c| c.time()).unwrap_or_default();
    let mut fig = Figures {
        wall: end - i.start,
        busy: i.busy.total(),
        in_window: i.busy.within(i.start, end),
        mflops: (i.flops / 1e6).round() as u64,
        ..i.fig
    };
    fig.totals.comm_ns = comm.comm_ns;
    fig.totals.exposed_comm_ns = comm.exposed_ns;
    acc.count += 1;
    acc.total.add(&fig);
    acc.calls.add(i.start, &fig);
}

/// The live instances by id: slots reused as instances come and go, found
/// through blocks of consecutive ids (threads take ids in blocks, and a
/// thread's ranges come and go in id order). A program holding 100,000
/// ranges (no kernel decides their time) then moves ids through a few
/// cache-friendly blocks, not 440-byte entries through one large hash
/// table (the decoder folded 2.3M NVTX events a second that way, slower
/// than one thread sends them).
#[derive(Default)]
struct Instances {
    blocks: FxHashMap<u64, Box<IdBlock>>,
    slots: Vec<Option<Instance>>,
    free: Vec<u32>,
    len: usize,
}

/// Ids per block.
const ID_BLOCK: u64 = 256;
/// No instance for that id.
const VACANT: u32 = u32::MAX;

struct IdBlock {
    slot: [u32; ID_BLOCK as usize],
    live: u32,
}

impl Instances {
    fn slot_of(&self, id: u64) -> Option<usize> {
        let k = self.blocks.get(&(id / ID_BLOCK))?.slot[(id % ID_BLOCK) as usize];
        (k != VACANT).then_some(k as usize)
    }

    fn insert(&mut self, id: u64, i: Instance) {
        if let Some(k) = self.slot_of(id) {
            self.slots[k] = Some(i);
            return;
        }
        let k = match self.free.pop() {
            Some(k) => {
                self.slots[k as usize] = Some(i);
                k
            }
            None => {
                self.slots.push(Some(i));
                (self.slots.len() - 1) as u32
            }
        };
        let b = self
            .blocks
            .entry(id / ID_BLOCK)
            .or_insert_with(|| Box::new(IdBlock { slot: [VACANT; ID_BLOCK as usize], live: 0 }));
        b.slot[(id % ID_BLOCK) as usize] = k;
        b.live += 1;
        self.len += 1;
    }

    fn get(&self, id: &u64) -> Option<&Instance> {
        self.slots[self.slot_of(*id)?].as_ref()
    }

    fn get_mut(&mut self, id: &u64) -> Option<&mut Instance> {
        let k = self.slot_of(*id)?;
        self.slots[k].as_mut()
    }

    fn contains_key(&self, id: &u64) -> bool {
        self.slot_of(*id).is_some()
    }

    fn remove(&mut self, id: &u64) -> Option<Instance> {
        let key = *id / ID_BLOCK;
        let b = self.blocks.get_mut(&key)?;
        let k = std::mem::replace(&mut b.slot[(*id % ID_BLOCK) as usize], VACANT);
        if k == VACANT {
            return None;
        }
        b.live -= 1;
        if b.live == 0 {
            self.blocks.remove(&key);
        }
        self.len -= 1;
        self.free.push(k);
        self.slots[k as usize].take()
    }

    fn len(&self) -> usize {
        self.len
    }

    fn values(&self) -> impl Iterator<Item = &Instance> {
        self.slots.iter().flatten()
    }

    /// Every instance with its id, leaving none.
    fn take_all(&mut self) -> Vec<(u64, Instance)> {
        let blocks = std::mem::take(&mut self.blocks);
        let mut slots = std::mem::take(&mut self.slots);
        self.free.clear();
        self.len = 0;
        let mut all = Vec::new();
        for (key, b) in blocks {
            for (j, &k) in b.slot.iter().enumerate() {
                if let Some(i) = slots.get_mut(k as usize).and_then(Option::take) {
                    all.push((key * ID_BLOCK + j as u64, i));
                }
            }
        }
        all
    }
}

#[cfg(test)]
impl std::ops::Index<&u64> for Instances {
    type Output = Instance;
    fn index(&self, id: &u64) -> &Instance {
        self.get(id).expect("an instance of that id")
    }
}

/// Traced instances still waiting for their kernels that one
/// [`Ranges::retire`] walks past to reach untraced ones: a timeline held
/// undecided would otherwise make every call walk all of them.
const MAX_SKIPPED: usize = 1024;

/// Open and unfinished instances, and the per-path totals.
pub(crate) struct Ranges {
    max_live: usize,
    /// By instance id (ids grow: the smallest are the oldest).
    instances: Instances,
    /// Push/pop ranges by path.
    pub by_path: FxHashMap<PathId, RangeAcc>,
    /// Open start/end ranges: id -> (path, thread, start).
    starts: FxHashMap<u64, (PathId, u32, u64)>,
    /// Start/end ranges by name.
    pub start_end: FxHashMap<PathId, RangeAcc>,
    /// Instances summarised early to bound memory.
    pub evicted: u64,
    /// Instances that may still get idle time: (start, id).
    idle_open: BTreeSet<(u64, u64)>,
    /// Sampling mode: instances that may still get samples: (start, id).
    sample_open: Option<BTreeSet<(u64, u64)>>,
    /// Sampling mode: the end of the latest sample seen (instances that
    /// ended by then get no more samples).
    sampled_until: u64,
    /// Closed instances, the candidates to retire: (end, id).
    closed: BTreeSet<(u64, u64)>,
}

impl Ranges {
    pub(crate) fn new(max_live: usize) -> Self {
        Ranges {
            max_live,
            instances: Instances::default(),
            by_path: FxHashMap::default(),
            starts: FxHashMap::default(),
            start_end: FxHashMap::default(),
            evicted: 0,
            idle_open: BTreeSet::new(),
            sample_open: None,
            sampled_until: 0,
            closed: BTreeSet::new(),
        }
    }

    /// Sampling mode: instances get the samples over their windows.
    pub(crate) fn track_samples(&mut self) {
        self.sample_open.get_or_insert_with(BTreeSet::new);
    }

    /// A push. Returns instances summarised early to make room (those
    /// touching `untraced` count apart).
    pub(crate) fn push(
        &mut self,
        instance: u64,
        parent: u64,
        path: PathId,
        tid: u32,
        ts: u64,
        untraced: &Untraced,
    ) -> Vec<Finished> {
        let i = Instance {
            parent,
            path,
            tid,
            start: ts,
            end: None,
            busy: IntervalUnion::default(),
            comm: None,
            fig: Figures::default(),
            sampled: Vec::new(),
            devices: 0,
            flops: 0.0,
            discarded: false,
            framework: [None, None],
            last_return: 0,
            pending_idle: VecDeque::new(),
        };
        self.instances.insert(instance, i);
        self.idle_open.insert((ts, instance));
        if let Some(open) = &mut self.sample_open {
            open.insert((ts, instance));
        }
        if self.instances.len() > self.max_live {
            self.evict(untraced)
        } else {
            Vec::new()
        }
    }

    /// Its pop.
    pub(crate) fn pop(&mut self, instance: u64, ts: u64) {
        if let Some(i) = self.instances.get_mut(&instance) {
            if let Some(old) = i.end.replace(ts) {
                self.closed.remove(&(old, instance));
            }
            self.closed.insert((ts, instance));
            i.settle_idle(ts, true);
        }
    }

    /// A start/end range opened.
    pub(crate) fn start(&mut self, id: u64, path: PathId, tid: u32, ts: u64) {
        if self.starts.len() < self.max_live {
            self.starts.insert(id, (path, tid, ts));
        } else {
            self.evicted += 1;
        }
    }

    /// It ended.
    pub(crate) fn end(&mut self, id: u64, ts: u64) -> Option<Finished> {
        let (path, tid, start) = self.starts.remove(&id)?;
        let acc = self.start_end.entry(path).or_default();
        acc.count += 1;
        acc.total.wall = acc.total.wall.saturating_add(ts.saturating_sub(start));
        Some(Finished { path, tid, start, end: ts, discarded: false })
    }

    /// A launch inside `instance` (`graph`: of a CUDA graph) counts for it
    /// and every range around it, with the time gpuscope's callback took (`callback_ns`) and, when
    /// timed, the thread's previous launch call (`call_ns`, 0: not timed).
    /// A launch inside `instance` made at `ts`, its call taking `call_ns`
    /// (0: not timed) and gpuscope's callback `callback_ns`.
    pub(crate) fn launch(&mut self, instance: u64, ts: u64, graph: bool, callback_ns: u64, call_ns: u64) {
        if let Some(i) = self.instances.get_mut(&instance) {
            i.last_return = ts.saturating_add(call_ns.max(callback_ns));
            if !i.pending_idle.is_empty() {
                i.settle_idle(ts, false);
            }
        }
        self.for_each_enclosing(instance, |i| {
            i.fig.launches += 1;
            i.fig.graph_launches += graph as u64;
            i.fig.callback_ns = i.fig.callback_ns.saturating_add(callback_ns);
            if call_ns > 0 {
                i.fig.call_ns = i.fig.call_ns.saturating_add(call_ns);
                i.fig.calls_timed += 1;
            }
        });
    }

    /// `instance` is left out of the report.
    pub(crate) fn discard(&mut self, instance: u64) {
        if let Some(i) = self.instances.get_mut(&instance) {
            i.discarded = true;
        }
    }

    /// A framework allocator's figures at `instance`'s start (`at_end`
    /// false) or end.
    pub(crate) fn framework_memory(&mut self, instance: u64, at_end: bool, sample: FrameworkSample) {
        if let Some(i) = self.instances.get_mut(&instance) {
            i.framework[at_end as usize] = Some(sample);
        }
    }

    /// `ns` of a framework integration's hook time inside `instance`.
    pub(crate) fn own_cost(&mut self, instance: u64, ns: u64) {
        self.for_each_enclosing(instance, |i| i.fig.hook_ns = i.fig.hook_ns.saturating_add(ns));
    }

    /// Model FLOPs counted inside `instance`.
    pub(crate) fn flops(&mut self, instance: u64, flops: f64) {
        self.for_each_enclosing(instance, |i| i.flops += flops);
    }

    /// A host synchronisation of `ns` inside `instance`.
    pub(crate) fn sync(&mut self, instance: u64, ns: u64) {
        self.for_each_enclosing(instance, |i| {
            i.fig.syncs += 1;
            i.fig.sync_ns = i.fig.sync_ns.saturating_add(ns);
        });
    }

    /// A copy made inside `instance`: `h2d_bytes` host-to-device (0 for
    /// other directions), `d2h` device-to-host, `pageable` from or to
    /// pageable host memory.
    pub(crate) fn copy(&mut self, instance: u64, h2d_bytes: u64, d2h: bool, pageable: bool) {
        self.for_each_enclosing(instance, |i| {
            i.fig.copies += 1;
            i.fig.d2h += d2h as u64;
            i.fig.h2d_bytes = i.fig.h2d_bytes.saturating_add(h2d_bytes);
            i.fig.pageable += pageable as u64;
        });
    }

    /// `launches` made inside `path` between trace windows: they count for
    /// it and every path around it, whether their instances are open or
    /// already folded (the count may come after they closed). Instances
    /// open during an untraced stretch are untraced ones, so these are
    /// untraced launches.
    pub(crate) fn untraced_launches(&mut self, path: PathId, instance: u64, launches: u64, graphs: u64) {
        // Into the instance they were made in when it is not folded yet
        // (sent before its pop): its calls' counts then tell warm-up apart.
        if instance != 0 && self.instances.contains_key(&instance) {
            self.for_each_enclosing(instance, |i| {
                i.fig.launches = i.fig.launches.saturating_add(launches);
                i.fig.graph_launches = i.fig.graph_launches.saturating_add(graphs);
            });
            return;
        }
        let mut p = path;
        for _ in 0..MAX_DEPTH {
            let Some(parent) = paths().parent(p) else { break };
            let acc = self.by_path.entry(p).or_default();
            acc.untraced_launches = acc.untraced_launches.saturating_add(launches);
            p = parent;
        }
    }

    /// A kernel launched inside `instance` ran over `[start, end)` on
    /// `device`; `comm`: a communication kernel.
    pub(crate) fn kernel(&mut self, instance: u64, device: u32, start: u64, end: u64, comm: bool) {
        let bit = if device < 64 { 1u64 << device } else { 0 };
        self.for_each_enclosing(instance, |i| {
            // Until now at most one device ran its kernels, none of them
            // communication: `busy` is that device's compute.
            let split = comm || bit == 0 || (i.devices != 0 && i.devices & bit == 0);
            if i.comm.is_none() && split {
                let seed = match i.devices {
                    0 => CommOverlap::default(),
                    d => CommOverlap::seeded(d.trailing_zeros(), &i.busy),
                };
                i.comm = Some(Box::new(seed));
            }
            if let Some(c) = &mut i.comm {
                c.add(device, start, end, comm);
            }
            i.busy.add(start, end);
            i.fig.totals.kernel_ns = i.fig.totals.kernel_ns.saturating_add(end.saturating_sub(start));
            i.devices |= bit;
        });
    }

    /// Calls `f` on `instance` and each live instance around it, inner
    /// first. At most [`MAX_DEPTH`] of them, and an instance that is its
    /// own parent ends the walk.
    fn for_each_enclosing(&mut self, instance: u64, mut f: impl FnMut(&mut Instance)) {
        let mut inst = instance;
        for _ in 0..MAX_DEPTH {
            let Some(i) = self.instances.get_mut(&inst) else { break };
            f(i);
            if i.parent == inst {
                break;
            }
            inst = i.parent;
        }
    }

    /// Samples of one decode: each counts for every instance open during
    /// it, by overlap.
    pub(crate) fn samples(&mut self, samples: &[Sample]) {
        let Some(open) = &mut self.sample_open else { return };
        let mut sorted = samples.to_vec();
        sorted.sort_unstable_by_key(|s| s.start);
        let Some(last) = sorted.iter().map(|s| s.end).max() else { return };
        // Samples are at most this long: those starting this much before an
        // instance may still overlap it.
        let longest = sorted.iter().map(Sample::len).max().unwrap_or(0);
        for &(start, id) in open.range(..(last, u64::MAX)) {
            let Some(i) = self.instances.get_mut(&id) else { continue };
            let end = i.end.unwrap_or(u64::MAX);
            let first = sorted.partition_point(|s| s.start.saturating_add(longest) <= start);
            for s in sorted[first..].iter().take_while(|s| s.start < end) {
                let overlap = end.min(s.end).saturating_sub(start.max(s.start));
                if overlap == 0 {
                    continue;
                }
                let p = i.sampled.iter().position(|(d, _)| *d == s.device).unwrap_or_else(|| {
                    i.sampled.push((s.device, SampledAcc::default()));
                    i.sampled.len() - 1
                });
                let acc = &mut i.sampled[p].1;
                let share = overlap as f64 / s.len().max(1) as f64;
                acc.add(s, share, overlap as f64, s.sm_efficiency_pct as f64, s.gr_active_pct as f64);
            }
        }
        // Instances that ended before these samples get no more.
        forget_ended(open, &self.instances, last);
        self.sampled_until = self.sampled_until.max(last);
    }

    /// Idle time decided by the idle tracker: each piece counts for every
    /// instance open during it. Pieces are disjoint.
    pub(crate) fn idle(&mut self, pieces: &[Piece]) {
        let mut pieces = pieces.to_vec();
        pieces.sort_unstable_by_key(|p| p.start);
        let Some(last) = pieces.last().map(|p| p.end) else { return };
        for &(start, id) in self.idle_open.range(..(last, u64::MAX)) {
            let Some(i) = self.instances.get_mut(&id) else { continue };
            let end = i.end.unwrap_or(u64::MAX);
            let first = pieces.partition_point(|p| p.end <= start);
            for p in pieces[first..].iter().take_while(|p| p.start < end) {
                let (s, e) = (p.start.max(start), p.end.min(end));
                if e <= s {
                    continue;
                }
                // Open: what lies after its last launch's return waits.
                let sure = if i.end.is_some() { e } else { e.min(i.last_return) };
                if sure > s {
                    i.fig.idle[p.cause] = i.fig.idle[p.cause].saturating_add(sure - s);
                }
                if e > sure.max(s) {
                    i.pending_idle.push_back((sure.max(s), e, p.cause));
                    if i.pending_idle.len() > PENDING_IDLE {
                        if let Some((s, e, cause)) = i.pending_idle.pop_front() {
                            i.fig.idle[cause] = i.fig.idle[cause].saturating_add(e - s);
                        }
                    }
                }
            }
        }
    }

    /// Everything before `t` is decided: instances that ended by then get
    /// no more idle time.
    pub(crate) fn idle_decided(&mut self, t: u64) {
        forget_ended(&mut self.idle_open, &self.instances, t);
    }

    /// Folds in the closed instances that nothing still to come can change,
    /// and returns them. `decided`: the idle timeline is decided before it
    /// (the kernels of every launch before it have come, or came late for
    /// the timeline too). An instance is complete once its end is decided
    /// and covered by samples (sampling mode); one that touched untraced
    /// time needs only the samples, since its kernel figures are not used.
    ///
    /// This, not [`Ranges::evict`], is what keeps memory flat in a long
    /// run: holding every closed instance until the cap grew a PyTorch
    /// process by ~350 MB (100000 instances of ~3.4 KB).
    pub(crate) fn retire(&mut self, decided: u64, untraced: &Untraced) -> Vec<Finished> {
        let sampled = if self.sample_open.is_some() { self.sampled_until } else { u64::MAX };
        let mut ready = Vec::new();
        let mut waiting = 0;
        for &(end, id) in self.closed.range(..=(sampled, u64::MAX)) {
            if end <= decided {
                ready.push(id);
                continue;
            }
            // Past `decided` only instances that touched untraced time are
            // complete; with none, or enough traced ones walked past, stop.
            if !untraced.any() || waiting == MAX_SKIPPED {
                break;
            }
            let start = self.instances.get(&id).map_or(end, |i| i.start);
            if untraced.touches(start, end) {
                ready.push(id);
            } else {
                waiting += 1;
            }
        }
        let mut done = Vec::with_capacity(ready.len());
        for id in ready {
            if let Some(i) = self.instances.remove(&id) {
                done.push(self.finish_instance(id, i, 0, untraced));
            }
        }
        done
    }

    /// Summarises the oldest closed instances to bound memory (their late
    /// kernels, samples or idle time are then lost to them): only when
    /// [`Ranges::retire`] cannot keep up, e.g. a timeline held undecided.
    fn evict(&mut self, untraced: &Untraced) -> Vec<Finished> {
        let n = (self.max_live / 10).max(1);
        // The earliest closed (instance ids are not in time order across
        // threads).
        let victims: Vec<u64> = self.closed.iter().take(n).map(|&(_, id)| id).collect();
        let mut done = Vec::new();
        for id in victims {
            if let Some(i) = self.instances.remove(&id) {
                self.evicted += 1;
                done.push(self.finish_instance(id, i, 0, untraced));
            }
        }
        done
    }

    fn finish_instance(&mut self, id: u64, mut i: Instance, session_end: u64, untraced: &Untraced) -> Finished {
        self.idle_open.remove(&(i.start, id));
        if let Some(e) = i.end {
            self.closed.remove(&(e, id));
        }
        if let Some(open) = &mut self.sample_open {
            open.remove(&(i.start, id));
        }
        // A range of the Python stack still open ends with its last launch:
        // it was open only until the thread's next launch outside it.
        let open_end = if i.last_return > 0 && is_stack_path(i.path) { i.last_return } else { session_end };
        let end = i.end.unwrap_or(open_end).max(i.start);
        i.settle_idle(end, true);
        fold(self.by_path.entry(i.path).or_default(), &i, end, untraced);
        Finished { path: i.path, tid: i.tid, start: i.start, end, discarded: i.discarded }
    }

    /// The per-path totals with the closed instances still held folded in
    /// (their late kernels may yet add to them; open instances are left
    /// out): a running session's figures so far.
    pub(crate) fn totals_so_far(&self, untraced: &Untraced) -> FxHashMap<PathId, RangeAcc> {
        let mut totals = self.by_path.clone();
        for i in self.instances.values() {
            if let Some(end) = i.end {
                fold(totals.entry(i.path).or_default(), i, end.max(i.start), untraced);
            }
        }
        // Paths with launches counted but no instance closed in the session
        // (open since before it, or still open now) have nothing to show.
        totals.retain(|_, a| a.count > 0 || a.untraced_count > 0);
        totals
    }

    /// Closes everything still open at `end_ns`.
    pub(crate) fn finish(&mut self, end_ns: u64, untraced: &Untraced) -> Vec<Finished> {
        let mut done = Vec::new();
        let mut open: Vec<(u64, Instance)> = self.instances.take_all();
        open.sort_unstable_by_key(|(id, i)| (i.start, *id));
        for (id, i) in open {
            done.push(self.finish_instance(id, i, end_ns, untraced));
        }
        for (_, (path, tid, start)) in std::mem::take(&mut self.starts) {
            let acc = self.start_end.entry(path).or_default();
            acc.count += 1;
            acc.total.wall = acc.total.wall.saturating_add(end_ns.saturating_sub(start));
            done.push(Finished { path, tid, start, end: end_ns, discarded: false });
        }
        done
    }

    /// When the oldest range still held began: push/pop instances open or
    /// not yet folded in, and open start/end ranges. A walk over them all.
    pub(crate) fn oldest_held_start(&self) -> Option<u64> {
        self.instances.values().map(|i| i.start).chain(self.starts.values().map(|s| s.2)).min()
    }

    /// Instances held now.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.instances.len()
    }
}

/// Whether `path` is a range gpuscope opened for a Python function.
fn is_stack_path(path: PathId) -> bool {
    crate::model::path::paths().path(path).leaf_domain() == Some(crate::model::path::STACK_DOMAIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::path::ROOT;

    /// One `step` instance with `kernels` (device, start, end, comm) and a
    /// nested instance holding the communication ones; the step's and the
    /// nested range's communication time.
    fn step(kernels: &[(u32, u64, u64, bool)]) -> (Figures, Figures) {
        let untraced = Untraced::default();
        let (outer, inner) = (paths().intern(ROOT, 0, "step"), paths().intern(ROOT, 0, "allreduce"));
        let mut r = Ranges::new(16);
        r.push(1, 0, outer, 1, 0, &untraced);
        r.push(2, 1, inner, 1, 0, &untraced);
        for &(device, start, end, comm) in kernels {
            r.kernel(if comm { 2 } else { 1 }, device, start, end, comm);
        }
        r.pop(2, 1_000);
        r.pop(1, 1_000);
        r.finish(1_000, &untraced);
        (r.by_path[&outer].total, r.by_path[&inner].total)
    }

    #[test]
    fn compute_before_the_first_collective_still_hides_it() {
        // Compute on device 0 arrives before the all-reduce that runs
        // under it: the step's unions start from that compute.
        let (s, inner) = step(&[(0, 0, 500, false), (0, 100, 400, true), (0, 450, 600, true)]);
        assert_eq!((s.totals.comm_ns, s.totals.exposed_comm_ns), (450, 100));
        // The nested range saw only the collectives.
        assert_eq!((inner.totals.comm_ns, inner.totals.exposed_comm_ns), (450, 450));
    }

    #[test]
    fn another_device_s_compute_hides_nothing() {
        // Compute on device 1 first, then device 0's collective over it.
        let (s, _) = step(&[(1, 0, 500, false), (0, 100, 400, true), (1, 600, 700, false)]);
        assert_eq!((s.totals.comm_ns, s.totals.exposed_comm_ns), (300, 300));
        // Two devices with compute before any collective.
        let (s, _) = step(&[(0, 0, 500, false), (1, 0, 500, false), (1, 100, 600, true), (0, 100, 200, true)]);
        assert_eq!((s.totals.comm_ns, s.totals.exposed_comm_ns), (600, 100));
        // No collective: nothing.
        let (s, _) = step(&[(0, 0, 500, false), (1, 0, 500, false)]);
        assert_eq!((s.totals.comm_ns, s.totals.exposed_comm_ns), (0, 0));
    }

    #[test]
    fn kernels_that_ran_at_once_count_in_kernel_time_once_each_and_in_busy_once() {
        // Compute under a collective on one device, and a second device's
        // kernel at the same time: 500 + 300 + 300 ns of kernels in a
        // 500 ns union.
        let (s, inner) = step(&[(0, 0, 500, false), (0, 100, 400, true), (1, 100, 400, false)]);
        assert_eq!((s.totals.kernel_ns, s.busy), (1_100, 500));
        assert_eq!((inner.totals.kernel_ns, inner.busy), (300, 300), "the nested range's own kernel");
    }

    #[test]
    fn a_range_closed_earlier_than_its_close_was_sent_gives_back_the_idle_time_past_its_end() {
        use crate::aggregate::idle::{Piece, NO_KERNEL};
        use crate::model::idle::{HOST, SYNC};
        let untraced = Untraced::default();
        let path = paths().intern(ROOT, 0, "optimizer-like");
        let mut r = Ranges::new(16);
        r.push(1, 0, path, 1, 0, &untraced);
        // Decided while it was open: idle inside it, then after its last
        // launch returned (at 100), before its close arrives.
        let piece = |start, end, cause| Piece { start, end, cause, before: NO_KERNEL };
        r.idle(&[piece(20, 40, SYNC), piece(90, 300, HOST)]);
        r.pop(1, 100);
        assert_eq!((r.instances[&1].fig.idle[SYNC], r.instances[&1].fig.idle[HOST]), (20, 10));
        // A gap after a launch that a later launch inside shows was inside.
        r.push(2, 0, path, 1, 1_000, &untraced);
        r.launch(2, 1_010, false, 0, 5);
        r.idle(&[piece(1_015, 1_050, HOST), piece(1_060, 2_000, HOST)]);
        assert_eq!(r.instances[&2].fig.idle[HOST], 0, "after its last launch: undecided");
        r.launch(2, 1_055, false, 0, 5);
        assert_eq!(r.instances[&2].fig.idle[HOST], 35);
        r.pop(2, 1_100);
        assert_eq!(r.instances[&2].fig.idle[HOST], 35 + 40);
        r.finish(3_000, &untraced);
    }
}
