//! How long analysis and each format take for a report of many ranges: a
//! program whose range names carry a number (`layer 17`, a request id)
//! can have hundreds of thousands of distinct paths, and `gpuscope report`
//! reads any report file it is given.
//!
//!     cargo run --release -p gpuscope --example analysis_scale
//!
//! `RANGES` (default 1000000) sets the number of distinct range paths: a
//! replayed step (host gap, two kernels, a nested `forward`) is copied
//! under `phase N/step` until there are that many, each with its kernels.
//! `STAGES=json,csv` times only those formats after the first table;
//! `read` (only when named) times reading the JSON back.
//! Prints the seconds each stage takes; exits non-zero when the first
//! table (analysis included) takes longer than `LIMIT_S` (default 2).

#[path = "../tests/records/mod.rs"]
mod records;
#[path = "../tests/rss/mod.rs"]
mod rss;
use gpuscope::testing::{HostEvent, Replay};
use gpuscope::RangeFrame;
use records::*;
use std::time::Instant;

fn main() {
    let env = |name: &str, default: f64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let n = env("RANGES", 1_000_000.0) as usize;
    let limit = env("LIMIT_S", 2.0);
    let base = base_report();
    let t = Instant::now();
    let mut r = base.clone();
    r.ranges.clear();
    r.path_kernels.clear();
    let per = base.ranges.len().max(1);
    'out: for i in 0.. {
        let phase = RangeFrame { domain: None, name: format!("phase {i}") };
        for g in &base.ranges {
            if r.ranges.len() >= n {
                break 'out;
            }
            let mut g = g.clone();
            g.path.frames.insert(0, phase.clone());
            r.ranges.push(g);
        }
        for k in &base.path_kernels {
            let mut k = k.clone();
            k.path.frames.insert(0, phase.clone());
            r.path_kernels.push(k);
        }
    }
    println!(
        "analysis_scale: {} ranges ({per} per phase), {} (path, kernel) rows, built in {:.2} s, RSS {:.0} MB",
        r.ranges.len(),
        r.path_kernels.len(),
        t.elapsed().as_secs_f64(),
        rss::rss_mb()
    );
    let stages = std::env::var("STAGES").unwrap_or_default();
    let time = |what: &str, f: &dyn Fn() -> usize| {
        if !stages.is_empty() && !what.starts_with("table") && !stages.split(',').any(|s| what.starts_with(s)) {
            return 0.0;
        }
        let (t, cpu) = (Instant::now(), cpu_s());
        let bytes = f();
        let (s, cpu) = (t.elapsed().as_secs_f64(), cpu_s() - cpu);
        println!("analysis_scale: {what:<24} {s:>7.2} s  (CPU {cpu:.2} s, {:.1} MB)", bytes as f64 / 1e6);
        s
    };
    if stages.contains("analyze") {
        time("analyze alone", &|| gpuscope::analysis::analyze(&r).findings.len());
    }
    let first = time("table (analysis)", &|| r.to_table(120).len());
    time("table again", &|| r.to_table(120).len());
    time("json", &|| r.to_json().len());
    if stages.split(',').any(|s| s == "read") {
        let json = r.to_json();
        time("read (the JSON back)", &|| gpuscope::Report::from_json(&json).map_or(0, |_| json.len()));
    }
    time("chrome trace", &|| r.to_chrome_trace().len());
    time("openmetrics", &|| r.to_openmetrics().len());
    time("csv", &|| r.to_csv().len());
    let findings = r.analysis().findings.len();
    println!("analysis_scale: {findings} findings, RSS {:.0} MB", rss::rss_mb());
    if first > limit {
        eprintln!("analysis_scale: the first table took {first:.2} s, over the {limit} s limit");
        std::process::exit(1);
    }
}

/// One traced step: host work before the first launch, two kernels, a
/// nested `forward`; its ranges get idle findings of their own.
fn base_report() -> gpuscope::Report {
    let mut rp = Replay::new(vec![h200()], 0);
    let step = rp.path(&["step"]);
    let fwd = rp.path(&["step", "forward"]);
    let mut buf = Vec::new();
    let mut ts = 1_000_000u64;
    let mut corr = 1u32;
    let mut inst = 1u64;
    for _ in 0..4 {
        let (si, fi) = (inst, inst + 1);
        inst += 2;
        rp.host_event(HostEvent::Push { instance: si, parent: 0, path: step, tid: 1, ts });
        rp.host_event(HostEvent::Push { instance: fi, parent: si, path: fwd, tid: 1, ts });
        // 2 ms of host work, then two launches back to back.
        ts += 2_000_000;
        for name in [c"gemm", c"softmax"] {
            let launch = HostEvent::Launch {
                correlation_id: corr,
                tid: 1,
                path: fwd,
                instance: fi,
                graph: false,
                profiled: false,
                inherited: false,
                ts,
                cost_ns: 2_000,
                prev_call_ns: 0,
            };
            rp.host_event(launch);
            let k =
                K { name, corr, start: ts + 5_000, end: ts + 505_000, block: 256, regs: 32, dyn_smem: 0, stream: 7 };
            buf.extend(kernel(&k));
            corr += 1;
            ts += 500_000;
        }
        rp.host_event(HostEvent::Pop { instance: fi, ts });
        ts += 10_000;
        rp.host_event(HostEvent::Pop { instance: si, ts });
    }
    rp.buffer(&buf);
    rp.finish(0, ts + 1_000_000)
}

/// This thread's CPU time, s: on a loaded machine, wall time overstates.
fn cpu_s() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer for clock_gettime.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}
