//! CUPTI's callbacks: kernel launches (attributed to the launching thread's
//! NVTX ranges, and measured in metrics mode), context creation and
//! destruction, and the activity buffers. They run on the program's threads:
//! each only takes a buffer from the pool, passes a pointer on, or queues a
//! small event, and never blocks on gpuscope's decoder. Each runs inside a
//! panic boundary ([`panic_guard`]) and holds the collection without a lock
//! ([`hold`]); set-ups that take long (a device's sampling, a context's
//! range profiler) go to threads of gpuscope's.

use super::calibrate;
use super::cupti::{self, activity, callback, tolerate};
use super::debug::debug;
use super::driver::{self, with_current};
use super::held::Held;
use super::metrics::collector::{self, LaunchSite, Measured};
use super::{active, hold, nvtx, panic_guard, python_stack, tally, CollectOptions, Collection};
use crate::error::Result;
use crate::model::event::{HostEvent, COMM_LAUNCH};
use crate::model::path::PathId;
use cupti_sys::{self as sys, Cupti};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Becomes CUPTI's subscriber, with [`api_callback`] as the callback.
pub(super) fn subscribe(cupti: &'static Cupti) -> Result<sys::CUpti_SubscriberHandle> {
    callback::subscribe(cupti, Some(api_callback), c"gpuscope")
}

const DRIVER_LAUNCHES: &[u32] = &[
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    sys::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    sys::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
];

const RUNTIME_LAUNCHES: &[u32] = &[
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    sys::CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    sys::CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
];

/// Stream-capture begins: metrics mode closes its measurement window there
/// (stopping the range profiler during a capture would invalidate it).
const CAPTURE_BEGINS: &[(u32, u32)] = &[
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture),
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz),
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2),
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz),
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph),
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz),
    (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000),
    (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000),
    (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_v12030),
    (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCaptureToGraph_ptsz_v12030),
];

/// Stream-capture ends: the ranges open at the capture's beginning are
/// forgotten there.
const CAPTURE_ENDS: &[(u32, u32)] = &[
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture),
    (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz),
    (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000),
    (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000),
];

/// A graph node made (or cloned, `cloned`): made during a stream capture
/// inside ranges opened since it began, it keeps them for its replays.
fn graph_node(s: &Collection, cloned: bool, g: &sys::CUpti_GraphData) {
    // Instantiation clones every node of every graph: nothing to carry
    // over until some node was made inside ranges of its capture's own.
    if cloned && !NODES_IN_RANGES.load(Ordering::Relaxed) {
        return;
    }
    if cloned {
        if let (Ok(node), Ok(original)) =
            (activity::graph_node_id(s.cupti, g.node), activity::graph_node_id(s.cupti, g.originalNode))
        {
            s.send(HostEvent::GraphNodeCloned { node, original });
        }
        return;
    }
    // Only a node made inside ranges of its capture's own is asked its id.
    let path = nvtx::current().path;
    let base = CAPTURE_BASE.try_with(Cell::get).ok().flatten().unwrap_or(path);
    if path == base {
        return;
    }
    let Ok(node) = activity::graph_node_id(s.cupti, g.node) else { return };
    NODES_IN_RANGES.store(true, Ordering::Relaxed);
    s.send(HostEvent::GraphNode { node, path, base });
}

/// Some graph node was made inside ranges opened during its capture.
static NODES_IN_RANGES: AtomicBool = AtomicBool::new(false);

/// Copy API calls: the time a thread spends blocked in them tells copies
/// apart from other host work when the GPU idles (a copy from pageable
/// memory blocks for all of its transfer). Driver variants are those the
/// runtime and current programs call.
const RUNTIME_COPIES: &[u32] = &[
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000,
];

const DRIVER_COPIES: &[u32] = &[
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2_ptds,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz,
];

/// Host synchronisation calls: the time a thread spends blocked in them is
/// a host wait. Timed from their callbacks, not from CUPTI's
/// synchronization activity records: enabling that kind made every step of
/// a PyTorch loop ~20% slower (bench/pytorch), these callbacks fire only
/// when the program synchronises.
const RUNTIME_SYNCS: &[u32] = &[
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
];

const DRIVER_SYNCS: &[u32] = &[
    sys::CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
    sys::CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
    sys::CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
    sys::CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    sys::CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
];

/// Device memory allocation and release calls: the ranges open at each
/// tell who holds the memory and which range allocated or released it (the
/// record carries the call's correlation id).
const RUNTIME_ALLOCS: &[u32] = &[
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMalloc3D_v3020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020,
    sys::CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020,
];

const DRIVER_ALLOCS: &[u32] = &[
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    sys::CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
];

/// What an API callback gpuscope subscribes to is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Launch,
    Copy,
    Sync,
    Alloc,
    CaptureBegin,
    CaptureEnd,
}

