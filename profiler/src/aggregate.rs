//! Folding records and host events into a [`Report`] as they arrive, in
//! memory bounded by the number of distinct kernel names, NVTX paths and
//! open ranges, not by the number of launches.

use crate::activity::{Activity, KernelActivity, RecordCursor};
use crate::device::DeviceTable;
use crate::interval::IntervalUnion;
use crate::metrics::KernelMetrics;
use crate::occupancy::{self, LaunchShape, Limiter};
use crate::ranges::{paths, PathId, ROOT};
use crate::report::*;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, CStr};

/// What the NVTX handler and launch callbacks report, in the order they
/// happened on each thread. Times are ns on CUPTI's clock; `instance` ids
/// name one opening of a range, `path` ids an interned NVTX path.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum HostEvent {
    /// A push/pop range opened (`parent`: the innermost range open before).
    Push { instance: u64, parent: u64, path: PathId, tid: u32, ts: u64 },
    /// It closed.
    Pop { instance: u64, ts: u64 },
    /// A pop with nothing open.
    UnbalancedPop { tid: u32 },
    /// A start/end range opened.
    Start { id: u64, path: PathId, tid: u32, ts: u64 },
    /// It ended.
    End { id: u64, ts: u64 },
    /// A kernel (or graph) launch API call; `profiled`: its metrics follow
    /// in a `KernelMetrics` event.
    Launch { correlation_id: u32, tid: u32, path: PathId, instance: u64, graph: bool, profiled: bool },
    /// Metric values of a profiled launch (`None`: measurement discarded).
    KernelMetrics { correlation_id: u32, values: Option<Vec<f64>> },
    /// `nvtxNameOsThread`.
    ThreadName { tid: u32, name: String },
}

/// Options of the aggregation.
#[derive(Debug, Clone)]
pub(crate) struct AggregateOptions {
    /// Keep per-kernel records, at most this many (0: none).
    pub trace_cap: usize,
    /// Open or unfinished range instances kept at once.
    pub max_live_ranges: usize,
    /// Launches waiting for their kernel record.
    pub max_pending_launches: usize,
    /// Names of the metrics in `KernelMetrics` values (metrics mode).
    pub metric_names: Vec<String>,
}

