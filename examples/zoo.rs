//! The bottleneck zoo under gpuscope: one NVTX range per way a GPU program
//! is slow (see `bottlenecks.rs`), and what gpuscope says about each.
//!
//!     cargo run --release --example zoo [trace|metrics|tensor] [OUT_DIR]
//!
//! `trace` (default) decides host-, sync- and launch-bound ranges from the
//! timeline; `metrics` adds hardware counters (compute-, memory- and
//! latency-bound kernels); `tensor` also counts tensor-core FLOPs for the
//! hardware MFU (7 replay passes per measured launch). Prints the report,
//! then each range's verdict against the one expected, and writes
//! OUT_DIR/zoo-MODE.json.

#[path = "bottlenecks.rs"]
mod bottlenecks;

#[path = "device.rs"]
mod device;

use std::process::ExitCode;

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "trace".into());
    let out = std::path::PathBuf::from(std::env::args().nth(2).unwrap_or_else(|| ".".into()));
    let profiler = match mode.as_str() {
        "trace" => gpuscope::Profiler::new(),
        "metrics" => gpuscope::Profiler::new().metrics(gpuscope::MetricSet::default()),
        "tensor" => gpuscope::Profiler::new().metrics(gpuscope::MetricSet::default().with_tensor()),
        m if m.starts_with("sampling") => {
            // sampling[:US]: a PM sample every US microseconds.
            let ns = m.split_once(':').and_then(|(_, u)| u.parse::<u64>().ok()).map(|us| us * 1000);
            let ns = ns.unwrap_or(gpuscope::sampling::DEFAULT_INTERVAL_NS);
            gpuscope::Profiler::new().sampling(std::time::Duration::from_nanos(ns))
        }
        other => {
            eprintln!("zoo: mode {other:?}; allowed: trace, metrics, tensor, sampling[:US]");
            return ExitCode::from(2);
        }
    };
    let Some(ctx) = device::open("zoo") else { return ExitCode::FAILURE };
    let session = match profiler.keep_trace(100_000).start() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gpuscope: {e}");
            return ExitCode::FAILURE;
        }
    };
    let ran = match bottlenecks::run(&ctx, bottlenecks::Sizes::demo()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("zoo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let report = match session.stop() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gpuscope: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", report.to_table(100));
    let analysis = gpuscope::analysis::analyze(&report);
    let mut wrong = 0;
    println!("\nverdicts ({mode} mode):");
    for case in bottlenecks::CASES {
        let want = if mode == "trace" || mode.starts_with("sampling") { Some(case.trace) } else { case.metrics };
        let got =
            analysis.ranges.iter().find(|g| g.path == case.range).map_or("(no range)", |g| g.verdict.bound.as_str());
        let mark = match want {
            Some(w) if w == got => "ok",
            Some(_) => {
                wrong += 1;
                "WRONG"
            }
            None => "-",
        };
        println!("  {:<22} {:<16} expected {:<16} {mark}", case.range, got, want.unwrap_or("(timeline case)"));
    }
    // Hardware MFU of the GEMMs against FLOPs counted by hand, both over
    // the range's time without gpuscope's own measurements.
    let compute = analysis.ranges.iter().find(|g| g.path == "zoo/compute-bound");
    let peak = analysis.peaks.as_ref().and_then(|p| p.flops(gpuscope::analysis::peaks::TENSOR_BF16));
    if let (Some(g), Some(peak)) = (compute, peak) {
        let by_hand = ran.gemm_flops / (g.active_ns as f64 / 1e9 * peak) * 100.0;
        match g.hardware_mfu_pct {
            Some(hw) => println!("zoo/compute-bound: hardware MFU {hw:.1}%, by hand (2 n^3 per GEMM) {by_hand:.1}%"),
            None => println!("zoo/compute-bound: by hand (2 n^3 per GEMM) {by_hand:.1}% MFU; run with `tensor` for the hardware count"),
        }
    }
    let path = out.join(format!("zoo-{mode}.json"));
    if let Err(e) = report.write(&path, gpuscope::Format::Json) {
        eprintln!("gpuscope: {e}");
    }
    if wrong > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