/// What the call `cbid` of `domain` is. Asked on every launch callback, so
/// it searches one sorted table of the calls that are not launches (a few
/// comparisons), built once, instead of scanning lists.
fn call_kind(domain: u32, cbid: u32) -> Call {
    static TABLE: std::sync::OnceLock<Vec<((u32, u32), Call)>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let (runtime, driver) = (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_CB_DOMAIN_DRIVER_API);
        let lists = [
            (runtime, RUNTIME_COPIES, Call::Copy),
            (driver, DRIVER_COPIES, Call::Copy),
            (runtime, RUNTIME_SYNCS, Call::Sync),
            (driver, DRIVER_SYNCS, Call::Sync),
            (runtime, RUNTIME_ALLOCS, Call::Alloc),
            (driver, DRIVER_ALLOCS, Call::Alloc),
        ];
        let mut t: Vec<((u32, u32), Call)> =
            lists.iter().flat_map(|&(domain, ids, call)| ids.iter().map(move |&id| ((domain, id), call))).collect();
        t.extend(CAPTURE_BEGINS.iter().map(|&k| (k, Call::CaptureBegin)));
        t.extend(CAPTURE_ENDS.iter().map(|&k| (k, Call::CaptureEnd)));
        t.sort_unstable_by_key(|e| e.0);
        t
    });
    table.binary_search_by_key(&(domain, cbid), |e| e.0).map_or(Call::Launch, |i| table[i].1)
}

/// Time in gpuscope's measurement at a launch's entry from which it is
/// reported as overhead: stopping the range profiler there costs
/// milliseconds, an uncontended lock well under a microsecond.
const OVERHEAD_MIN_NS: u64 = 20_000;

fn is_graph_launch(domain: u32, cbid: u32) -> bool {
    match domain {
        sys::CUPTI_CB_DOMAIN_DRIVER_API => {
            cbid == sys::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch
                || cbid == sys::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz
        }
        _ => {
            cbid == sys::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000
                || cbid == sys::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000
        }
    }
}

/// Turns on the launch and resource callbacks and the activity kinds.
pub(super) fn enable(cupti: &'static Cupti, sub: sys::CUpti_SubscriberHandle, p: &CollectOptions) -> Result<()> {
    // Ids the loaded CUPTI does not know (CUPTI 12 lacks 13's launch ids)
    // fail harmlessly: those calls cannot happen with it. A CUPTI without
    // the function cannot be used at all.
    let on = |domain: u32, cbid: u32| -> Result<()> {
        // SAFETY: the subscriber is ours and subscribed.
        match unsafe { callback::enable_callback(cupti, true, sub, domain, cbid) } {
            Err(missing) if missing.cupti_code().is_none() => Err(missing),
            r => {
                tolerate(r, &format!("enabling callback {cbid} of domain {domain}"));
                Ok(())
            }
        }
    };
    // Every runtime launch reaches a driver launch call too, with the
    // correlation id its kernel record carries (a trace window asked of a
    // session without records joins through it:
    // python/tests/test_gpu_windows.py); a session that starts without
    // records (trace windows of 0) pays CUPTI for half the callbacks a
    // launch. Sessions with records keep the runtime's launch calls, whose
    // parameters and call time gpuscope reads.
    let lists = [(sys::CUPTI_CB_DOMAIN_DRIVER_API, DRIVER_LAUNCHES)]
        .into_iter()
        .chain(p.records.then_some((sys::CUPTI_CB_DOMAIN_RUNTIME_API, RUNTIME_LAUNCHES)));
    // Sampling mode finds devices in use at their first launch.
    for (domain, list) in lists.filter(|_| p.attribution || p.sampling.is_some()) {
        for &cbid in list {
            on(domain, cbid)?;
        }
    }
    // Captures: metrics mode closes its window at their beginning; graph
    // nodes remember the ranges opened during them.
    for &(domain, cbid) in CAPTURE_BEGINS.iter().chain(CAPTURE_ENDS).filter(|_| p.metrics.is_some() || p.attribution) {
        on(domain, cbid)?;
    }
    if p.attribution {
        on(sys::CUPTI_CB_DOMAIN_RESOURCE, sys::CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED)?;
        on(sys::CUPTI_CB_DOMAIN_RESOURCE, sys::CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED)?;
    }
    let copies = [(sys::CUPTI_CB_DOMAIN_DRIVER_API, DRIVER_COPIES), (sys::CUPTI_CB_DOMAIN_RUNTIME_API, RUNTIME_COPIES)];
    for (domain, list) in copies.into_iter().filter(|_| p.attribution) {
        for &cbid in list {
            on(domain, cbid)?;
        }
    }
    let allocs = [(sys::CUPTI_CB_DOMAIN_DRIVER_API, DRIVER_ALLOCS), (sys::CUPTI_CB_DOMAIN_RUNTIME_API, RUNTIME_ALLOCS)];
    let device_memory = p.kinds.contains(&sys::CUPTI_ACTIVITY_KIND_MEMORY2);
    if device_memory {
        // Before the kind is enabled; without it (CUPTI before 12.6, or not
        // x86-64 Linux) allocations are attributed to no library.
        tolerate(activity::enable_allocation_source(cupti), "allocation records name no library");
    }
    for (domain, list) in allocs.into_iter().filter(|_| device_memory && p.attribution) {
        for &cbid in list {
            on(domain, cbid)?;
        }
    }
    let syncs = [(sys::CUPTI_CB_DOMAIN_DRIVER_API, DRIVER_SYNCS), (sys::CUPTI_CB_DOMAIN_RUNTIME_API, RUNTIME_SYNCS)];
    for (domain, list) in syncs.into_iter().filter(|_| p.host_waits) {
        for &cbid in list {
            on(domain, cbid)?;
        }
    }
    // A context's records (and measurements) are taken out before it is
    // destroyed: cudaDeviceReset or cuCtxDestroy before exit.
    on(sys::CUPTI_CB_DOMAIN_RESOURCE, sys::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)?;
    if p.metrics.is_some() || p.sampling.is_some() {
        // Metrics mode prepares each new context's range profiler early,
        // sampling mode its device's sampling.
        on(sys::CUPTI_CB_DOMAIN_RESOURCE, sys::CUPTI_CBID_RESOURCE_CONTEXT_CREATED)?;
    }
    shared_activity_buffers(cupti);
    activity::register_callbacks(cupti, Some(buffer_requested), Some(buffer_completed))?;
    if !p.records {
        return Ok(());
    }
    if p.calibrate && p.attribution {
        // Kernel records come on at the first launch, once it has been
        // timed without them (`calibrate`); copies are recorded from now.
        let rest: Vec<u32> =
            p.kinds.iter().copied().filter(|&k| k != sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).collect();
        return activity_kinds(cupti, &rest, true);
    }
    activity_kinds(cupti, &p.kinds, true)
}

