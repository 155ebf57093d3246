//! What the runtime's aggregation hands the report: its running totals
//! per kernel, range, copy kind and time bin, with names and paths
//! resolved ([`Aggregate`]), from which [`crate::Report`] is built. Plain
//! data and the arithmetic that folds values into it; the runtime
//! (`gpuscope`'s aggregation) decides what is folded where. Not a stable
//! API: it changes with the runtime.

pub mod calls;
pub mod kernels;
pub mod timeline;

use crate::model::device::DeviceInfo;
use crate::model::device_memory::{DeviceMemory, FrameworkMemory, RangeMemory};
use crate::model::drops::Drops;
use crate::model::idle::{Cause, CAUSES};
use crate::model::path::RangePath;
use crate::model::profiler_cost::{Calibration, ThreadCost};
use crate::model::sampled::{SampledAcc, SamplingStatus};
use crate::model::trace::Trace;
use calls::{CallLog, Figures};
use kernels::KernelAcc;
use timeline::Timeline;

/// What aggregation folded, with names and paths resolved, for the report.
pub struct Aggregate {
    /// Metrics mode: values were measured.
    pub metrics_mode: bool,
    /// Sampling mode: how sampling went, with the join's losses.
    pub sampling: Option<SamplingStatus>,
    /// The devices kernels ran on.
    pub devices: Vec<DeviceInfo>,
    /// Per kernel name.
    pub kernels: Vec<(String, KernelAcc)>,
    /// Per (NVTX path, kernel name).
    pub path_kernels: Vec<(RangePath, String, KernelAcc)>,
    /// Push/pop ranges by path.
    pub ranges: Vec<(RangePath, RangeAcc)>,
    /// Start/end ranges by name.
    pub start_end_ranges: Vec<(RangePath, RangeAcc)>,
    /// Copies by kind name, sets, host waits.
    pub memcpy: Vec<(&'static str, CopyAcc)>,
    /// See `memcpy`.
    pub memset: CopyAcc,
    /// See `memcpy`: count, ns.
    pub syncs: (u64, u64),
    /// Of which on the process's main thread, where every one's thread
    /// was known.
    pub main_syncs: Option<(u64, u64)>,
    /// Device memory per device.
    pub device_memory: Vec<DeviceMemory>,
    /// Device memory per range path.
    pub range_memory: Vec<(RangePath, RangeMemory)>,
    /// Names of the program's threads by thread id.
    pub thread_names: Vec<(u32, String)>,
    /// The records kept one by one, when a trace was asked for.
    pub trace: Option<Trace>,
    /// What did not make it into the totals, by cause.
    pub drops: Drops,
    /// CUPTI's own kernels (metrics mode): count, ns.
    pub profiler_kernels: (u64, u64),
    /// GPU idle time of the whole session by cause (`model::idle` order).
    pub idle: [u64; CAUSES],
    /// Kernels attributed to the lead thread's ranges: count, ns.
    pub cross_thread: (u64, u64),
    /// gpuscope's own cost per launching thread.
    pub threads: Vec<ThreadCost>,
    /// CUPTI's per-launch record cost as measured at the first launch, or
    /// why it was not.
    pub calibration: Result<Calibration, String>,
    /// gpuscope's cost is in `idle` and the pieces already, as the
    /// profiler's share, decided gap by gap (see
    /// [`crate::report::ProfilerCost::in_idle`]).
    pub cost_in_idle: bool,
    /// Children the process forked while the session ran.
    pub forks: u64,
    /// The session in bins.
    pub timeline: Timeline,
    /// The last compute kernels: (start, name id, [`lane`]), in arrival
    /// order.
    pub kernel_stream: Vec<(u64, u32, u32)>,
    /// The names of the ids in `kernel_stream`: (id, demangled name), by id.
    pub kernel_stream_names: Vec<(u32, String)>,
    /// The last launches made without kernel records: (time, function id,
    /// launching thread's lane), in order (each thread's; threads in
    /// batches).
    pub launch_stream: Vec<(u64, u32, u32)>,
    /// The names of the kernels of `launch_stream`'s ids, where the
    /// launch callbacks gave them: (id, demangled name), by id.
    pub launch_stream_names: Vec<(u32, String)>,
    /// Each GPU's busy time, idle time by cause and bins (with one GPU,
    /// the session's).
    pub per_device: Vec<(u32, u64, [u64; CAUSES], Timeline)>,
}

#[cfg(test)]
impl Aggregate {
    /// What aggregating nothing hands over (no device, no kernel, no
    /// range), for tests that set the report's figures themselves.
    pub fn empty() -> Aggregate {
        Aggregate {
            metrics_mode: false,
            sampling: None,
            devices: Vec::new(),
            kernels: Vec::new(),
            path_kernels: Vec::new(),
            ranges: Vec::new(),
            start_end_ranges: Vec::new(),
            memcpy: Vec::new(),
            memset: CopyAcc::default(),
            syncs: (0, 0),
            main_syncs: None,
            device_memory: Vec::new(),
            range_memory: Vec::new(),
            thread_names: Vec::new(),
            trace: None,
            drops: Drops::default(),
            profiler_kernels: (0, 0),
            idle: [0; CAUSES],
            cross_thread: (0, 0),
            threads: Vec::new(),
            calibration: Err("no kernel was launched in the session".to_string()),
            cost_in_idle: false,
            forks: 0,
            timeline: Timeline::new(0),
            kernel_stream: Vec::new(),
            kernel_stream_names: Vec::new(),
            launch_stream: Vec::new(),
            launch_stream_names: Vec::new(),
            per_device: Vec::new(),
        }
    }
}

/// A kernel's device and stream as one number: the steps are found from
/// one stream's kernels (a device's streams interleave differently every
/// step: FSDP's all-gather copies, side streams).
pub fn lane(device: u32, stream: u32) -> u32 {
    (device << 20) | (stream & 0xF_FFFF)
}

/// Running totals of one kind of copy (or of sets).
#[derive(Debug, Clone, Default)]
pub struct CopyAcc {
    /// Operations.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Their summed GPU time, ns.
    pub ns: u64,
    /// Copies from or to pageable host memory among them.
    pub pageable: u64,
}

/// Running totals of the finished instances of one path.
#[derive(Debug, Clone, Default)]
pub struct RangeAcc {
    /// Traced instances.
    pub count: u64,
    /// Sums over the traced instances.
    pub total: Figures,
    /// Each traced instance's figures: the first ones, and every wall time.
    pub calls: CallLog,
    /// Sampling mode: samples over the windows, on the devices the
    /// instances' kernels ran on (all sampled devices for an instance with
    /// none).
    pub sampled_wall: SampledAcc,
    /// A framework allocator's figures over the instances that reported
    /// them.
    pub framework: Option<FrameworkMemory>,
    /// Sampling mode's trace windows: instances that touched an untraced
    /// stretch. They count here and in `sampled_wall` only, not in the
    /// figures above, which need every kernel of the instance.
    pub untraced_count: u64,
    /// Their wall time, ns.
    pub untraced_wall: u64,
    /// Their launches: traced ones, and those counted between windows
    /// (the runtime's `Ranges::untraced_launches`).
    pub untraced_launches: u64,
    /// Of their launches, CUDA graph launches counted with them.
    pub untraced_graph_launches: u64,
    /// Their wall times (the first ones each, and every one's), to tell
    /// warm-up apart as traced calls do.
    pub untraced_calls: CallLog,
    /// The samples over each of the first of them, in the order of
    /// `untraced_calls.first`: warm-up's are taken out of `sampled_wall`.
    pub untraced_sampled_first: Vec<SampledAcc>,
    /// Instances' wall time by how many devices ran their kernels (the
    /// last entry: that many or more; instances without kernels are not
    /// counted), ns.
    pub gpus: [u64; 17],
}

impl RangeAcc {
    /// How many devices ran its instances' kernels for most of its time
    /// (0: none ran any): a short warm-up call that touched another GPU
    /// does not count, long calls count for their length.
    pub fn usual_gpus(&self) -> u32 {
        let mut best = (0, 0u64);
        for (n, &ns) in self.gpus.iter().enumerate() {
            if ns > 0 && ns >= best.1 {
                best = (n as u32, ns);
            }
        }
        best.0
    }
}

/// A classified piece of idle time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Where it starts, ns.
    pub start: u64,
    /// Where it ends, ns.
    pub end: u64,
    /// Its cause (`model::idle` order).
    pub cause: Cause,
    /// The kernel whose launch ended the gap (a kernel name id;
    /// [`NO_KERNEL`]: unknown): host work before it is the program's
    /// code that ran ahead of that launch.
    pub before: u32,
}

/// No kernel known (see [`Piece::before`]).
pub const NO_KERNEL: u32 = u32::MAX;

/// Which union a span handed out by the runtime's `SessionComm` belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Union {
    /// Every kernel of a device that ran communication.
    All,
    /// Its compute kernels.
    Compute,
    /// Its communication kernels.
    Comm,
}
