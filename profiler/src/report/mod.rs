//! The session's result: per-kernel and per-range statistics, the optional
//! per-kernel trace, and what was dropped. Serialises to JSON (serde) and
//! renders as a terminal table or a Chrome trace.

mod chrome;
mod compare;
mod table;

pub use table::fmt_ns;

use crate::occupancy::{Limiter, Occupancy};
use crate::ranges::RangePath;
use serde::{Deserialize, Serialize};

/// Version of the JSON layout; bumped when a field changes meaning.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything a session measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// [`SCHEMA_VERSION`] of this report.
    pub schema_version: u32,
    /// gpuscope's version.
    pub gpuscope_version: String,
    /// "trace".
    pub mode: String,
    /// Session start, ns on CUPTI's clock.
    pub start_ns: u64,
    /// Session end, ns.
    pub end_ns: u64,
    /// Devices that ran kernels.
    pub devices: Vec<DeviceInfo>,
    /// Per kernel name, most GPU time first.
    pub kernels: Vec<KernelSummary>,
    /// Per NVTX push/pop path, in tree order.
    pub ranges: Vec<RangeSummary>,
    /// Per (NVTX path, kernel name): kernels launched directly under a path.
    pub path_kernels: Vec<PathKernelSummary>,
    /// Start/end ranges (may cross threads), per name.
    pub start_end_ranges: Vec<RangeSummary>,
    /// Copies and sets.
    pub memory: MemorySummary,
    /// Records and events that did not make it into the report.
    pub drops: Drops,
    /// Names given to threads with NVTX.
    pub thread_names: Vec<ThreadName>,
    /// Kernels CUPTI launched for its own measurements (metrics mode), left
    /// out of every other statistic.
    #[serde(default)]
    pub profiler_kernels: u64,
    /// Their GPU time, ns.
    #[serde(default)]
    pub profiler_kernel_ns: u64,
    /// How hardware-metric collection went (metrics mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<crate::metrics::collector::MetricsStatus>,
    /// Per-kernel records, when the session kept a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Trace>,
}

/// A GPU.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceInfo {
    /// Ordinal.
    pub id: u32,
    /// Marketing name.
    pub name: String,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// SM limits used for occupancy.
    pub limits: crate::occupancy::SmLimits,
}

/// Statistics of a set of kernel launches.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelStats {
    /// Launches.
    pub launches: u64,
    /// Sum of durations, ns.
    pub total_ns: u64,
    /// Mean duration, ns.
    pub mean_ns: u64,
    /// Shortest, ns.
    pub min_ns: u64,
    /// Longest, ns.
    pub max_ns: u64,
    /// Theoretical occupancy, %, weighted by GPU time.
    pub theoretical_occupancy_pct: Option<f64>,
    /// The limiter of most of the GPU time.
    pub occupancy_limiter: Option<Limiter>,
    /// Launches measured with hardware counters (metrics mode).
    #[serde(default)]
    pub profiled_launches: u64,
    /// Achieved occupancy of the profiled launches, %, weighted by GPU time.
    #[serde(default)]
    pub achieved_occupancy_pct: Option<f64>,
    /// SM efficiency of the profiled launches, %, weighted by GPU time.
    #[serde(default)]
    pub sm_efficiency_pct: Option<f64>,
}

/// One kernel name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelSummary {
    /// Demangled name.
    pub name: String,
    /// Its launches.
    #[serde(flatten)]
    pub stats: KernelStats,
}

/// Kernels of one name launched with a given NVTX path open.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PathKernelSummary {
    /// The open ranges at launch.
    pub path: RangePath,
    /// Demangled name.
    pub name: String,
    /// Its launches.
    #[serde(flatten)]
    pub stats: KernelStats,
}

