//! Rendering: the last stage. A report, with its analysis, as a terminal
//! table, JSON, CSV or a Chrome trace, and two reports side by side.

mod answer;
mod chrome;
mod compare;
mod csv;
mod diagnosis;
mod json;
mod merge;
pub mod openmetrics;
mod table;

pub use crate::model::units::fmt_ns;

use crate::error::{Error, ErrorKind, Result};
use crate::report::Report;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Terminal table.
    Table,
    /// JSON ([`Report`] as is).
    Json,
    /// Chrome trace event JSON (ui.perfetto.dev, chrome://tracing).
    ChromeTrace,
    /// CSV: one row per (NVTX path, kernel).
    Csv,
    /// OpenMetrics text (Prometheus): session, kernel and range counters.
    OpenMetrics,
}

impl Format {
    /// Every format, in the order of [`Format::NAMES`].
    pub const ALL: [Format; 5] = [Format::Table, Format::Json, Format::Csv, Format::ChromeTrace, Format::OpenMetrics];

    /// The names every interface accepts (the environment, the command
    /// line, Python; C's `GPUSCOPE_FORMAT_*` constants), in the order of
    /// [`Format::ALL`].
    pub const NAMES: [&'static str; 5] = ["table", "json", "csv", "chrome", "openmetrics"];
}

impl std::str::FromStr for Format {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match Format::NAMES.iter().position(|n| *n == s) {
            Some(i) => Ok(Format::ALL[i]),
            None => Err(Error::new(
                ErrorKind::InvalidConfig,
                format!("unknown report format {s:?}; allowed: {}", Format::NAMES.join(", ")),
            )),
        }
    }
}

/// Table widths are kept within these columns: a table narrower has no
/// room for its figures (its columns need 80), one wider is no easier to
/// read.
pub const TABLE_WIDTHS: std::ops::RangeInclusive<usize> = 80..=400;

fn clamp_width(width: usize) -> usize {
    width.clamp(*TABLE_WIDTHS.start(), *TABLE_WIDTHS.end())
}

impl crate::analysis::job::JobAnswer {
    /// The job's answer as text: the step, what sets its pace, each rank's
    /// compute, exposed communication, wait and host time per step, and
    /// the actions; at most `width` columns (kept within
    /// [`TABLE_WIDTHS`]).
    pub fn to_table(&self, width: usize) -> String {
        merge::render_answer(self, clamp_width(width))
    }
}

impl crate::report::JobReport {
    /// The job table: each rank's session and kernel time, then per range
    /// the wall time per call of every rank (or the fastest, median and
    /// slowest of more than four) and the slowest rank; at most `width`
    /// columns (kept within [`TABLE_WIDTHS`]).
    pub fn to_table(&self, width: usize) -> String {
        merge::render(self, clamp_width(width))
    }

    /// The job as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The job as JSON, with its answer (`answer`) where there is one.
    pub fn to_json_with(&self, answer: Option<&crate::analysis::job::JobAnswer>) -> String {
        json::text(|out| json::write_job(self, answer, out))
    }
}

impl Report {
    /// The report as JSON, with its analysis: `findings`, `peaks` and
    /// `analysis_notes` at the top, an `analysis` object in each range and
    /// heavy kernel. [`Report::from_json`] reads it back (ignoring them).
    pub fn to_json(&self) -> String {
        json::render(self, self.analysis())
    }

    /// The terminal table with the analysis, ending with the findings, at
    /// most `width` columns wide (kept within [`TABLE_WIDTHS`]).
    pub fn to_table(&self, width: usize) -> String {
        table::render(self, self.analysis(), clamp_width(width))
    }

    /// This report against a later one (`after`): per NVTX path and kernel,
    /// GPU time before and after with the change, SM efficiency and
    /// occupancy after with their change; at most `width` columns (kept within
    /// [`TABLE_WIDTHS`]).
    pub fn compare(&self, after: &Report, width: usize) -> String {
        compare::render(self, after, clamp_width(width))
    }

    /// A Chrome trace (JSON object format). Needs a trace
    /// (`gpuscope::Profiler::keep_trace`); without one, ranges and kernels are
    /// absent and the trace says so in its metadata.
    pub fn to_chrome_trace(&self) -> String {
        chrome::render(self, self.analysis())
    }

    /// CSV, one row per (NVTX path, kernel name), most GPU time first within
    /// a path; fields quoted where needed.
    pub fn to_csv(&self) -> String {
        csv::render(self)
    }

    /// OpenMetrics text, as Prometheus scrapes it: per kernel launches and
    /// GPU seconds, per NVTX range path calls, wall and GPU-busy seconds,
    /// launches, utilisation, SM efficiency and occupancy (labelled
    /// `source="measured"` or `"sampled"`) and MFU where known, the
    /// session's length and drop counters. Ratios are 0 to 1.
    pub fn to_openmetrics(&self) -> String {
        openmetrics::render(self, self.analysis(), &[])
    }

    /// [`Report::to_openmetrics`] with `labels` on every series (e.g.
    /// `("rank", "3")`), plus `gpu` with the ids of the devices that ran
    /// kernels ("0", "0,1") once there are any.
    pub fn to_openmetrics_labelled(&self, labels: &[(String, String)]) -> String {
        let mut all = labels.to_vec();
        if !self.devices.is_empty() {
            let ids: Vec<String> = self.devices.iter().map(|d| d.id.to_string()).collect();
            all.push(("gpu".to_string(), ids.join(",")));
        }
        openmetrics::render(self, self.analysis(), &all)
    }

    /// Renders in `format`.
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Table => self.to_table(100),
            Format::Json => self.to_json(),
            Format::ChromeTrace => self.to_chrome_trace(),
            Format::Csv => self.to_csv(),
            Format::OpenMetrics => self.to_openmetrics(),
        }
    }

    /// Writes the report to `path` in `format`. A new file is written whole
    /// or not at all: the report goes to a temporary file beside it,
    /// renamed once complete, so a full disk leaves no half report. An
    /// existing file (or a link, a pipe, `/dev/stdout`) is written in
    /// place, keeping its owner, mode and links.
    pub fn write(&self, path: impl AsRef<std::path::Path>, format: Format) -> Result<()> {
        use std::io::Write;
        let path = path.as_ref();
        let failed = |e: &dyn std::fmt::Display| {
            Error::new(ErrorKind::Io, format!("cannot write report to {}: {e}", path.display()))
        };
        // Before the file is touched: seconds for a report of many ranges.
        let analysis = self.analysis();
        let write_to = |file: std::fs::File| -> std::io::Result<()> {
            let mut out = std::io::BufWriter::new(file);
            match format {
                // Straight to the file: a report of many ranges is GBs of JSON.
                Format::Json => json::write(self, analysis, &mut out)?,
                _ => out.write_all(self.render(format).as_bytes())?,
            }
            out.into_inner().map(drop).map_err(|e| e.into_error())
        };
        let new = std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
        let name = path.file_name().filter(|_| !path.as_os_str().to_string_lossy().ends_with('/'));
        let Some(name) = name.filter(|_| new) else {
            return std::fs::File::create(path).and_then(write_to).map_err(|e| failed(&e));
        };
        // A name of this process's and this moment's, never another's file.
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let tmp = path.with_file_name(format!(".{}.{}-{nanos}.tmp", name.to_string_lossy(), std::process::id()));
        let file = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp).map_err(|e| failed(&e))?;
        write_to(file).and_then(|()| std::fs::rename(&tmp, path)).map_err(|e| {
            // Ours: made above with create_new.
            let _ = std::fs::remove_file(&tmp);
            failed(&e)
        })
    }
}
