//! CPU-only entry points for tests and tools: fold synthetic activity
//! buffers and host events into a report without CUPTI.

use crate::aggregate::devices::DeviceTable;
use crate::aggregate::{AggregateOptions, Aggregator};
use crate::decode::Activity;
pub use crate::model::event::HostEvent;
use crate::report::{DeviceInfo, Report};
use rustc_hash::FxHashSet;
use std::ffi::{c_char, CStr};
use std::sync::Mutex;

/// Name strings handed out by [`kernel_name`]: `'static`, so readable
/// for as long as the process runs.
static NAMES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// The pointer to put in a kernel record's `name` field for
/// [`Replay::buffer`] to read `name`: the replay reads only name
/// pointers handed out here.
pub fn kernel_name(name: &'static CStr) -> *const c_char {
    let p = name.as_ptr();
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if !names.contains(&(p as usize)) {
        names.push(p as usize);
    }
    p
}

/// Routes the process's NVTX events into gpuscope's per-thread range
/// stacks, as a session does, without starting one (for benchmarks of
/// the NVTX path). Whether NVTX could be attached.
pub fn route_nvtx() -> bool {
    crate::collect::nvtx::install()
}

/// ns per range event queued by the running session, if any: `n` pops
/// of no range (the decoder drops them at once), each held, timed and
/// queued as an NVTX pop is, without the NVTX call or the range stack.
pub fn range_event_cost(n: usize) -> Option<f64> {
    crate::collect::hold()?;
    let t0 = std::time::Instant::now();
    for _ in 0..n {
        crate::collect::send_range_event(|ts| HostEvent::Pop { instance: 0, ts });
    }
    Some(t0.elapsed().as_nanos() as f64 / n.max(1) as f64)
}

/// The parts of [`range_event_cost`], each alone, ns per call: a hold of
/// the session (taken and dropped), a reading of the range clock, an
/// event queued; and whether holds make no read-modify-write here.
pub fn range_event_parts(n: usize) -> Option<([f64; 3], bool)> {
    crate::collect::range_event_parts(n)
}

/// An aggregator over fixed devices.
pub struct Replay {
    agg: Aggregator,
    /// Name pointers known to come from [`kernel_name`] (a copy of
    /// those met so far, so most records take no lock).
    names: FxHashSet<usize>,
}

