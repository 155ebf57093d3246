//! Stress: 10 million kernel launches from 64 threads, each pushing NVTX
//! ranges around its launches and many empty ones, under one trace-mode
//! session. Checks that memory stops growing once gpuscope's bounds are
//! reached and that every launch and range is in the report or counted as
//! dropped. A test binary of its own (one session per process at a time).
//!
//! `STRESS_LAUNCHES` (default 10000000) and `STRESS_THREADS` (default 64)
//! size it, `STRESS_MAX_BUFFERS` sets `Profiler::max_buffers` (default:
//! gpuscope's); it prints the figures for the closing note.
//!
//! On the H100 (2026-11-23) it first failed: CUPTI 13 fills an activity
//! buffer per launching thread by default, so 64 threads held the whole
//! pool and 97% of the records were dropped (counted). gpuscope now asks
//! for shared buffers and keeps up to 64. The decoder thread is near its
//! limit at this rate (~600 k launches/s): when it runs behind, the
//! activity buffers fill towards their bound (max_buffers x buffer_size),
//! and once they are full CUPTI drops records, which the report counts. So
//! memory is checked as two parts: the activity buffers against their bound,
//! and everything else for flatness after half the launches. Three runs on
//! the H100 passed that way, one with the buffers at 248 of 256 MB at the
//! end (RSS +161 MB after half, +41 MB besides the buffers).
//! `examples/decoder_throughput.rs` replays this load on the CPU to measure
//! the decoder alone.

