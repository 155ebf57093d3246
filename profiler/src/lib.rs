//! gpuscope: an in-process GPU profiler.
//!
//! Start a session, run your CUDA work inside NVTX ranges, stop, and read
//! every kernel back: its GPU time, launch configuration and theoretical
//! occupancy, attributed to the NVTX ranges open when it was launched.
//!
//! ```no_run
//! let session = gpuscope::Profiler::new().keep_trace(100_000).start()?;
//! {
//!     let _step = nvtx_rs::push("train step");
//!     // ... launch kernels ...
//! }
//! let report = session.stop()?;
//! println!("{}", report.to_table(100));
//! # Ok::<(), gpuscope::Error>(())
//! ```
//!
//! When CUDA, CUPTI or the driver is missing, [`Profiler::start`] returns
//! an [`Error`] that says what and where it looked; the program can carry on
//! unprofiled.

#![warn(missing_docs)]

// The pipeline: collect -> decode -> attribute -> aggregate -> report ->
// analysis -> render, run by the session and configured from the
// environment by config. Each stage imports only the stages before it (and
// `error` and `model`, the data they share); `tests/architecture.rs` checks
// it.
mod aggregate;
pub mod analysis;
mod attribute;
mod collect;
pub mod config;
mod decode;
mod error;
mod model;
mod render;
pub mod report;
mod serve;
mod session;

pub use collect::declare::{declare_flops, declare_work};
pub use error::{Error, ErrorKind, Result};
pub use model::names::demangle;
pub use model::path::{RangeFrame, RangePath, FOLD_AFTER, MAX_PATHS};
pub use render::{Format, TABLE_WIDTHS};
pub use report::{KernelRecord, Report};
pub use session::{ActivityBuffers, Profiler, Session, StopError};

/// Hardware metrics: which to collect, on which launches, and what one
/// launch measured.
pub mod metrics {
    pub use crate::collect::metrics::{MetricSet, Selection};
    pub use crate::model::metrics::{
        KernelMetrics, MetricsStatus, PhaseTimes, ACHIEVED_OCCUPANCY, DURATION, SM_CYCLES_ELAPSED, SM_EFFICIENCY,
    };
}
pub use metrics::{KernelMetrics, MetricSet, MetricsStatus, Selection};

/// Sampling mode's settings and figures.
pub mod sampling {
    pub use crate::collect::sampling::{
        default_interval_ns, ALWAYS_ON_INTERVAL_NS, DEFAULT_INTERVAL_NS, INTERVALS_NS, MIN_KERNEL_SAMPLES,
        TRACE_WINDOWS_NS,
    };
    pub use crate::model::sampled::{SampledFigures, SamplingStatus, TraceWindows, SAMPLED_METRICS};
}

/// Theoretical occupancy: the calculator and its types.
pub mod occupancy {
    pub use crate::aggregate::occupancy::{theoretical, LaunchShape};
    pub use crate::model::occupancy::{Limiter, Occupancy, SmLimits};
}
pub use occupancy::{Limiter, Occupancy};

/// CUPTI activity records as gpuscope decodes them.
pub mod activity {
    pub use crate::decode::{
        decode, record_size, Activity, DecodeError, KernelActivity, LayoutCursor, MemcpyActivity, MemsetActivity,
        RecordCursor, SyncActivity,
    };
}

/// Routes NVTX events of this process into gpuscope's per-thread range
/// stacks now, before any session: for injection shims, whose NVTX tool is
/// attached when the program first calls NVTX. `Profiler::start` does this
/// too.
pub fn install_nvtx_handler() {
    collect::nvtx::install_handler();
}

/// Whether the NVIDIA driver library (libcuda) loads in this process:
/// without it there is no GPU to profile.
pub fn driver_present() -> bool {
    collect::driver::driver().is_some()
}

/// CPU-only entry points for tests and tools: fold synthetic activity
/// buffers and host events into a report without CUPTI.
#[doc(hidden)]
pub mod testing {
    use crate::aggregate::devices::DeviceTable;
    use crate::aggregate::{AggregateOptions, Aggregator};
    pub use crate::model::event::HostEvent;
    use crate::report::{DeviceInfo, Report};

    /// An aggregator over fixed devices.
    pub struct Replay(Aggregator);

    impl Replay {
        /// `trace_cap` 0 keeps no per-kernel records.
        pub fn new(devices: Vec<DeviceInfo>, trace_cap: usize) -> Self {
            Self::with_metrics(devices, trace_cap, &[])
        }
        /// In metrics mode: `KernelMetrics` values are of `metrics`.
        pub fn with_metrics(devices: Vec<DeviceInfo>, trace_cap: usize, metrics: &[String]) -> Self {
            let opts = AggregateOptions { trace_cap, metric_names: metrics.to_vec(), ..Default::default() };
            Replay(Aggregator::new(opts, DeviceTable::fixed(devices)))
        }
        /// Interns an NVTX path (default domain), for host events.
        pub fn path(&self, names: &[&str]) -> u32 {
            use crate::model::path::{paths, ROOT};
            names.iter().fold(ROOT, |p, n| paths().intern(p, 0, n))
        }
        /// Applies a host event.
        pub fn host_event(&mut self, e: HostEvent) {
            self.0.host_event(e)
        }
        /// Folds a buffer of records laid out as CUPTI 13 writes them.
        pub fn buffer(&mut self, bytes: &[u8]) {
            self.0.buffer(&mut crate::decode::LayoutCursor::new(bytes))
        }
        /// The report.
        pub fn finish(self, start_ns: u64, end_ns: u64) -> Report {
            Report::build(self.0.finish(end_ns), start_ns, end_ns)
        }
    }
}
