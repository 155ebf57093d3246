//! The bottleneck zoo under a profiler, shared by the GPU test binaries
//! (tests/gpu.rs, and tests/sampling.rs in a process of its own).

#[path = "../examples/bottlenecks.rs"]
#[allow(dead_code)]
pub mod bottlenecks;

use gpuscope::{Profiler, Report};

/// The zoo under `profiler`: what it ran, the report and its analysis.
pub fn zoo(profiler: Profiler) -> (bottlenecks::Ran, Report, gpuscope::analysis::Analysis) {
    let ctx = cudarc::driver::CudaContext::new(0).expect("a CUDA device");
    let session = profiler.keep_trace(100_000).start().expect("profiler starts");
    let ran = bottlenecks::run(&ctx, bottlenecks::Sizes::demo()).expect("the zoo runs");
    let report = session.stop().expect("report");
    println!("{}", report.to_table(100));
    let analysis = gpuscope::analysis::analyze(&report);
    (ran, report, analysis)
}

pub fn verdict<'a>(a: &'a gpuscope::analysis::Analysis, range: &str) -> &'a gpuscope::analysis::RangeAnalysis {
    a.ranges.iter().find(|g| g.path == range).unwrap_or_else(|| panic!("range {range} in the report"))
}
