//! The report: the fifth stage's data. Per-kernel and per-range statistics,
//! the optional per-kernel trace, and what was dropped; serialised as JSON.
//! [`crate::analysis`] explains it, [`crate::Format`] renders it.

mod build;
mod merge;
internal_mod! { mod steady; }
internal_mod! { mod steps; }

pub use crate::model::declared::Declared;
pub use crate::model::device::DeviceInfo;
use crate::model::device_memory::RangeMemory;
pub use crate::model::drops::Drops;
pub use crate::model::idle::IdleSplit;
use crate::model::metrics::MetricsStatus;
use crate::model::occupancy::Limiter;
use crate::model::path::{RangeFrame, RangePath};
pub use crate::model::profiler_cost::{Calibration, ThreadCost};
pub use crate::model::sampled::{SampledFigures, SamplingStatus, TraceWindows};
pub use crate::model::totals::Totals;
pub use crate::model::trace::{KernelRecord, MemoryRecord, RangeRecord, SampleRecord, Trace};
pub use merge::{JobRange, JobReport, RankRange, RankSummary};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
pub use steady::{SessionSteady, Steady, WindowsBusy};
pub use steps::FoundSteps;

/// Version of the JSON layout; bumped when a field changes meaning.
/// Version 2 added GPU idle time by cause (`idle`, per range and for the
/// session), declared FLOPs and work (`declared`), every measured counter
/// per kernel (`counters`, `measured_ns`), launch-shape figures and device
/// clocks; written reports also carry the analysis (`findings`, per-range
/// and per-kernel `analysis`), which reading ignores and recomputes.
/// Version 3 added device memory: per device (`memory.devices`: peak, who
/// held it by range and by library, timeline) and per range (`memory`).
pub const SCHEMA_VERSION: u32 = 3;

/// Everything a session measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
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
    pub metrics: Option<MetricsStatus>,
    /// Per-kernel records, when the session kept a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Trace>,
    /// GPU idle time of the whole session by cause (schema 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<IdleSplit>,
    /// FLOPs and work per call the program declared for its ranges.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declared: Vec<Declared>,
    /// How PM sampling went (sampling mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SamplingStatus>,
    /// Kernels attributed to another thread's NVTX ranges.
    #[serde(default)]
    pub cross_thread: CrossThread,
    /// What gpuscope itself cost the program (trace mode).
    #[serde(default, skip_serializing_if = "ProfilerCost::is_empty")]
    pub profiler_cost: ProfilerCost,
    /// Child processes the program forked while the session ran (PyTorch's
    /// DataLoader forks its workers).
    #[serde(default)]
    pub forks: u64,
    /// Frameworks whose libraries the process had loaded at the end
    /// (`torch`, `triton`, `jax`, `tensorflow`, `cupy`): advice is in their
    /// terms when no kernel name says which framework ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frameworks: Vec<String>,
    /// The host's name: a job's ranks on one host share its links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The session's steady state: its time without start-up, compilation
    /// and shutdown, found from its activity over time (for programs
    /// without ranges to count calls of).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_steady: Option<SessionSteady>,
    /// Each GPU's own busy and idle time (with one GPU, the session's; with
    /// several, the session's idle time is when none of them worked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_time: Vec<crate::model::device::DeviceTime>,
    /// The analysis, computed at its first use (see [`Report::analysis`]).
    #[serde(skip)]
    pub(crate) analysis: AnalysisCache,
}

/// A report's analysis, computed once at its first use
/// ([`Report::analysis`]; the analysis stage fills it, the report only
/// holds it). A clone starts without one (it may be edited), and two
/// reports compare equal whatever their caches hold.
#[derive(Default)]
pub(crate) struct AnalysisCache(pub(crate) std::sync::OnceLock<Box<crate::analysis::Analysis>>);

impl Clone for AnalysisCache {
    fn clone(&self) -> Self {
        AnalysisCache::default()
    }
}

impl PartialEq for AnalysisCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for AnalysisCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() { "AnalysisCache(computed)" } else { "AnalysisCache(empty)" })
    }
}

/// What gpuscope itself cost the program: CUPTI's per-launch record cost,
/// measured at the first launch, and its launch callbacks' time per
/// launching thread.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct ProfilerCost {
    /// The measurement (trace mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
    /// Why there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_calibrated: Option<String>,
    /// Per launching thread, most launches first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadCost>,
    /// gpuscope's cost is in the idle time already, as the profiler's
    /// share: each gap ended by a launch got as much of it as had delayed
    /// the host since it last waited for the GPU. Reports without it: the
    /// cost is taken out of the host's idle causes as a whole
    /// ([`ProfilerCost::added_ns`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_idle: bool,
}

impl ProfilerCost {
    fn is_empty(&self) -> bool {
        *self == ProfilerCost::default()
    }