impl Default for AggregateOptions {
    fn default() -> Self {
        AggregateOptions {
            trace_cap: 0,
            max_live_ranges: 100_000,
            max_pending_launches: 1 << 20,
            metric_names: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct LaunchInfo {
    tid: u32,
    path: PathId,
    instance: u64,
    profiled: bool,
}

#[derive(Debug, Clone, Default)]
struct KernelAcc {
    launches: u64,
    total: u64,
    min: u64,
    max: u64,
    occ_weighted: f64,
    occ_time: u64,
    limiter_time: [u64; 4],
    profiled: u64,
    achieved_weighted: f64,
    efficiency_weighted: f64,
    metric_time: f64,
}

impl KernelAcc {
    fn add(&mut self, dur: u64, occ: Option<&occupancy::Occupancy>, m: Option<&KernelMetrics>) {
        if let Some(m) = m {
            // Weighted by measured GPU time, as ncu's per-range averages.
            let w = if m.duration_ns.is_finite() && m.duration_ns > 0.0 { m.duration_ns } else { 1.0 };
            self.profiled += 1;
            self.achieved_weighted += m.achieved_occupancy_pct * w;
            self.efficiency_weighted += m.sm_efficiency_pct * w;
            self.metric_time += w;
        }
        if self.launches == 0 || dur < self.min {
            self.min = dur;
        }
        self.max = self.max.max(dur);
        self.launches += 1;
        self.total += dur;
        if let Some(o) = occ {
            // Zero-length records still count once, so occupancy is defined.
            let w = dur.max(1);
            self.occ_weighted += o.theoretical_pct * w as f64;
            self.occ_time += w;
            self.limiter_time[o.limiter as usize] += w;
        }
    }

    fn stats(&self) -> KernelStats {
        let lim = [Limiter::Warps, Limiter::Registers, Limiter::SharedMemory, Limiter::Blocks];
        let best = (0..4).max_by_key(|&i| self.limiter_time[i]).filter(|&i| self.limiter_time[i] > 0);
        KernelStats {
            launches: self.launches,
            total_ns: self.total,
            mean_ns: self.total.checked_div(self.launches).unwrap_or(0),
            min_ns: self.min,
            max_ns: self.max,
            theoretical_occupancy_pct: (self.occ_time > 0).then(|| self.occ_weighted / self.occ_time as f64),
            occupancy_limiter: best.map(|i| lim[i]),
            profiled_launches: self.profiled,
            achieved_occupancy_pct: (self.profiled > 0).then(|| self.achieved_weighted / self.metric_time),
            sm_efficiency_pct: (self.profiled > 0).then(|| self.efficiency_weighted / self.metric_time),
        }
    }
}

struct Instance {
    parent: u64,
    path: PathId,
    tid: u32,
    start: u64,
    end: Option<u64>,
    busy: IntervalUnion,
    launches: u64,
}

#[derive(Default)]
struct RangeAcc {
    count: u64,
    wall: u64,
    busy: u64,
    in_window: u64,
    launches: u64,
}

#[derive(Default)]
struct CopyAcc {
    count: u64,
    bytes: u64,
    ns: u64,
    pageable: u64,
}

/// The running state of one session's aggregation.
pub(crate) struct Aggregator {
    opts: AggregateOptions,
    devices: DeviceTable,
    launches: HashMap<u32, LaunchInfo>,
    graph_launches: BTreeMap<u32, LaunchInfo>,
    name_by_ptr: HashMap<usize, u32>,
    name_ids: HashMap<String, u32>,
    names: Vec<String>,
    by_name: HashMap<u32, KernelAcc>,
    by_path_name: HashMap<(PathId, u32), KernelAcc>,
    instances: BTreeMap<u64, Instance>,
    ranges: HashMap<PathId, RangeAcc>,
    starts: HashMap<u64, (PathId, u32, u64)>,
    start_end: HashMap<PathId, RangeAcc>,
    memcpy: BTreeMap<u8, CopyAcc>,
    memset: CopyAcc,
    syncs: (u64, u64),
    thread_names: BTreeMap<u32, String>,
    trace: Option<Trace>,
    trace_kernel_paths: Vec<PathId>,
    pending_metrics: HashMap<u32, Option<Vec<f64>>>,
    injected: (u64, u64),
    parked: HashMap<u32, (KernelActivity, LaunchInfo)>,
    trace_range_paths: Vec<PathId>,
    pub(crate) drops: Drops,
}

fn copy_kind_name(k: u8) -> &'static str {
    match k as u32 {
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD => "HtoD",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH => "DtoH",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_DTOD => "DtoD",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_HTOH => "HtoH",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_PTOP => "PtoP",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_HTOA => "HtoA",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_ATOH => "AtoH",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_ATOA => "AtoA",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_ATOD => "AtoD",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_DTOA => "DtoA",
        _ => "unknown",
    }
}

/// Demangles an Itanium C++ name; other names pass through.
pub fn demangle(name: &str) -> String {
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(s) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return s;
            }
        }
    }
    name.to_string()
}

impl Aggregator {
    pub(crate) fn new(opts: AggregateOptions, devices: DeviceTable) -> Self {
        Aggregator {
            devices,
            launches: HashMap::new(),
            graph_launches: BTreeMap::new(),
            name_by_ptr: HashMap::new(),
            name_ids: HashMap::new(),
            names: Vec::new(),
            by_name: HashMap::new(),
            by_path_name: HashMap::new(),
            instances: BTreeMap::new(),
            ranges: HashMap::new(),
            starts: HashMap::new(),
            start_end: HashMap::new(),
            memcpy: BTreeMap::new(),
            memset: CopyAcc::default(),
            syncs: (0, 0),
            thread_names: BTreeMap::new(),
            trace: (opts.trace_cap > 0).then(Trace::default),
            opts,
            trace_kernel_paths: Vec::new(),
            pending_metrics: HashMap::new(),
            injected: (0, 0),
            parked: HashMap::new(),
            trace_range_paths: Vec::new(),
            drops: Drops::default(),
        }
    }

