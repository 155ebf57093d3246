//! Aggregation: the fourth stage. Folds attributed kernels, copies and host
//! events into running totals as they arrive, in memory bounded by the
//! number of distinct kernel names, NVTX paths and open ranges, not by the
//! number of launches. [`Aggregator::finish`] hands the totals to the report
//! stage.

pub(crate) use gpuscope_report::aggregated::calls;
pub(crate) mod comm;
pub(crate) mod device_memory;
pub(crate) mod devices;
mod graph_nodes;
mod host_delay;
pub(crate) mod idle;
pub(crate) mod interval;
pub(crate) use gpuscope_report::aggregated::kernels;
pub(crate) mod memory;
mod names;
pub mod occupancy;
pub(crate) mod per_device;
pub(crate) mod ranges;
pub(crate) mod sampled;
mod traced_samples;
pub(crate) use gpuscope_report::aggregated::timeline;
pub(crate) mod windows;

use crate::attribute::{Attributed, Attributor, LaunchInfo, Own};
use crate::decode::{Activity, KernelActivity, RecordCursor};
use crate::model::drops::Drops;
use crate::model::event::{HostEvent, COMM_LAUNCH};
use crate::model::idle::CAUSES;
use crate::model::path::{paths, PathId, RangePath};
use crate::model::profiler_cost::{Calibration, ThreadCost, MAX_TIMED_CALL_NS};
use crate::model::sampled::{Sample, SamplingStatus, TraceWindows};
use crate::model::trace::{KernelRecord, MemoryRecord, RangeRecord, SampleRecord, Trace};
use devices::DeviceTable;
use idle::{IdleTracker, Piece};
use kernels::{Grid, KernelAcc};
use memory::{copy_kind_name, MemoryAcc};
use names::KernelNames;
use occupancy::LaunchShape;
use ranges::{Finished, Ranges};
use rustc_hash::FxHashMap;
use sampled::{Joined, SampleJoin};
use std::collections::BTreeMap;
use timeline::Timeline;
use traced_samples::TracedSamples;
use windows::Untraced;

/// Options of the aggregation.
#[derive(Debug, Clone)]
pub(crate) struct AggregateOptions {
    /// Keep per-kernel records, at most this many (0: none).
    pub trace_cap: usize,
    /// Open or unfinished range instances kept at once.
    pub max_live_ranges: usize,
    /// Launches waiting for their kernel record.
    pub max_pending_launches: usize,
    /// Names of the metrics in `KernelMetrics` values (metrics mode, and
    /// metrics passes on demand).
    pub metric_names: Vec<String>,
    /// The metrics are measured only in passes asked for on demand: the
    /// session is not in metrics mode.
    pub metrics_on_demand: bool,
    /// When the session began (the idle timeline starts there).
    pub start_ns: u64,
    /// Sampling mode: PM samples are joined to kernels and ranges.
    pub sampling: bool,
    /// Sampling mode's trace windows (window, period), ns.
    pub trace_windows: Option<(u64, u64)>,
    /// Trace windows were asked for and not used: why (the report says).
    pub trace_windows_off: Option<String>,
    /// gpuscope's cost is charged gap by gap from the host's delay
    /// ([`host_delay`]): the host's waits are recorded (sync records on)
    /// and the session is not in metrics mode (whose measurements are
    /// timed as overhead). Otherwise the report takes it out as a whole.
    pub host_delay: bool,
}

impl Default for AggregateOptions {
    fn default() -> Self {
        AggregateOptions {
            start_ns: 0,
            trace_cap: 0,
            max_live_ranges: 100_000,
            max_pending_launches: 1 << 20,
            metric_names: Vec::new(),
            metrics_on_demand: false,
            host_delay: true,
            sampling: false,
            trace_windows: None,
            trace_windows_off: None,
        }
    }
}

/// Kernels kept for finding steps in a program without ranges: ~1.5 MB,
/// dozens of steps of a thousand kernels.
pub(crate) const KERNEL_STREAM: usize = 1 << 16;

pub(crate) use gpuscope_report::aggregated::lane;

/// Samples that may wait per device for the timeline to be decided: ~2.6 s
/// at a 10 us interval, 26 s at the default 100 us; ~11 MB.
const MAX_WAITING_SAMPLES: usize = 1 << 18;

pub(crate) use gpuscope_report::aggregated::Aggregate;

/// Threads per block of a record's block dimensions (negative ones read as
/// 0). A product past `u32::MAX` is no block a device runs: it reads as
/// `u32::MAX`, over every device's limit, so it gets no occupancy rather
/// than that of a wrapped size.
fn threads_per_block(block: [i32; 3]) -> u32 {
    let threads = block.iter().fold(1u64, |n, &d| n.saturating_mul(d.max(0) as u64));
    u32::try_from(threads).unwrap_or(u32::MAX)
}

/// Blocks of a record's grid dimensions (negative ones read as 0): exact,
/// as three `i32`s multiply to less than 2^93.
fn blocks(grid: [i32; 3]) -> u128 {
    grid.iter().map(|&d| d.max(0) as u128).product()
}

/// Launching threads whose cost is kept apart; more share one row (tid 0).
const MAX_THREADS: usize = 1024;
/// A thread that launched within this long is one whose CPU time is read.
const LAUNCHED_RECENTLY_NS: u64 = 10_000_000_000;
/// Copy calls waiting for their copy record.
const MAX_COPY_CALLS: usize = 65_536;
/// NCCL calls' message sizes kept per thread for their kernel's record.
const MAX_COMM_MESSAGES: usize = 4096;
/// Threads whose NCCL calls' message sizes are kept.
const MAX_COMM_THREADS: usize = 256;
/// An NCCL call this long before a communication kernel's launch is not
/// that kernel's (a group's calls are made just before its end launches
/// them).
const COMM_GROUP_NS: u64 = 100_000_000;
/// A copy call that held the host this long blocked it (an asynchronous
/// copy from pinned memory returns in a few microseconds).
const BLOCKING_COPY_NS: u64 = 20_000;

/// The running state of one session's aggregation.
pub(crate) struct Aggregator {
    opts: AggregateOptions,
    devices: DeviceTable,
    attribution: Attributor,
    names: KernelNames,
    by_name: FxHashMap<u32, KernelAcc>,
    by_path_name: FxHashMap<(PathId, u32), KernelAcc>,
    ranges: Ranges,
    memory: MemoryAcc,
    device_memory: device_memory::DeviceMemoryAcc,
    idle: IdleTracker,
    idle_total: [u64; CAUSES],
    /// Each GPU's own idle time, once a second one runs a kernel.
    per_device: per_device::PerDevice,
    cross_thread: (u64, u64),
    /// Per launching thread: its costs.
    threads: FxHashMap<u32, ThreadCost>,
    /// When each thread's (cost row's) last launch call began: where a
    /// call that blocked ended.
    last_launch: FxHashMap<u32, u64>,
    /// When the program's threads last left CUDA calls.
    recent: idle::RecentCalls,
    calibration: Result<Calibration, String>,
    forks: u64,
    /// Copy calls by correlation id: the range instance they were made in.
    copy_calls: FxHashMap<u32, u64>,
    /// Per thread, its NCCL calls' (time, message size) in call order,
    /// until the record of the communication kernel it launched after
    /// them comes.
    comm_messages: FxHashMap<u32, std::collections::VecDeque<(u64, u64)>>,
    /// Whether a range path is a framework's compilation range.
    compile_paths: FxHashMap<PathId, bool>,
    timeline: Timeline,
    /// The session's communication over time, into `timeline`.
    session_comm: comm::SessionComm,
    /// The last kernels (start, name, [`lane`]), at most [`KERNEL_STREAM`]:
    /// steps are found in them (`report::steps`).
    kernel_stream: std::collections::VecDeque<(u64, u32, u32)>,
    /// The last launches logged without kernel records, at most
    /// [`KERNEL_STREAM`], and the ids of the functions they launched (at
    /// most [`KERNEL_STREAM`]; later ones share [`u32::MAX`]).
    launch_stream: std::collections::VecDeque<(u64, u32, u32)>,
    launch_functions: FxHashMap<u64, u32>,
    /// The launched kernels' names, demangled, by the launch log's kernel
    /// id (at most [`KERNEL_STREAM`]).
    launch_names: FxHashMap<u64, String>,
    thread_names: BTreeMap<u32, String>,
    trace: Option<Trace>,
    trace_kernel_paths: Vec<PathId>,
    trace_range_paths: Vec<PathId>,
    pub(crate) drops: Drops,
    join: Option<SampleJoin>,
    /// How collection's sampling went, handed over at the end.
    sampling_status: Option<SamplingStatus>,
    /// Sampling mode's untraced stretches (trace windows).
    untraced: Untraced,
    /// With trace windows: the PM samples inside windows, set against the
    /// idle timeline once it is decided over them
    /// ([`TracedSamples`]).
    traced_samples: Option<TracedSamples>,
    /// Launch calls made between trace windows.
    untraced_launches: u64,
    /// Trace windows asked for on demand.
    on_demand: u64,
    /// CUDA graph nodes and the ranges they were captured in.
    graph_nodes: graph_nodes::GraphNodes,
}

impl Aggregator {
    pub(crate) fn new(opts: AggregateOptions, devices: DeviceTable) -> Self {
        let mut a = Aggregator {
            devices,
            attribution: Attributor::new(opts.metric_names.clone(), opts.max_pending_launches),
            names: KernelNames::default(),
            by_name: FxHashMap::default(),
            by_path_name: FxHashMap::default(),
            ranges: Ranges::new(opts.max_live_ranges),
            memory: MemoryAcc::default(),
            device_memory: Default::default(),
            idle: IdleTracker::new(opts.start_ns),
            idle_total: [0; CAUSES],
            per_device: per_device::PerDevice::default(),
            cross_thread: (0, 0),
            threads: FxHashMap::default(),
            last_launch: FxHashMap::default(),
            recent: idle::RecentCalls::default(),
            calibration: Err("no kernel was launched in the session".to_string()),
            forks: 0,
            copy_calls: FxHashMap::default(),
            comm_messages: FxHashMap::default(),
            compile_paths: FxHashMap::default(),
            timeline: Timeline::new(opts.start_ns),
            session_comm: comm::SessionComm::default(),
            kernel_stream: std::collections::VecDeque::new(),
            launch_stream: std::collections::VecDeque::new(),
            launch_functions: FxHashMap::default(),
            launch_names: FxHashMap::default(),
            thread_names: BTreeMap::new(),
            trace: (opts.trace_cap > 0).then(Trace::default),
            opts,
            trace_kernel_paths: Vec::new(),
            trace_range_paths: Vec::new(),
            drops: Drops::default(),
            join: None,
            sampling_status: None,
            untraced: Untraced::default(),
            traced_samples: None,
            untraced_launches: 0,
            on_demand: 0,
            graph_nodes: graph_nodes::GraphNodes::default(),
        };
        if matches!(a.opts.trace_windows, Some((0, _))) {
            // Windows of 0: kernel records are never on.
            a.untraced.off(a.opts.start_ns);
        }
        if a.opts.trace_windows.is_some() {
            a.idle.keep_unclassified();
            a.traced_samples = Some(TracedSamples::default());
        }
        if a.opts.sampling {
            a.ranges.track_samples();
            a.join = Some(SampleJoin::new(
                crate::collect::sampling::MIN_KERNEL_SAMPLES,
                MAX_WAITING_SAMPLES,
                a.opts.max_pending_launches,
            ));
        }
        a
    }

