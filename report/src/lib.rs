//! gpuscope's reports, without the profiler: the report a session writes
//! ([`Report`]), reading it back from JSON, its analysis (verdicts,
//! findings, MFU, the answer), its renderings ([`Format`]: table, JSON,
//! CSV, Chrome trace, OpenMetrics), the comparison of two reports and the
//! merge of several ranks' reports into one job.
//!
//! No CUPTI, no driver, no global state: the crate reads and writes report
//! files and nothing else. The profiler (`gpuscope`) builds reports with it
//! and re-exports what its users need.
//!
//! ```no_run
//! let text = std::fs::read_to_string("gpuscope-report.json")?;
//! let report = gpuscope_report::Report::from_json(&text)?;
//! println!("{}", report.to_table(120));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

// The stages a report goes through: model (the data the stages share) ->
// aggregated (what the runtime's aggregation hands over) -> report ->
// analysis -> render. Each names only the stages before it (and `error`);
// `tests/architecture.rs` checks it.
/// A module for gpuscope's own runtime tests, command and schema checks:
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

#[doc(hidden)]
pub mod aggregated;
pub mod analysis;
mod error;
#[doc(hidden)]
pub mod model;
#[doc(hidden)]
pub mod render;
pub mod report;

pub use error::{Error, ErrorKind, Result};
pub use model::names::demangle;
pub use model::path::{RangeFrame, RangePath};
pub use render::{Format, TABLE_WIDTHS};
pub use report::{KernelRecord, Report};