/// Asks CUPTI to fill one activity buffer at a time for all threads.
/// CUPTI 13's default, a buffer per launching thread, hands a buffer back
/// only when that thread fills it: with many launching threads each holds
/// one of the bounded pool's buffers (64 threads and 16 buffers dropped 97%
/// of 10 M kernel records on the H100) and records arrive long after their
/// launches (most counted late or unattributed even with 128 buffers).
/// Older CUPTI without the attribute has shared buffers already. Set
/// before the buffer callbacks are registered and any kind is enabled, as
/// CUPTI requires.
fn shared_activity_buffers(cupti: &'static Cupti) {
    let r = activity::set_attribute_u8(cupti, sys::CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, 0);
    tolerate(r, "shared activity buffers not set; keeping CUPTI's default");
}

/// Enables or disables activity kinds. Enabling stops at the first kind
/// CUPTI refuses, with its error. Disabling always goes on through every
/// kind: one CUPTI refuses to disable cannot be helped (it is logged), and
/// the rest are off.
pub(crate) fn activity_kinds(cupti: &'static Cupti, kinds: &[u32], on: bool) -> Result<()> {
    for &k in kinds {
        if on {
            activity::enable(cupti, k)?;
        } else {
            tolerate(activity::disable(cupti, k), &format!("disabling activity kind {k}"));
        }
    }
    Ok(())
}

thread_local! {
    // Set while a runtime call is in progress on this thread (to the
    // session epoch it began in; 0: none), so the driver call it makes is
    // not recorded a second time.
    static IN_RUNTIME_CALL: Cell<u64> = const { Cell::new(0) };
    // When this thread entered the copy or synchronisation call it is
    // blocked in (one at a time: the driver calls a runtime call makes are
    // skipped, IN_RUNTIME_CALL).
    static BLOCKED_SINCE: Cell<Option<u64>> = const { Cell::new(None) };
    // When this thread entered the launch gpuscope is measuring.
    static MEASURE_ENTERED: Cell<Option<u64>> = const { Cell::new(None) };
    // The ranges open on this thread when its stream capture in progress
    // began (`None`: no capture).
    static CAPTURE_BASE: Cell<Option<PathId>> = const { Cell::new(None) };
    // When this thread entered its launch call in progress.
    static CALL_ENTERED: Cell<Option<Instant>> = const { Cell::new(None) };
    // How long this thread's last launch call took, entry to exit, ns (0:
    // taken by the next launch's event, or never timed).
    static LAST_CALL_NS: Cell<u32> = const { Cell::new(0) };
}