    /// Tests: sampling mode with trace windows of 0 (nothing traced), on no
    /// device.
    #[cfg(test)]
    pub(crate) fn windows_of_zero() -> Self {
        let opts = AggregateOptions { sampling: true, trace_windows: Some((0, 1000)), ..Default::default() };
        Aggregator::new(opts, DeviceTable::fixed(vec![]))
    }

    /// How collection's sampling went (sampling mode, at the end).
    pub(crate) fn sampling_status(&mut self, status: SamplingStatus) {
        self.sampling_status = Some(status);
    }

    /// A trace window was asked for on demand (it opens with the next
    /// [`Aggregator::tracing`]).
    pub(crate) fn window_on_demand(&mut self) {
        self.on_demand = self.on_demand.saturating_add(1);
    }

    /// Kernel records went off (`on` false) or came back on at `ts`
    /// (sampling mode's trace windows).
    pub(crate) fn tracing(&mut self, on: bool, ts: u64) {
        if self.opts.trace_windows.is_none() {
            return;
        }
        if !on {
            self.untraced.off(ts);
        } else if self.untraced.off_since().is_some() {
            self.untraced.on(ts);
            // Launches that waited for their kernels across the untraced
            // stretch no longer hold the timeline.
            self.idle.forget_launches_before(ts);
            self.advance_idle();
        }
    }

    /// PM samples of one decode (sampling mode).
    pub(crate) fn samples(&mut self, samples: &[Sample]) {
        if samples.is_empty() {
            return;
        }
        self.ranges.samples(samples);
        self.timeline.samples(samples);
        if let Some(t) = &mut self.traced_samples {
            t.samples(samples.iter().filter(|s| !self.untraced.touches(s.start, s.end)));
            t.settle(self.idle.decided_until(), &mut self.timeline);
        }
        // Without kernel records (trace windows of 0) the samples are what
        // says which devices ran: their peaks judge the sampled figures.
        let mut last = None;
        for s in samples.iter().filter(|s| last.replace(s.device) != Some(s.device)) {
            self.devices.limits(s.device);
        }
        if let Some(j) = &mut self.join {
            j.samples(samples);
        }
        if let Some(t) = &mut self.trace {
            let room = self.opts.trace_cap.saturating_sub(t.samples.len());
            t.samples.extend(samples.iter().take(room).map(SampleRecord::from));
        }
        self.advance_join(self.idle.decided_until());
        self.retire_ranges();
    }

    fn advance_join(&mut self, decided: u64) {
        let Some(j) = &mut self.join else { return };
        let mut out = Vec::new();
        j.advance(decided, &mut out);
        self.credit_samples(out);
    }

    fn credit_samples(&mut self, joined: Vec<Joined>) {
        for k in joined {
            for acc in
                [self.by_name.get_mut(&k.name), self.by_path_name.get_mut(&(k.path, k.name))].into_iter().flatten()
            {
                acc.sampled.merge(&k.all);
                if let Some(own) = &k.own {
                    acc.sampled_own.merge(own);
                }
            }
        }
    }

    /// Thread `tid`'s cost row; beyond MAX_THREADS threads, the rest share
    /// one row (tid 0).
    fn thread_cost(&mut self, tid: u32) -> &mut ThreadCost {
        let row = self.thread_row(tid);
        self.threads.entry(row).or_insert_with(|| ThreadCost { tid: row, ..Default::default() })
    }

    /// Thread `tid`'s row: beyond MAX_THREADS threads, the rest share 0.
    fn thread_row(&self, tid: u32) -> u32 {
        if self.threads.len() < MAX_THREADS || self.threads.contains_key(&tid) {
            tid
        } else {
            0
        }
    }

    /// Applies one host event.
    pub(crate) fn host_event(&mut self, e: HostEvent) {
        match e {
            HostEvent::Push { instance, parent, path, tid, ts } => {
                for f in self.ranges.push(instance, parent, path, tid, ts, &self.untraced) {
                    self.finished(f);
                }
            }
            HostEvent::Pop { instance, ts } => self.ranges.pop(instance, ts),
            HostEvent::UnbalancedPop { .. } => self.drops.unbalanced_pops += 1,
            HostEvent::Start { id, path, tid, ts } => self.ranges.start(id, path, tid, ts),
            HostEvent::End { id, ts } => {
                if let Some(f) = self.ranges.end(id, ts) {
                    self.finished(f);
                }
            }
            HostEvent::KernelMetrics { correlation_id, values } => {
                if let Some(a) = self.attribution.metrics(correlation_id, values) {
                    self.kernel_with(a);
                }
            }
            HostEvent::Launch {
                correlation_id,
                tid,
                path,
                instance,
                graph,
                profiled,
                inherited,
                ts,
                cost_ns,
                prev_call_ns,
            } => {
                // The thread's previous launch call blocked (a full launch
                // queue): it waited for the GPU, which set the pace.
                // (Less what gpuscope and CUPTI added to it: a slow callback
                // is no wait.)
                let own = self.launch_cost(cost_ns as u64, 0);
                let blocked = (prev_call_ns as u64).saturating_sub(own) >= host_delay::WAITED_NS;
                // The blocked call ended `prev_call_ns` after it began (its
                // start unknown for threads past the rows kept, sharing row 0:
                // then at this launch, as late as it can be).
                let row = self.thread_row(tid);
                let prev_launch = if row == 0 { None } else { self.last_launch.insert(row, ts) };
                let blocked_until = prev_launch.map_or(ts, |p| p.saturating_add(prev_call_ns as u64).min(ts));
                let prev_call_ns = if prev_call_ns as u64 > MAX_TIMED_CALL_NS { 0 } else { prev_call_ns };
                self.thread_cost(tid).add(cost_ns as u64, prev_call_ns as u64);
                if self.opts.host_delay {
                    if blocked {
                        self.idle.host_waited(blocked_until);
                        self.per_device.host_waited(blocked_until);
                    }
                    let added = self.launch_cost(cost_ns as u64, if blocked { 0 } else { prev_call_ns as u64 });
                    self.idle.host_cost(ts, added);
                    self.per_device.host_cost(ts, added);
                }
                let since = self.recent.before(ts);
                self.recent.add(ts);
                let info = LaunchInfo { tid, path, instance, profiled, ts, graph, seen: true, inherited, since };
                self.attribution.launch(correlation_id, info);
                self.idle.launch(correlation_id, ts, graph);
                self.ranges.launch(instance, ts, graph, cost_ns as u64, prev_call_ns as u64);
                self.timeline.launch(ts, cost_ns as u64, prev_call_ns as u64);
            }
            HostEvent::UntracedLaunches { path, instance, launches, graphs, start, end } => {
                // Launches between trace windows: a thread's next traced
                // launch does not follow its last traced one.
                self.last_launch.clear();
                self.untraced_launches = self.untraced_launches.saturating_add(launches);
                self.timeline.counted_launches(start, end, launches);
                self.ranges.untraced_launches(path, instance, launches, graphs);
            }
            HostEvent::KernelName { kernel, name } => {
                if self.launch_names.len() < KERNEL_STREAM {
                    self.launch_names.entry(kernel).or_insert_with(|| crate::model::names::demangle(&name));
                }
            }
            HostEvent::LaunchLog { lane, entries } => {
                // Steps are found from compute launches, as from records.
                for (ts, function) in entries.into_iter().filter(|(_, f)| f & COMM_LAUNCH == 0) {
                    let next = self.launch_functions.len() as u32;
                    let id = match self.launch_functions.get(&function) {
                        Some(&id) => id,
                        None if (next as usize) < KERNEL_STREAM => {
                            *self.launch_functions.entry(function).or_insert(next)
                        }
                        None => u32::MAX,
                    };
                    if self.launch_stream.len() == KERNEL_STREAM {
                        self.launch_stream.pop_front();
                    }
                    self.launch_stream.push_back((ts, id, lane));
                }
            }
            HostEvent::CommMessage { tid, bytes, ts } => {
                if self.comm_messages.len() >= MAX_COMM_THREADS && !self.comm_messages.contains_key(&tid) {
                    self.drops.comm_messages_unmatched += 1;
                    return;
                }
                let q = self.comm_messages.entry(tid).or_default();
                if q.len() == MAX_COMM_MESSAGES {
                    // Calls whose kernels never came (records off between
                    // trace windows, or dropped).
                    q.pop_front();
                    self.drops.comm_messages_unmatched += 1;
                }
                q.push_back((ts, bytes));
            }
            HostEvent::HostCopy { start, end, correlation_id, instance } => {
                self.idle.copy(start, end);
                self.per_device.host_copy(start, end);
                // A copy call that blocked the host while the GPU drained
                // (pageable memory, `.item()`) leaves nothing queued behind
                // it, as a synchronisation does; an asynchronous one returns
                // at once.
                if end.saturating_sub(start) >= BLOCKING_COPY_NS {
                    self.host_sync(start, end);
                }
                self.recent.add(end);
                if self.copy_calls.len() >= MAX_COPY_CALLS {
                    // Copies whose records never came (failed calls).
                    self.copy_calls.clear();
                }
                self.copy_calls.insert(correlation_id, instance);
            }
            HostEvent::HostWait { start, end, instance, main } => {
                self.recent.add(end);
                self.memory.wait(start, end, Some(main));
                self.host_sync(start, end);
                self.ranges.sync(instance, end.saturating_sub(start));
            }
            HostEvent::Calibrated { record_ns, plain_ns, traced_ns } => {
                self.calibration = Ok(Calibration { record_ns, plain_ns, traced_ns });
            }
            HostEvent::NotCalibrated { why } => self.calibration = Err(why),
            HostEvent::Forked { .. } => self.forks += 1,
            HostEvent::Overhead { start, end } => {
                self.idle.overhead(start, end);
                self.per_device.overhead(start, end);
            }
            HostEvent::ThreadName { tid, name } => {
                self.thread_names.insert(tid, name);
            }
            HostEvent::Flops { instance, flops } => self.ranges.flops(instance, flops),
            HostEvent::FrameworkMemory { instance, at_end, allocated, reserved, peak } => {
                self.ranges.framework_memory(instance, at_end, ranges::FrameworkSample { allocated, reserved, peak })
            }
            HostEvent::Alloc { correlation_id, path } => self.device_memory.call(correlation_id, path),
            HostEvent::OwnCost { tid, instance, ns, ts } => {
                if self.opts.host_delay {
                    self.idle.host_cost(ts, ns);
                    self.per_device.host_cost(ts, ns);
                }
                self.thread_cost(tid).add_own(ns);
                self.ranges.own_cost(instance, ns);
                self.timeline.own_cost(ts, ns);
            }
            HostEvent::Discard { instance } => self.ranges.discard(instance),
            HostEvent::GraphNode { node, path, base } => {
                if !self.graph_nodes.made(node, path, base) {
                    self.drops.graph_nodes_over_cap += 1;
                }
            }
            HostEvent::GraphNodeCloned { node, original } => {
                if !self.graph_nodes.cloned(node, original) {
                    self.drops.graph_nodes_over_cap += 1;
                }
            }
        }
    }