mod rss;
use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use gpuscope::Profiler;
use rss::rss_mb;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PTX: &str = include_str!("../examples/kernels/kernels.ptx");
/// Launches per "batch" range.
const BATCH: u64 = 50;
/// Empty ranges pushed and popped per batch.
const TICKS: u64 = 10;
/// Records of other kinds than kernels a launching thread makes, at most.
const OTHER_RECORDS: u64 = 8;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn ten_million_launches_from_64_threads_with_nvtx_ranges_lose_nothing_uncounted_in_flat_memory() {
    let (launches, threads) = (env("STRESS_LAUNCHES", 10_000_000), env("STRESS_THREADS", 64));
    let batches_per_thread = launches / threads / BATCH;
    let launched_total = batches_per_thread * BATCH * threads;
    let ctx = CudaContext::new(0).expect("a CUDA device");
    // SAFETY: each thread's buffer is used only on that thread's stream.
    unsafe { ctx.disable_event_tracking() };
    let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(PTX)).expect("kernels load");
    let tiny = module.load_function("tiny").expect("tiny");

    let mut profiler = Profiler::new();
    if let Some(n) = std::env::var("STRESS_MAX_BUFFERS").ok().filter(|n| !n.is_empty()) {
        profiler = profiler.max_buffers(n.parse().expect("STRESS_MAX_BUFFERS: a number"));
    }
    let session = profiler.start().expect("profiler starts");
    let mb = |bytes: u64| bytes as f64 / (1u64 << 20) as f64;
    let pool_cap_mb = mb(session.activity_buffers().bound_bytes);
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    // (launches done, RSS MB, MB of activity buffers), every 100 ms.
    let rss = Mutex::new(Vec::new());
    let (secs, pool_max_mb) = std::thread::scope(|scope| {
        let monitor = scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let pool = mb(session.activity_buffers().bytes);
                rss.lock().unwrap().push((done.load(Ordering::Relaxed), rss_mb(), pool));
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let t0 = Instant::now();
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (ctx, tiny, done) = (ctx.clone(), tiny.clone(), done.clone());
                std::thread::spawn(move || {
                    ctx.bind_to_thread().expect("context on this thread");
                    let stream = ctx.new_stream().expect("a stream");
                    let mut counter = stream.alloc_zeros::<i32>(1).expect("a buffer");
                    let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
                    let _root = gpuscope_nvtx::push("stress");
                    for _ in 0..batches_per_thread {
                        let _batch = gpuscope_nvtx::push("batch");
                        for _ in 0..TICKS {
                            let _tick = gpuscope_nvtx::push("tick");
                        }
                        for _ in 0..BATCH {
                            let mut l = stream.launch_builder(&tiny);
                            l.arg(&mut counter);
                            // SAFETY: tiny(int*), a buffer of this stream.
                            unsafe { l.launch(cfg) }.expect("launch");
                        }
                        done.fetch_add(BATCH, Ordering::Relaxed);
                    }
                    stream.synchronize().expect("stream finishes");
                })
            })
            .collect();
        for w in workers {
            w.join().expect("a worker panicked");
        }
        let secs = t0.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        monitor.join().unwrap();
        (secs, rss.lock().unwrap().iter().map(|x| x.2).fold(0.0, f64::max))
    });
    let r = session.stop().expect("report");

    let rss = rss.into_inner().unwrap();
    let sample = |share: f64| {
        rss.iter()
            .find(|(n, _, _)| *n as f64 >= share * launched_total as f64)
            .or(rss.last())
            .copied()
            .unwrap_or_default()
    };
    let (quarter, half, three_quarters, end) =
        (sample(0.25), sample(0.5), sample(0.75), rss.last().copied().unwrap_or_default());
    let max = rss.iter().map(|x| x.1).fold(0.0, f64::max);
    let in_report: u64 = r.kernels.iter().map(|k| k.stats.launches).sum();
    let d = &r.drops;
    let count = |p: &str| r.ranges.iter().find(|g| g.path.to_string() == p).map_or(0, |g| g.count);
    println!(
        "stress: {launched_total} launches from {threads} threads in {secs:.1} s ({:.0}/s); in the report {in_report}; \
         drops {d:?}",
        launched_total as f64 / secs
    );
    let shown = |x: (u64, f64, f64)| format!("{:.0} ({:.0} in activity buffers)", x.1, x.2);
    println!(
        "stress: RSS MB {} at start, {} at 25% of launches, {} at 50%, {} at 75%, {} at the end, max {max:.0}; \
         activity buffers at most {pool_max_mb:.0} MB of {pool_cap_mb:.0}",
        shown(rss.first().copied().unwrap_or_default()),
        shown(quarter),
        shown(half),
        shown(three_quarters),
        shown(end)
    );
    println!(
        "stress: ranges stress {} batch {} tick {} (expected {threads}, {}, {})",
        count("stress"),
        count("stress/batch"),
        count("stress/batch/tick"),
        batches_per_thread * threads,
        batches_per_thread * threads * TICKS
    );

    // Every launch is in the report or counted as lost. CUPTI's count of
    // dropped records takes every kind: each thread's buffer (its
    // allocation, memset and free) and its stream's synchronisation make a
    // few records besides the kernels, which may be among those dropped
    // (so when CUPTI dropped any, up to that many kernels lost uncounted
    // would go unseen; with nothing dropped the check is exact).
    let accounted = in_report + d.cupti_records + d.undecodable_records;
    assert!(in_report <= launched_total, "{in_report} kernels in the report of {launched_total} launched");
    assert!(
        (launched_total..=launched_total + OTHER_RECORDS * threads).contains(&accounted),
        "{accounted} kernels in the report or dropped, of {launched_total} launched: {d:?}"
    );
    // Every kernel kept is under its range: launches wait for their records
    // however far the decoder runs behind.
    assert_eq!(d.unattributed_kernels, 0, "{d:?}");
    // Every range is counted (evicted ones are summarised early, still
    // counted), unless host events were dropped, which the report says.
    let ranges_ok = count("stress/batch") == batches_per_thread * threads
        && count("stress/batch/tick") == batches_per_thread * threads * TICKS
        && count("stress") == threads;
    assert!(ranges_ok || d.host_events > 0, "ranges short with no host events dropped: {d:?}");
    assert_eq!(d.unbalanced_pops, 0);
    // Bounded: the activity buffers stay within max_buffers x buffer_size
    // (a decoder running behind fills them, and CUPTI's drops are counted
    // above), and the rest of the memory is flat after the first half but
    // for what waits on the records still in those buffers: each launch
    // there holds its join (attribution and idle-timeline entries, its
    // range), capped too, about as many bytes as its 216-byte record. So
    // over the second half the rest grows by less than 64 MB plus the
    // buffers' own growth. (A decoder falling further behind over the run
    // grew both on the H100: +148 MB of buffers, +158 MB besides.)
    assert!(pool_max_mb <= pool_cap_mb, "activity buffers {pool_max_mb:.0} MB over their bound {pool_cap_mb:.0} MB");
    let (rest_half, rest_end) = (half.1 - half.2, end.1 - end.2);
    let backlog = (end.2 - half.2).max(0.0);
    assert!(
        rest_end - rest_half < 64.0 + backlog,
        "RSS besides activity buffers grew from {rest_half:.0} MB at half the launches to {rest_end:.0} MB, with \
         {backlog:.0} MB more records waiting in the buffers"
    );
}