pub(super) unsafe extern "C" fn api_callback(
    _user: *mut c_void,
    domain: sys::CUpti_CallbackDomain,
    cbid: sys::CUpti_CallbackId,
    data: *const c_void,
) {
    panic_guard::catch(|| {
        panic_guard::fault("api_callback");
        // gpuscope's own calibration launches are not the program's.
        if data.is_null() || calibrate::in_progress_here() {
            return;
        }
        if domain == sys::CUPTI_CB_DOMAIN_RESOURCE {
            if cbid == sys::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING {
                // SAFETY: resource callbacks pass a CUpti_ResourceData.
                let ctx = unsafe { &*(data as *const sys::CUpti_ResourceData) }.context;
                if let Some(s) = hold() {
                    context_destroying(&s, ctx);
                }
            } else if cbid == sys::CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED
                || cbid == sys::CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED
            {
                // SAFETY: resource callbacks pass a CUpti_ResourceData; for
                // graph node callbacks its descriptor is a CUpti_GraphData.
                let g = unsafe { (*(data as *const sys::CUpti_ResourceData)).resourceDescriptor }
                    as *const sys::CUpti_GraphData;
                if let (false, Some(s)) = (g.is_null(), hold()) {
                    // SAFETY: checked non-null above; CUPTI owns it for the call.
                    graph_node(&s, cbid == sys::CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, unsafe { &*g });
                }
            } else if cbid == sys::CUPTI_CBID_RESOURCE_CONTEXT_CREATED {
                // SAFETY: as above.
                let ctx = unsafe { &*(data as *const sys::CUpti_ResourceData) }.context;
                if let Some(s) = hold() {
                    prepare_metrics(&s, ctx);
                    drop(prepare_sampling(&s, ctx, None));
                }
            }
            return;
        }
        if domain != sys::CUPTI_CB_DOMAIN_RUNTIME_API && domain != sys::CUPTI_CB_DOMAIN_DRIVER_API {
            return;
        }
        // SAFETY: for the API domains CUPTI passes a CUpti_CallbackData.
        let d = unsafe { &*(data as *const sys::CUpti_CallbackData) };
        let enter = d.callbackSite == sys::CUPTI_API_ENTER;
        if inside_runtime_call(domain, enter, super::session_epoch()) {
            return;
        }
        if !enter && collector::take_unmeasured_here() {
            // A count only, no CUPTI call: kept right even while stopping.
            if let Some(c) = active().as_ref().and_then(|s| s.collector.as_ref()) {
                c.unmeasured_exit();
            }
        }
        let call = call_kind(domain, cbid);
        if let Call::CaptureBegin | Call::CaptureEnd = call {
            let begins = call == Call::CaptureBegin;
            if enter {
                let base = begins.then(|| nvtx::current().path);
                let _ = CAPTURE_BASE.try_with(|b| b.set(base));
            }
            if let (true, true, Some(s)) = (begins, enter, hold()) {
                if let Some(c) = &s.collector {
                    c.close_windows();
                }
            }
            return;
        }
        if call == Call::Alloc {
            if enter {
                if let Some(s) = hold() {
                    s.send(HostEvent::Alloc { correlation_id: d.correlationId, path: nvtx::current().path });
                }
            }
            return;
        }
        let copy = call == Call::Copy;
        let wait = call == Call::Sync;
        if !enter && !copy && !wait {
            // A launch call's exit: how long the call took goes with the
            // thread's next launch.
            if let Some(t) = CALL_ENTERED.try_with(Cell::take).ok().flatten() {
                let ns = t.elapsed().as_nanos().clamp(1, u32::MAX as u128) as u32;
                let _ = LAST_CALL_NS.try_with(|c| c.set(ns));
            }
            // The exit of a launch this thread is not measuring (every
            // launch exit in trace mode) has nothing more to do.
            if !collector::measuring_here() {
                return;
            }
        }
        if enter && !copy && !wait && calibrate::armed() {
            // The session's first launch: time launches with and without
            // kernel records before this one goes on.
            if let Some(s) = hold() {
                // SAFETY: CUPTI passes the launch function's own params struct.
                let stream = unsafe { launch_target(domain, cbid, d.functionParams) }.map(|(s, _)| s);
                calibrate::at_first_launch(&s.arc(), d.context, stream.is_some_and(capturing));
            }
        }
        // Held, not locked, for the rest of the callback, which may be long
        // (the range profiler's start and decode in metrics mode).
        let Some(s) = hold() else { return };
        if !s.traced.load(std::sync::atomic::Ordering::Relaxed) {
            // Between trace windows: a new device's sampling set-up begun,
            // and the launch counted for its ranges, the Python stack's
            // modules included (no record will come to join).
            // Stream-capture callbacks, the other kind that gets here, are
            // on only in metrics mode, which has no windows.
            if enter && !copy && !wait {
                sample_device_of_launch(&s, d.context);
                let c = if python_stack::active() {
                    // The module ranges end when their last launch returns.
                    let _ = CALL_ENTERED.try_with(|c| c.set(Some(Instant::now())));
                    let prev_call_ns = LAST_CALL_NS.try_with(|c| c.replace(0)).unwrap_or(0);
                    python_stack::launch_context(&s, nvtx::current(), cupti::timestamp(s.cupti), prev_call_ns)
                } else {
                    nvtx::current()
                };
                let graph = is_graph_launch(domain, cbid);
                let (function, first) = launched_kernel(domain, cbid, d, super::session_epoch());
                if first && !d.symbolName.is_null() {
                    // SAFETY: for launch callbacks CUPTI points `symbolName`
                    // at the kernel's NUL-terminated name, valid for the
                    // callback.
                    let name = unsafe { std::ffi::CStr::from_ptr(d.symbolName) }.to_string_lossy().into_owned();
                    s.send(HostEvent::KernelName { kernel: function, name });
                }
                tally::count(s.id, c.path, c.instance, graph, function, || cupti::timestamp(s.cupti), |e| s.send(e));
            }
            return;
        }
        // After calibrating: its time is not this launch's.
        let entered = Instant::now();
        let now = || cupti::timestamp(s.cupti);
        if copy || wait {
            if enter {
                let _ = BLOCKED_SINCE.try_with(|t| t.set(Some(now())));
            } else if let Some(start) = BLOCKED_SINCE.try_with(|t| t.take()).ok().flatten() {
                let end = now();
                let c = nvtx::current();
                let instance = c.instance;
                s.send(if copy {
                    HostEvent::HostCopy { start, end, correlation_id: d.correlationId, instance }
                } else {
                    HostEvent::HostWait { start, end, instance, main: nvtx::on_main_thread() }
                });
            }
            return;
        }
        let correlation_id = d.correlationId;
        if !enter {
            // A launch measured at entry: its kernel has run (replayed) by now.
            if let Some(c) = &s.collector {
                // A launch that failed ran no kernel: it has no range.
                let ret = d.functionReturnValue as *const i32;
                // SAFETY: at API exit CUPTI points this at the call's return
                // value (CUresult or cudaError_t, both 32-bit).
                let launched = ret.is_null() || unsafe { *ret } == 0;
                for (correlation_id, values) in c.on_exit(correlation_id, launched) {
                    s.send(HostEvent::KernelMetrics { correlation_id, values });
                }
                if let Some(start) = MEASURE_ENTERED.try_with(|t| t.take()).ok().flatten() {
                    s.send(HostEvent::Overhead { start, end: now() });
                }
            }
            return;
        }
        // Before anything gpuscope does at this launch.
        let ts = now();
        let _ = CALL_ENTERED.try_with(|c| c.set(Some(entered)));
        sample_device_of_launch(&s, d.context);
        let prev_call_ns = LAST_CALL_NS.try_with(|c| c.replace(0)).unwrap_or(0);
        let ctx = python_stack::launch_context(&s, nvtx::current(), ts, prev_call_ns);
        let graph = is_graph_launch(domain, cbid);
        // A collector on demand between passes costs a launch nothing.
        let profiled = s.collector.as_ref().filter(|c| c.is_armed()).is_some_and(|c| {
            // SAFETY: CUPTI passes the launch function's own params struct.
            let target = unsafe { launch_target(domain, cbid, d.functionParams) };
            let site = LaunchSite { ctx: d.context, target, symbol: d.symbolName, path: ctx.path, graph };
            let measured = c.on_enter(&site);
            if measured != Measured::Not {
                // The measured launch holds the thread until its exit.
                let _ = MEASURE_ENTERED.try_with(|t| t.set(Some(ts)));
            } else {
                let end = now();
                if end.saturating_sub(ts) >= OVERHEAD_MIN_NS {
                    s.send(HostEvent::Overhead { start: ts, end });
                }
            }
            measured == Measured::Selected
        });
        s.send(HostEvent::Launch {
            correlation_id,
            tid: ctx.tid,
            path: ctx.path,
            instance: ctx.instance,
            graph,
            profiled,
            inherited: ctx.inherited,
            ts,
            cost_ns: entered.elapsed().as_nanos().min(u32::MAX as u128) as u32,
            prev_call_ns,
        });
    });
}