    /// Applies one host event.
    pub(crate) fn host_event(&mut self, e: HostEvent) {
        match e {
            HostEvent::Push { instance, parent, path, tid, ts } => {
                self.instances.insert(
                    instance,
                    Instance { parent, path, tid, start: ts, end: None, busy: IntervalUnion::default(), launches: 0 },
                );
                if self.instances.len() > self.opts.max_live_ranges {
                    self.evict_ranges();
                }
            }
            HostEvent::Pop { instance, ts } => {
                if let Some(i) = self.instances.get_mut(&instance) {
                    i.end = Some(ts);
                }
            }
            HostEvent::UnbalancedPop { .. } => self.drops.unbalanced_pops += 1,
            HostEvent::Start { id, path, tid, ts } => {
                if self.starts.len() < self.opts.max_live_ranges {
                    self.starts.insert(id, (path, tid, ts));
                } else {
                    self.drops.ranges_evicted += 1;
                }
            }
            HostEvent::End { id, ts } => {
                if let Some((path, tid, start)) = self.starts.remove(&id) {
                    let acc = self.start_end.entry(path).or_default();
                    acc.count += 1;
                    acc.wall += ts.saturating_sub(start);
                    self.trace_range(path, tid, start, ts);
                }
            }
            HostEvent::KernelMetrics { correlation_id, values } => match self.parked.remove(&correlation_id) {
                Some((k, info)) => self.kernel_with(&k, info, values),
                None => {
                    self.pending_metrics.insert(correlation_id, values);
                }
            },
            HostEvent::Launch { correlation_id, tid, path, instance, graph, profiled } => {
                let info = LaunchInfo { tid, path, instance, profiled };
                if graph {
                    self.graph_launches.insert(correlation_id, info);
                    if self.graph_launches.len() > 4096 {
                        self.graph_launches.pop_first();
                    }
                } else {
                    if self.launches.len() >= self.opts.max_pending_launches {
                        // Launches that never produced a kernel (failed
                        // launches): forget the oldest half.
                        let mut ids: Vec<u32> = self.launches.keys().copied().collect();
                        ids.sort_unstable();
                        for id in &ids[..ids.len() / 2] {
                            self.launches.remove(id);
                        }
                    }
                    self.launches.insert(correlation_id, info);
                }
                let mut inst = instance;
                while let Some(i) = self.instances.get_mut(&inst) {
                    i.launches += 1;
                    inst = i.parent;
                }
            }
            HostEvent::ThreadName { tid, name } => {
                self.thread_names.insert(tid, name);
            }
        }
    }

    /// Summarises the oldest closed instances to bound memory.
    fn evict_ranges(&mut self) {
        let n = (self.opts.max_live_ranges / 10).max(1);
        let victims: Vec<u64> =
            self.instances.iter().filter(|(_, i)| i.end.is_some()).map(|(id, _)| *id).take(n).collect();
        for id in victims {
            if let Some(i) = self.instances.remove(&id) {
                self.drops.ranges_evicted += 1;
                self.finish_instance(i, 0);
            }
        }
    }

    fn finish_instance(&mut self, i: Instance, session_end: u64) {
        let end = i.end.unwrap_or(session_end).max(i.start);
        let acc = self.ranges.entry(i.path).or_default();
        acc.count += 1;
        acc.wall += end - i.start;
        acc.busy += i.busy.total();
        acc.in_window += i.busy.within(i.start, end);
        acc.launches += i.launches;
        self.trace_range(i.path, i.tid, i.start, end);
    }

    fn trace_range(&mut self, path: PathId, tid: u32, start: u64, end: u64) {
        if let Some(t) = &mut self.trace {
            if t.ranges.len() < self.opts.trace_cap {
                t.ranges.push(RangeRecord { path: Default::default(), thread: tid, start_ns: start, end_ns: end });
                self.trace_range_paths.push(path);
            }
        }
    }

