//! What the collection stage hands on from the program's threads: NVTX
//! range events and kernel launches, in the order each thread made them.

use super::path::PathId;

/// Set in a [`HostEvent::LaunchLog`] id: the launch is a communication
/// kernel's (NCCL's), which steps are not found from (as with kernel
/// records: a rank's collectives wait on the others).
pub const COMM_LAUNCH: u64 = 1 << 63;

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
    /// A kernel (or graph) launch API call entered at `ts`; `profiled`: its
    /// metrics follow in a `KernelMetrics` event; `inherited`: `path` and
    /// `instance` are the lead thread's ranges, not `tid`'s own. `cost_ns`:
    /// time gpuscope's launch callback took; `prev_call_ns`: how long the
    /// thread's previous launch call took, entry to exit (0: unknown).
    Launch {
        correlation_id: u32,
        tid: u32,
        path: PathId,
        instance: u64,
        graph: bool,
        profiled: bool,
        inherited: bool,
        ts: u64,
        cost_ns: u32,
        prev_call_ns: u32,
    },
    /// `launches` launch API calls made inside `path` between trace
    /// windows (kernel records off): they count for its ranges and those
    /// around them, with no kernel to wait for. Sent by a thread before
    /// its next range event (push or pop), when its range changes, and at
    /// collection: `instance` (0: none) was its innermost open range when
    /// it made them, still open when sent before a range event.
    /// They were made from `start` to `end` (ns): spread over that time in
    /// the session's bins.
    /// `graphs` of them were CUDA graph launches.
    UntracedLaunches { path: PathId, instance: u64, launches: u64, graphs: u64, start: u64, end: u64 },
    /// A thread's launches between trace windows, in order: (time, the
    /// launched kernel's id: the same for every launch of one kernel, 0
    /// where unknown; its top bit set for a communication kernel's).
    /// `lane` tells the thread's apart from other threads'. Steps are
    /// found in them where no kernel record was taken.
    LaunchLog { lane: u32, entries: Vec<(u64, u64)> },
    /// The name CUPTI gave the kernel of a [`HostEvent::LaunchLog`] id (as
    /// compiled, mangled), sent the first time a thread launches it
    /// through a function handle: where the exact kernels do not repeat,
    /// steps are looked for by kernel family.
    KernelName { kernel: u64, name: String },
    /// Thread `tid` called NCCL for a collective (or send, receive) of
    /// `bytes` (its message size, from NCCL's NVTX payload) at `ts`: the
    /// thread's next communication kernel launched after it moves them
    /// (with those of the other calls of its group, launched together at
    /// the group's end).
    CommMessage { tid: u32, bytes: u64, ts: u64 },
    /// A thread was blocked in a copy API call (`cudaMemcpy*`,
    /// `cuMemcpy*`) from `start` to `end`, inside range `instance` (0:
    /// none); its copy record has `correlation_id`.
    HostCopy { start: u64, end: u64, correlation_id: u32, instance: u64 },
    /// The per-launch cost of CUPTI's kernel records, measured at the
    /// session's first launch (see `collect::calibrate`).
    Calibrated { record_ns: u32, plain_ns: u32, traced_ns: u32 },
    /// Calibration did not run or failed: why.
    NotCalibrated { why: String },
    /// The process forked a child while the session ran (data-loader
    /// workers are forked).
    Forked { ts: u64 },
    /// A thread was blocked in a synchronisation call
    /// (`cudaStreamSynchronize`, `cuCtxSynchronize`, ...) from `start` to
    /// `end`, inside range `instance`; `main`: the process's main thread
    /// (a Python program's own code runs there; a framework runtime's
    /// threads, XLA's, are others).
    HostWait { start: u64, end: u64, instance: u64, main: bool },
    /// gpuscope's own measurement held a thread from `start` to `end`
    /// (metrics mode: starting, stopping and reading the range profiler
    /// around a launch).
    Overhead { start: u64, end: u64 },
    /// Metric values of a profiled launch (`None`: measurement discarded).
    KernelMetrics { correlation_id: u32, values: Option<Vec<f64>> },
    /// `nvtxNameOsThread`.
    ThreadName { tid: u32, name: String },
    /// A CUDA graph node was made while the ranges at `path` were open on
    /// the thread, inside `base` (the ranges open when its stream capture
    /// began): its kernels, whenever replayed, run the frames of `path`
    /// below `base` inside the ranges open at their graph's launch.
    GraphNode { node: u64, path: PathId, base: PathId },
    /// A graph node copied from `original` (graph instantiation clones the
    /// captured graph's nodes): its kernels are the original's.
    GraphNodeCloned { node: u64, original: u64 },
    /// A device memory allocation or release call (correlation id) made
    /// inside the ranges of `path`.
    Alloc { correlation_id: u32, path: PathId },
    /// Range `instance`, about to close, is left out of the report.
    Discard { instance: u64 },
    /// Model FLOPs counted inside range `instance` (a framework
    /// integration's count from operand shapes).
    Flops { instance: u64, flops: f64 },
    /// A framework allocator's figures at the start (`at_end` false) or
    /// end of `instance`.
    FrameworkMemory { instance: u64, at_end: bool, allocated: u64, reserved: u64, peak: u64 },
    /// Time thread `tid` spent in a framework integration's own
    /// instrumentation (PyTorch's range hooks) up to `ts`, inside range
    /// `instance` (0: none): gpuscope's cost, as its callbacks' time is.
    OwnCost { tid: u32, instance: u64, ns: u64, ts: u64 },
}

impl HostEvent {
    /// A plain kernel launch by thread `tid` at `ts` inside range `instance`
    /// of `path` (0 and the root path: none): no graph, not measured, on
    /// the thread's own ranges, untimed (replayed events and tests).
    #[cfg_attr(not(feature = "internal"), allow(dead_code))]
    pub fn launch(correlation_id: u32, tid: u32, path: PathId, instance: u64, ts: u64) -> HostEvent {
        HostEvent::Launch {
            correlation_id,
            tid,
            path,
            instance,
            graph: false,
            profiled: false,
            inherited: false,
            ts,
            cost_ns: 0,
            prev_call_ns: 0,
        }
    }
}