impl Replay {
    /// `trace_cap` 0 keeps no per-kernel records.
    pub fn new(devices: Vec<DeviceInfo>, trace_cap: usize) -> Self {
        Self::with_metrics(devices, trace_cap, &[])
    }
    /// In metrics mode: `KernelMetrics` values are of `metrics`. With
    /// metrics, as in a metrics session without sampling, gpuscope's cost
    /// is taken out of the host's idle time as a whole (its measurements
    /// hold launches).
    pub fn with_metrics(devices: Vec<DeviceInfo>, trace_cap: usize, metrics: &[String]) -> Self {
        let opts = AggregateOptions {
            trace_cap,
            metric_names: metrics.to_vec(),
            host_delay: metrics.is_empty(),
            ..Default::default()
        };
        Replay { agg: Aggregator::new(opts, DeviceTable::fixed(devices)), names: FxHashSet::default() }
    }
    /// As a session without synchronisation records (`sync_records` off):
    /// with the host's waits unknown, gpuscope's cost is taken out of the
    /// host's idle time as a whole, not gap by gap.
    pub fn without_host_waits(devices: Vec<DeviceInfo>, trace_cap: usize) -> Self {
        let opts = AggregateOptions { trace_cap, host_delay: false, ..Default::default() };
        Replay { agg: Aggregator::new(opts, DeviceTable::fixed(devices)), names: FxHashSet::default() }
    }
    /// Interns an NVTX path (default domain), for host events.
    pub fn path(&self, names: &[&str]) -> u32 {
        use crate::model::path::{paths, ROOT};
        names.iter().fold(ROOT, |p, n| paths().intern(p, 0, n))
    }
    /// Applies a host event.
    pub fn host_event(&mut self, e: HostEvent) {
        self.agg.host_event(e)
    }
    /// Folds a buffer of records laid out as CUPTI 13 writes them. Any
    /// bytes will do: a kernel record's name pointer and a memory
    /// record's source pointer are followed only when they came from
    /// [`kernel_name`]; with any other, a kernel reads as unnamed and an
    /// allocation as from no known library.
    pub fn buffer(&mut self, bytes: &[u8]) {
        let names = &mut self.names;
        let mut known = |p: usize| {
            names.contains(&p) || {
                let registered = NAMES.lock().unwrap_or_else(|e| e.into_inner()).contains(&p);
                if registered {
                    names.insert(p);
                }
                registered
            }
        };
        self.agg.buffer_with(&mut crate::decode::LayoutCursor::new(bytes), &mut |a| match a {
            Activity::Kernel(k) if !k.name.is_null() && !known(k.name as usize) => k.name = std::ptr::null(),
            Activity::DeviceMemory(m) if !m.source.is_null() && !known(m.source as usize) => {
                m.source = std::ptr::null()
            }
            _ => {}
        })
    }
    /// The report.
    pub fn finish(self, start_ns: u64, end_ns: u64) -> Report {
        Report::build(self.agg.finish(end_ns), start_ns, end_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::occupancy::SmLimits;
    use cupti_sys as sys;

    fn kernel_bytes(name: *const c_char, correlation_id: u32) -> Vec<u8> {
        // SAFETY: all-zero is a valid CUpti_ActivityKernel10 (integers and
        // null pointers).
        let mut r: sys::CUpti_ActivityKernel10 = unsafe { std::mem::zeroed() };
        r.kind = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        r.name = name;
        r.correlationId = correlation_id;
        (r.start, r.end) = (100, 200);
        (r.gridX, r.gridY, r.gridZ) = (1, 1, 1);
        (r.blockX, r.blockY, r.blockZ) = (32, 1, 1);
        // SAFETY: reading the bytes of a plain-data record.
        unsafe { std::slice::from_raw_parts(&r as *const _ as *const u8, std::mem::size_of_val(&r)) }.to_vec()
    }

    #[test]
    fn a_buffer_s_name_pointers_are_followed_only_when_handed_out_here() {
        let mut rp = Replay::new(vec![DeviceInfo::new(0, "NVIDIA H200", 132, SmLimits::SM_90)], 0);
        let mut bytes = kernel_bytes(kernel_name(c"replayed_kernel"), 1);
        // Pointers into nowhere, and into memory that is no string.
        bytes.extend(kernel_bytes(8 as *const c_char, 2));
        bytes.extend(kernel_bytes(usize::MAX as *const c_char, 3));
        rp.buffer(&bytes);
        let r = rp.finish(0, 1_000);
        let names: Vec<(&str, u64)> = r.kernels.iter().map(|k| (k.name.as_str(), k.stats.launches)).collect();
        assert_eq!(names, [("(unnamed kernel)", 2), ("replayed_kernel", 1)]);
    }

    #[test]
    fn arbitrary_bytes_fold_without_a_crash() {
        let mut rp = Replay::new(vec![DeviceInfo::new(0, "NVIDIA H200", 132, SmLimits::SM_90)], 16);
        // A xorshift stream: kinds the cursor knows are planted at record
        // boundaries so most buffers decode past their first record, with
        // every other field (name pointers, times, shapes) random.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let kinds = [
            sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
            sys::CUPTI_ACTIVITY_KIND_MEMCPY,
            sys::CUPTI_ACTIVITY_KIND_MEMSET,
            sys::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
            sys::CUPTI_ACTIVITY_KIND_MEMORY2,
        ];
        for _ in 0..2_000 {
            let mut bytes = Vec::new();
            for _ in 0..(next() % 8) {
                let kind = kinds[(next() % kinds.len() as u64) as usize];
                let size = crate::decode::record_size(kind).expect("a kind the cursor knows");
                let mut rec: Vec<u8> =
                    (0..size.div_ceil(8)).flat_map(|_| next().to_ne_bytes()).take(size).collect();
                rec[..4].copy_from_slice(&kind.to_ne_bytes());
                bytes.extend(rec);
            }
            // Cut anywhere: a truncated last record.
            bytes.truncate(bytes.len().saturating_sub((next() % 64) as usize));
            rp.buffer(&bytes);
        }
        let r = rp.finish(0, u64::MAX);
        let _ = (r.to_table(100), r.to_json(), r.to_chrome_trace(), r.to_openmetrics());
        assert!(r.kernels.iter().all(|k| k.name == "(unnamed kernel)"), "no random pointer was followed");
    }
}