/// Marks the calling thread's runtime calls (entered, exited) in session
/// `epoch`, and tells whether a driver call is one a runtime call of this
/// session makes (recorded with it, not again). The mark holds its epoch:
/// a runtime call whose exit a stopped session never saw hides no driver
/// launch of the next session.
fn inside_runtime_call(domain: u32, enter: bool, epoch: u64) -> bool {
    if domain == sys::CUPTI_CB_DOMAIN_RUNTIME_API {
        let _ = IN_RUNTIME_CALL.try_with(|f| f.set(if enter { epoch } else { 0 }));
        return false;
    }
    IN_RUNTIME_CALL.try_with(|f| f.get() == epoch).unwrap_or(false)
}

/// How long the calling thread's last launch call took, ns (0: none
/// since its last launch began).
pub(super) fn last_call_ns() -> u32 {
    LAST_CALL_NS.try_with(Cell::get).unwrap_or(0)
}

/// Whether `stream` is being captured into a graph (or its state cannot be
/// read).
fn capturing(stream: sys::CUstream) -> bool {
    // SAFETY: a stream the program launches into.
    let status = unsafe { driver::stream_capture_status(stream) };
    status != Ok(0)
}

/// A context was created: set up its range profiler on a thread of its
/// own, overlapping the program's start-up (see `Collector::prepare`).
fn prepare_metrics(s: &Held<Collection>, ctx: sys::CUcontext) {
    // On demand, nothing is set up before a pass: a context's range
    // profiler cannot run beside PM sampling.
    if !s.collector.as_ref().is_some_and(|c| !c.is_on_demand()) || ctx.is_null() {
        return;
    }
    // The thread holds the collection: stop waits for it before CUPTI
    // detaches.
    let Some(held) = s.again() else { return };
    debug("metrics: a context was created");
    let key = ctx as usize;
    let spawned = std::thread::Builder::new().name("gpuscope-metrics-setup".into()).spawn(move || {
        panic_guard::catch(|| {
            if let Some(c) = &held.collector {
                with_current(key, || c.prepare(key as sys::CUcontext));
            }
        })
    });
    if spawned.is_err() {
        debug("metrics: no setup thread; the first selected launch sets up");
    }
}

/// A launch into `ctx` (current): the first to find its device's sampling
/// not set up starts the set-up on a thread of gpuscope's, and goes on.
fn sample_device_of_launch(s: &Held<Collection>, ctx: sys::CUcontext) {
    if let Some(dev) = s.sampler.as_ref().and_then(|sampler| sampler.claim_at_launch(ctx)) {
        // The launch goes on; the set-up thread finishes on its own.
        drop(prepare_sampling(s, ctx, Some(dev)));
    }
}

