//! gpuscope: an in-process GPU profiler.
//!
//! Start a session, run your CUDA work inside NVTX ranges, stop, and read
//! every kernel back: its GPU time, launch configuration and theoretical
//! occupancy, attributed to the NVTX ranges open when it was launched.
//!
//! ```no_run
//! // Without a GPU, CUDA or CUPTI, `start` says why and the program runs on.
//! let session = gpuscope::Profiler::new().keep_trace(100_000).start().map_err(|e| eprintln!("gpuscope: {e}")).ok();
//! {
//!     let _step = gpuscope::nvtx::push("train step");
//!     // ... launch kernels ...
//! }
//! if let Some(session) = session {
//!     let report = session.stop()?;
//!     println!("{}", report.to_table(100));
//! }
//! # Ok::<(), gpuscope::Error>(())
//! ```
//!
//! When CUDA, CUPTI or the driver is missing, [`Profiler::start`] returns
//! an [`Error`] that says what and where it looked; the program carries on
//! unprofiled, as above.

#![warn(missing_docs)]

// The pipeline: collect -> decode -> attribute -> aggregate, then the
// report crate's report -> analysis -> render (`gpuscope-report`), run by
// the session and configured from the environment by config. Each stage
// imports only the stages before it (and `error` and `model`, the data they
// share); `tests/architecture.rs` checks it.
/// A module for gpuscope's own command, C library, fuzz targets and tests:
/// public with the `internal` feature (no stability promise), private to
/// the crate without it.
macro_rules! internal_mod {
    ($(#[$attr:meta])* mod $name:ident $($body:tt)*) => {
        $(#[$attr])*
        #[cfg(feature = "internal")]
        pub mod $name $($body)*
        $(#[$attr])*
        #[cfg(not(feature = "internal"))]
        #[allow(dead_code, unused_imports)]
        pub(crate) mod $name $($body)*
    };
}

mod aggregate;
pub use gpuscope_report::analysis;
mod attribute;
mod collect;
internal_mod! { mod config; }
internal_mod! { mod control; }
mod decode;
internal_mod! { mod integration; }
/// gpuscope's error type: the report crate's, so that one type says what
/// failed whether profiling or reading a report did.
mod error {
    pub use gpuscope_report::{Error, ErrorKind, Result};
}
mod model;
mod sorted_deque;
use gpuscope_report::render;
pub use gpuscope_report::report;
#[cfg(test)]
mod report_tests;
mod serve;
mod session;

/// NVTX ranges (the `gpuscope-nvtx` crate): `gpuscope::nvtx::push("step")`.
pub use gpuscope_nvtx as nvtx;

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

internal_mod! { mod activity; }

pub use collect::driver::NO_DRIVER;

/// Whether the NVIDIA driver library (libcuda) loads in this process:
/// without it there is no GPU to profile.
pub fn driver_present() -> bool {
    collect::driver::driver().is_some()
}

internal_mod! { mod testing; }
