//! Every setting, with its name in each interface: the one list the
//! environment's parser and `gpuscope run`'s flags are made from, and that
//! `docs/reference/configuration.md` is checked against. A setting of kind
//! [`Kind::Switch`] or [`Kind::Count`] is parsed, checked and applied from
//! its entry alone, in every interface: the environment, `gpuscope run`'s
//! flag, C's `settings` string and Python's keyword.

use crate::session::Profiler;

/// One setting and its name in each interface. Names share one root:
/// `keep_trace` is `Profiler::keep_trace`, `GPUSCOPE_KEEP_TRACE`,
/// `--keep-trace`, the C field `keep_trace` and Python's `keep_trace=`.
/// `None`: the interface does not have it (the reference says why).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Setting {
    /// The root name.
    pub name: &'static str,
    /// What it does, in a sentence (also `gpuscope run --help`'s text).
    pub meaning: &'static str,
    /// Its unit or the values it takes.
    pub values: &'static str,
    /// The default, as the environment spells it; `None`: unset.
    pub default: Option<&'static str>,
    /// Where Rust, C and Python default otherwise (see the reference).
    pub in_process_default: Option<&'static str>,
    /// The Rust API that sets it: `Profiler::` methods, `Selection::`
    /// methods, functions; comma-separated.
    pub rust: Option<&'static str>,
    /// The `GPUSCOPE_*` variable.
    pub env: Option<&'static str>,
    /// `gpuscope run`'s flag, which sets the variable for the program.
    pub flag: Option<&'static str>,
    /// The flag's one-letter form.
    pub short: Option<char>,
    /// The flag's value in `--help`.
    pub value_name: &'static str,
    /// The flag's value when given without one (`--quiet`).
    pub bare: Option<&'static str>,
    /// The C field of `gpuscope_config`, or functions and constants;
    /// comma-separated.
    pub c: Option<&'static str>,
    /// The keyword of Python's `gpuscope.profile`, or functions.
    pub python: Option<&'static str>,
    /// Older names, still read.
    pub older: &'static [Older],
    /// How its value is read and applied.
    pub kind: Kind,
}

/// How a setting's value is read and applied.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Kind {
    /// Read by code of its own (modes, metric sets, paths, windows).
    Own,
    /// `on` or `off` (`1`, `0`, and `words`), applied by `set`.
    Switch {
        /// Applies the value.
        set: fn(Profiler, bool) -> Profiler,
        /// More words and what they mean (older spellings).
        words: &'static [(&'static str, bool)],
    },
    /// A count where `ok` holds ([`Setting::values`] says where), applied
    /// by `set`.
    Count {
        /// Applies the value.
        set: fn(Profiler, usize) -> Profiler,
        /// Whether a value is allowed.
        ok: fn(usize) -> bool,
    },
}

/// An older name of a setting's variable and flag: still accepted, the
/// current name winning where both are set.
#[derive(Debug, Clone, Copy)]
pub struct Older {
    /// The older `GPUSCOPE_*` variable.
    pub env: &'static str,
    /// The older flag of `gpuscope run`.
    pub flag: &'static str,
}

const NONE: Setting = Setting {
    name: "",
    meaning: "",
    values: "",
    default: None,
    in_process_default: None,
    rust: None,
    env: None,
    flag: None,
    short: None,
    value_name: "",
    bare: None,
    c: None,
    python: None,
    older: &[],
    kind: Kind::Own,
};

/// A switch: `on` or `off` (`1` and `0` too) in the environment and on the
/// command line (the flag alone: `on`), 1 or 0 in C, `True` or `False` in
/// Python.
const SWITCH: Setting = Setting { values: "on, off", value_name: "on|off", bare: Some("on"), ..NONE };