/// Sets up sampling on the device of `ctx` (`dev`, claimed already, or
/// `None`: found and claimed on the thread) on a thread of gpuscope's,
/// with `ctx` current there. The thread holds the collection: stop waits
/// for a set-up in progress before CUPTI detaches.
pub(super) fn prepare_sampling(
    s: &Held<Collection>,
    ctx: sys::CUcontext,
    dev: Option<u32>,
) -> Option<std::thread::JoinHandle<()>> {
    if s.sampler.is_none() || ctx.is_null() {
        return None;
    }
    let held = s.again()?;
    let key = ctx as usize;
    if let Some(sampler) = &s.sampler {
        sampler.register_exit_handler();
        // Counted from before the thread exists: the exit waits for it.
        sampler.set_up_begins();
    }
    debug("sampling: a device's set-up starts on a thread of gpuscope's");
    let spawned = std::thread::Builder::new().name("gpuscope-sampling-setup".into()).spawn(move || {
        panic_guard::catch(|| {
            let Some(sampler) = &held.sampler else { return };
            with_current(key, || match dev {
                Some(dev) => sampler.set_up(dev),
                None => sampler.set_up_current(),
            });
        });
        if let Some(sampler) = &held.sampler {
            sampler.set_up_ends();
        }
    });
    if spawned.is_err() {
        if let Some(sampler) = &s.sampler {
            sampler.set_up_ends();
        }
    }
    match (spawned, dev, &s.sampler) {
        (Ok(thread), _, _) => Some(thread),
        (Err(e), Some(dev), Some(sampler)) => {
            // Not set up in the launch instead: that is the wait this avoids.
            sampler.give_up(dev, &format!("no thread to set its sampling up on ({e})"));
            None
        }
        (Err(_), _, _) => None,
    }
}

/// Context `ctx` is about to be destroyed: wait for its work, then take
/// out every record CUPTI holds (partial buffers too) and what metrics mode
/// measured in it, while the context still exists.
fn context_destroying(s: &Collection, ctx: sys::CUcontext) {
    debug("context destroy: flush");
    if !ctx.is_null() {
        // CUPTI passes a context that is still alive at DESTROY_STARTING.
        if let Err(e) = with_current(ctx as usize, driver::ctx_synchronize) {
            debug(&format!("context destroy: synchronising: {e}"));
        }
    }
    s.flush(true);
    if let Some(c) = &s.collector {
        for (correlation_id, values) in c.context_destroyed(ctx) {
            s.send(HostEvent::KernelMetrics { correlation_id, values });
        }
    }
}

thread_local! {
    /// Function handles this thread launched in a session (its epoch), and
    /// their kernels' ids ([`launched_kernel`]); cleared when full and when
    /// a new session begins (which is sent the kernels' names afresh).
    static KERNEL_IDS: std::cell::RefCell<(u64, rustc_hash::FxHashMap<u64, u64>)> = Default::default();
}

/// Handles a thread keeps the kernel ids of.
const KERNEL_IDS_MAX: usize = 4096;

/// A number for the kernel a launch runs, the same for each of its
/// launches: its name's hash (cuBLAS launches one kernel through several
/// function handles, one per module it loaded it into), found once per
/// handle; a graph launch's executable graph; the handle where CUPTI gives
/// no name. With it, whether this thread launched it through this handle
/// for the first time in the session of `epoch` (or since its table was
/// last cleared).
fn launched_kernel(domain: u32, cbid: u32, d: &sys::CUpti_CallbackData, epoch: u64) -> (u64, bool) {
    // SAFETY: CUPTI passes the launch function's own params struct.
    let handle = unsafe { launched_function(domain, cbid, d.functionParams) }.unwrap_or(0);
    let name = || {
        if d.symbolName.is_null() {
            return handle;
        }
        // SAFETY: for launch callbacks CUPTI points `symbolName` at the
        // kernel's NUL-terminated name, valid for the callback.
        let bytes = unsafe { std::ffi::CStr::from_ptr(d.symbolName) }.to_bytes();
        let mut h = rustc_hash::FxHasher::default();
        std::hash::Hash::hash(bytes, &mut h);
        let comm = std::str::from_utf8(bytes).is_ok_and(crate::model::comm::is_comm_kernel);
        std::hash::Hasher::finish(&h) & !COMM_LAUNCH | if comm { COMM_LAUNCH } else { 0 }
    };
    if handle == 0 {
        return (name(), false);
    }
    KERNEL_IDS
        .try_with(|table| {
            let (session, ids) = &mut *table.borrow_mut();
            if *session != epoch {
                (*session, *ids) = (epoch, Default::default());
            }
            if let Some(&id) = ids.get(&handle) {
                return (id, false);
            }
            if ids.len() >= KERNEL_IDS_MAX {
                ids.clear();
            }
            let id = name();
            ids.insert(handle, id);
            (id, true)
        })
        .unwrap_or((handle, false))
}

