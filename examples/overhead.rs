//! What tracing costs, measured in one process:
//!   (a) no profiler,
//!   (b) raw CUPTI activity tracing of concurrent kernels with an empty
//!       buffer consumer (the floor any CUPTI-based tracer pays),
//!   (c) gpuscope trace mode (launch callbacks, NVTX, four activity kinds,
//!       decoding and aggregation).
//! on two workloads: 100k tiny launches (launch-bound worst case) and
//! kernels of about 50 us. Each mode runs `REPS` times, interleaved, after
//! warm-up; medians are reported. (a) runs again at the end to show whether
//! CUPTI left anything behind.
//!
//!     cargo run --release --example overhead

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cupti_sys as sys;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

const PTX: &str = include_str!("kernels/kernels.ptx");
const REPS: usize = 5;

/// (b): buffers from a fixed set, handed straight back.
struct RawPool(Mutex<Vec<usize>>);
static RAW: OnceLock<(sys::Cupti, RawPool)> = OnceLock::new();
const RAW_BUF: usize = 4 << 20;

unsafe extern "C" fn raw_request(b: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let p = RAW.get().and_then(|(_, pool)| pool.0.lock().ok()?.pop()).unwrap_or(0);
    // SAFETY: CUPTI passes valid out pointers.
    unsafe {
        *b = p as *mut u8;
        *size = if p == 0 { 0 } else { RAW_BUF };
        *max = 0;
    }
}

unsafe extern "C" fn raw_complete(_c: sys::CUcontext, _s: u32, b: *mut u8, _size: usize, _valid: usize) {
    if let Some((_, pool)) = RAW.get() {
        if !b.is_null() {
            if let Ok(mut v) = pool.0.lock() {
                v.push(b as usize);
            }
        }
    }
}

unsafe extern "C" fn empty_callback(_u: *mut std::ffi::c_void, _d: u32, _c: u32, _p: *const std::ffi::c_void) {}

static RAW_SUB: Mutex<usize> = Mutex::new(0);

/// (b2): (b) plus an empty CUPTI callback on the driver launch APIs: what
/// subscribing to launches costs before gpuscope does anything in it.
fn raw_callbacks(on: bool) {
    let (c, _) = RAW.get().expect("raw_cupti ran first");
    let mut sub = RAW_SUB.lock().unwrap();
    // SAFETY: plain CUPTI calls; the callback does nothing.
    unsafe {
        if on {
            let mut h: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
            assert_eq!(sys::sym!(c, cuptiSubscribe).unwrap()(&mut h, Some(empty_callback), std::ptr::null_mut()), 0);
            for cbid in [sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx] {
                sys::sym!(c, cuptiEnableCallback).unwrap()(1, h, sys::CUPTI_CB_DOMAIN_DRIVER_API, cbid);
            }
            *sub = h as usize;
        } else {
            sys::sym!(c, cuptiUnsubscribe).unwrap()(*sub as sys::CUpti_SubscriberHandle);
        }
    }
}