    /// A range instance folded in: its device memory, and its trace record
    /// (none for one left out of the report).
    fn finished(&mut self, f: Finished) {
        if f.discarded {
            return;
        }
        self.device_memory.range(f.path, f.start, f.end);
        // The outermost compilation range only: nested passes would count
        // its time again.
        let compile =
            self.is_compile_path(f.path) && !paths().parent(f.path).is_some_and(|parent| self.is_compile_path(parent));
        if compile {
            self.timeline.compile(f.start, f.end);
        }
        if let Some(t) = &mut self.trace {
            if t.ranges.len() < self.opts.trace_cap {
                t.ranges.push(RangeRecord {
                    path: Default::default(),
                    thread: f.tid,
                    start_ns: f.start,
                    end_ns: f.end,
                });
                self.trace_range_paths.push(f.path);
            }
        }
    }

    /// Folds one kernel record in (a profiled one waits for its metrics).
    pub(crate) fn kernel(&mut self, k: &KernelActivity) {
        let names = &mut self.names;
        let own = || match names.name(k.name) {
            "WaitNs" => Some(Own::Measurement),
            crate::collect::calibrate::KERNEL => Some(Own::Calibration),
            _ => None,
        };
        if let Some(a) = self.attribution.kernel(k, own) {
            self.kernel_with(a);
        }
    }

    fn kernel_with(&mut self, a: Attributed) {
        let Attributed { kernel: k, launch: info, metrics } = a;
        // The nodes of a graph launched before kernel records went off that
        // ran past the switch get no true end from CUPTI (seen on XLA's
        // command buffers: every node's end 38-164 ms late, those that
        // began after the switch too; no such node was seen with a
        // plausible end).
        let launched = if info.seen { info.ts.min(k.start) } else { k.start };
        if k.graph_id != 0 && self.untraced.went_off_within(launched, k.end) {
            self.drops.window_cut_graph_kernels += 1;
            return;
        }
        let name = self.names.id(k.name);
        // A replayed graph kernel runs the ranges its node was captured in.
        let path = self.graph_nodes.path(k.graph_node_id, info.path);
        let info = LaunchInfo { path, ..info };
        let shape = LaunchShape {
            threads_per_block: threads_per_block(k.block),
            registers_per_thread: k.registers_per_thread as u32,
            static_smem: k.static_smem.max(0) as u32,
            dynamic_smem: k.dynamic_smem.max(0) as u32,
            smem_carveout: k.smem_executed,
        };
        let occ = self.devices.occupancy(k.device, &shape);
        // Under kernel replay the record's end is not the kernel's: a
        // profiled kernel's duration is the measured gpu__time_duration.
        let dur = match &metrics {
            Some(m) if m.duration_ns.is_finite() && m.duration_ns >= 0.0 => m.duration_ns as u64,
            _ => k.end.saturating_sub(k.start),
        };
        let end = k.start.saturating_add(dur);
        let grid = self.devices.sm_count(k.device).map(|sms| Grid { blocks: blocks(k.grid), sms });
        self.by_name.entry(name).or_default().add(k.start, dur, occ.as_ref(), metrics.as_ref(), grid);
        self.by_path_name.entry((info.path, name)).or_default().add(k.start, dur, occ.as_ref(), metrics.as_ref(), grid);
        let is_comm = self.names.is_comm(name);
        let message_bytes = if is_comm { self.comm_message(info.tid, info.ts) } else { None };
        self.ranges.kernel(info.instance, k.device, k.start, end, is_comm);
        self.timeline.kernel(k.start, end);
        let tl = &mut self.timeline;
        self.session_comm.kernel(k.device, k.start, end, is_comm, &mut |u, s, e| tl.comm_span(u, s, e));
        // Communication kernels run on streams of their own and fall
        // between the compute kernels differently every step: the steps
        // are found from the compute kernels.
        if !is_comm {
            if self.kernel_stream.len() == KERNEL_STREAM {
                self.kernel_stream.pop_front();
            }
            self.kernel_stream.push_back((k.start, name, lane(k.device, k.stream)));
        }
        if let Some(j) = &mut self.join {
            j.kernel(k.device, k.start, end, name, info.path);
        }
        if info.inherited {
            self.cross_thread.0 += 1;
            self.cross_thread.1 = self.cross_thread.1.saturating_add(dur);
        }
        let launch =
            info.seen.then_some(idle::Launched { ts: info.ts, graph: info.graph, since: info.since, kernel: name });
        // Before the session's timeline takes it: a second device's first
        // kernel copies the session's timeline as the first device's.
        self.per_device.kernel(
            k.device,
            k.correlation_id,
            k.start,
            end,
            launch,
            (&self.idle, &self.timeline, &self.idle_total),
        );
        self.idle.kernel(k.correlation_id, k.start, end, launch);
        if self.idle.full() {
            self.advance_idle();
        }
        if let Some(t) = &mut self.trace {
            if t.kernels.len() < self.opts.trace_cap {
                t.kernels.push(KernelRecord {
                    name: self.names.get(name).to_string(),
                    device: k.device,
                    context: k.context,
                    stream: k.stream,
                    correlation_id: k.correlation_id,
                    start_ns: k.start,
                    end_ns: end,
                    grid: k.grid,
                    block: k.block,
                    cluster: k.cluster,
                    registers_per_thread: k.registers_per_thread as u32,
                    static_smem_bytes: shape.static_smem,
                    dynamic_smem_bytes: shape.dynamic_smem,
                    smem_carveout_bytes: k.smem_executed,
                    occupancy: occ,
                    thread: info.tid,
                    path: Default::default(),
                    graph_id: k.graph_id,
                    replayed: info.profiled,
                    metrics,
                    message_bytes,
                });
                self.trace_kernel_paths.push(info.path);
            } else {
                self.drops.trace_kernels_over_cap += 1;
            }
        }
    }

    /// Whether `path` ends in a framework's compilation range.
    fn is_compile_path(&mut self, path: PathId) -> bool {
        *self.compile_paths.entry(path).or_insert_with(|| {
            paths().path(path).frames.last().is_some_and(|leaf| {
                leaf.domain.as_deref().is_some_and(crate::model::path::is_internal_domain)
                    && crate::model::path::is_compile_range(&leaf.name)
            })
        })
    }

    /// The bytes of thread `tid`'s NCCL calls made up to its launch at
    /// `launched` (one call, or a group's, launched together at its end),
    /// taken; `None` when it made none.
    fn comm_message(&mut self, tid: u32, launched: u64) -> Option<u64> {
        let q = self.comm_messages.get_mut(&tid)?;
        let mut bytes = None;
        while let Some(&(ts, b)) = q.front() {
            if ts > launched {
                break;
            }
            q.pop_front();
            // A group's calls come just before its launch; older ones are
            // calls whose kernels never came.
            if launched - ts > COMM_GROUP_NS {
                self.drops.comm_messages_unmatched += 1;
                continue;
            }
            bytes = Some(bytes.unwrap_or(0u64).saturating_add(b));
        }
        bytes
    }

    /// Folds one decoded record in.
    pub(crate) fn activity(&mut self, a: &Activity) {
        match a {
            Activity::Kernel(k) => self.kernel(k),
            Activity::Memcpy(m) => {
                self.memory.copy(m);
                let d2h = m.copy_kind as u32 == cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
                let h2d = if m.copy_kind as u32 == cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD { m.bytes } else { 0 };
                self.timeline.copy(m.start, memory::is_pageable(m), d2h, h2d);
                if let Some(instance) = self.copy_calls.remove(&m.correlation_id) {
                    self.ranges.copy(instance, h2d, d2h, memory::is_pageable(m));
                }
                self.gpu_copy(m.device, m.start, m.end);
                self.trace_memory(copy_kind_name(m.copy_kind), m.bytes, m.device, m.stream, m.start, m.end);
            }
            Activity::Memset(m) => {
                self.memory.set(m);
                self.gpu_copy(m.device, m.start, m.end);
                self.trace_memory("memset", m.bytes, m.device, m.stream, m.start, m.end);
            }
            Activity::DeviceMemory(m) => {
                if let Some(alloc) = self.device_memory.record(m) {
                    self.timeline.device_memory(m.ts, alloc);
                }
            }
            Activity::Sync(s) => {
                self.memory.sync(s);
                // A stream waiting on an event is the GPU waiting, not the
                // host.
                if s.sync_type != cupti_sys::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT {
                    self.host_sync(s.start, s.end);
                }
            }
            Activity::Other(_) => {}
        }
    }

    /// What gpuscope and CUPTI added to one launch call, ns: the larger of
    /// CUPTI's record cost (the calibration's) with gpuscope's callback
    /// time, and the previous call's time over a plain launch's, as
    /// [`ProfilerCost::added_ns`](gpuscope_report::report::ProfilerCost::added_ns)
    /// takes them over many launches; the callback time alone without a
    /// calibration.
    fn launch_cost(&self, callback_ns: u64, prev_call_ns: u64) -> u64 {
        match &self.calibration {
            Ok(c) => {
                let records = (c.record_ns as u64).saturating_add(callback_ns);
                let call = if prev_call_ns > 0 { prev_call_ns.saturating_sub(c.plain_ns as u64) } else { 0 };
                records.max(call)
            }
            Err(_) => callback_ns,
        }
    }

    /// The host waited in a synchronisation: the session's and every
    /// GPU's gaps then are its wait.
    fn host_sync(&mut self, start: u64, end: u64) {
        self.idle.sync(start, end);
        self.per_device.sync(start, end);
        self.timeline.cuda_blocked(start, end);
    }

