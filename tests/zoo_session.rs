//! The bottleneck zoo under a profiler, shared by the GPU test binaries
//! (tests/gpu.rs, and tests/sampling.rs in a process of its own).

#[path = "../examples/bottlenecks.rs"]
#[allow(dead_code)]
pub mod bottlenecks;

use gpuscope::{Profiler, Report};

/// The zoo under `profiler`: what it ran, the report and its analysis.
pub fn zoo(profiler: Profiler) -> (bottlenecks::Ran, Report, gpuscope::analysis::Analysis) {
    zoo_when(profiler, &|_| true)
}

/// The zoo under `profiler`, run once `ready` says the session is (polled
/// every 20 ms, for up to 30 s).
#[allow(dead_code)] // tests/sampling.rs's
pub fn zoo_when(
    profiler: Profiler,
    ready: &dyn Fn(&gpuscope::Session) -> bool,
) -> (bottlenecks::Ran, Report, gpuscope::analysis::Analysis) {
    let ctx = cudarc::driver::CudaContext::new(0).expect("a CUDA device");
    let t0 = std::time::Instant::now();
    let session = profiler.keep_trace(100_000).start().expect("profiler starts");
    while !ready(&session) {
        assert!(t0.elapsed() < std::time::Duration::from_secs(30), "the session was not ready in 30 s");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let began = t0.elapsed();
    let ran = bottlenecks::run(&ctx, bottlenecks::Sizes::demo()).expect("the zoo runs");
    let ran_to = t0.elapsed();
    let report = session.stop().expect("report");
    // When each part ran, to read a GPUSCOPE_DEBUG=1 log against.
    eprintln!("zoo: session started and ready in {began:?}, the zoo ran to {ran_to:?}, stopped at {:?}", t0.elapsed());
    println!("{}", report.to_table(100));
    let analysis = gpuscope::analysis::analyze(&report);
    (ran, report, analysis)
}

pub fn verdict<'a>(a: &'a gpuscope::analysis::Analysis, range: &str) -> &'a gpuscope::analysis::RangeAnalysis {
    a.ranges.iter().find(|g| g.path == range).unwrap_or_else(|| panic!("range {range} in the report"))
}