fn raw_cupti(on: bool) {
    let (c, _) = RAW.get_or_init(|| {
        let c = sys::load_cupti().expect("libcupti");
        let bufs =
            (0..16).map(|_| Box::leak(vec![0u64; RAW_BUF / 8].into_boxed_slice()).as_mut_ptr() as usize).collect();
        (c, RawPool(Mutex::new(bufs)))
    });
    // SAFETY: plain CUPTI calls with valid callbacks.
    unsafe {
        if on {
            sys::sym!(c, cuptiActivityRegisterCallbacks).unwrap()(Some(raw_request), Some(raw_complete));
            sys::sym!(c, cuptiActivityEnable).unwrap()(sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        } else {
            sys::sym!(c, cuptiActivityFlushAll).unwrap()(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            sys::sym!(c, cuptiActivityDisable).unwrap()(sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
            sys::sym!(c, cuptiActivityFlushAll).unwrap()(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            // As gpuscope does at stop, so neither leaves CUPTI attached.
            sys::sym!(c, cuptiFinalize).unwrap()();
        }
    }
}

struct Work {
    stream: Arc<CudaStream>,
    tiny: CudaFunction,
    spin: CudaFunction,
    counter: cudarc::driver::CudaSlice<i32>,
    spin_cycles: u64,
}

impl Work {
    /// Returns seconds for `n` launches of `which`, launch loop + sync.
    fn run(&mut self, which: &str, n: usize) -> f64 {
        let t = Instant::now();
        for _ in 0..n {
            if which == "tiny" {
                let mut l = self.stream.launch_builder(&self.tiny);
                l.arg(&mut self.counter);
                // SAFETY: tiny(int*).
                unsafe { l.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 }) }
                    .unwrap();
            } else {
                let mut l = self.stream.launch_builder(&self.spin);
                l.arg(&self.spin_cycles).arg(&mut self.counter);
                // SAFETY: spin(u64, int*).
                unsafe {
                    l.launch(LaunchConfig { grid_dim: (132, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 })
                }
                .unwrap();
            }
        }
        self.stream.synchronize().unwrap();
        t.elapsed().as_secs_f64()
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let ctx = CudaContext::new(0).expect("a CUDA device");
    // One stream: cudarc's cross-stream event tracking (an event record per
    // launch) would be measured as part of every mode's launch cost.
    // SAFETY: everything below runs on the one default stream.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.default_stream();
    let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(PTX)).unwrap();
    let mut w = Work {
        tiny: module.load_function("tiny").unwrap(),
        spin: module.load_function("spin").unwrap(),
        counter: stream.alloc_zeros::<i32>(256).unwrap(),
        stream,
        spin_cycles: 0,
    };
    // Calibrate the spin kernel to about 50 us of GPU time.
    w.spin_cycles = 100_000;
    w.run("spin", 20);
    let per = w.run("spin", 200) / 200.0;
    w.spin_cycles = (100_000.0 * 50e-6 / per) as u64;
    let per = w.run("spin", 200) / 200.0;
    println!("spin kernel calibrated: {} cycles, {:.1} us per launch (no profiler)", w.spin_cycles, per * 1e6);

    let workloads = [("tiny", 100_000usize), ("spin", 2_000usize)];
    let _ = w.run("tiny", 10_000);
    let mut results: Vec<(String, Vec<f64>)> = Vec::new();
    let mut record = |key: String, secs: f64| match results.iter_mut().find(|(k, _)| *k == key) {
        Some((_, v)) => v.push(secs),
        None => results.push((key, vec![secs])),
    };
    for (name, n) in workloads {
        for _ in 0..REPS {
            record(format!("{name} a"), w.run(name, n));
        }
    }
    let mut start_stop = Vec::new();
    for _ in 0..REPS {
        for (name, n) in workloads {
            raw_cupti(true);
            record(format!("{name} b"), w.run(name, n));
            raw_cupti(false);
            raw_cupti(true);
            raw_callbacks(true);
            record(format!("{name} b2"), w.run(name, n));
            raw_callbacks(false);
            raw_cupti(false);
            // Variants, to see what each part of gpuscope costs.
            let variants = [
                (
                    "c-kernels",
                    gpuscope::Profiler::new().memory_records(false).sync_records(false).launch_attribution(false),
                ),
                ("c-noattr", gpuscope::Profiler::new().launch_attribution(false)),
                ("c-nosync", gpuscope::Profiler::new().sync_records(false)),
            ];
            for (label, p) in variants {
                let s = p.start().expect("gpuscope starts");
                record(format!("{name} {label}"), w.run(name, n));
                drop(s);
            }
            let t = Instant::now();
            let s = gpuscope::Profiler::new().start().expect("gpuscope starts");
            let started = t.elapsed().as_secs_f64();
            record(format!("{name} c"), w.run(name, n));
            let t = Instant::now();
            let r = s.stop().expect("report");
            start_stop.push((started, t.elapsed().as_secs_f64()));
            let seen: u64 = r.kernels.iter().map(|k| k.stats.launches).sum();
            assert_eq!(seen, n as u64, "gpuscope saw every launch");
            assert!(r.drops.is_empty(), "{:?}", r.drops);
        }
    }
    for (name, n) in workloads {
        for _ in 0..REPS {
            record(format!("{name} a-after"), w.run(name, n));
        }
    }
    let get = |k: &str| median(results.iter().find(|(key, _)| key == k).unwrap().1.clone());
    println!();
    println!(
        "{:<26} {:>10} {:>10} {:>10} {:>10} {:>12} {:>9} {:>8}",
        "workload (median of 5)",
        "a: none",
        "b: CUPTI",
        "c: gpuscope",
        "a after",
        "c-a per launch",
        "(c-a)/(b-a)",
        "c/a"
    );
    for (name, n) in workloads {
        let (a, b, c, a2) = (
            get(&format!("{name} a")),
            get(&format!("{name} b")),
            get(&format!("{name} c")),
            get(&format!("{name} a-after")),
        );
        let label = if name == "tiny" { format!("{n} tiny launches") } else { format!("{n} x ~50 us kernels") };
        println!(
            "{:<26} {:>8.1}ms {:>8.1}ms {:>9.1}ms {:>8.1}ms {:>10.3} us {:>9.2} {:>8.3}",
            label,
            a * 1e3,
            b * 1e3,
            c * 1e3,
            a2 * 1e3,
            (c - a) / n as f64 * 1e6,
            (c - a) / (b - a),
            c / a
        );
        let b2 = get(&format!("{name} b2"));
        println!(
            "{:<26} per launch: b-a {:.3} us, b2-a {:.3} us (CUPTI + empty launch callback: {:.1}ms)",
            "",
            (b - a) / n as f64 * 1e6,
            (b2 - a) / n as f64 * 1e6,
            b2 * 1e3
        );
        for v in ["c-kernels", "c-noattr", "c-nosync"] {
            let x = get(&format!("{name} {v}"));
            println!("{:<26} {v}: {:.1}ms, {:.3} us per launch over a", "", x * 1e3, (x - a) / n as f64 * 1e6);
        }
    }
    let (st, sp): (Vec<f64>, Vec<f64>) = start_stop.into_iter().unzip();
    println!(
        "gpuscope session start {:.2} ms, stop (flush + report) {:.2} ms (medians)",
        median(st) * 1e3,
        median(sp) * 1e3
    );
}