    /// The threads that launched kernels in the last
    /// [`LAUNCHED_RECENTLY_NS`] before `now` (those with a row of their
    /// own; none across untraced launches), whose CPU time the decoder
    /// reads: not a thread that launched at start-up and then does other
    /// work.
    pub(crate) fn launching_threads(&self, now: u64) -> impl Iterator<Item = u32> + '_ {
        let since = now.saturating_sub(LAUNCHED_RECENTLY_NS);
        self.last_launch.iter().filter(move |&(_, &at)| at >= since).map(|(&t, _)| t)
    }

    /// Those threads used `ns` of CPU time from `start` to `end` (session
    /// clock).
    pub(crate) fn launching_cpu(&mut self, start: u64, end: u64, ns: u64) {
        self.timeline.launching_cpu(start, end, ns);
    }

    /// A copy or memset ran on `device`'s GPU.
    fn gpu_copy(&mut self, device: u32, start: u64, end: u64) {
        self.idle.copy(start, end);
        self.per_device.copy(device, start, end);
    }

    fn trace_memory(&mut self, kind: &str, bytes: u64, device: u32, stream: u32, start: u64, end: u64) {
        if let Some(t) = &mut self.trace {
            if t.memory.len() < self.opts.trace_cap {
                t.memory.push(MemoryRecord {
                    kind: kind.to_string(),
                    bytes,
                    device,
                    stream,
                    start_ns: start,
                    end_ns: end,
                });
            }
        }
    }

    /// Decodes and folds every record a cursor yields.
    pub(crate) fn buffer(&mut self, cursor: &mut dyn RecordCursor) {
        self.buffer_with(cursor, &mut |_| {})
    }

    /// [`Aggregator::buffer`], with `fix` applied to each record before it
    /// is folded.
    pub(crate) fn buffer_with(&mut self, cursor: &mut dyn RecordCursor, fix: &mut dyn FnMut(&mut Activity)) {
        loop {
            match cursor.next_record() {
                Ok(Some(bytes)) => match crate::decode::decode(bytes) {
                    Ok(mut a) => {
                        fix(&mut a);
                        self.activity(&a)
                    }
                    Err(_) => {
                        self.drops.undecodable_records += 1;
                        break;
                    }
                },
                Ok(None) => break,
                Err(_) => {
                    // The rest of the buffer cannot be walked.
                    self.drops.undecodable_records += 1;
                    break;
                }
            }
        }
        // Every record of the buffer is in: decide the idle gaps that
        // nothing still to come can fill.
        self.advance_idle();
    }

    fn advance_idle(&mut self) {
        let mut pieces = Vec::new();
        self.idle.advance(&self.untraced, &mut |p| pieces.push(p));
        self.per_device.advance(self.idle.watermark(), &self.untraced);
        self.credit_idle(&pieces);
        self.credit_traced_gaps(&pieces);
    }

    /// Decided gaps inside windows, for the samples there.
    fn credit_traced_gaps(&mut self, pieces: &[Piece]) {
        let Some(t) = &mut self.traced_samples else { return };
        for p in pieces {
            t.gap(p.start, p.end, true);
        }
        for (s, e) in self.idle.take_unclassified() {
            t.gap(s, e, false);
        }
        t.settle(self.idle.decided_until(), &mut self.timeline);
    }

    fn credit_idle(&mut self, pieces: &[Piece]) {
        for p in pieces {
            self.idle_total[p.cause] = self.idle_total[p.cause].saturating_add(p.end - p.start);
            if p.cause == crate::model::idle::HOST {
                if let Some(k) = self.by_name.get_mut(&p.before) {
                    k.host_before = k.host_before.saturating_add(p.end - p.start);
                }
            }
        }
        self.ranges.idle(pieces);
        self.timeline.idle(pieces);
        self.ranges.idle_decided(self.idle.decided_until());
        self.advance_join(self.idle.decided_until());
        self.retire_ranges();
    }

    /// Folds in the range instances that are complete, freeing them.
    fn retire_ranges(&mut self) {
        for f in self.ranges.retire(self.idle.decided_until(), &self.untraced) {
            self.finished(f);
        }
        if self.device_memory.wants_trim() {
            let oldest = self.ranges.oldest_held_start().unwrap_or(u64::MAX);
            self.device_memory.forget_before(oldest);
        }
    }

    /// Closes every open range at `end_ns` and hands over the totals.
    pub(crate) fn finish(mut self, end_ns: u64) -> Aggregate {
        // Profiled kernels whose metrics never came: report them without.
        for a in self.attribution.finish() {
            self.kernel_with(a);
        }
        let tl = &mut self.timeline;
        self.session_comm.drain(&mut |u, s, e| tl.comm_span(u, s, e));
        let mut pieces = Vec::new();
        self.idle.finish(end_ns, &self.untraced, &mut |p| pieces.push(p));
        self.per_device.finish(end_ns, &self.untraced);
        self.credit_idle(&pieces);
        // Samples past the decided time stay unjudged: they have no gaps
        // to be judged by.
        self.credit_traced_gaps(&pieces);
        self.drops.late_kernels += self.idle.late_kernels;
        let mut sampling = None;
        if let Some(mut j) = self.join.take() {
            let mut out = Vec::new();
            j.finish(end_ns, &mut out);
            self.credit_samples(out);
            let mut st = self.sampling_status.take().unwrap_or_default();
            (st.samples_expired, st.kernels_unsampled) = (j.expired, j.unsampled);
            st.trace_windows = self.trace_windows_at(end_ns);
            st.trace_windows_off = self.opts.trace_windows_off.clone();
            sampling = Some(st);
        }
        for f in self.ranges.finish(end_ns, &self.untraced) {
            self.finished(f);
        }
        self.drops.kernels_missing_metrics += self.attribution.missing_metrics;
        self.drops.unattributed_kernels += self.attribution.unattributed;
        self.drops.ranges_evicted += self.ranges.evicted;
        let mut trace = self.trace.take();
        if let Some(t) = &mut trace {
            let table = paths();
            // Up to trace_cap records, over few paths: resolve each once.
            let mut cache: FxHashMap<PathId, RangePath> = FxHashMap::default();
            let mut resolve = |p: PathId| cache.entry(p).or_insert_with(|| table.path(p)).clone();
            for (k, p) in t.kernels.iter_mut().zip(&self.trace_kernel_paths) {
                k.path = resolve(*p);
            }
            for (r, p) in t.ranges.iter_mut().zip(&self.trace_range_paths) {
                r.path = resolve(*p);
            }
        }
        self.debug_bins();
        Aggregate { sampling, trace, ..self.snapshot(end_ns) }
    }

    /// `GPUSCOPE_DEBUG=1`: the session's time bins the steady state is
    /// found from, one line per active bin.
    fn debug_bins(&self) {
        if !crate::collect::debug::on() {
            return;
        }
        let t = &self.timeline;
        let debug = crate::collect::debug::debug;
        debug(&format!("timeline: {} bins of {} ms", t.bins.len(), t.width / 1_000_000));
        for (i, b) in t.bins.iter().enumerate() {
            let sampled = b.sampled_busy_ns();
            if b.launches == 0 && b.kernel_ns == 0 && sampled == 0 && b.compile_ns == 0 {
                continue;
            }
            debug(&format!(
                "bin {i} at {} ms: launches {} kernel {} us sampled busy {} us compile {} us",
                i as u64 * t.width / 1_000_000,
                b.launches,
                b.kernel_ns / 1000,
                sampled / 1000,
                b.compile_ns / 1000
            ));
        }
    }

    /// The trace windows taken up to `end_ns`, in sampling mode with them.
    fn trace_windows_at(&self, end_ns: u64) -> Option<TraceWindows> {
        self.opts.trace_windows.map(|(window_ns, period_ns)| {
            let (stretches, untraced_ns) = self.untraced.totals(end_ns);
            TraceWindows {
                window_ns,
                period_ns,
                // With windows of 0, the stretches that ended were closed
                // by windows asked for.
                windows: if window_ns == 0 { stretches } else { stretches + 1 },
                traced_ns: end_ns.saturating_sub(self.opts.start_ns).saturating_sub(untraced_ns),
                untraced_ns,
                unclassified_gaps_ns: self.idle.untraced_gaps,
                untraced_launches: Some(self.untraced_launches),
                on_demand: self.on_demand,
            }
        })
    }

    /// The totals so far, for a report while the session runs (`now_ns`):
    /// kernels and copies decoded so far, ranges with their closed
    /// instances (open ones are not in yet), no per-kernel trace; in
    /// sampling mode the sampling status last handed in, with the trace
    /// windows so far (an always-on session's series are answered as
    /// such).
    pub(crate) fn snapshot(&self, now_ns: u64) -> Aggregate {
        let sampling = self.join.as_ref().map(|_| SamplingStatus {
            trace_windows: self.trace_windows_at(now_ns),
            trace_windows_off: self.opts.trace_windows_off.clone(),
            ..self.sampling_status.clone().unwrap_or_default()
        });
        let table = paths();
        // Paths were kept as ids while aggregating; resolve each once.
        let mut cache: FxHashMap<PathId, RangePath> = FxHashMap::default();
        let mut resolve = |p: PathId| cache.entry(p).or_insert_with(|| table.path(p)).clone();
        let names = &self.names;
        let kernels = self.by_name.iter().map(|(n, a)| (names.get(*n).to_string(), a.clone())).collect();
        let path_kernels =
            self.by_path_name.iter().map(|((p, n), a)| (resolve(*p), names.get(*n).to_string(), a.clone())).collect();
        let ranges = self.ranges.totals_so_far(&self.untraced).into_iter().map(|(p, a)| (resolve(p), a)).collect();
        let start_end_ranges = self.ranges.start_end.iter().map(|(p, a)| (resolve(*p), a.clone())).collect();
        Aggregate {
            metrics_mode: !self.opts.metric_names.is_empty() && !self.opts.metrics_on_demand,
            sampling,
            devices: self.devices.infos(),
            kernels,
            path_kernels,
            ranges,
            start_end_ranges,
            memcpy: self.memory.memcpy.iter().map(|(k, a)| (copy_kind_name(*k), a.clone())).collect(),
            memset: self.memory.memset.clone(),
            syncs: self.memory.syncs,
            main_syncs: self.memory.main_syncs.filter(|_| !self.memory.threads_unknown),
            device_memory: self.device_memory.summary(|p| resolve(p).to_string()),
            range_memory: self
                .device_memory
                .ranges(|p| table.parent(p))
                .into_iter()
                .map(|(p, m)| (resolve(p), m))
                .collect(),
            thread_names: self.thread_names.iter().map(|(t, n)| (*t, n.clone())).collect(),
            trace: None,
            drops: Drops {
                live_allocations_over_cap: self.device_memory.over_cap,
                devices_over_cap: self.per_device.over_cap,
                range_memory_partial: self.device_memory.partial_ranges,
                ..self.drops.clone()
            },
            profiler_kernels: self.attribution.profiler_kernels,
            idle: self.idle_total,
            cross_thread: self.cross_thread,
            threads: {
                let mut t: Vec<ThreadCost> = self.threads.values().copied().collect();
                t.sort_by_key(|c| std::cmp::Reverse(c.launches));
                t
            },
            calibration: self.calibration.clone(),
            cost_in_idle: self.opts.host_delay,
            forks: self.forks,
            kernel_stream: self.kernel_stream.iter().copied().collect(),
            kernel_stream_names: {
                let mut ids: Vec<u32> = self.kernel_stream.iter().map(|k| k.1).collect();
                ids.sort_unstable();
                ids.dedup();
                ids.into_iter().map(|id| (id, self.names.get(id).to_string())).collect()
            },
            launch_stream: self.launch_stream.iter().copied().collect(),
            launch_stream_names: {
                let mut v: Vec<(u32, String)> = self
                    .launch_functions
                    .iter()
                    .filter_map(|(f, &id)| self.launch_names.get(f).map(|n| (id, n.clone())))
                    .collect();
                v.sort_unstable();
                v
            },
            timeline: {
                // The communication spans not handed out yet, into a copy.
                let mut t = self.timeline.clone();
                self.session_comm.clone().drain(&mut |u, s, e| t.comm_span(u, s, e));
                t
            },
            per_device: match self.per_device.first {
                Some(d) if self.per_device.devices.is_empty() => {
                    vec![(d, self.idle.busy_ns, self.idle_total, self.timeline.clone())]
                }
                _ => self
                    .per_device
                    .devices
                    .iter()
                    .map(|(d, t)| {
                        let t = t.settled(self.idle.decided_until(), &self.untraced);
                        (*d, t.busy_ns(), t.total, t.timeline)
                    })
                    .collect(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::device::DeviceInfo;
    use crate::model::path::ROOT;
    use device_memory::TRIM_EVERY;

    /// A plain (non-graph, unmeasured) launch on thread 1.
    fn launch(correlation_id: u32, instance: u64, path: PathId, ts: u64) -> HostEvent {
        launch_on(1, correlation_id, instance, path, ts, 0)
    }

    /// A plain launch on thread `tid`, outside ranges when `instance` is 0;
    /// `prev_call_ns`: the thread's previous launch call, timed.
    fn launch_on(tid: u32, correlation_id: u32, instance: u64, path: PathId, ts: u64, prev_call_ns: u32) -> HostEvent {
        let mut e = HostEvent::launch(correlation_id, tid, path, instance, ts);
        if let HostEvent::Launch { prev_call_ns: p, .. } = &mut e {
            *p = prev_call_ns;
        }
        e
    }

    #[test]
    fn a_snapshot_has_the_closed_ranges_and_kernels_so_far_and_the_end_counts_them_once() {
        let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        let step = paths().intern(ROOT, 0, "snapshot-step");
        let outer = paths().intern(ROOT, 0, "snapshot-outer");
        a.host_event(HostEvent::Push { instance: 1, parent: 0, path: outer, tid: 1, ts: 0 });
        a.host_event(HostEvent::Push { instance: 2, parent: 1, path: step, tid: 1, ts: 10 });
        a.host_event(launch(7, 2, step, 20));
        a.host_event(HostEvent::Pop { instance: 2, ts: 300 });
        a.kernel(&KernelActivity::sample(7, 100, 200));
        let count = |agg: &Aggregate, name: &str| {
            agg.ranges.iter().find(|(p, _)| p.to_string() == name).map(|(_, acc)| (acc.count, acc.total.launches))
        };
        let snap = a.snapshot(0);
        assert_eq!(snap.kernels.iter().map(|(_, k)| k.launches).sum::<u64>(), 1);
        assert_eq!(count(&snap, "snapshot-step"), Some((1, 1)), "closed: in");
        assert_eq!(count(&snap, "snapshot-outer"), None, "still open: not yet");
        let end = a.finish(1_000);
        assert_eq!(count(&end, "snapshot-step"), Some((1, 1)), "once, not twice");
        assert_eq!(count(&end, "snapshot-outer"), Some((1, 1)));
    }

    #[test]
    fn synchronisations_on_the_main_thread_are_counted_apart() {
        let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        a.host_event(HostEvent::HostWait { start: 10, end: 30, instance: 0, main: true });
        a.host_event(HostEvent::HostWait { start: 40, end: 100, instance: 0, main: false });
        a.host_event(HostEvent::HostWait { start: 110, end: 200, instance: 0, main: false });
        let done = a.finish(1_000);
        assert_eq!((done.syncs, done.main_syncs), ((3, 170), Some((1, 20))));
        // No synchronisation: nothing to tell apart.
        let a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        assert_eq!(a.finish(1_000).main_syncs, None);
    }

    #[test]
    fn a_communication_kernel_moves_the_bytes_of_its_threads_nccl_calls_before_its_launch() {
        let opts = AggregateOptions { trace_cap: 100, ..Default::default() };
        let mut a = Aggregator::new(opts, DeviceTable::fixed(vec![]));
        let comm = |a: &mut Aggregator, id: u32, start: u64| {
            let mut k = KernelActivity::sample(id, start, start + 50);
            k.name = c"ncclDevKernel_AllReduce_Sum_f32_RING_LL".as_ptr();
            a.kernel(&k);
        };
        // A group of two all-reduces launched at its end, one kernel.
        a.host_event(HostEvent::CommMessage { tid: 1, bytes: 100, ts: 10 });
        a.host_event(HostEvent::CommMessage { tid: 1, bytes: 200, ts: 11 });
        a.host_event(launch(1, 0, ROOT, 12));
        // Another thread's call is not this kernel's; a later call waits
        // for the next kernel, which comes with its record before it.
        a.host_event(HostEvent::CommMessage { tid: 2, bytes: 7, ts: 5 });
        a.host_event(HostEvent::CommMessage { tid: 1, bytes: 400, ts: 20 });
        a.host_event(launch(2, 0, ROOT, 21));
        // A compute kernel takes none; a kernel with no call before it has none.
        a.host_event(launch(3, 0, ROOT, 30));
        a.host_event(launch(4, 0, ROOT, 40));
        // A call whose kernel never came, long before the next launch: not
        // that kernel's, and counted.
        a.host_event(HostEvent::CommMessage { tid: 1, bytes: 800, ts: 50 });
        a.host_event(launch(5, 0, ROOT, 50 + COMM_GROUP_NS + 1));
        comm(&mut a, 1, 100);
        a.kernel(&KernelActivity::sample(3, 300, 310));
        comm(&mut a, 2, 200);
        comm(&mut a, 4, 400);
        comm(&mut a, 5, 60 + COMM_GROUP_NS);
        let done = a.finish(200 + COMM_GROUP_NS);
        let t = done.trace.expect("kept");
        let bytes: Vec<(u32, Option<u64>)> = t.kernels.iter().map(|k| (k.correlation_id, k.message_bytes)).collect();
        assert_eq!(bytes, vec![(1, Some(300)), (3, None), (2, Some(400)), (4, None), (5, None)]);
        assert_eq!(done.drops.comm_messages_unmatched, 1);
    }

    #[test]
    fn hooks_time_counts_as_gpuscopes_cost_of_the_range_and_the_thread() {
        let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        let step = paths().intern(ROOT, 0, "cost-step");
        let layer = paths().intern(step, 0, "layers.0");
        a.host_event(HostEvent::Push { instance: 1, parent: 0, path: step, tid: 7, ts: 0 });
        a.host_event(HostEvent::Push { instance: 2, parent: 1, path: layer, tid: 7, ts: 10 });
        a.host_event(HostEvent::OwnCost { tid: 7, instance: 2, ns: 3_000, ts: 20 });
        a.host_event(HostEvent::Pop { instance: 2, ts: 100 });
        a.host_event(HostEvent::OwnCost { tid: 7, instance: 1, ns: 500, ts: 110 });
        a.host_event(HostEvent::Pop { instance: 1, ts: 300 });
        // Outside any range: the thread's cost only.
        a.host_event(HostEvent::OwnCost { tid: 7, instance: 0, ns: 40, ts: 400 });
        let end = a.finish(1_000);
        let cost = |name: &str| end.ranges.iter().find(|(p, _)| p.to_string() == name).map(|(_, r)| r.total.hook_ns);
        assert_eq!(cost("cost-step/layers.0"), Some(3_000));
        assert_eq!(cost("cost-step"), Some(3_500), "nested ranges included");
        let t = end.threads.iter().find(|t| t.tid == 7).expect("the thread's row");
        assert_eq!((t.hook_ns, t.callback_ns, t.launches), (3_540, 0, 0), "no launch counted");
    }

    #[test]
    fn counted_flops_count_for_the_range_and_every_range_around_it() {
        let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        let step = paths().intern(ROOT, 0, "flops-step");
        let layer = paths().intern(step, 0, "layers.0");
        let other = paths().intern(step, 0, "lm_head");
        a.host_event(HostEvent::Push { instance: 1, parent: 0, path: step, tid: 1, ts: 0 });
        a.host_event(HostEvent::Push { instance: 2, parent: 1, path: layer, tid: 1, ts: 10 });
        a.host_event(HostEvent::Flops { instance: 2, flops: 3e9 });
        a.host_event(HostEvent::Flops { instance: 2, flops: 1.5e6 });
        a.host_event(HostEvent::Pop { instance: 2, ts: 100 });
        a.host_event(HostEvent::Push { instance: 3, parent: 1, path: other, tid: 1, ts: 110 });
        a.host_event(HostEvent::Flops { instance: 3, flops: 2e9 });
        a.host_event(HostEvent::Pop { instance: 3, ts: 200 });
        a.host_event(HostEvent::Flops { instance: 1, flops: 1e9 });
        a.host_event(HostEvent::Pop { instance: 1, ts: 300 });
        let end = a.finish(1_000);
        let mflops = |name: &str| end.ranges.iter().find(|(p, _)| p.to_string() == name).map(|(_, r)| r.total.mflops);
        assert_eq!(mflops("flops-step/layers.0"), Some(3002), "to the MFLOP");
        assert_eq!(mflops("flops-step/lm_head"), Some(2000));
        assert_eq!(mflops("flops-step"), Some(6002), "nested ranges included");
    }

    #[test]
    fn a_frameworks_allocator_figures_give_each_range_what_it_kept_and_the_peak_it_raised() {
        let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        let step = paths().intern(ROOT, 0, "fw-step");
        let fwd = paths().intern(step, 0, "forward");
        let mem = |instance, at_end, allocated, peak| HostEvent::FrameworkMemory {
            instance,
            at_end,
            allocated,
            reserved: 2_000,
            peak,
        };
        for (k, (grow_to, peak)) in [(400, 450), (390, 450)].into_iter().enumerate() {
            let (s, f, t) = (10 * k as u64 + 1, 10 * k as u64 + 2, 1_000 * k as u64);
            a.host_event(HostEvent::Push { instance: s, parent: 0, path: step, tid: 1, ts: t });
            a.host_event(mem(s, false, 100, if k == 0 { 100 } else { 450 }));
            a.host_event(HostEvent::Push { instance: f, parent: s, path: fwd, tid: 1, ts: t + 10 });
            a.host_event(mem(f, false, 100, if k == 0 { 100 } else { 450 }));
            a.host_event(mem(f, true, grow_to, peak));
            a.host_event(HostEvent::Pop { instance: f, ts: t + 100 });
            a.host_event(mem(s, true, 100, peak));
            a.host_event(HostEvent::Pop { instance: s, ts: t + 200 });
        }
        let end = a.finish(10_000);
        let fw =
            |name: &str| end.ranges.iter().find(|(p, _)| p.to_string() == name).and_then(|(_, r)| r.framework.clone());
        let f = fw("fw-step/forward").expect("the forward's figures");
        assert_eq!((f.calls, f.allocated_at_start_bytes, f.allocated_at_end_bytes), (2, 100, 390));
        assert_eq!(f.max_growth_bytes, 300, "the most one call kept");
        assert_eq!(f.peak_inside_bytes, Some(450), "raised by the first call; the second stayed under it");
        assert_eq!((f.peak_allocated_bytes, f.reserved_at_end_bytes), (450, 2_000));
        let s = fw("fw-step").expect("the step's");
        assert_eq!((s.max_growth_bytes, s.peak_inside_bytes), (0, Some(450)));
    }

    #[test]
    fn changes_of_live_memory_are_kept_for_every_range_still_held_start_end_ones_too() {
        use crate::decode::DeviceMemoryActivity;
        let rec =
            |alloc, address, bytes, ts| Activity::DeviceMemory(DeviceMemoryActivity::sample(alloc, address, bytes, ts));
        let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        let long = paths().intern(ROOT, 0, "mem-epoch");
        let step = paths().intern(ROOT, 0, "mem-step");
        // A start/end range open over everything; 1000 bytes come and go
        // early in it, then many small changes while steps come and go.
        a.host_event(HostEvent::Start { id: 1, path: long, tid: 1, ts: 0 });
        a.activity(&rec(true, 0x10, 1_000, 5));
        a.activity(&rec(false, 0x10, 1_000, 6));
        for i in 0..3 * TRIM_EVERY as u64 {
            let ts = 100 + 10 * i;
            a.host_event(HostEvent::Push { instance: 10 + i, parent: 0, path: step, tid: 1, ts });
            a.activity(&rec(true, 0x1000 + i, 1, ts + 1));
            a.activity(&rec(false, 0x1000 + i, 1, ts + 2));
            a.host_event(HostEvent::Pop { instance: 10 + i, ts: ts + 3 });
            a.advance_idle();
        }
        assert!(a.device_memory.log_len() > 2 * TRIM_EVERY, "the open range needs them all");
        a.host_event(HostEvent::End { id: 1, ts: 1_000_000 });
        a.advance_idle();
        let end = a.finish(2_000_000);
        let peak =
            |name: &str| end.range_memory.iter().find(|(p, _)| p.to_string() == name).map(|(_, m)| m.peak_live_bytes);
        assert_eq!(peak("mem-epoch"), Some(1_000), "the early change is still counted");
        assert_eq!(peak("mem-step"), Some(1));
        assert_eq!(end.drops.range_memory_partial, 0);
    }

    #[test]
    fn a_discarded_range_call_is_in_no_figure_nor_the_trace() {
        use crate::decode::DeviceMemoryActivity;
        let opts = AggregateOptions { trace_cap: 10, ..Default::default() };
        let mut a = Aggregator::new(opts, DeviceTable::fixed(vec![]));
        let step = paths().intern(ROOT, 0, "discarded-step");
        a.activity(&Activity::DeviceMemory(DeviceMemoryActivity::sample(true, 0x10, 64, 1)));
        a.host_event(HostEvent::Push { instance: 1, parent: 0, path: step, tid: 1, ts: 10 });
        a.host_event(HostEvent::Discard { instance: 1 });
        a.host_event(HostEvent::Pop { instance: 1, ts: 20 });
        let end = a.finish(100);
        assert!(end.ranges.iter().all(|(p, _)| p.to_string() != "discarded-step"));
        assert!(end.range_memory.is_empty(), "{:?}", end.range_memory);
        assert!(end.trace.expect("a trace").ranges.is_empty());
    }

    /// One range per 10 launches, 100 ns apart, each kernel arriving (a
    /// buffer's worth decided every 1000 launches) unless `lost(i)`.
    fn ranges_of_ten(a: &mut Aggregator, path: PathId, launches: std::ops::Range<u32>, lost: impl Fn(u32) -> bool) {
        for i in launches {
            let inst = 1 + (i / 10) as u64;
            if i % 10 == 0 {
                a.host_event(HostEvent::Push { instance: inst, parent: 0, path, tid: 1, ts: i as u64 * 100 });
            }
            a.host_event(launch(i, inst, path, i as u64 * 100));
            if !lost(i) {
                a.kernel(&KernelActivity::sample(i, i as u64 * 100, i as u64 * 100 + 10));
            }
            if i % 10 == 9 {
                a.host_event(HostEvent::Pop { instance: inst, ts: i as u64 * 100 + 50 });
            }
            if i % 1000 == 999 {
                a.advance_idle();
            }
        }
    }

    #[test]
    fn a_million_launches_keep_memory_flat_as_complete_ranges_retire() {
        let opts = AggregateOptions { max_live_ranges: 1000, max_pending_launches: 4096, ..Default::default() };
        let mut a = Aggregator::new(opts, DeviceTable::fixed(vec![]));
        let path = paths().intern(ROOT, 0, "bounded-test");
        let mut most_live = 0;
        for round in 0..1000 {
            ranges_of_ten(&mut a, path, round * 1000..(round + 1) * 1000, |_| false);
            most_live = most_live.max(a.ranges.live());
        }
        // Launch records are dropped as their kernels arrive; an instance
        // is folded in once the timeline is decided past its end.
        assert_eq!(a.attribution.pending_launches(), 0);
        assert!(most_live <= 101, "instances held: {most_live}");
        assert_eq!(a.by_name.len(), 1);
        assert_eq!(a.by_path_name.len(), 1);
        let r = a.finish(1_000_000 * 100);
        assert_eq!(r.kernels[0].1.launches, 1_000_000);
        let (_, g) = r.ranges.iter().find(|(p, _)| p.to_string() == "bounded-test").unwrap();
        assert_eq!((g.count, g.total.launches, g.total.busy), (100_000, 1_000_000, 10_000_000));
        assert_eq!(r.drops.ranges_evicted, 0, "complete instances are not summarised early");
    }

    #[test]
    fn a_timeline_held_by_a_lost_kernel_summarises_the_oldest_ranges_at_the_cap_and_counts_them() {
        let opts = AggregateOptions { max_live_ranges: 100, max_pending_launches: 1 << 20, ..Default::default() };
        let mut a = Aggregator::new(opts, DeviceTable::fixed(vec![]));
        let path = paths().intern(ROOT, 0, "held-test");
        // The first launch's kernel never comes: nothing after it is decided
        // until the timeline's own cap (8192 spans) forces it.
        ranges_of_ten(&mut a, path, 0..100_000, |i| i == 0);
        assert!(a.ranges.live() <= 101, "{}", a.ranges.live());
        let r = a.finish(100_000 * 100);
        let (_, g) = r.ranges.iter().find(|(p, _)| p.to_string() == "held-test").unwrap();
        assert_eq!((g.count, g.total.launches), (10_000, 100_000), "every instance summarised, early or at the end");
        assert!(r.drops.ranges_evicted > 0, "early summaries are counted");
    }

    #[test]
    fn trace_windows_turned_off_are_reported_with_the_reason_and_nothing_untraced() {
        let why = "trace windows are off with CUPTI 12".to_string();
        let opts = AggregateOptions { sampling: true, trace_windows_off: Some(why.clone()), ..Default::default() };
        let mut a = Aggregator::new(opts, DeviceTable::fixed(vec![]));
        a.kernel(&KernelActivity::sample(1, 10, 20));
        let st = a.finish(100).sampling.expect("sampling status");
        assert_eq!(st.trace_windows_off, Some(why));
        assert!(st.trace_windows.is_none(), "no windows were taken");
    }

    #[test]
    fn graph_kernels_running_when_a_window_closed_are_left_out_and_counted() {
        let opts = AggregateOptions { sampling: true, trace_windows: Some((100, 1000)), ..Default::default() };
        let mut a = Aggregator::new(opts, DeviceTable::fixed(vec![]));
        let node = |id: u32, start: u64, end: u64, graph_id: u32| KernelActivity {
            graph_id,
            graph_node_id: start,
            ..KernelActivity::sample(id, start, end)
        };
        let graph_launch = |id: u32, ts: u64| {
            let mut e = launch(id, 0, ROOT, ts);
            if let HostEvent::Launch { graph, .. } = &mut e {
                *graph = true;
            }
            e
        };
        // A graph launched well inside the window: its nodes count.
        a.host_event(graph_launch(1, 5));
        a.kernel(&node(1, 10, 20, 9));
        a.kernel(&node(1, 20, 30, 9));
        // One launched just before the close: its nodes' records end long
        // after it, those that began after the close too.
        a.host_event(graph_launch(2, 95));
        a.tracing(false, 100);
        a.kernel(&node(2, 96, 600, 9));
        a.kernel(&node(2, 102, 606, 9));
        // A plain kernel across the close keeps its end.
        a.host_event(launch(3, 0, ROOT, 97));
        a.kernel(&KernelActivity::sample(3, 99, 110));
        let r = a.finish(1000);
        assert_eq!(r.drops.window_cut_graph_kernels, 2);
        let k = &r.kernels.iter().find(|(n, _)| n == "k").expect("the kernels").1;
        assert_eq!((k.launches, k.total, k.max), (3, 10 + 10 + 11, 11), "{k:?}");
    }

    #[test]
    fn untraced_stretches_leave_idle_time_and_range_figures_alone_and_are_counted() {
        let opts = AggregateOptions { sampling: true, trace_windows: Some((100, 1000)), ..Default::default() };
        let mut a = Aggregator::new(opts, DeviceTable::fixed(vec![]));
        let (ra, rb, rc) = (
            paths().intern(ROOT, 0, "windows-a"),
            paths().intern(ROOT, 0, "windows-b"),
            paths().intern(ROOT, 0, "windows-c"),
        );
        // Traced: a's first instance with a kernel; c opens.
        a.host_event(HostEvent::Push { instance: 1, parent: 0, path: ra, tid: 1, ts: 0 });
        a.host_event(launch(1, 1, ra, 5));
        a.kernel(&KernelActivity::sample(1, 10, 20));
        a.host_event(HostEvent::Pop { instance: 1, ts: 50 });
        a.host_event(HostEvent::Push { instance: 2, parent: 0, path: rc, tid: 2, ts: 90 });
        // A launch whose kernel's record never comes (records went off).
        a.host_event(launch(2, 2, rc, 95));
        a.tracing(false, 100);
        // Untraced: b runs, its kernels unseen.
        // Launches there are counted for their ranges: two in b, one in c
        // (open across the stretch), one outside every range.
        a.host_event(HostEvent::Push { instance: 3, parent: 0, path: rb, tid: 1, ts: 200 });
        a.host_event(HostEvent::UntracedLaunches { path: rb, instance: 0, launches: 2, graphs: 0, start: 0, end: 0 });
        a.host_event(HostEvent::UntracedLaunches { path: rc, instance: 0, launches: 1, graphs: 0, start: 0, end: 0 });
        a.host_event(HostEvent::UntracedLaunches { path: ROOT, instance: 0, launches: 1, graphs: 0, start: 0, end: 0 });
        a.host_event(HostEvent::Pop { instance: 3, ts: 300 });
        a.tracing(true, 1000);
        // Traced again: a's second instance.
        a.host_event(HostEvent::Push { instance: 4, parent: 0, path: ra, tid: 1, ts: 1000 });
        a.host_event(launch(3, 4, ra, 1005));
        a.kernel(&KernelActivity::sample(3, 1010, 1020));
        a.host_event(HostEvent::Pop { instance: 4, ts: 1050 });
        a.host_event(HostEvent::Pop { instance: 2, ts: 1060 });
        let r = a.finish(1100);
        let range = |p: &str| r.ranges.iter().find(|(rp, _)| rp.to_string() == p).map(|(_, g)| g.clone()).unwrap();
        let (ga, gb, gc) = (range("windows-a"), range("windows-b"), range("windows-c"));
        assert_eq!(
            (ga.count, ga.untraced_count, ga.total.busy, ga.total.launches, ga.untraced_launches),
            (2, 0, 20, 2, 0)
        );
        assert_eq!((gb.count, gb.untraced_count, gb.untraced_wall, gb.untraced_launches), (0, 1, 100, 2));
        // c's traced launch (its kernel never seen) and its counted one.
        assert_eq!((gc.count, gc.untraced_count, gc.untraced_wall, gc.untraced_launches), (0, 1, 970, 2));
        assert_eq!(gc.total.launches, 0, "an untraced instance's launches are not the traced ones'");
        let w = r.sampling.and_then(|s| s.trace_windows).expect("trace windows reported");
        assert_eq!((w.window_ns, w.period_ns, w.windows, w.untraced_launches), (100, 1000, 2, Some(4)));
        assert_eq!((w.traced_ns, w.untraced_ns), (200, 900));
        // The gap from 20 to 1010 touched untraced time: not idle, not lost.
        assert_eq!(w.unclassified_gaps_ns, 990);
        assert_eq!(r.idle.iter().sum::<u64>(), 10 + 80, "only the traced gaps are idle time");
        // a's idle time: 0-10 and 1020-1050; its parts of the unclassified
        // gap are not idle time.
        assert_eq!(ga.total.idle.iter().sum::<u64>(), 10 + 30);
    }

    #[test]
    fn windows_of_zero_leave_the_whole_session_untraced_with_sampled_range_figures() {
        let mut a = Aggregator::windows_of_zero();
        let r0 = paths().intern(ROOT, 0, "zero-windows");
        let inner = paths().intern(r0, 0, "inner");
        let other = paths().intern(ROOT, 0, "zero-windows-open-before");
        a.host_event(HostEvent::Push { instance: 1, parent: 0, path: r0, tid: 1, ts: 100 });
        a.host_event(HostEvent::UntracedLaunches { path: r0, instance: 0, launches: 1, graphs: 0, start: 0, end: 0 });
        a.host_event(HostEvent::Push { instance: 2, parent: 1, path: inner, tid: 1, ts: 200 });
        a.host_event(HostEvent::Pop { instance: 2, ts: 300 });
        a.host_event(HostEvent::Pop { instance: 1, ts: 600 });
        let samples = Sample::flat_run(0, 0, 1000, 40.0, 50.0);
        a.samples(&samples);
        assert_eq!(a.ranges.live(), 0, "both instances are folded");
        // A thread sends its count when its path changes: here after the
        // ranges closed and were folded. It still lands on them.
        a.host_event(HostEvent::UntracedLaunches {
            path: inner,
            instance: 0,
            launches: 3,
            graphs: 0,
            start: 0,
            end: 0,
        });
        // A range open since before the session has no instance: its count
        // goes to the session's total only, not to a row of its own.
        a.host_event(HostEvent::UntracedLaunches {
            path: other,
            instance: 0,
            launches: 5,
            graphs: 0,
            start: 0,
            end: 0,
        });
        let r = a.finish(1000);
        assert!(r.ranges.iter().all(|(p, _)| p.to_string() != "zero-windows-open-before"));
        let get = |p: &str| r.ranges.iter().find(|(rp, _)| rp.to_string() == p).map(|(_, g)| g.clone()).unwrap();
        let (g, gi) = (get("zero-windows"), get("zero-windows/inner"));
        assert_eq!((g.count, g.untraced_count, g.untraced_wall, g.total.busy), (0, 1, 500, 0));
        // Launches count for the range they were made in and those around it.
        assert_eq!((g.total.launches, g.untraced_launches, gi.untraced_launches), (0, 4, 3));
        let f = g.sampled_wall.figures().expect("the range's wall time was sampled");
        assert!((f.sm_efficiency_pct.unwrap() - 40.0).abs() < 1e-6, "{:?}", f.sm_efficiency_pct);
        assert_eq!(f.gpu_busy_pct, Some(40.0), "the engine active as long as the SMs in these samples");
        let w = r.sampling.and_then(|s| s.trace_windows).expect("trace windows reported");
        assert_eq!((w.window_ns, w.windows, w.traced_ns, w.untraced_ns, w.untraced_launches), (0, 0, 0, 1000, Some(9)));
        assert_eq!(r.idle.iter().sum::<u64>(), 0, "nothing traced: no idle time claimed");
    }

    #[test]
    fn a_window_asked_for_in_an_always_on_session_is_traced_and_counted() {
        let mut a = Aggregator::windows_of_zero();
        let step = paths().intern(ROOT, 0, "on-demand-step");
        // Untraced, then a window asked for from 1000 to 2000.
        a.host_event(HostEvent::Push { instance: 1, parent: 0, path: step, tid: 1, ts: 100 });
        a.host_event(HostEvent::Pop { instance: 1, ts: 500 });
        a.window_on_demand();
        a.tracing(true, 1000);
        a.host_event(HostEvent::Push { instance: 2, parent: 0, path: step, tid: 1, ts: 1100 });
        a.host_event(launch(1, 2, step, 1150));
        a.kernel(&KernelActivity::sample(1, 1200, 1800));
        a.host_event(HostEvent::Pop { instance: 2, ts: 1900 });
        a.tracing(false, 2000);
        // A scrape while it runs says so too (its answers are always-on's).
        let snap = a.snapshot(2500).sampling.and_then(|s| s.trace_windows).expect("trace windows so far");
        assert_eq!((snap.window_ns, snap.windows, snap.on_demand, snap.traced_ns), (0, 1, 1, 1000));
        let r = a.finish(3000);
        let w = r.sampling.and_then(|s| s.trace_windows).expect("trace windows");
        assert_eq!((w.windows, w.on_demand, w.traced_ns), (1, 1, 1000));
        let (_, g) = r.ranges.iter().find(|(p, _)| p.to_string() == "on-demand-step").expect("the range");
        assert_eq!((g.count, g.untraced_count), (1, 1), "the call in the window is traced, the other counted apart");
    }

    #[test]
    fn untraced_ranges_retire_once_samples_cover_them_and_not_before() {
        let mut a = Aggregator::windows_of_zero();
        let path = paths().intern(ROOT, 0, "untraced-retire");
        let sample = |t: u64| Sample::flat(0, t, t + 10, 40.0, 50.0);
        for i in 0..3u64 {
            a.host_event(HostEvent::Push { instance: i + 1, parent: 0, path, tid: 1, ts: i * 100 });
            a.host_event(HostEvent::Pop { instance: i + 1, ts: i * 100 + 50 });
        }
        assert_eq!(a.ranges.live(), 3, "no samples yet: they may still come");
        a.samples(&(0..16).map(|k| sample(k * 10)).collect::<Vec<_>>());
        assert_eq!(a.ranges.live(), 1, "samples up to 160 cover the two that ended by 150");
        a.samples(&[sample(160), sample(250)]);
        assert_eq!(a.ranges.live(), 0);
        let r = a.finish(1000);
        let (_, g) = r.ranges.iter().find(|(p, _)| p.to_string() == "untraced-retire").unwrap();
        assert_eq!((g.count, g.untraced_count, g.untraced_wall), (0, 3, 150));
        assert!(g.sampled_wall.figures().is_some());
        assert_eq!(r.drops.ranges_evicted, 0);
    }

    #[test]
    fn a_launch_soon_after_another_thread_s_is_dispatch_and_a_blocking_copy_leaves_a_sync_shadow() {
        use crate::model::idle::{COPY, DISPATCH, HOST, SYNC};
        let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        let on = |tid, c, ts| launch_on(tid, c, 0, ROOT, ts, 0);
        // Thread 1 launches at 1 us; thread 2 (autograd's worker, say) 89
        // us later, after 70 us of the GPU idle: the program was dispatching.
        a.host_event(on(1, 1, 1_000));
        a.kernel(&KernelActivity::sample(1, 10_000, 20_000));
        a.host_event(on(2, 2, 90_000));
        a.kernel(&KernelActivity::sample(2, 95_000, 105_000));
        // A blocking copy (`.item()`) from 100 to 300 us; the next launch
        // comes 40 us after it returned.
        a.host_event(HostEvent::HostCopy { start: 100_000, end: 300_000, correlation_id: 9, instance: 0 });
        a.host_event(on(1, 3, 340_000));
        a.kernel(&KernelActivity::sample(3, 345_000, 350_000));
        // Then 2 ms of host work before the next launch.
        a.host_event(on(1, 4, 2_350_000));
        a.kernel(&KernelActivity::sample(4, 2_355_000, 2_360_000));
        let idle = a.finish(2_360_000).idle;
        assert_eq!(idle[DISPATCH], 70_000);
        assert_eq!(idle[COPY], 195_000, "the host was blocked in the copy");
        assert_eq!(idle[SYNC], 45_000, "nothing was queued behind the copy");
        assert_eq!(idle[HOST], 2_350_000 - 350_000, "no CUDA call for 2 ms: host work");
    }

    #[test]
    fn an_asynchronous_copy_call_leaves_no_sync_shadow_and_long_launch_calls_are_not_timed() {
        use crate::model::idle::{HOST, SYNC};
        let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        let on = |c, ts, prev_call_ns| launch_on(1, c, 0, ROOT, ts, prev_call_ns);
        a.host_event(on(1, 1_000, 0));
        a.kernel(&KernelActivity::sample(1, 5_000, 20_000));
        // A 3 us copy call (pinned, non_blocking) as the GPU goes idle.
        a.host_event(HostEvent::HostCopy { start: 19_000, end: 22_000, correlation_id: 9, instance: 0 });
        // A launch call of 80 us (a full queue, say) is not a timed call.
        a.host_event(on(2, 2_900_000, 80_000));
        a.kernel(&KernelActivity::sample(2, 2_905_000, 2_910_000));
        a.host_event(on(3, 2_911_000, 6_000));
        a.kernel(&KernelActivity::sample(3, 2_915_000, 2_920_000));
        let r = a.finish(2_920_000);
        assert_eq!(r.idle[SYNC], 0, "an asynchronous copy did not make the host wait");
        assert!(r.idle[HOST] > 2_800_000);
        let t = r.threads[0];
        assert_eq!((t.launches, t.calls_timed, t.call_ns), (3, 1, 6_000));
    }

    #[test]
    fn records_with_huge_times_saturate_the_sums_instead_of_wrapping() {
        let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        let path = paths().intern(ROOT, 0, "huge-times");
        a.host_event(HostEvent::Push { instance: 1, parent: 0, path, tid: 1, ts: 0 });
        for i in 0..3u32 {
            a.host_event(launch(i, 1, path, 0));
            // A record whose end is garbage: near the top of the clock.
            a.kernel(&KernelActivity::sample(i, 1, u64::MAX - 1));
        }
        a.host_event(HostEvent::Pop { instance: 1, ts: u64::MAX });
        let r = a.finish(u64::MAX);
        assert_eq!(r.kernels[0].1.total, u64::MAX, "three near-maximal kernels saturate");
        let (_, g) = r.ranges.iter().find(|(p, _)| p.to_string() == "huge-times").unwrap();
        assert_eq!((g.total.wall, g.total.launches), (u64::MAX, 3));
    }

    fn on_h200() -> Aggregator {
        let h200 = DeviceInfo::new(0, "NVIDIA H200", 132, crate::model::occupancy::SmLimits::SM_90);
        Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![h200]))
    }

    /// A kernel record of `grid` blocks of `block` threads, named `name`.
    fn shaped(name: &'static std::ffi::CStr, correlation_id: u32, grid: [i32; 3], block: [i32; 3]) -> KernelActivity {
        KernelActivity { name: name.as_ptr(), grid, block, ..KernelActivity::sample(correlation_id, 0, 1_000) }
    }

    /// A kernel's figures per unit of its time: theoretical occupancy, SM
    /// coverage, wave efficiency (%) and waves, as the report gives them.
    fn per_time(a: &KernelAcc) -> (Option<f64>, f64, f64, f64) {
        let t = a.grid_time as f64;
        let occ = (a.occ_time > 0).then(|| a.occ_weighted / a.occ_time as f64);
        (occ, 100.0 * a.coverage_weighted / t, 100.0 * a.waves_weighted / t, a.wave_count_weighted / t)
    }

    #[test]
    fn a_grid_of_more_blocks_than_32_bits_hold_has_its_true_waves() {
        let mut a = on_h200();
        a.kernel(&shaped(c"wide", 1, [i32::MAX, 2, 2], [1024, 1, 1]));
        let r = a.finish(1_000);
        let (occ, coverage, efficiency, waves) = per_time(&r.kernels[0].1);
        // 2^33 - 4 blocks, two of 1024 threads per SM: 264 at once.
        let blocks = 4.0 * i32::MAX as f64;
        assert_eq!((r.kernels[0].1.launches, occ, coverage), (1, Some(100.0), 100.0));
        assert!((waves - blocks / 264.0).abs() < 1e-3, "{waves}");
        assert!((efficiency - 100.0 * blocks / ((blocks / 264.0).ceil() * 264.0)).abs() < 1e-9, "{efficiency}");
    }

    #[test]
    fn a_grid_past_64_bits_is_counted_exactly() {
        let mut a = on_h200();
        // (2^31 - 1)^3 blocks: past u64, counted exactly in u128.
        a.kernel(&shaped(c"huge_grid", 1, [i32::MAX; 3], [1024, 1, 1]));
        let r = a.finish(1_000);
        let (occ, coverage, _, waves) = per_time(&r.kernels[0].1);
        let blocks = (i32::MAX as f64).powi(3);
        assert!((waves / (blocks / 264.0) - 1.0).abs() < 1e-12, "{waves}");
        assert_eq!((occ, coverage), (Some(100.0), 100.0));
    }

    #[test]
    fn a_block_past_32_bits_gets_no_occupancy_rather_than_a_wrapped_one() {
        let mut a = on_h200();
        // 256 x (2^24 + 1) threads: 2^32 + 256, which a 32-bit product wraps
        // to a block of 256 threads, one that would get an occupancy.
        a.kernel(&shaped(c"huge_block", 1, [1, 1, 1], [256, 16_777_217, 1]));
        let r = a.finish(1_000);
        let k = &r.kernels[0].1;
        assert_eq!((k.launches, k.total, k.occ_time, k.grid_time), (1, 1_000, 0, 0), "no device runs such a block");
        assert_eq!(threads_per_block([256, 16_777_217, 1]), u32::MAX);
        assert_eq!(threads_per_block([i32::MAX; 3]), u32::MAX);
        assert_eq!(threads_per_block([-1, 5, 5]), 0);
    }

    #[test]
    fn times_at_the_top_of_the_clock_are_neither_wrapped_nor_a_panic() {
        use crate::model::idle::SYNC;
        let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        let path = paths().intern(ROOT, 0, "top-of-clock");
        // A host wait that ends at the top of the clock.
        a.kernel(&KernelActivity::sample(1, 10, 20));
        a.host_event(HostEvent::HostWait { start: 15, end: u64::MAX - 1, instance: 0, main: true });
        a.kernel(&KernelActivity::sample(2, 1_000, 2_000));
        // A range pushed and popped there.
        a.host_event(HostEvent::Push { instance: 1, parent: 0, path, tid: 1, ts: u64::MAX });
        a.host_event(HostEvent::Pop { instance: 1, ts: u64::MAX });
        let r = a.finish(u64::MAX);
        // Every gap is the wait's (the first: it began within the clocks'
        // slack of it).
        assert_eq!(r.idle[SYNC], 10 + (1_000 - 20) + (u64::MAX - 2_000));
        let (_, g) = r.ranges.iter().find(|(p, _)| p.to_string() == "top-of-clock").unwrap();
        assert_eq!((g.count, g.total.wall), (1, 0));
    }

    #[test]
    fn a_metrics_pass_on_demand_joins_its_values_and_leaves_the_session_always_on() {
        use crate::model::metrics::{ACHIEVED_OCCUPANCY, SM_EFFICIENCY};
        let names = vec![SM_EFFICIENCY.to_string(), ACHIEVED_OCCUPANCY.to_string()];
        let opts = AggregateOptions {
            sampling: true,
            trace_windows: Some((0, 1000)),
            metric_names: names,
            metrics_on_demand: true,
            ..Default::default()
        };
        let mut a = Aggregator::new(opts, DeviceTable::fixed(vec![]));
        a.window_on_demand();
        a.tracing(true, 1_000);
        for (id, profiled) in [(1, true), (2, false)] {
            let mut e = launch(id, 0, ROOT, 1_000 * id as u64 + 100);
            if let HostEvent::Launch { profiled: p, .. } = &mut e {
                *p = profiled;
            }
            a.host_event(e);
            a.kernel(&KernelActivity::sample(id, 1_000 * id as u64 + 200, 1_000 * id as u64 + 700));
        }
        // Values come after their kernels: the pass ends, then decodes.
        a.tracing(false, 3_000);
        a.host_event(HostEvent::KernelMetrics { correlation_id: 1, values: Some(vec![1.5, 12.0]) });
        let r = a.finish(4_000);
        assert!(!r.metrics_mode, "the session is not in metrics mode");
        assert_eq!(r.sampling.and_then(|s| s.trace_windows).map(|w| w.on_demand), Some(1));
        let (_, k) = &r.kernels[0];
        assert_eq!((k.launches, k.profiled), (2, 1), "one launch measured, both traced");
        assert!((k.efficiency_weighted / k.metric_time - 1.5).abs() < 1e-9);
    }

    #[test]
    fn a_measured_duration_past_the_clock_ends_the_kernel_at_its_top() {
        let names = vec![crate::model::metrics::DURATION.to_string()];
        let opts = AggregateOptions { trace_cap: 1, metric_names: names, ..Default::default() };
        let mut a = Aggregator::new(opts, DeviceTable::fixed(vec![]));
        let mut measured = launch(1, 0, ROOT, 1_000);
        if let HostEvent::Launch { profiled, .. } = &mut measured {
            *profiled = true;
        }
        a.host_event(measured);
        a.kernel(&KernelActivity::sample(1, 1_000, 2_000));
        a.host_event(HostEvent::KernelMetrics { correlation_id: 1, values: Some(vec![1e30]) });
        let r = a.finish(u64::MAX);
        assert_eq!((r.kernels[0].1.total, r.kernels[0].1.last_end), (u64::MAX, u64::MAX));
        assert_eq!(r.trace.unwrap().kernels[0].end_ns, u64::MAX);
    }

    #[test]
    fn samples_at_the_top_of_the_clock_count_for_the_ranges_open_then() {
        let opts = AggregateOptions { sampling: true, ..Default::default() };
        let mut a = Aggregator::new(opts, DeviceTable::fixed(vec![]));
        let path = paths().intern(ROOT, 0, "sampled-to-the-top");
        a.host_event(HostEvent::Push { instance: 1, parent: 0, path, tid: 1, ts: 0 });
        a.samples(&[Sample::flat(0, 0, 100, 40.0, 50.0), Sample::flat(0, u64::MAX - 10, u64::MAX, 40.0, 50.0)]);
        a.host_event(HostEvent::Pop { instance: 1, ts: u64::MAX });
        let r = a.finish(u64::MAX);
        let (_, g) = r.ranges.iter().find(|(p, _)| p.to_string() == "sampled-to-the-top").unwrap();
        let f = g.sampled_wall.figures().expect("sampled");
        assert_eq!((f.samples, f.covered_ns), (2, 110));
    }

    #[test]
    fn a_live_report_settles_a_gpu_that_stopped_working_at_the_session_s_decided_time() {
        // GPU 1 works once early; GPU 0 goes on. In a report taken while the
        // session runs, GPU 1 reads idle after its kernel, not busy.
        let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        a.host_event(launch_on(1, 1, 0, ROOT, 9_000, 0));
        a.kernel(&KernelActivity { device: 1, ..KernelActivity::sample(1, 10_000, 110_000) });
        for i in 0..20u64 {
            let t = 1_000_000 + i * 1_000_000;
            a.host_event(launch_on(1, 2 + i as u32, 0, ROOT, t - 1_000, 0));
            a.kernel(&KernelActivity { device: 0, ..KernelActivity::sample(2 + i as u32, t, t + 500_000) });
        }
        a.advance_idle();
        let snap = a.snapshot(0);
        let (_, busy, idle, _) = snap.per_device.iter().find(|d| d.0 == 1).expect("GPU 1");
        assert_eq!(*busy, 100_000);
        assert!(idle.iter().sum::<u64>() >= 19_000_000, "GPU 1 idle from its kernel on: {idle:?}");
    }
}