/// What a launch API call launches, as a number the same for every launch
/// of it: the kernel's function handle (or the runtime's host stub), a
/// graph launch's executable graph; `None` for launch APIs whose
/// parameters gpuscope does not decode.
///
/// # Safety
/// `params` is the `functionParams` CUPTI passed for `(domain, cbid)`.
unsafe fn launched_function(domain: u32, cbid: u32, params: *const c_void) -> Option<u64> {
    if params.is_null() {
        return None;
    }
    // SAFETY (all reads): per this function's contract, `params` points to
    // the `<api>_params` struct of this callback id.
    let handle = unsafe {
        match (domain, cbid) {
            (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
            | (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz) => {
                (*(params as *const sys::cuLaunchKernel_params)).f as u64
            }
            (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel)
            | (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz) => {
                (*(params as *const sys::cuLaunchCooperativeKernel_params)).f as u64
            }
            (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx)
            | (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) => {
                (*(params as *const sys::cuLaunchKernelEx_params)).f as u64
            }
            (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch)
            | (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz) => {
                (*(params as *const sys::cuGraphLaunch_params)).hGraph as u64
            }
            (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
            | (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000) => {
                (*(params as *const sys::cudaLaunchKernel_v7000_params)).func as u64
            }
            (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000)
            | (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000) => {
                (*(params as *const sys::cudaGraphLaunch_v10000_params)).graphExec as u64
            }
            (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060)
            | (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060) => {
                (*(params as *const sys::cudaLaunchKernelExC_v11060_params)).func as u64
            }
            _ => return None,
        }
    };
    Some(handle)
}

/// The stream a kernel launch API call targets and the number of thread
/// blocks (CTAs) it launches, read from its parameters; `None` for launch
/// APIs whose parameters gpuscope does not decode.
///
/// # Safety
/// `params` is the `functionParams` CUPTI passed for `(domain, cbid)`.
unsafe fn launch_target(domain: u32, cbid: u32, params: *const c_void) -> Option<(sys::CUstream, u64)> {
    if params.is_null() {
        return None;
    }
    let ctas = |x: u32, y: u32, z: u32| u64::from(x) * u64::from(y) * u64::from(z);
    // SAFETY (all reads): per this function's contract, `params` points to
    // the `<api>_params` struct of this callback id.
    unsafe {
        match (domain, cbid) {
            (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel)
            | (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz) => {
                let p = &*(params as *const sys::cuLaunchKernel_params);
                Some((p.hStream, ctas(p.gridDimX, p.gridDimY, p.gridDimZ)))
            }
            (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel)
            | (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz) => {
                let p = &*(params as *const sys::cuLaunchCooperativeKernel_params);
                Some((p.hStream, ctas(p.gridDimX, p.gridDimY, p.gridDimZ)))
            }
            (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx)
            | (sys::CUPTI_CB_DOMAIN_DRIVER_API, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) => {
                let cfg = (*(params as *const sys::cuLaunchKernelEx_params)).config;
                (!cfg.is_null()).then(|| ((*cfg).hStream, ctas((*cfg).gridDimX, (*cfg).gridDimY, (*cfg).gridDimZ)))
            }
            (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
            | (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000) => {
                let p = &*(params as *const sys::cudaLaunchKernel_v7000_params);
                Some((p.stream as sys::CUstream, ctas(p.gridDim.x, p.gridDim.y, p.gridDim.z)))
            }
            (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060)
            | (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060) => {
                let cfg = (*(params as *const sys::cudaLaunchKernelExC_v11060_params)).config;
                (!cfg.is_null()).then(|| {
                    let g = (*cfg).gridDim;
                    ((*cfg).stream as sys::CUstream, ctas(g.x, g.y, g.z))
                })
            }
            _ => None,
        }
    }
}

/// CUPTI asks for an activity buffer: one from the pool, or none (CUPTI
/// then drops the records and counts them).
unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    if buffer.is_null() || size.is_null() || max_records.is_null() {
        return;
    }
    // No buffer, written first: what CUPTI reads if anything below returns
    // early or panics.
    // SAFETY: CUPTI passes valid out pointers (checked non-null above).
    unsafe {
        *buffer = std::ptr::null_mut();
        *size = 0;
        *max_records = 0;
    }
    panic_guard::catch(|| {
        panic_guard::fault("buffer_requested");
        let Some(s) = hold() else { return };
        let Some(p) = s.pool.take() else { return };
        // SAFETY: as above; max_records stays 0 (as many as fit).
        unsafe {
            *buffer = p;
            *size = s.pool.buffer_size();
        }
    });
}

/// CUPTI hands back a buffer it filled (or flushed): its records go to the
/// decoder, which returns it to the pool.
unsafe extern "C" fn buffer_completed(ctx: sys::CUcontext, stream: u32, buffer: *mut u8, size: usize, valid: usize) {
    panic_guard::catch(|| {
        panic_guard::fault("buffer_completed");
        let Some(s) = active() else {
            if !buffer.is_null() && size > 0 {
                // Late buffer after the session: free it (pool layout).
                // SAFETY: every buffer we hand out is size bytes, align 8.
                unsafe { std::alloc::dealloc(buffer, std::alloc::Layout::from_size_align_unchecked(size, 8)) };
            }
            return;
        };
        // Asked in the gate; a buffer handed back after stop closed it (by
        // the finalize itself) still reaches the decoder, which calls no
        // more than the record walk.
        s.calls.within(|| match activity::num_dropped_records(s.cupti, ctx, stream) {
            Ok(n) => {
                s.cupti_dropped.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) => debug(&format!("records dropped with a buffer: {e}")),
        });
        if buffer.is_null() {
            return;
        }
        // The decoder walks it and gives it back to the pool.
        s.completed(buffer, valid);
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Calls CUPTI's three callbacks as CUPTI would, each with a panic
    /// injected at its start (no session runs): none unwinds into its
    /// caller, each counts one panic.
    pub(crate) fn call_each_callback_with_a_fault() {
        let before = panic_guard::caught();
        let mut data = 0u64;
        for site in ["api_callback", "buffer_requested", "buffer_completed"] {
            panic_guard::inject(Some(site));
            let (mut buffer, mut size, mut max) = (std::ptr::dangling_mut::<u8>(), 12_345usize, 6usize);
            // SAFETY: what CUPTI passes: valid out pointers, a null buffer
            // handed back, callback data the callback does not reach.
            unsafe {
                match site {
                    "api_callback" => api_callback(
                        std::ptr::null_mut(),
                        sys::CUPTI_CB_DOMAIN_RESOURCE,
                        0,
                        (&mut data as *mut u64).cast(),
                    ),
                    "buffer_requested" => buffer_requested(&mut buffer, &mut size, &mut max),
                    _ => buffer_completed(std::ptr::null_mut(), 0, std::ptr::null_mut(), 0, 0),
                }
            }
            if site == "buffer_requested" {
                assert_eq!((buffer, size, max), (std::ptr::null_mut(), 0, 0), "defined when the body panicked");
            }
        }
        panic_guard::inject(None);
        assert!(panic_guard::caught() >= before + 3, "each callback's panic counted");
    }

    #[test]
    fn each_callback_catches_its_panic_and_buffer_requested_leaves_no_buffer() {
        call_each_callback_with_a_fault();
    }

    #[test]
    fn a_runtime_call_left_open_by_a_stopped_session_hides_no_launch_of_the_next() {
        let (runtime, driver) = (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_CB_DOMAIN_DRIVER_API);
        assert!(!inside_runtime_call(runtime, true, 5));
        assert!(inside_runtime_call(driver, true, 5), "the runtime call's own driver call");
        // Session 5 stopped before the call's exit; session 6 subscribes no
        // runtime launches.
        assert!(!inside_runtime_call(driver, true, 6));
        assert!(!inside_runtime_call(runtime, false, 6));
        assert!(!inside_runtime_call(driver, true, 6));
    }

    #[test]
    fn a_kernel_launched_through_two_handles_has_one_id_and_a_graph_its_own() {
        let driver = sys::CUPTI_CB_DOMAIN_DRIVER_API;
        let launch_in = |epoch: u64, f: usize, name: Option<&std::ffi::CStr>| {
            // SAFETY: plain C structs, all-zero valid.
            let mut p: sys::cuLaunchKernel_params = unsafe { std::mem::zeroed() };
            p.f = f as sys::CUfunction;
            // SAFETY: as above.
            let mut d: sys::CUpti_CallbackData = unsafe { std::mem::zeroed() };
            d.functionParams = (&p as *const sys::cuLaunchKernel_params).cast();
            d.symbolName = name.map_or(std::ptr::null(), |n| n.as_ptr());
            launched_kernel(driver, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &d, epoch)
        };
        let (gemm, first) = launch_in(1, 0x1000, Some(c"sm90_xmma_gemm"));
        assert!(first);
        assert_eq!(launch_in(1, 0x2000, Some(c"sm90_xmma_gemm")), (gemm, true), "one kernel, two modules' handles");
        assert_eq!(
            launch_in(1, 0x1000, Some(c"not read")),
            (gemm, false),
            "found again by its handle, its name not read"
        );
        // The next session is told the names again.
        assert_eq!(launch_in(2, 0x1000, Some(c"sm90_xmma_gemm")), (gemm, true), "a new session");
        assert_eq!(launch_in(2, 0x1000, Some(c"not read")), (gemm, false));
        let launch = |f: usize, name: Option<&std::ffi::CStr>| launch_in(2, f, name).0;
        assert_ne!(launch(0x3000, Some(c"elementwise")), gemm);
        assert_eq!(launch(0x4000, None), 0x4000, "no name: the handle");
        // NCCL's kernels are marked: steps are not found from them.
        assert_eq!(gemm & COMM_LAUNCH, 0);
        let nccl =
            launch(0x6000, Some(c"_Z28ncclDevKernel_AllReduce_Sum_f32_RING_LLP24ncclDevKernelArgsStorageILm4096EE"));
        assert_eq!(nccl & COMM_LAUNCH, COMM_LAUNCH, "{nccl:x}");
        // SAFETY: as above.
        let mut g: sys::cuGraphLaunch_params = unsafe { std::mem::zeroed() };
        g.hGraph = 0x5000 as sys::CUgraphExec;
        // SAFETY: as above.
        let mut d: sys::CUpti_CallbackData = unsafe { std::mem::zeroed() };
        d.functionParams = (&g as *const sys::cuGraphLaunch_params).cast();
        assert_eq!(launched_kernel(driver, sys::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &d, 2), (0x5000, true));
    }

    #[test]
    fn each_call_is_told_by_domain_and_id() {
        let (runtime, driver) = (sys::CUPTI_CB_DOMAIN_RUNTIME_API, sys::CUPTI_CB_DOMAIN_DRIVER_API);
        for (domain, ids, call) in [
            (runtime, RUNTIME_LAUNCHES, Call::Launch),
            (driver, DRIVER_LAUNCHES, Call::Launch),
            (runtime, RUNTIME_COPIES, Call::Copy),
            (driver, DRIVER_COPIES, Call::Copy),
            (runtime, RUNTIME_SYNCS, Call::Sync),
            (driver, DRIVER_SYNCS, Call::Sync),
            (runtime, RUNTIME_ALLOCS, Call::Alloc),
            (driver, DRIVER_ALLOCS, Call::Alloc),
        ] {
            for &id in ids {
                assert_eq!(call_kind(domain, id), call, "domain {domain} id {id}");
            }
        }
        for &(domain, id) in CAPTURE_BEGINS {
            assert_eq!(call_kind(domain, id), Call::CaptureBegin);
        }
        for &(domain, id) in CAPTURE_ENDS {
            assert_eq!(call_kind(domain, id), Call::CaptureEnd);
        }
    }
}