    /// The time gpuscope and CUPTI added to `launches` launch calls, ns:
    /// the larger of two estimates. What the launch calls took, timed on
    /// the program's own launches (`call_ns` over `calls_timed`), less what
    /// a launch call takes without tracing (the calibration's plain launch);
    /// and CUPTI's record cost measured by the calibration plus gpuscope's
    /// callback time (`callback_ns`); plus the time of a framework
    /// integration's hooks (`hook_ns`), which run outside launch calls.
    /// `None`: no calibration and nothing timed.
    pub fn added_ns(
        &self,
        launches: u64,
        callback_ns: u64,
        call_ns: u64,
        calls_timed: u64,
        hook_ns: u64,
    ) -> Option<u64> {
        let Some(c) = self.calibration else {
            // No record cost measured (no kernel records): what was timed.
            let timed = callback_ns.saturating_add(hook_ns);
            return (timed > 0).then_some(timed);
        };
        let records = (c.record_ns as u64).saturating_mul(launches).saturating_add(callback_ns);
        let calls = match call_ns.checked_div(calls_timed) {
            Some(mean) => mean.saturating_sub(c.plain_ns as u64).saturating_mul(launches),
            None => 0,
        };
        Some(records.max(calls).saturating_add(hook_ns))
    }
}

/// Figures of a range's calls beyond its time: what its host threads did.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostFigures {
    /// CUDA graph launches among its kernel launches.
    #[serde(default)]
    pub graph_launches: u64,
    /// Time gpuscope's launch callbacks took on its launches, ns.
    pub callback_ns: u64,
    /// Time a framework integration's hooks took inside it (PyTorch's
    /// automatic ranges), outside launch calls, ns: gpuscope's cost too.
    #[serde(default)]
    pub hook_ns: u64,
    /// Time its launch calls took, entry to exit, over `calls_timed` of
    /// them, ns.
    pub launch_call_ns: u64,
    /// See `launch_call_ns`.
    pub calls_timed: u64,
    /// Host synchronisations made inside it, and their time, ns.
    pub syncs: u64,
    /// See `syncs`.
    pub sync_ns: u64,
    /// Copies made inside it, host-to-device bytes among them, and copies
    /// from or to pageable host memory.
    pub copies: u64,
    /// See `copies`.
    pub h2d_bytes: u64,
    /// See `copies`.
    pub pageable_copies: u64,
    /// Device-to-host copies among them (`.item()`, `.cpu()`: each waits
    /// for the GPU).
    #[serde(default)]
    pub d2h_copies: u64,
}

/// Kernels launched on a thread with no NVTX range of its own (autograd's
/// worker, say), attributed to the ranges open on the lead thread: of the
/// threads with ranges of their own open, the one whose outermost range is
/// the oldest (the training loop's `step`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct CrossThread {
    /// Launches on threads with no range of their own took the lead
    /// thread's ranges (false: strict per-thread NVTX semantics).
    pub inherit: bool,
    /// Kernels so attributed.
    pub kernels: u64,
    /// Their GPU time, ns.
    pub kernel_ns: u64,
}

/// Statistics of a set of kernel launches.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
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
    /// Every measured metric over the profiled launches: totals for
    /// additive counters (names ending in `.sum`), means weighted by
    /// measured duration for the rest (schema 2).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, f64>,
    /// Measured duration of the profiled launches, ns: what the totals in
    /// `counters` cover.
    #[serde(default)]
    pub measured_ns: f64,
    /// Share of the device's SMs the grids reach (one block per SM at
    /// most), %, weighted by GPU time. 1 block on 132 SMs: 0.8%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_coverage_pct: Option<f64>,
    /// Blocks over the block slots of the waves they need (SMs x blocks per
    /// SM per wave), %, weighted by GPU time: below 100% the last wave runs
    /// partly empty (a tail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave_efficiency_pct: Option<f64>,
    /// Waves the grids need: blocks over the block slots of all SMs,
    /// weighted by GPU time (2.01: two full waves and a sliver).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waves: Option<f64>,
    /// Sampling mode: figures from the PM samples wholly inside launches
    /// spanning at least `SamplingStatus::min_kernel_samples` samples; the
    /// occupancy and SM efficiency above then come from here when no
    /// launch was measured (`metrics_sampled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampledFigures>,
    /// `achieved_occupancy_pct` and `sm_efficiency_pct` are sampled, not
    /// measured per launch.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub metrics_sampled: bool,
    /// When its first launch started and its last ended, ns (0: not
    /// recorded, an older report).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub first_ns: u64,
    /// See `first_ns`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub last_ns: u64,
    /// GPU idle time, ns, while the program ran host code of its own right
    /// before launching this kernel (the gap that its launch ended): where
    /// in the step the host worked.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub host_before_ns: u64,
}

