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

pub mod activity;
mod aggregate;
pub mod config;
mod cupti;
mod device;
mod error;
mod interval;
pub mod metrics;
pub mod occupancy;
mod ranges;
pub mod report;
mod session;

pub use aggregate::demangle;
pub use error::{Error, ErrorKind, Result};
pub use metrics::collector::MetricsStatus;
pub use metrics::{KernelMetrics, MetricSet, Selection};
pub use occupancy::{Limiter, Occupancy};
pub use ranges::{RangeFrame, RangePath};
pub use report::{Format, KernelRecord, Report};
pub use session::{Profiler, Session};

/// Routes NVTX events of this process into gpuscope's per-thread range
/// stacks now, before any session: for injection shims, whose NVTX tool is
/// attached when the program first calls NVTX. `Profiler::start` does this
/// too.
pub fn install_nvtx_handler() {
    ranges::install_handler();
}

/// CPU-only entry points for tests and tools: fold synthetic activity
/// buffers and host events into a report without CUPTI.
#[doc(hidden)]
pub mod testing {
    pub use crate::aggregate::HostEvent;
    use crate::aggregate::{AggregateOptions, Aggregator};
    use crate::device::DeviceTable;
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
            names.iter().fold(crate::ranges::ROOT, |p, n| crate::ranges::paths().intern(p, 0, n))
        }
        /// Applies a host event.
        pub fn host_event(&mut self, e: HostEvent) {
            self.0.host_event(e)
        }
        /// Folds a buffer of records laid out as CUPTI 13 writes them.
        pub fn buffer(&mut self, bytes: &[u8]) {
            self.0.buffer(&mut crate::activity::LayoutCursor::new(bytes))
        }
        /// The report.
        pub fn finish(self, start_ns: u64, end_ns: u64) -> Report {
            self.0.finish(start_ns, end_ns)
        }
    }
}