/// Every setting, in the order of the reference's table.
pub const SETTINGS: &[Setting] = &[
    Setting {
        name: "mode",
        meaning: "What is collected: every kernel, timed and attributed to NVTX ranges (trace); also hardware \
                  counters on selected launches, exact but each measured launch serialised (metrics); also counters \
                  sampled device-wide, joined to kernels and ranges by time, at about trace-mode cost (sampling)",
        values: "trace, metrics, sampling",
        default: Some("trace"),
        rust: Some("Profiler::metrics, Profiler::sampling"),
        env: Some("GPUSCOPE_MODE"),
        flag: Some("--mode"),
        value_name: "MODE",
        c: Some("mode, GPUSCOPE_MODE_*"),
        python: Some("mode"),
        ..NONE
    },
    Setting {
        name: "metrics",
        meaning: "Metrics mode: the counters measured, on top of the default set; always-on mode (sampling with \
                  trace windows): what a metrics pass asked of the live process measures",
        values: "sets (default, dram, flops, tensor, roofline, checklist) or metric names like lts__t_bytes.sum, comma-separated",
        default: Some("default"),
        rust: Some("Profiler::metrics, MetricSet::parse"),
        env: Some("GPUSCOPE_METRICS"),
        flag: Some("--metrics"),
        value_name: "LIST",
        c: Some("metrics"),
        python: Some("metrics"),
        ..NONE
    },
    Setting {
        name: "kernel_filter",
        meaning: "Metrics mode: only kernels whose demangled name matches are measured",
        values: "regex",
        rust: Some("Profiler::select, Selection::kernels"),
        env: Some("GPUSCOPE_KERNEL_FILTER"),
        flag: Some("--kernel-filter"),
        value_name: "REGEX",
        c: Some("kernel_filter"),
        python: Some("kernel_filter"),
        older: &[Older { env: "GPUSCOPE_KERNELS", flag: "--kernels" }],
        ..NONE
    },
    Setting {
        name: "nvtx_filter",
        meaning: "Metrics mode: only kernels launched inside this NVTX path (or deeper) are measured",
        values: "range path prefix, e.g. train/forward",
        rust: Some("Profiler::select, Selection::nvtx"),
        env: Some("GPUSCOPE_NVTX_FILTER"),
        flag: Some("--nvtx-filter"),
        value_name: "PATH",
        c: Some("nvtx_filter"),
        python: Some("nvtx_filter"),
        older: &[Older { env: "GPUSCOPE_NVTX", flag: "--nvtx" }],
        ..NONE
    },
    Setting {
        name: "launch_count",
        meaning: "Metrics mode: the first launches of each kernel measured",
        values: "launches: 1 or more, or all",
        default: Some("3"),
        rust: Some("Profiler::select, Selection::first, Selection::all"),
        env: Some("GPUSCOPE_LAUNCH_COUNT"),
        flag: Some("--launch-count"),
        value_name: "N",
        c: Some("launch_count, GPUSCOPE_LAUNCH_COUNT_ALL"),
        python: Some("launch_count"),
        ..NONE
    },
    Setting {
        name: "every",
        meaning: "Metrics mode: after the first ones, every N-th launch of each kernel measured too",
        values: "launches; 0: none",
        default: Some("0"),
        rust: Some("Profiler::select, Selection::every"),
        env: Some("GPUSCOPE_EVERY"),
        flag: Some("--every"),
        value_name: "N",
        c: Some("every"),
        python: Some("every"),
        ..NONE
    },
    Setting {
        name: "sampling_interval",
        meaning: "Sampling mode: the time between samples (1000 us by default with trace_windows)",
        values: "microseconds, 1 to 100000",
        default: Some("100"),
        rust: Some("Profiler::sampling"),
        env: Some("GPUSCOPE_SAMPLING_INTERVAL"),
        flag: Some("--sampling-interval"),
        value_name: "US",
        c: Some("sampling_interval_us"),
        python: Some("sampling_interval_us"),
        ..NONE
    },
    Setting {
        name: "trace_windows",
        meaning: "Sampling mode, always on: kernel records only for the first WINDOW of every PERIOD (samples, \
                  ranges and launch counts all the time); a window of 0: no kernel records at all, the cheapest",
        values: "milliseconds, WINDOW/PERIOD: a window of 0, or of 10 or more and below the period",
        rust: Some("Profiler::trace_windows"),
        env: Some("GPUSCOPE_TRACE_WINDOWS"),
        flag: Some("--trace-windows"),
        value_name: "WINDOW/PERIOD",
        c: Some("trace_window_ms, trace_period_ms"),
        python: Some("trace_windows"),
        ..NONE
    },
    Setting {
        name: "keep_trace",
        meaning: "Per-kernel, per-range and per-copy records kept, at most this many of each: the Chrome trace \
                  and per-launch figures",
        values: "records; 0: none",
        default: Some("100000"),
        in_process_default: Some("0"),
        rust: Some("Profiler::keep_trace"),
        env: Some("GPUSCOPE_KEEP_TRACE"),
        flag: Some("--keep-trace"),
        value_name: "N",
        c: Some("keep_trace"),
        python: Some("keep_trace"),
        older: &[Older { env: "GPUSCOPE_TRACE", flag: "--trace" }],
        kind: Kind::Count { set: Profiler::keep_trace, ok: |_| true },
        ..NONE
    },
    Setting {
        name: "device_memory",
        meaning: "Device memory allocations and releases recorded: peaks, who holds memory, per-range figures",
        default: Some("on"),
        rust: Some("Profiler::device_memory"),
        env: Some("GPUSCOPE_DEVICE_MEMORY"),
        flag: Some("--device-memory"),
        c: Some("device_memory"),
        python: Some("device_memory"),
        kind: Kind::Switch { set: Profiler::device_memory, words: &[] },
        ..SWITCH
    },
    Setting {
        name: "memory_records",
        meaning: "Copies and memsets recorded (memcpy and memset records)",
        default: Some("on"),
        rust: Some("Profiler::memory_records"),
        env: Some("GPUSCOPE_MEMORY_RECORDS"),
        flag: Some("--memory-records"),
        c: Some("memory_records"),
        python: Some("memory_records"),
        kind: Kind::Switch { set: Profiler::memory_records, words: &[] },
        ..SWITCH
    },
    Setting {
        name: "sync_records",
        meaning: "Host waits recorded: stream, event and context synchronisation calls, timed",
        default: Some("on"),
        rust: Some("Profiler::sync_records"),
        env: Some("GPUSCOPE_SYNC_RECORDS"),
        flag: Some("--sync-records"),
        c: Some("sync_records"),
        python: Some("sync_records"),
        kind: Kind::Switch { set: Profiler::sync_records, words: &[] },
        ..SWITCH
    },
    Setting {
        name: "launch_attribution",
        meaning: "Kernels attributed to the launching thread and its NVTX ranges; off, no launch callback runs \
                  and kernels are counted under (no range)",
        default: Some("on"),
        rust: Some("Profiler::launch_attribution"),
        env: Some("GPUSCOPE_LAUNCH_ATTRIBUTION"),
        flag: Some("--launch-attribution"),
        c: Some("launch_attribution"),
        python: Some("launch_attribution"),
        kind: Kind::Switch { set: Profiler::launch_attribution, words: &[] },
        ..SWITCH
    },
    Setting {
        name: "cross_thread_ranges",
        meaning: "Kernels launched on a thread with no NVTX range of its own take the ranges of the thread that \
                  waits for them (autograd's backward lands in the loop's backward range); off: strict \
                  per-thread NVTX",
        values: "on, off (inherit, strict)",
        default: Some("on"),
        rust: Some("Profiler::cross_thread_ranges"),
        env: Some("GPUSCOPE_CROSS_THREAD_RANGES"),
        flag: Some("--cross-thread-ranges"),
        c: Some("cross_thread_ranges"),
        python: Some("cross_thread_ranges"),
        older: &[Older { env: "GPUSCOPE_THREAD_RANGES", flag: "--thread-ranges" }],
        kind: Kind::Switch { set: Profiler::cross_thread_ranges, words: &[("inherit", true), ("strict", false)] },
        ..SWITCH
    },
    Setting {
        name: "calibrate",
        meaning: "Trace mode (and sampling mode without trace windows): the first launch waits (up to 2 s) while gpuscope measures what CUPTI's kernel records \
                  add to a launch call, to take its own cost out of idle time; off: no wait, only gpuscope's callback \
                  time taken out",
        default: Some("on"),
        rust: Some("Profiler::calibrate"),
        env: Some("GPUSCOPE_CALIBRATE"),
        flag: Some("--calibrate"),
        c: Some("settings"),
        python: Some("calibrate"),
        kind: Kind::Switch { set: Profiler::calibrate, words: &[] },
        ..SWITCH
    },
    Setting {
        name: "buffer_size",
        meaning: "Bytes per CUPTI activity buffer",
        values: "bytes: 64 KiB to 256 MiB, a multiple of 8",
        default: Some("4194304"),
        rust: Some("Profiler::buffer_size"),
        env: Some("GPUSCOPE_BUFFER_SIZE"),
        flag: Some("--buffer-size"),
        value_name: "BYTES",
        c: Some("buffer_size"),
        python: Some("buffer_size"),
        kind: Kind::Count { set: Profiler::buffer_size, ok: |b| (64 << 10..=256 << 20).contains(&b) && b % 8 == 0 },
        ..NONE
    },
    Setting {
        name: "max_buffers",
        meaning: "Activity buffers alive at once (allocated as needed); when all are full and not yet decoded, \
                  CUPTI drops records and the report counts them",
        values: "buffers, 1 to 1024",
        default: Some("64"),
        rust: Some("Profiler::max_buffers"),
        env: Some("GPUSCOPE_MAX_BUFFERS"),
        flag: Some("--max-buffers"),
        value_name: "N",
        c: Some("max_buffers"),
        python: Some("max_buffers"),
        kind: Kind::Count { set: Profiler::max_buffers, ok: |n| (1..=1024).contains(&n) },
        ..NONE
    },
    Setting {
        name: "host_queue",
        meaning: "How many NVTX and launch events one thread may have waiting for the decoder (a queue per thread); events that find its queue full are dropped and counted",
        values: "events, 1024 to 16777216",
        default: Some("262144"),
        rust: Some("Profiler::host_queue"),
        env: Some("GPUSCOPE_HOST_QUEUE"),
        flag: Some("--host-queue"),
        value_name: "N",
        c: Some("host_queue"),
        python: Some("host_queue"),
        kind: Kind::Count { set: Profiler::host_queue, ok: |n| (1024..=1 << 24).contains(&n) },
        ..NONE
    },
    Setting {
        name: "max_live_ranges",
        meaning: "Range instances held at once; past it the oldest closed ones are summarised early and counted",
        values: "range instances, 1 or more",
        default: Some("100000"),
        rust: Some("Profiler::max_live_ranges"),
        env: Some("GPUSCOPE_MAX_LIVE_RANGES"),
        flag: Some("--max-live-ranges"),
        value_name: "N",
        c: Some("max_live_ranges"),
        python: Some("max_live_ranges"),
        kind: Kind::Count { set: Profiler::max_live_ranges, ok: |n| n >= 1 },
        ..NONE
    },
    Setting {
        name: "output",
        meaning: "Where the report is written: by each profiled process at exit (environment, gpuscope run), at \
                  stop (Rust, Python), or when asked (C)",
        values: "file path; {pid} and {rank} are replaced (environment, gpuscope run)",
        default: Some("gpuscope-{pid}.json"),
        rust: Some("Profiler::output"),
        env: Some("GPUSCOPE_OUTPUT"),
        flag: Some("--output"),
        short: Some('o'),
        value_name: "FILE",
        c: Some("gpuscope_write_report()"),
        python: Some("output"),
        ..NONE
    },
    Setting {
        name: "format",
        meaning: "The report's format",
        values: "table, json, csv, chrome, openmetrics",
        default: Some("json"),
        rust: Some("Profiler::output, Format"),
        env: Some("GPUSCOPE_FORMAT"),
        c: Some("gpuscope_write_report(), GPUSCOPE_FORMAT_*"),
        python: Some("format"),
        ..NONE
    },
    Setting {
        name: "quiet",
        meaning: "No summary line on stderr when a process writes its report at exit",
        default: Some("off"),
        rust: Some("Profiler::quiet"),
        env: Some("GPUSCOPE_QUIET"),
        flag: Some("--quiet"),
        short: Some('q'),
        kind: Kind::Switch { set: Profiler::quiet, words: &[] },
        ..SWITCH
    },
    Setting {
        name: "prometheus",
        meaning: "Serve the running session's figures at http://ADDR/metrics for Prometheus to scrape",
        values: "HOST:PORT, or :PORT for every interface; {rank} and {pid} are replaced",
        rust: Some("Profiler::prometheus"),
        env: Some("GPUSCOPE_PROMETHEUS"),
        flag: Some("--prometheus"),
        value_name: "HOST:PORT",
        c: Some("prometheus"),
        python: Some("prometheus"),
        ..NONE
    },
    Setting {
        name: "flops",
        meaning: "Model FLOPs per call of a range, for its model FLOPs utilisation",
        values: "RANGE=FLOPS, comma-separated, e.g. step=1.2e12",
        rust: Some("declare_flops"),
        env: Some("GPUSCOPE_FLOPS"),
        flag: Some("--flops"),
        value_name: "RANGE=FLOPS",
        c: Some("gpuscope_declare_flops()"),
        python: Some("declare_flops()"),
        ..NONE
    },
    Setting {
        name: "work",
        meaning: "Work per call of a range, for its throughput",
        values: "RANGE=AMOUNT[:UNIT], comma-separated, e.g. step=4096:tokens",
        rust: Some("declare_work"),
        env: Some("GPUSCOPE_WORK"),
        flag: Some("--work"),
        value_name: "RANGE=N[:UNIT]",
        c: Some("gpuscope_declare_work()"),
        python: Some("declare_work()"),
        ..NONE
    },
    Setting {
        name: "torch_ranges",
        meaning: "PyTorch programs: ranges made with no change to the program (step, data, forward and backward \
                  per module to a depth, optimizer) and model FLOPs counted from operand shapes",
        values: "on or auto (the default depth), a depth of 1 or more (N or depth=N), stack or stack=N (forward \
                 modules and the optimizer found on the Python stack at each launch: no hook per call), off or 0",
        default: Some("off"),
        env: Some("GPUSCOPE_TORCH_RANGES"),
        flag: Some("--torch-ranges"),
        value_name: "DEPTH",
        bare: Some("auto"),
        python: Some("torch_ranges, annotate()"),
        ..NONE
    },
    Setting {
        name: "strict",
        meaning: "Raise instead of warning and running on unprofiled when there is no GPU, driver or CUPTI, or \
                  another profiler holds CUPTI",
        values: "True, False",
        default: Some("off"),
        python: Some("strict"),
        ..NONE
    },
    Setting {
        name: "lib",
        meaning: "The libgpuscope.so that gpuscope run injects and the Python package loads",
        values: "file path",
        env: Some("GPUSCOPE_LIB"),
        flag: Some("--lib"),
        value_name: "PATH",
        ..NONE
    },
    Setting {
        name: "cupti_path",
        meaning: "Where CUPTI is loaded from, before the usual places",
        values: "a file, or a folder holding libcupti.so.13 or libcupti.so.12",
        env: Some("GPUSCOPE_CUPTI_PATH"),
        ..NONE
    },
    Setting {
        name: "python_site",
        meaning: "Site-packages folders where CUPTI from NVIDIA's wheels is looked for, after the usual places; \
                  the Python package sets it to those it sees",
        values: "folders, separated by :",
        env: Some("GPUSCOPE_PYTHON_SITE"),
        ..NONE
    },
    Setting {
        name: "metrics_batch",
        meaning: "Metrics mode: measured launches per read of the counters; 1 measures each launch alone, as \
                  Nsight Compute does",
        values: "launches, 1 to 1024",
        default: Some("64"),
        env: Some("GPUSCOPE_METRICS_BATCH"),
        ..NONE
    },
    Setting {
        name: "debug",
        meaning: "Each step of start, stop and metrics setup on stderr, timed: where a hang or failure happens",
        values: "1: on",
        default: Some("0"),
        env: Some("GPUSCOPE_DEBUG"),
        ..NONE
    },
];

impl Setting {
    /// Whether it can be given by name: read and applied from its entry alone
    /// ([`Kind::Switch`], [`Kind::Count`]).
    pub fn by_name(&self) -> bool {
        !matches!(self.kind, Kind::Own)
    }

    /// Every variable it goes by: its own, then its older names.
    pub fn env_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.env.into_iter().chain(self.older.iter().map(|o| o.env))
    }
}

/// The setting named `name`.
pub fn setting(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.name == name)
}