/// One kernel name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct KernelSummary {
    /// Demangled name.
    pub name: String,
    /// The name tables show: the function with the template argument that
    /// tells its instances apart, unique within the report.
    #[serde(default)]
    pub display_name: String,
    /// Its launches.
    #[serde(flatten)]
    pub stats: KernelStats,
}

/// Kernels of one name launched with a given NVTX path open.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct PathKernelSummary {
    /// The open ranges at launch.
    pub path: RangePath,
    /// Demangled name.
    pub name: String,
    /// The name tables show: the function with the template argument that
    /// tells its instances apart, unique within the report.
    #[serde(default)]
    pub display_name: String,
    /// Its launches.
    #[serde(flatten)]
    pub stats: KernelStats,
}

/// One NVTX path: all instances of a range with that path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
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
    /// least 90%) while its SMs were underused (SM efficiency under 50% or
    /// achieved occupancy under 20%).
    #[serde(default)]
    pub busy_but_underused: bool,
    /// Sampling mode: figures from the PM samples over its kernels' run
    /// time (nested ranges included; each sample's counts shared among the
    /// kernels running in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampledFigures>,
    /// Sampling mode: figures from the PM samples over its wall windows,
    /// idle time included (what the GPU did while the range was open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_wall: Option<SampledFigures>,
    /// `achieved_occupancy_pct` and `sm_efficiency_pct` are sampled, not
    /// measured per launch.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub metrics_sampled: bool,
    /// GPU idle time inside the range's windows by cause; GPU busy time of
    /// any kernel in them is `wall_ns` minus its total (schema 2; absent
    /// for start/end ranges).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<IdleSplit>,
    /// Sampling mode's trace windows: instances that touched untraced time,
    /// left out of every figure above but `sampled_wall` (schema 2, absent
    /// when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub untraced_count: u64,
    /// Their wall time, ns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub untraced_wall_ns: u64,
    /// Their kernel launch calls (nested ranges included): those in traced
    /// windows and those the launch callbacks counted between them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub untraced_launches: u64,
    /// Those instances without their warm-up ones (told apart by wall time
    /// as traced calls are; see [`Steady`]): calls, wall times, median and
    /// p90 (the kernel figures are 0: none were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untraced_steady: Option<Steady>,
    /// `sampled_wall` without the warm-up instances' samples, when some
    /// were left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_wall_steady: Option<SampledFigures>,
    /// What its threads did: launch-call and callback time, host waits,
    /// copies (all traced calls).
    #[serde(default)]
    pub host: HostFigures,
    /// Its calls without the warm-up ones (see [`Steady`]), when it has
    /// enough calls to tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<Steady>,
    /// Wall time of each of its first calls, in the order they opened, ns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_calls_ns: Vec<u64>,
    /// The NVTX domain of a library or framework (cuBLAS, CCCL, XLA's TSL,
    /// ...) one of its frames belongs to: it is folded into the range
    /// around it, with no verdict of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// Model FLOPs counted in all its calls from operand shapes (PyTorch's
    /// automatic ranges: `nn.Linear`, convolutions, attention), nested
    /// ranges included.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub counted_flops: f64,
    /// Device memory while it was open (schema 3; absent when allocations
    /// were not recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<RangeMemory>,
    /// Its totals over all its calls (communication time and the rest),
    /// each under its own name, absent when zero.
    #[serde(flatten)]
    pub totals: Totals,
    /// How many GPUs its calls ran kernels on for most of their time (0: no
    /// kernels):
    /// rates against a device's peak are over this many devices.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gpus: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

/// Utilisation from which a range counts as busy, %.
pub(crate) const BUSY_PCT: f64 = 90.0;
/// SM efficiency under which a busy range is flagged, %.
pub(crate) const LOW_SM_EFFICIENCY_PCT: f64 = 50.0;
/// Achieved occupancy under which a busy range is flagged, %.
pub(crate) const LOW_OCCUPANCY_PCT: f64 = 20.0;

/// Memory operations.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct MemorySummary {
    /// Copies by direction.
    pub memcpy: Vec<CopySummary>,
    /// Memsets.
    pub memset: CopySummary,
    /// Host waits on the GPU (stream, event, context synchronize).
    pub synchronizations: u64,
    /// Time spent in them, ns.
    pub synchronization_ns: u64,
    /// Of the synchronisations, those made on the process's main thread
    /// (a Python program's own code runs there; a runtime's threads, XLA's,
    /// are others). Absent in reports that did not tell threads apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_thread_synchronizations: Option<u64>,
    /// Their time, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_thread_synchronization_ns: Option<u64>,
    /// Device memory allocated and live, per device (allocation records).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<crate::model::device_memory::DeviceMemory>,
}

/// Copies of one kind.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
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

