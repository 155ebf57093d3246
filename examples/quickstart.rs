//! gpuscope's main demo: a real CUDA program (driver API through cudarc,
//! kernels as PTX) in nested NVTX ranges, profiled in-process.
//!
//!     cargo run --release --example quickstart [OUT_DIR]
//!
//! Prints the report, and writes OUT_DIR/quickstart.json and
//! OUT_DIR/quickstart.chrome.json (open it in ui.perfetto.dev).

#[path = "workload.rs"]
mod workload;

#[path = "device.rs"]
mod device;

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(ctx) = device::open("quickstart") else { return ExitCode::FAILURE };
    let out = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));

    let session = match gpuscope::Profiler::new().keep_trace(200_000).start() {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("gpuscope: {e}\ngpuscope: running the workload without profiling");
            None
        }
    };
    let t = std::time::Instant::now();
    if let Err(e) = workload::run(&ctx, workload::Sizes::demo()) {
        eprintln!("quickstart: CUDA error: {e}");
        return ExitCode::FAILURE;
    }
    let wall = t.elapsed();
    let Some(session) = session else { return ExitCode::FAILURE };
    let report = match session.stop() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gpuscope: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", report.to_table(100));
    println!("workload wall time: {:.1} ms", wall.as_secs_f64() * 1e3);
    for (name, format) in
        [("quickstart.json", gpuscope::Format::Json), ("quickstart.chrome.json", gpuscope::Format::ChromeTrace)]
    {
        let path = out.join(name);
        match report.write(&path, format) {
            Ok(()) => println!("wrote {}", path.display()),
            Err(e) => eprintln!("gpuscope: {e}"),
        }
    }
    ExitCode::SUCCESS
}