    fn name_id(&mut self, p: *const c_char) -> u32 {
        if let Some(id) = self.name_by_ptr.get(&(p as usize)) {
            return *id;
        }
        let raw = if p.is_null() {
            "(unnamed kernel)".to_string()
        } else {
            // SAFETY: CUPTI's kernel name strings are NUL-terminated and live
            // until CUPTI is finalized, after the session's last record.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        };
        let name = demangle(&raw);
        let next = self.names.len() as u32;
        let id = *self.name_ids.entry(name.clone()).or_insert(next);
        if id == next {
            self.names.push(name);
        }
        self.name_by_ptr.insert(p as usize, id);
        id
    }

    /// The demangled name of CUPTI's name string.
    fn name(&mut self, p: *const c_char) -> &str {
        let id = self.name_id(p);
        &self.names[id as usize]
    }

    /// Folds one kernel record in (a profiled one waits for its metrics).
    pub(crate) fn kernel(&mut self, k: &KernelActivity) {
        let info =
            self.launches.remove(&k.correlation_id).or_else(|| self.graph_launches.get(&k.correlation_id).copied());
        let info = match info {
            Some(info) => info,
            None => {
                // CUPTI's range profiler launches a `WaitNs` kernel of its
                // own per measured range (single-pass mode): gpuscope's
                // overhead, not the program's work, and no launch of the
                // program's is behind it.
                if !self.opts.metric_names.is_empty() && self.name(k.name) == "WaitNs" {
                    self.injected.0 += 1;
                    self.injected.1 += k.end.saturating_sub(k.start);
                    return;
                }
                self.drops.unattributed_kernels += 1;
                LaunchInfo { tid: 0, path: ROOT, instance: 0, profiled: false }
            }
        };
        if info.profiled {
            match self.pending_metrics.remove(&k.correlation_id) {
                Some(values) => self.kernel_with(k, info, values),
                None => {
                    self.parked.insert(k.correlation_id, (*k, info));
                }
            }
        } else {
            self.kernel_with(k, info, None);
        }
    }

    fn kernel_with(&mut self, k: &KernelActivity, info: LaunchInfo, values: Option<Vec<f64>>) {
        let metrics = values.map(|v| KernelMetrics::from_values(&self.opts.metric_names, &v));
        let name = self.name_id(k.name);
        let threads = (k.block[0].max(0) * k.block[1].max(0) * k.block[2].max(0)) as u32;
        let shape = LaunchShape {
            threads_per_block: threads,
            registers_per_thread: k.registers_per_thread as u32,
            static_smem: k.static_smem.max(0) as u32,
            dynamic_smem: k.dynamic_smem.max(0) as u32,
            smem_carveout: k.smem_executed,
        };
        let occ = self.devices.limits(k.device).and_then(|l| occupancy::theoretical(&l, &shape));
        // Under kernel replay the record's end is not the kernel's: a
        // profiled kernel's duration is the measured gpu__time_duration.
        let dur = match &metrics {
            Some(m) if m.duration_ns.is_finite() && m.duration_ns >= 0.0 => m.duration_ns as u64,
            _ => k.end.saturating_sub(k.start),
        };
        let end = k.start + dur;
        self.by_name.entry(name).or_default().add(dur, occ.as_ref(), metrics.as_ref());
        self.by_path_name.entry((info.path, name)).or_default().add(dur, occ.as_ref(), metrics.as_ref());
        let mut inst = info.instance;
        while let Some(i) = self.instances.get_mut(&inst) {
            i.busy.add(k.start, end);
            inst = i.parent;
        }
        if let Some(t) = &mut self.trace {
            if t.kernels.len() < self.opts.trace_cap {
                t.kernels.push(KernelRecord {
                    name: self.names[name as usize].clone(),
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
                });
                self.trace_kernel_paths.push(info.path);
            } else {
                self.drops.trace_kernels_over_cap += 1;
            }
        }
    }

    /// Folds one decoded record in.
    pub(crate) fn activity(&mut self, a: &Activity) {
        match a {
            Activity::Kernel(k) => self.kernel(k),
            Activity::Memcpy(m) => {
                let acc = self.memcpy.entry(m.copy_kind).or_default();
                acc.count += 1;
                acc.bytes += m.bytes;
                acc.ns += m.end.saturating_sub(m.start);
                let pageable = cupti_sys::CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE as u8;
                if m.src_kind == pageable || m.dst_kind == pageable {
                    acc.pageable += 1;
                }
                self.trace_memory(copy_kind_name(m.copy_kind), m.bytes, m.device, m.stream, m.start, m.end);
            }
            Activity::Memset(m) => {
                self.memset.count += 1;
                self.memset.bytes += m.bytes;
                self.memset.ns += m.end.saturating_sub(m.start);
                self.trace_memory("memset", m.bytes, m.device, m.stream, m.start, m.end);
            }
            Activity::Sync(s) => {
                self.syncs.0 += 1;
                self.syncs.1 += s.end.saturating_sub(s.start);
            }
            Activity::Other(_) => {}
        }
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
        loop {
            match cursor.next_record() {
                Ok(Some(bytes)) => match crate::activity::record::decode(bytes) {
                    Ok(a) => self.activity(&a),
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
    }

    /// Closes every open range at `end_ns` and builds the report.
    pub(crate) fn finish(mut self, start_ns: u64, end_ns: u64) -> Report {
        // Profiled kernels whose metrics never came: report them without.
        for (_, (k, info)) in std::mem::take(&mut self.parked) {
            self.drops.kernels_missing_metrics += 1;
            self.kernel_with(&k, info, None);
        }
        let open = std::mem::take(&mut self.instances);
        for (_, i) in open {
            self.finish_instance(i, end_ns);
        }
        for (_, (path, tid, start)) in std::mem::take(&mut self.starts) {
            let acc = self.start_end.entry(path).or_default();
            acc.count += 1;
            acc.wall += end_ns.saturating_sub(start);
            self.trace_range(path, tid, start, end_ns);
        }
        let table = paths();
        let mut kernels: Vec<KernelSummary> = self
            .by_name
            .iter()
            .map(|(n, a)| KernelSummary { name: self.names[*n as usize].clone(), stats: a.stats() })
            .collect();
        kernels.sort_by(|a, b| b.stats.total_ns.cmp(&a.stats.total_ns).then(a.name.cmp(&b.name)));
        let mut path_kernels: Vec<PathKernelSummary> = self
            .by_path_name
            .iter()
            .map(|((p, n), a)| PathKernelSummary {
                path: table.path(*p),
                name: self.names[*n as usize].clone(),
                stats: a.stats(),
            })
            .collect();
        path_kernels.sort_by(|a, b| a.path.cmp(&b.path).then(b.stats.total_ns.cmp(&a.stats.total_ns)));
        let summarize = |m: &HashMap<PathId, RangeAcc>| {
            let mut v: Vec<RangeSummary> = m
                .iter()
                .map(|(p, a)| RangeSummary {
                    path: table.path(*p),
                    count: a.count,
                    wall_ns: a.wall,
                    gpu_busy_ns: a.busy,
                    gpu_utilization_pct: if a.wall > 0 { 100.0 * a.in_window as f64 / a.wall as f64 } else { 0.0 },
                    kernel_launches: a.launches,
                    sm_efficiency_pct: None,
                    achieved_occupancy_pct: None,
                    busy_but_underused: false,
                })
                .collect();
            v.sort_by(|a, b| a.path.cmp(&b.path));
            v
        };
        let mut ranges = summarize(&self.ranges);
        // Hardware metrics of each range: its measured kernels and those of
        // the ranges nested in it, weighted by measured GPU time.
        let kernel_paths: Vec<(crate::ranges::RangePath, &KernelAcc)> =
            self.by_path_name.iter().filter(|(_, a)| a.profiled > 0).map(|((p, _), a)| (table.path(*p), a)).collect();
        for g in &mut ranges {
            let (mut ach, mut eff, mut w) = (0.0, 0.0, 0.0);
            for (p, a) in &kernel_paths {
                if p.frames.starts_with(&g.path.frames) {
                    ach += a.achieved_weighted;
                    eff += a.efficiency_weighted;
                    w += a.metric_time;
                }
            }
            if w > 0.0 {
                g.achieved_occupancy_pct = Some(ach / w);
                g.sm_efficiency_pct = Some(eff / w);
                g.busy_but_underused = g.gpu_utilization_pct >= BUSY_PCT
                    && (eff / w < LOW_SM_EFFICIENCY_PCT || ach / w < LOW_OCCUPANCY_PCT);
            }
        }
        let start_end_ranges = summarize(&self.start_end);
        let memory = MemorySummary {
            memcpy: self
                .memcpy
                .iter()
                .map(|(k, a)| CopySummary {
                    kind: copy_kind_name(*k).to_string(),
                    count: a.count,
                    bytes: a.bytes,
                    total_ns: a.ns,
                    pageable: a.pageable,
                })
                .collect(),
            memset: CopySummary {
                kind: "memset".into(),
                count: self.memset.count,
                bytes: self.memset.bytes,
                total_ns: self.memset.ns,
                pageable: 0,
            },
            synchronizations: self.syncs.0,
            synchronization_ns: self.syncs.1,
        };
        let mut trace = self.trace.take();
        if let Some(t) = &mut trace {
            // Paths were kept as ids while recording; resolve each once.
            let mut cache: HashMap<PathId, crate::ranges::RangePath> = HashMap::new();
            let mut resolve = |p: PathId| cache.entry(p).or_insert_with(|| table.path(p)).clone();
            for (k, p) in t.kernels.iter_mut().zip(&self.trace_kernel_paths) {
                k.path = resolve(*p);
            }
            for (r, p) in t.ranges.iter_mut().zip(&self.trace_range_paths) {
                r.path = resolve(*p);
            }
        }
        Report {
            schema_version: SCHEMA_VERSION,
            gpuscope_version: env!("CARGO_PKG_VERSION").to_string(),
            mode: if self.opts.metric_names.is_empty() { "trace" } else { "metrics" }.into(),
            metrics: None,
            profiler_kernels: self.injected.0,
            profiler_kernel_ns: self.injected.1,
            start_ns,
            end_ns,
            devices: self.devices.infos(),
            kernels,
            ranges,
            path_kernels,
            start_end_ranges,
            memory,
            drops: self.drops.clone(),
            thread_names: self.thread_names.iter().map(|(t, n)| ThreadName { tid: *t, name: n.clone() }).collect(),
            trace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::KernelActivity;

    fn kernel(corr: u32, start: u64) -> KernelActivity {
        KernelActivity {
            name: c"k".as_ptr(),
            start,
            end: start + 10,
            device: 0,
            context: 1,
            stream: 7,
            correlation_id: corr,
            grid: [1, 1, 1],
            block: [32, 1, 1],
            cluster: [0; 3],
            registers_per_thread: 8,
            static_smem: 0,
            dynamic_smem: 0,
            smem_executed: 0,
            local_mem_per_thread: 0,
            graph_id: 0,
            graph_node_id: 0,
            device_launched: false,
        }
    }

    #[test]
    fn a_million_launches_keep_memory_bounded() {
        let opts = AggregateOptions { max_live_ranges: 1000, max_pending_launches: 4096, ..Default::default() };
        let mut a = Aggregator::new(opts, DeviceTable::fixed(vec![]));
        let path = crate::ranges::paths().intern(ROOT, 0, "bounded-test");
        for i in 0..1_000_000u32 {
            // One range per 10 launches; every launch's kernel arrives.
            if i % 10 == 0 {
                let inst = 1 + (i / 10) as u64;
                a.host_event(HostEvent::Push { instance: inst, parent: 0, path, tid: 1, ts: i as u64 * 100 });
            }
            let inst = 1 + (i / 10) as u64;
            a.host_event(HostEvent::Launch {
                correlation_id: i,
                tid: 1,
                path,
                instance: inst,
                graph: false,
                profiled: false,
            });
            a.kernel(&kernel(i, i as u64 * 100));
            if i % 10 == 9 {
                a.host_event(HostEvent::Pop { instance: inst, ts: i as u64 * 100 + 50 });
            }
        }
        // Launch records are dropped as their kernels arrive; range
        // instances are summarised once the cap is reached.
        assert!(a.launches.is_empty());
        assert!(a.instances.len() <= 1000, "{}", a.instances.len());
        assert_eq!(a.by_name.len(), 1);
        assert_eq!(a.by_path_name.len(), 1);
        let r = a.finish(0, 1_000_000 * 100);
        assert_eq!(r.kernels[0].stats.launches, 1_000_000);
        let g = r.ranges.iter().find(|g| g.path.to_string() == "bounded-test").unwrap();
        assert_eq!(g.count, 100_000, "every instance summarised, early or at the end");
        assert_eq!(g.kernel_launches, 1_000_000);
        assert!(r.drops.ranges_evicted > 0, "early summaries are counted");
    }

    #[test]
    fn launches_that_never_ran_are_forgotten_not_accumulated() {
        let opts = AggregateOptions { max_pending_launches: 1000, ..Default::default() };
        let mut a = Aggregator::new(opts, DeviceTable::fixed(vec![]));
        for i in 0..100_000u32 {
            a.host_event(HostEvent::Launch {
                correlation_id: i,
                tid: 1,
                path: ROOT,
                instance: 0,
                graph: false,
                profiled: false,
            });
        }
        assert!(a.launches.len() <= 1000);
    }
}