/// An NVTX thread name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct ThreadName {
    /// OS thread id.
    pub tid: u32,
    /// Name.
    pub name: String,
}

impl Report {
    /// Reads a report written as JSON (any schema version up to this one's).
    /// A report of a newer schema is refused, not half read: its fields may
    /// mean something this version does not know.
    pub fn from_json(s: &str) -> crate::error::Result<Report> {
        use crate::error::{Error, ErrorKind};
        #[derive(Deserialize)]
        struct Version {
            schema_version: Option<u32>,
            /// Only a job's merged document has it.
            ranks: Option<serde::de::IgnoredAny>,
        }
        let not_a_report = |e: serde_json::Error| {
            Error::new(
                ErrorKind::InvalidConfig,
                format!("not a gpuscope report (a JSON object with a schema_version was expected): {e}"),
            )
        };
        if !s.trim_start().starts_with('{') {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                "not a gpuscope report: a report is a JSON object ({...}), written by gpuscope run -o or \
                 Session::stop",
            ));
        }
        let v: Version = serde_json::from_str(s).map_err(not_a_report)?;
        if v.schema_version.is_none() && v.ranks.is_some() {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                "not a gpuscope report but a job's merged document (gpuscope report --merge --format json): merge \
                 the ranks' own reports again to render it",
            ));
        }
        if let Some(n) = v.schema_version.filter(|&n| n > SCHEMA_VERSION) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "report schema_version {n} is newer than this gpuscope ({}) reads (1 to {SCHEMA_VERSION}): \
                     read it with the gpuscope that wrote it, or a newer one",
                    env!("CARGO_PKG_VERSION")
                ),
            ));
        }
        let mut r: Report = serde_json::from_str(s).map_err(not_a_report)?;
        r.fill_display_names();
        Ok(r)
    }

    /// Gives every kernel its display name, unique within the report
    /// (reports written before display names existed lack them).
    pub(crate) fn fill_display_names(&mut self) {
        let names = crate::model::names::display_names(self.kernels.iter().map(|k| k.name.as_str()));
        let pick = |n: &str| names.get(n).cloned().unwrap_or_else(|| crate::model::names::display_name(n));
        for k in &mut self.kernels {
            k.display_name = pick(&k.name);
        }
        for k in &mut self.path_kernels {
            k.display_name = pick(&k.name);
        }
    }

    /// Display names by full name: those of this report's kernels.
    pub fn display_names(&self) -> std::collections::HashMap<&str, &str> {
        self.kernels.iter().map(|k| (k.name.as_str(), k.display_name.as_str())).collect()
    }

    /// Kernel launches seen: those with kernel records, and those counted
    /// between trace windows.
    pub fn launches_seen(&self) -> u64 {
        let counted = self.sampling.as_ref().and_then(|s| s.trace_windows.as_ref()).and_then(|w| w.untraced_launches);
        let traced = crate::model::units::saturating_sum(self.kernels.iter().map(|k| k.stats.launches));
        traced.saturating_add(counted.unwrap_or(0))
    }

    /// Whether the session saw no kernel launch at all (traced or counted):
    /// nothing to report.
    pub fn launched_nothing(&self) -> bool {
        self.launches_seen() == 0 && self.ranges.iter().all(|g| g.kernel_launches == 0)
    }

    /// Total GPU time of all kernels, ns.
    pub fn total_kernel_ns(&self) -> u64 {
        crate::model::units::saturating_sum(self.kernels.iter().map(|k| k.stats.total_ns))
    }

    /// Session time whose GPU activity is known: all of it, but for
    /// sampling mode's trace windows, where the gaps that touched untraced
    /// time are left out (busy plus idle time add up to this), ns.
    pub fn timeline_ns(&self) -> u64 {
        let unknown =
            self.sampling.as_ref().and_then(|s| s.trace_windows.as_ref()).map_or(0, |w| w.unclassified_gaps_ns);
        self.end_ns.saturating_sub(self.start_ns).saturating_sub(unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_time_adds_to_the_larger_of_the_launch_estimates() {
        let c = ProfilerCost {
            calibration: Some(Calibration { record_ns: 1_000, plain_ns: 2_000, traced_ns: 3_000 }),
            ..Default::default()
        };
        // Records: 10 x 1 us + 5 us of callbacks = 15 us; launch calls:
        // 10 x (4 - 2) us = 20 us; hooks ran outside the calls: on top.
        assert_eq!(c.added_ns(10, 5_000, 40_000, 10, 7_000), Some(27_000));
        assert_eq!(c.added_ns(10, 5_000, 40_000, 10, 0), Some(20_000));
        let none = ProfilerCost::default();
        assert_eq!(none.added_ns(10, 0, 0, 0, 0), None, "nothing measured");
        assert_eq!(none.added_ns(10, 300, 0, 0, 7_000), Some(7_300), "what was timed");
    }
}