/// One NVTX path: all instances of a range with that path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RangeSummary {
    /// The range and its parents.
    pub path: RangePath,
    /// Times it was entered.
    pub count: u64,
    /// Wall time inside it (push to pop), summed, ns.
    pub wall_ns: u64,
    /// Union of the GPU time of the kernels launched inside it (nested
    /// ranges included), ns; kernels may run after the pop.
    pub gpu_busy_ns: u64,
    /// The share of the range's wall time in which one of its kernels ran:
    /// what `nvidia-smi`'s "GPU utilization" would say for that window, %.
    pub gpu_utilization_pct: f64,
    /// Kernels launched inside it, nested ranges included.
    pub kernel_launches: u64,
    /// SM efficiency of its measured kernels (nested included), %, weighted
    /// by GPU time (metrics mode).
    #[serde(default)]
    pub sm_efficiency_pct: Option<f64>,
    /// Achieved occupancy of its measured kernels, %, weighted likewise.
    #[serde(default)]
    pub achieved_occupancy_pct: Option<f64>,
    /// The case `nvidia-smi` hides: the GPU looked busy (utilisation of at
    /// least [`BUSY_PCT`]) while its SMs were underused (SM efficiency under
    /// [`LOW_SM_EFFICIENCY_PCT`] or achieved occupancy under
    /// [`LOW_OCCUPANCY_PCT`]).
    #[serde(default)]
    pub busy_but_underused: bool,
}

/// Utilisation from which a range counts as busy, %.
pub const BUSY_PCT: f64 = 90.0;
/// SM efficiency under which a busy range is flagged, %.
pub const LOW_SM_EFFICIENCY_PCT: f64 = 50.0;
/// Achieved occupancy under which a busy range is flagged, %.
pub const LOW_OCCUPANCY_PCT: f64 = 20.0;

/// Memory operations.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MemorySummary {
    /// Copies by direction.
    pub memcpy: Vec<CopySummary>,
    /// Memsets.
    pub memset: CopySummary,
    /// Host waits on the GPU (stream, event, context synchronize).
    pub synchronizations: u64,
    /// Time spent in them, ns.
    pub synchronization_ns: u64,
}

/// Copies of one kind.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CopySummary {
    /// "HtoD", "DtoH", "DtoD", ... ("memset" for sets).
    pub kind: String,
    /// Operations.
    pub count: u64,
    /// Bytes.
    pub bytes: u64,
    /// GPU time, ns.
    pub total_ns: u64,
    /// Of which from/to pageable host memory.
    pub pageable: u64,
}

/// What was lost, by cause. Every report carries it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Drops {
    /// Records CUPTI dropped (it had no buffer).
    pub cupti_records: u64,
    /// Buffer requests refused because the pool was at its cap.
    pub buffer_requests_refused: u64,
    /// NVTX and launch events lost because the event queue was full.
    pub host_events: u64,
    /// Kernels whose launch was not seen (no thread or NVTX path).
    pub unattributed_kernels: u64,
    /// Records that could not be decoded.
    pub undecodable_records: u64,
    /// Kernels left out of the trace by its cap (they are in the statistics).
    pub trace_kernels_over_cap: u64,
    /// Pops with no open range of their domain on that thread.
    pub unbalanced_pops: u64,
    /// Range instances summarised early to bound memory (their late kernels
    /// are missing from range busy time).
    pub ranges_evicted: u64,
    /// Profiled kernels whose metric values never arrived.
    #[serde(default)]
    pub kernels_missing_metrics: u64,
}

impl Drops {
    /// True when nothing was lost.
    pub fn is_empty(&self) -> bool {
        *self == Drops::default()
    }
}

/// An NVTX thread name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThreadName {
    /// OS thread id.
    pub tid: u32,
    /// Name.
    pub name: String,
}

/// Per-event records.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Trace {
    /// Kernels, in arrival order.
    pub kernels: Vec<KernelRecord>,
    /// Push/pop and start/end range instances.
    pub ranges: Vec<RangeRecord>,
    /// Copies and sets.
    pub memory: Vec<MemoryRecord>,
}

/// One kernel execution.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelRecord {
    /// Demangled name.
    pub name: String,
    /// Device ordinal.
    pub device: u32,
    /// CUDA context id.
    pub context: u32,
    /// Stream id.
    pub stream: u32,
    /// Correlation id of the launch.
    pub correlation_id: u32,
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
    /// Grid.
    pub grid: [i32; 3],
    /// Block.
    pub block: [i32; 3],
    /// Cluster (zeros when none).
    pub cluster: [u32; 3],
    /// Registers per thread.
    pub registers_per_thread: u32,
    /// Static shared memory per block, bytes.
    pub static_smem_bytes: u32,
    /// Dynamic shared memory per block, bytes.
    pub dynamic_smem_bytes: u32,
    /// The SM's shared memory carveout for the launch, bytes.
    pub smem_carveout_bytes: u32,
    /// Theoretical occupancy.
    pub occupancy: Option<Occupancy>,
    /// OS thread that launched it (0: unknown).
    pub thread: u32,
    /// NVTX ranges open on that thread at the launch.
    pub path: RangePath,
    /// CUDA graph id (0: not from a graph).
    pub graph_id: u32,
    /// Replayed by the range profiler: `start_ns` is the record's, `end_ns`
    /// is start + the measured duration.
    #[serde(default)]
    pub replayed: bool,
    /// Hardware metrics, for profiled launches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<crate::metrics::KernelMetrics>,
}

/// One range instance.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RangeRecord {
    /// Path (for start/end ranges, the range alone).
    pub path: RangePath,
    /// Thread that opened it.
    pub thread: u32,
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
}

/// One copy or set.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemoryRecord {
    /// "HtoD", ..., "memset".
    pub kind: String,
    /// Bytes.
    pub bytes: u64,
    /// Device.
    pub device: u32,
    /// Stream.
    pub stream: u32,
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
}

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
}

impl std::str::FromStr for Format {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "table" => Ok(Format::Table),
            "json" => Ok(Format::Json),
            "chrome" | "chrome-trace" | "perfetto" => Ok(Format::ChromeTrace),
            "csv" => Ok(Format::Csv),
            other => Err(crate::Error::new(
                crate::ErrorKind::InvalidConfig,
                format!("unknown report format {other:?}; allowed: table, json, csv, chrome"),
            )),
        }
    }
}

impl Report {
    /// The report as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a report written by [`Report::to_json`].
    pub fn from_json(s: &str) -> crate::Result<Report> {
        serde_json::from_str(s)
            .map_err(|e| crate::Error::new(crate::ErrorKind::InvalidConfig, format!("not a gpuscope report: {e}")))
    }

    /// The terminal table, at most `width` columns wide.
    pub fn to_table(&self, width: usize) -> String {
        table::render(self, width)
    }

    /// This report against a later one (`after`): per NVTX path and kernel,
    /// GPU time before and after with the change, SM efficiency and
    /// occupancy after with their change; at most `width` columns.
    pub fn compare(&self, after: &Report, width: usize) -> String {
        compare::render(self, after, width)
    }

    /// A Chrome trace (JSON object format). Needs a trace
    /// ([`crate::Profiler::keep_trace`]); without one, ranges and kernels are
    /// absent and the trace says so in its metadata.
    pub fn to_chrome_trace(&self) -> String {
        chrome::render(self)
    }

    /// CSV, one row per (NVTX path, kernel name), most GPU time first within
    /// a path; fields quoted where needed.
    pub fn to_csv(&self) -> String {
        fn q(s: &str) -> String {
            if s.contains([',', '"', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        }
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.2}"));
        let mut out = String::from(
            "nvtx_path,kernel,launches,total_ns,mean_ns,min_ns,max_ns,theoretical_occupancy_pct,limiter,\
             profiled_launches,achieved_occupancy_pct,sm_efficiency_pct\n",
        );
        for k in &self.path_kernels {
            let s = &k.stats;
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{}\n",
                q(&k.path.to_string()),
                q(&k.name),
                s.launches,
                s.total_ns,
                s.mean_ns,
                s.min_ns,
                s.max_ns,
                opt(s.theoretical_occupancy_pct),
                s.occupancy_limiter.map_or("", |l| l.as_str()),
                s.profiled_launches,
                opt(s.achieved_occupancy_pct),
                opt(s.sm_efficiency_pct),
            ));
        }
        out
    }

    /// Renders in `format`.
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Table => self.to_table(100),
            Format::Json => self.to_json(),
            Format::ChromeTrace => self.to_chrome_trace(),
            Format::Csv => self.to_csv(),
        }
    }

    /// Writes the report to `path` in `format`.
    pub fn write(&self, path: impl AsRef<std::path::Path>, format: Format) -> crate::Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.render(format)).map_err(|e| {
            crate::Error::new(crate::ErrorKind::Io, format!("cannot write report to {}: {e}", path.display()))
        })
    }

    /// Total GPU time of all kernels, ns.
    pub fn total_kernel_ns(&self) -> u64 {
        self.kernels.iter().map(|k| k.stats.total_ns).sum()
    }
}
