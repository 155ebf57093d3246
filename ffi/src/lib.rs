//! gpuscope's C ABI. Every function returns a status code (`GPUSCOPE_OK` or
//! a `GPUSCOPE_ERR_*` constant), never aborts, and stops panics at the
//! boundary; `gpuscope_last_error` explains the last failure on the calling
//! thread. One session per process.

#![allow(clippy::missing_safety_doc)]

mod shim;
pub use shim::{InitializeInjection, InitializeInjectionNvtx2};

use profiler::config::setting;
use profiler::{ErrorKind, Format, MetricSet, Profiler, Report, Selection, Session};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

/// Success.
pub const GPUSCOPE_OK: c_int = 0;
/// No NVIDIA driver, GPU or CUPTI: the program runs on unprofiled.
pub const GPUSCOPE_ERR_NO_GPU: c_int = 1;
/// Another tool holds CUPTI.
pub const GPUSCOPE_ERR_BUSY: c_int = 2;
/// A bad argument or configuration value.
pub const GPUSCOPE_ERR_INVALID: c_int = 3;
/// Wrong state: no session running, or one already is.
pub const GPUSCOPE_ERR_STATE: c_int = 4;
/// Writing the report failed.
pub const GPUSCOPE_ERR_IO: c_int = 5;
/// A CUPTI call failed.
pub const GPUSCOPE_ERR_CUPTI: c_int = 6;
/// A bug in gpuscope (a panic was caught at the boundary).
pub const GPUSCOPE_ERR_INTERNAL: c_int = 7;
/// The GPU or this process cannot do what was asked (a mode the GPU
/// lacks; a session after a sampling-mode session in the same process).
pub const GPUSCOPE_ERR_UNSUPPORTED: c_int = 8;

/// Trace mode: every kernel, timed and attributed.
pub const GPUSCOPE_MODE_TRACE: u32 = 0;
/// Metrics mode: trace plus hardware counters on selected launches.
pub const GPUSCOPE_MODE_METRICS: u32 = 1;
/// Sampling mode: trace plus hardware counters sampled device-wide at
/// `sampling_interval_us`, joined to kernels and ranges by time.
pub const GPUSCOPE_MODE_SAMPLING: u32 = 2;

/// Terminal table.
pub const GPUSCOPE_FORMAT_TABLE: c_int = 0;
/// JSON (schema_version 2: with the analysis).
pub const GPUSCOPE_FORMAT_JSON: c_int = 1;
/// CSV, one row per (NVTX path, kernel).
pub const GPUSCOPE_FORMAT_CSV: c_int = 2;
/// Chrome trace (ui.perfetto.dev).
pub const GPUSCOPE_FORMAT_CHROME: c_int = 3;
/// OpenMetrics text (what Prometheus scrapes).
pub const GPUSCOPE_FORMAT_OPENMETRICS: c_int = 4;

/// `gpuscope_config.launch_count`: every launch of each kernel (that
/// passes the filters) is measured.
pub const GPUSCOPE_LAUNCH_COUNT_ALL: u32 = u32::MAX;

/// `gpuscope_range_enter` flag: the range continues the work of the
/// training loop's thread (a module's backward on autograd's worker): on a
/// thread with no range of its own it nests under that thread's ranges.
pub const GPUSCOPE_RANGE_FOLLOW: u32 = 1;
/// `gpuscope_range_exit` flag: leave this opening of the range out of the
/// report (it did none of the work it names).
pub const GPUSCOPE_RANGE_DISCARD: u32 = 2;
/// `gpuscope_range_framework_memory`: figures at the range's start.
pub const GPUSCOPE_AT_START: u32 = 0;
/// `gpuscope_range_framework_memory`: figures at the range's end.
pub const GPUSCOPE_AT_END: u32 = 1;

/// Session options. Call `gpuscope_config_init` first: it sets
/// `struct_size`, which lets later versions add fields at the end.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct gpuscope_config {
    /// `sizeof(gpuscope_config)`, set by `gpuscope_config_init`.
    pub struct_size: u32,
    /// `GPUSCOPE_MODE_TRACE`, `GPUSCOPE_MODE_METRICS` or
    /// `GPUSCOPE_MODE_SAMPLING`.
    pub mode: u32,
    /// Per-kernel, per-range and per-copy records kept, at most this many
    /// of each, for the Chrome trace and per-launch figures (0, default:
    /// none).
    pub keep_trace: u32,
    /// Metrics mode: the first N launches of each kernel are measured (1 or
    /// more, default 3; `GPUSCOPE_LAUNCH_COUNT_ALL`: every launch).
    pub launch_count: u32,
    /// Metrics mode: comma-separated metric sets/names ("dram,flops"), or
    /// NULL; in sampling mode with trace windows, what a metrics pass asked
    /// of the live process measures.
    pub metrics: *const c_char,
    /// Metrics mode: regex on kernel names, or NULL.
    pub kernel_filter: *const c_char,
    /// Metrics mode: NVTX path prefix ("train/forward"), or NULL.
    pub nvtx_filter: *const c_char,
    /// Sampling mode: microseconds between samples (1 to 100000), or 0
    /// (default): 100, or 1000 with trace windows.
    pub sampling_interval_us: u32,
    /// Sampling mode, always-on setting: kernel records only for the first
    /// `trace_window_ms` of every `trace_period_ms` (PM sampling all the
    /// time). 0 and 0 (default): records all the time. A window of 0 with
    /// a period: no kernel records at all (the cheapest always-on setting:
    /// CUPTI keeps most of the records' per-launch cost after they are
    /// switched off). Otherwise the window is 10 ms or more and shorter
    /// than the period.
    pub trace_window_ms: u32,
    /// The period of the trace windows, ms.
    pub trace_period_ms: u32,
    /// Device memory allocations and releases recorded (1, default) or
    /// not (0): peaks, who holds memory, per-range figures.
    pub device_memory: u32,
    /// Metrics mode: after the first `launch_count`, every N-th launch of
    /// each kernel is measured too (0, default: none).
    pub every: u32,
    /// Kernels launched on a thread with no NVTX range of its own take the
    /// ranges of the thread that waits for them (1, default), or strict
    /// per-thread NVTX (0).
    pub cross_thread_ranges: u32,
    /// Host waits (stream, event and context synchronisation calls)
    /// recorded (1, default) or not (0).
    pub sync_records: u32,
    /// Copies and memsets recorded (1, default) or not (0).
    pub memory_records: u32,
    /// Kernels attributed to the launching thread and its NVTX ranges (1,
    /// default), or no launch callback and every kernel under "(no range)"
    /// (0).
    pub launch_attribution: u32,
    /// Bytes per activity buffer (64 KiB to 256 MiB, a multiple of 8;
    /// default 4 MiB).
    pub buffer_size: u32,
    /// Activity buffers alive at once (1 to 1024; default 64).
    pub max_buffers: u32,
    /// NVTX and launch events one thread may have waiting for the decoder
    /// (1024 to 16777216; default 262144).
    pub host_queue: u32,
    /// Range instances held at once (1 or more; default 100000).
    pub max_live_ranges: u32,
    /// Serve the running session's figures at http://ADDR/metrics for
    /// Prometheus: "HOST:PORT", or ":PORT" for every interface ("{rank}"
    /// is replaced by the process's rank); NULL or "" (default): none.
    pub prometheus: *const c_char,
    /// More settings by name, `NAME=VALUE` comma-separated
    /// ("sync_records=off,max_buffers=128"): any switch or count of the
    /// settings reference (docs/reference/configuration.md), applied after
    /// the fields above; NULL or "" (default): none. Settings added in
    /// later versions come this way, without a field of their own.
    pub settings: *const c_char,
}

/// Size of `gpuscope_config` before the trace-window fields: callers built
/// against that header pass it and get the fields' defaults (as callers of
/// any later, shorter version do).
const CONFIG_SIZE_V1: usize = std::mem::offset_of!(gpuscope_config, trace_window_ms);

/// Size of `gpuscope_config` in gpuscope 0.1.0, the first release: what
/// programs built against its header pass (frozen; later versions append).
const CONFIG_SIZE_0_1_0: usize = 104;

// Fields are appended whole: the struct ends with its last field, so an
// older caller's `sizeof` never takes in trailing padding that a later
// field would be read from.
const _: () = assert!(
    std::mem::size_of::<gpuscope_config>()
        == std::mem::offset_of!(gpuscope_config, settings) + std::mem::size_of::<*const c_char>()
);
const _: () = assert!(std::mem::size_of::<gpuscope_config>() >= CONFIG_SIZE_0_1_0);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

struct State {
    /// Shared only with a flush in progress, which stop waits out.
    session: Option<Arc<Session>>,
    /// Shared with writes in progress.
    report: Option<Arc<Report>>,
}

static STATE: Mutex<State> = Mutex::new(State { session: None, report: None });

fn last_error() -> String {
    LAST_ERROR.try_with(|e| e.borrow().to_string_lossy().into_owned()).unwrap_or_default()
}

fn set_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|e| *e.borrow_mut() = c);
}

fn code(e: &profiler::Error) -> c_int {
    set_error(e.message());
    match e.kind() {
        ErrorKind::LibraryNotFound | ErrorKind::NoDevice => GPUSCOPE_ERR_NO_GPU,
        ErrorKind::Unsupported => GPUSCOPE_ERR_UNSUPPORTED,
        ErrorKind::CuptiBusy => GPUSCOPE_ERR_BUSY,
        ErrorKind::InvalidConfig => GPUSCOPE_ERR_INVALID,
        ErrorKind::SessionActive | ErrorKind::NotRunning => GPUSCOPE_ERR_STATE,
        ErrorKind::Io => GPUSCOPE_ERR_IO,
        _ => GPUSCOPE_ERR_CUPTI,
    }
}

/// The panic boundary every exported function goes through.
fn guard(f: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        set_error("internal error in gpuscope (a panic was caught); please report it");
        GPUSCOPE_ERR_INTERNAL
    })
}

/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn opt_str<'a>(p: *const c_char, what: &str) -> Result<Option<&'a str>, c_int> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: per this function's contract.
    match unsafe { CStr::from_ptr(p) }.to_str() {
        Ok(s) => Ok(Some(s)),
        Err(_) => {
            set_error(&format!("{what} is not valid UTF-8"));
            Err(GPUSCOPE_ERR_INVALID)
        }
    }
}

/// Fills the first `size` bytes of `config`, the caller's
/// `sizeof(gpuscope_config)`, with the defaults (trace mode, first 3
/// launches per kernel in metrics mode; docs/reference/configuration.md
/// lists them), and `struct_size` with the size filled: a program built
/// against an older, shorter header gets its own fields, and the library
/// writes nothing past them. The header's `gpuscope_config_init(config)`
/// macro passes the size. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn gpuscope_config_init_sized(config: *mut gpuscope_config, size: usize) -> c_int {
    guard(|| {
        if config.is_null() {
            set_error("gpuscope_config_init: config is NULL");
            return GPUSCOPE_ERR_INVALID;
        }
        if size < CONFIG_SIZE_V1 {
            set_error(&format!(
                "gpuscope_config_init: a config of {size} bytes; allowed: {CONFIG_SIZE_V1} or more (sizeof(gpuscope_config))"
            ));
            return GPUSCOPE_ERR_INVALID;
        }
        let n = size.min(std::mem::size_of::<gpuscope_config>());
        let mut defaults = default_config();
        defaults.struct_size = n as u32;
        // SAFETY: non-null, and the caller's struct holds `size` >= `n`
        // writable bytes (the contract); `defaults` is a whole config; the
        // two do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(&defaults as *const gpuscope_config as *const u8, config as *mut u8, n)
        };
        GPUSCOPE_OK
    })
}

/// `gpuscope_config_init` as programs built against gpuscope 0.1.0's
/// header call it (and as `dlsym` or a function pointer finds it): fills
/// 0.1.0's fields, never more, so a later, longer config is not written
/// past an older program's struct. The header's `gpuscope_config_init`
/// macro calls `gpuscope_config_init_sized` with the header's size.
#[no_mangle]
pub unsafe extern "C" fn gpuscope_config_init(config: *mut gpuscope_config) -> c_int {
    // SAFETY: a caller of this symbol has at least 0.1.0's config.
    unsafe { gpuscope_config_init_sized(config, CONFIG_SIZE_0_1_0) }
}

/// The defaults `gpuscope_config_init` writes: those of the settings
/// registry, as in Rust.
fn default_config() -> gpuscope_config {
    gpuscope_config {
        struct_size: std::mem::size_of::<gpuscope_config>() as u32,
        mode: GPUSCOPE_MODE_TRACE,
        keep_trace: default_of("keep_trace"),
        launch_count: default_of("launch_count"),
        metrics: std::ptr::null(),
        kernel_filter: std::ptr::null(),
        nvtx_filter: std::ptr::null(),
        // 0: the default, which depends on the trace windows.
        sampling_interval_us: 0,
        trace_window_ms: 0,
        trace_period_ms: 0,
        device_memory: default_of("device_memory"),
        every: default_of("every"),
        cross_thread_ranges: default_of("cross_thread_ranges"),
        sync_records: default_of("sync_records"),
        memory_records: default_of("memory_records"),
        launch_attribution: default_of("launch_attribution"),
        buffer_size: default_of("buffer_size"),
        max_buffers: default_of("max_buffers"),
        host_queue: default_of("host_queue"),
        max_live_ranges: default_of("max_live_ranges"),
        prometheus: std::ptr::null(),
        settings: std::ptr::null(),
    }
}

/// A setting's default in C: Rust's (`in_process_default`, else
/// `default`), a switch's `on`/`off` as 1/0.
fn default_of(name: &str) -> u32 {
    let s = setting(name);
    match s.and_then(|s| s.in_process_default.or(s.default)) {
        Some("on") => 1,
        Some(v) => v.parse().unwrap_or(0),
        None => 0,
    }
}

/// The caller's config, of its header's size: fields its header did not
/// have take their defaults.
///
/// # Safety
/// `config` points to a config whose `struct_size` bytes are readable (set
/// by `gpuscope_config_init` of the caller's header).
unsafe fn read_config(config: *const gpuscope_config) -> gpuscope_config {
    let mut c = default_config();
    // SAFETY: every version of the struct begins with struct_size.
    let size = unsafe { std::ptr::addr_of!((*config).struct_size).read_unaligned() } as usize;
    let n = size.min(std::mem::size_of::<gpuscope_config>());
    // SAFETY: the caller's struct holds at least `n` readable bytes (the
    // contract above); `c` is a whole config, and the two do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(config as *const u8, &mut c as *mut gpuscope_config as *mut u8, n) };
    c
}

fn profiler_from(c: &gpuscope_config) -> Result<Profiler, c_int> {
    let refuse = |msg: String| {
        set_error(&msg);
        Err(GPUSCOPE_ERR_INVALID)
    };
    if (c.struct_size as usize) < CONFIG_SIZE_V1 {
        return refuse("gpuscope_config.struct_size is too small: call gpuscope_config_init first".into());
    }
    let switches = [
        ("device_memory", c.device_memory),
        ("cross_thread_ranges", c.cross_thread_ranges),
        ("sync_records", c.sync_records),
        ("memory_records", c.memory_records),
        ("launch_attribution", c.launch_attribution),
    ];
    if let Some((name, v)) = switches.iter().find(|(_, v)| *v > 1) {
        return refuse(format!("gpuscope_config.{name} = {v}; allowed: 0 (off) or 1 (on)"));
    }
    let first = match c.launch_count {
        0 => {
            return refuse(
                "gpuscope_config.launch_count = 0; allowed: 1 or more, or GPUSCOPE_LAUNCH_COUNT_ALL (every launch)"
                    .into(),
            )
        }
        GPUSCOPE_LAUNCH_COUNT_ALL => u64::MAX,
        n => n as u64,
    };
    // SAFETY: the caller passes NULL or C strings in these fields.
    let (kernels, nvtx, prometheus) = unsafe {
        (
            opt_str(c.kernel_filter, "kernel_filter")?,
            opt_str(c.nvtx_filter, "nvtx_filter")?,
            opt_str(c.prometheus, "prometheus")?,
        )
    };
    let mut selection = Selection::default().first(first).every(c.every as u64);
    if let Some(k) = kernels {
        selection = selection.kernels(k).map_err(|e| code(&e))?;
    }
    if let Some(n) = nvtx {
        selection = selection.nvtx(n);
    }
    // Sizes and counts are checked with the rest of the options when the
    // session starts.
    let mut p = Profiler::new()
        .keep_trace(c.keep_trace as usize)
        .device_memory(c.device_memory == 1)
        .cross_thread_ranges(c.cross_thread_ranges == 1)
        .sync_records(c.sync_records == 1)
        .memory_records(c.memory_records == 1)
        .launch_attribution(c.launch_attribution == 1)
        .buffer_size(c.buffer_size as usize)
        .max_buffers(c.max_buffers as usize)
        .host_queue(c.host_queue as usize)
        .max_live_ranges(c.max_live_ranges as usize)
        .select(selection);
    if let Some(addr) = prometheus.filter(|a| !a.is_empty()) {
        p = p.prometheus(addr);
    }
    // SAFETY: the caller passes NULL or a C string.
    if let Some(list) = unsafe { opt_str(c.settings, "gpuscope_config.settings")? } {
        p = profiler::config::apply_all(p, "gpuscope_config.settings", list).map_err(|e| code(&e))?;
    }
    if (c.trace_window_ms, c.trace_period_ms) != (0, 0) {
        let ms = |v: u32| std::time::Duration::from_millis(v as u64);
        p = p.trace_windows(ms(c.trace_window_ms), ms(c.trace_period_ms));
    }
    match c.mode {
        GPUSCOPE_MODE_TRACE => {}
        GPUSCOPE_MODE_METRICS => {
            // SAFETY: the caller passes NULL or a C string.
            let m = unsafe { opt_str(c.metrics, "metrics")? };
            p = p.metrics(MetricSet::parse(m.unwrap_or("")).map_err(|e| code(&e))?);
        }
        GPUSCOPE_MODE_SAMPLING => {
            let windows = (c.trace_window_ms, c.trace_period_ms) != (0, 0);
            // With trace windows: what a metrics pass asked of the live
            // process measures (without, refused as metrics mode's).
            // SAFETY: the caller passes NULL or a C string.
            if let Some(m) = unsafe { opt_str(c.metrics, "metrics")? }.filter(|m| !m.is_empty()) {
                p = p.metrics(MetricSet::parse(m).map_err(|e| code(&e))?);
            }
            let us = match c.sampling_interval_us {
                0 => (profiler::sampling::default_interval_ns(windows) / 1000) as u32,
                us => us,
            };
            if !profiler::sampling::INTERVALS_NS.contains(&(us as u64 * 1000)) {
                return refuse(format!(
                    "gpuscope_config.sampling_interval_us = {us}; allowed: 1 to 100000, or 0 for the default"
                ));
            }
            p = p.sampling(std::time::Duration::from_micros(us as u64));
        }
        other => {
            return refuse(format!(
                "gpuscope_config.mode = {other}; allowed: GPUSCOPE_MODE_TRACE (0), GPUSCOPE_MODE_METRICS (1), GPUSCOPE_MODE_SAMPLING (2)"
            ));
        }
    }
    Ok(p)
}

/// Starts the process's session. `config` may be NULL (defaults).
/// Returns `GPUSCOPE_ERR_NO_GPU` when there is no driver, GPU or CUPTI: the
/// program can carry on unprofiled. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn gpuscope_start(config: *const gpuscope_config) -> c_int {
    guard(|| {
        let p = if config.is_null() {
            Profiler::new()
        } else {
            // SAFETY: non-null; the caller passes a config set up by
            // gpuscope_config_init (its struct_size bytes readable).
            match profiler_from(&unsafe { read_config(config) }) {
                Ok(p) => p,
                Err(c) => return c,
            }
        };
        let mut st = STATE.lock().unwrap_or_else(|e| e.into_inner());
        if st.session.is_some() {
            set_error("a gpuscope session is already running");
            return GPUSCOPE_ERR_STATE;
        }
        match p.start() {
            Ok(s) => {
                st.session = Some(Arc::new(s));
                st.report = None;
                GPUSCOPE_OK
            }
            Err(e) => code(&e),
        }
    })
}

/// Stops the session and keeps its report for `gpuscope_write_report`.
/// Thread-safe.
#[no_mangle]
pub extern "C" fn gpuscope_stop() -> c_int {
    guard(|| {
        let session = STATE.lock().unwrap_or_else(|e| e.into_inner()).session.take();
        let Some(mut session) = session else {
            set_error("gpuscope_stop: no session is running");
            return GPUSCOPE_ERR_STATE;
        };
        // A flush on another thread holds a share for its duration.
        let session = loop {
            match Arc::try_unwrap(session) {
                Ok(s) => break s,
                Err(shared) => {
                    session = shared;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        };
        // The lock is not held while CUPTI flushes (its callbacks run here).
        match session.stop() {
            Ok(r) => {
                STATE.lock().unwrap_or_else(|e| e.into_inner()).report = Some(Arc::new(r));
                GPUSCOPE_OK
            }
            Err(e) => {
                let c = code(e.error());
                if let Some(r) = e.into_report() {
                    // Only writing failed: the report stays for gpuscope_write_report.
                    STATE.lock().unwrap_or_else(|e| e.into_inner()).report = Some(Arc::new(r));
                    set_error(&format!(
                        "{}; the report is kept: gpuscope_write_report can write it elsewhere",
                        last_error()
                    ));
                }
                c
            }
        }
    })
}

/// Asks CUPTI for the activity buffers completed so far. Thread-safe.
#[no_mangle]
pub extern "C" fn gpuscope_flush() -> c_int {
    guard(|| {
        // CUPTI's flush runs without the lock (it waits for its callbacks).
        let session = STATE.lock().unwrap_or_else(|e| e.into_inner()).session.clone();
        match session {
            Some(s) => {
                s.flush();
                GPUSCOPE_OK
            }
            None => {
                set_error("gpuscope_flush: no session is running");
                GPUSCOPE_ERR_STATE
            }
        }
    })
}

/// Takes the running session's report so far (every record CUPTI holds;
/// ranges with their closed instances; no per-kernel records) and keeps it
/// for `gpuscope_write_report`, in place of an earlier snapshot; the
/// session runs on, and its stop replaces the snapshot. Thread-safe.
#[no_mangle]
pub extern "C" fn gpuscope_snapshot() -> c_int {
    guard(|| {
        // Taken without the lock: CUPTI flushes, and the decoder answers.
        let session = STATE.lock().unwrap_or_else(|e| e.into_inner()).session.clone();
        let Some(session) = session else {
            set_error("gpuscope_snapshot: no session is running");
            return GPUSCOPE_ERR_STATE;
        };
        let report = match session.snapshot() {
            Ok(r) => r,
            Err(e) => return code(&e),
        };
        let mut st = STATE.lock().unwrap_or_else(|e| e.into_inner());
        // A stop meanwhile left its final report, which a snapshot must
        // not replace.
        if !st.session.as_ref().is_some_and(|s| Arc::ptr_eq(s, &session)) {
            set_error("gpuscope_snapshot: the session stopped while the snapshot was taken");
            return GPUSCOPE_ERR_STATE;
        }
        st.report = Some(Arc::new(report));
        GPUSCOPE_OK
    })
}

/// Writes the report of the last stopped session, or the running session's
/// latest snapshot (`gpuscope_snapshot`), to `path` in `format`
/// (`GPUSCOPE_FORMAT_*`). Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn gpuscope_write_report(path: *const c_char, format: c_int) -> c_int {
    guard(|| {
        // SAFETY: the caller passes NULL or a C string.
        let path = match unsafe { opt_str(path, "path") } {
            Ok(Some(p)) => p.to_string(),
            Ok(None) => {
                set_error("gpuscope_write_report: path is NULL");
                return GPUSCOPE_ERR_INVALID;
            }
            Err(c) => return c,
        };
        let format = match format {
            GPUSCOPE_FORMAT_TABLE => Format::Table,
            GPUSCOPE_FORMAT_JSON => Format::Json,
            GPUSCOPE_FORMAT_CSV => Format::Csv,
            GPUSCOPE_FORMAT_CHROME => Format::ChromeTrace,
            GPUSCOPE_FORMAT_OPENMETRICS => Format::OpenMetrics,
            other => {
                set_error(&format!(
                    "format = {other}; allowed: GPUSCOPE_FORMAT_TABLE/JSON/CSV/CHROME/OPENMETRICS (0-4)"
                ));
                return GPUSCOPE_ERR_INVALID;
            }
        };
        // Rendering and writing happen without the lock.
        let report = STATE.lock().unwrap_or_else(|e| e.into_inner()).report.clone();
        match report {
            Some(r) => match r.write(&path, format) {
                Ok(()) => GPUSCOPE_OK,
                Err(e) => code(&e),
            },
            None => {
                set_error("gpuscope_write_report: no report yet (stop the session, or take a snapshot)");
                GPUSCOPE_ERR_STATE
            }
        }
    })
}

/// Declares the model FLOPs one call of `range` performs (usually
/// `6 * parameters * tokens` for a training step): the report then gives the
/// range's model FLOPs utilisation. `range` is a path (`"train/step"`) or,
/// without `/`, a range name at any depth. Callable before or during a
/// session; a later call replaces it. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn gpuscope_declare_flops(range: *const c_char, flops_per_call: f64) -> c_int {
    guard(|| {
        // SAFETY: the caller passes NULL or a C string.
        let range = match unsafe { opt_str(range, "range") } {
            Ok(Some(r)) => r,
            Ok(None) => {
                set_error("gpuscope_declare_flops: range is NULL");
                return GPUSCOPE_ERR_INVALID;
            }
            Err(c) => return c,
        };
        match profiler::declare_flops(range, flops_per_call) {
            Ok(()) => GPUSCOPE_OK,
            Err(e) => code(&e),
        }
    })
}

/// Declares the work one call of `range` processes (`amount` of `unit`,
/// e.g. 4096 "tokens"; `unit` may be NULL): the report then gives its
/// throughput per second. Thread-safe.
#[no_mangle]
pub unsafe extern "C" fn gpuscope_declare_work(
    range: *const c_char,
    amount_per_call: f64,
    unit: *const c_char,
) -> c_int {
    guard(|| {
        // SAFETY: the caller passes NULL or C strings.
        let (range, unit) = match unsafe { (opt_str(range, "range"), opt_str(unit, "unit")) } {
            (Ok(Some(r)), Ok(u)) => (r, u.unwrap_or("")),
            (Ok(None), _) => {
                set_error("gpuscope_declare_work: range is NULL");
                return GPUSCOPE_ERR_INVALID;
            }
            (Err(c), _) | (_, Err(c)) => return c,
        };
        match profiler::declare_work(range, amount_per_call, unit) {
            Ok(()) => GPUSCOPE_OK,
            Err(e) => code(&e),
        }
    })
}

/// Pushes an NVTX range on the calling thread (other NVTX tools see it
/// too). Pair with `gpuscope_range_pop` on the same thread.
#[no_mangle]
pub unsafe extern "C" fn gpuscope_range_push(name: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: the caller passes NULL or a C string.
        let name = match unsafe { opt_str(name, "name") } {
            Ok(n) => n.unwrap_or(""),
            Err(c) => return c,
        };
        // The range stays open until gpuscope_range_pop: no guard to drop.
        std::mem::forget(gpuscope_nvtx::push(name));
        GPUSCOPE_OK
    })
}

/// Pops the calling thread's innermost range.
#[no_mangle]
pub extern "C" fn gpuscope_range_pop() -> c_int {
    guard(|| {
        gpuscope_nvtx::pop();
        GPUSCOPE_OK
    })
}

/// Opens a range on the calling thread straight in gpuscope's range stacks
/// (no NVTX call, so other NVTX tools do not see it; cheaper): for
/// framework integrations such as gpuscope's PyTorch hooks. `flags`: 0 or
/// `GPUSCOPE_RANGE_FOLLOW`. Close it with `gpuscope_range_exit` on the
/// same thread.
#[no_mangle]
pub unsafe extern "C" fn gpuscope_range_enter(name: *const c_char, flags: u32) -> c_int {
    guard(|| {
        // SAFETY: the caller passes NULL or a C string.
        let name = match unsafe { opt_str(name, "name") } {
            Ok(n) => n.unwrap_or(""),
            Err(c) => return c,
        };
        if flags & !GPUSCOPE_RANGE_FOLLOW != 0 {
            set_error(&format!("gpuscope_range_enter: flags {flags:#x}; allowed: 0 or GPUSCOPE_RANGE_FOLLOW (1)"));
            return GPUSCOPE_ERR_INVALID;
        }
        profiler::integration::enter_range(name, flags & GPUSCOPE_RANGE_FOLLOW != 0);
        GPUSCOPE_OK
    })
}

/// Closes the calling thread's innermost range opened by
/// `gpuscope_range_enter`. `flags`: 0 or `GPUSCOPE_RANGE_DISCARD`.
#[no_mangle]
pub extern "C" fn gpuscope_range_exit(flags: u32) -> c_int {
    guard(|| {
        if flags & !GPUSCOPE_RANGE_DISCARD != 0 {
            set_error(&format!("gpuscope_range_exit: flags {flags:#x}; allowed: 0 or GPUSCOPE_RANGE_DISCARD (2)"));
            return GPUSCOPE_ERR_INVALID;
        }
        profiler::integration::exit_range(flags & GPUSCOPE_RANGE_DISCARD != 0);
        GPUSCOPE_OK
    })
}

/// Counts `flops` model FLOPs, computed from operand shapes, for the
/// calling thread's innermost open range and those around it: the report
/// gives their model FLOPs utilisation without declared FLOPs (declared
/// ones win).
#[no_mangle]
pub extern "C" fn gpuscope_range_flops(flops: f64) -> c_int {
    guard(|| {
        if !flops.is_finite() || flops < 0.0 {
            set_error(&format!("gpuscope_range_flops: {flops} FLOPs; allowed: a finite number of 0 or more"));
            return GPUSCOPE_ERR_INVALID;
        }
        profiler::integration::add_range_flops(flops);
        GPUSCOPE_OK
    })
}

/// Counts `ns` nanoseconds of the calling thread's time as gpuscope's own
/// cost, for its innermost open range and those around it: the time a
/// framework integration's hooks took (PyTorch's automatic ranges send
/// theirs). It is taken out of the host's share of idle GPU time before
/// verdicts, as gpuscope's callbacks' time is.
#[no_mangle]
pub extern "C" fn gpuscope_range_cost(ns: u64) -> c_int {
    guard(|| {
        profiler::integration::add_own_cost(ns);
        GPUSCOPE_OK
    })
}

/// An id of the calling thread's innermost open NVTX range of the
/// program's own (not a library's, not one opened by
/// `gpuscope_range_enter`), or 0 where none is open (or on an internal
/// error): a framework integration asks it to tell whether the program
/// marks its steps itself (a new id at each step).
#[no_mangle]
pub extern "C" fn gpuscope_program_range() -> u64 {
    catch_unwind(profiler::integration::program_range_here).unwrap_or(0)
}

/// `gpuscope_python_functions` flag: the walk up a launching thread's
/// Python stack stops at this function's frame (a model's outermost
/// module, an optimizer's `step`).
pub const GPUSCOPE_FUNCTION_ROOT: u32 = 1;

/// Attributes launches to Python functions on the launching thread's
/// stack, without a call per function call: at each traced launch, the
/// frames of the `count` functions given (their code objects' addresses in
/// `codes`, the names of their ranges in `names`, `GPUSCOPE_FUNCTION_ROOT`
/// or 0 in `flags`) make ranges under the thread's own, keeping the
/// outermost `levels` (1 to 16) of them. The caller keeps the code objects
/// alive while they are registered. `here`: the code objects' addresses of
/// the caller's `here_count` innermost Python frames, innermost first,
/// three or more, each called from the next by Python, and
/// `here_first_local` the address of the innermost one's first local
/// variable: the interpreter's frame layout is found from them. A `count`
/// of 0 turns it off. Only in a Python process.
///
/// # Safety
/// `codes`, `names` and `flags` point to `count` elements each, `here` to
/// `here_count` (or are NULL with a count of 0); each name is a C string.
#[no_mangle]
pub unsafe extern "C" fn gpuscope_python_functions(
    codes: *const usize,
    names: *const *const c_char,
    flags: *const u32,
    count: u32,
    levels: u32,
    here: *const usize,
    here_count: u32,
    here_first_local: usize,
) -> c_int {
    guard(|| {
        if here_count > 0 && here.is_null() {
            set_error("gpuscope_python_functions: NULL `here` with a count of frames; allowed: an array of `here_count` elements, or a count of 0");
            return GPUSCOPE_ERR_INVALID;
        }
        let here: &[usize] = if here_count == 0 {
            &[]
        } else {
            // SAFETY: per this function's contract.
            unsafe { std::slice::from_raw_parts(here, here_count as usize) }
        };
        if count > 0 && (codes.is_null() || names.is_null() || flags.is_null()) {
            set_error("gpuscope_python_functions: NULL arrays with a count of functions; allowed: arrays of `count` elements, or a count of 0");
            return GPUSCOPE_ERR_INVALID;
        }
        let mut functions = Vec::with_capacity(count as usize);
        for i in 0..count as usize {
            // SAFETY: per this function's contract, each array has `count`
            // elements and each name is NULL or a C string.
            let (code, name, flag) = unsafe { (*codes.add(i), *names.add(i), *flags.add(i)) };
            // SAFETY: as above.
            let name = match unsafe { opt_str(name, "name") } {
                Ok(n) => n.unwrap_or("").to_string(),
                Err(c) => return c,
            };
            if flag & !GPUSCOPE_FUNCTION_ROOT != 0 {
                set_error(&format!(
                    "gpuscope_python_functions: flags {flag:#x} of {name:?}; allowed: 0 or GPUSCOPE_FUNCTION_ROOT (1)"
                ));
                return GPUSCOPE_ERR_INVALID;
            }
            if code == 0 {
                set_error(&format!("gpuscope_python_functions: code 0 for {name:?}; allowed: a code object's address"));
                return GPUSCOPE_ERR_INVALID;
            }
            functions.push(profiler::integration::PythonFunction {
                code,
                name,
                root: flag & GPUSCOPE_FUNCTION_ROOT != 0,
            });
        }
        match profiler::integration::attribute_python_functions(&functions, levels as usize, here, here_first_local) {
            Ok(()) => GPUSCOPE_OK,
            Err(e) => code(&e),
        }
    })
}

/// Writes into `buf` (`len` bytes, NUL included) the names of the
/// functions registered with `gpuscope_python_functions` on the calling
/// thread's Python stack, outermost first, joined by `/`: the ranges a
/// launch made here is attributed to, under the thread's own. `*needed`
/// (if not NULL) gets the whole text's length without its NUL; a longer
/// text than `len - 1` is cut.
///
/// # Safety
/// `buf` points to `len` writable bytes (or is NULL with `len` 0);
/// `needed` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn gpuscope_python_functions_here(buf: *mut c_char, len: usize, needed: *mut usize) -> c_int {
    guard(|| {
        if buf.is_null() && len > 0 {
            set_error("gpuscope_python_functions_here: NULL buffer with a length; allowed: a buffer of `len` bytes, or a length of 0");
            return GPUSCOPE_ERR_INVALID;
        }
        let text = profiler::integration::python_functions_here().join("/");
        if len > 0 {
            let n = text.len().min(len - 1);
            // SAFETY: per this function's contract, `buf` has `len` bytes;
            // `n + 1 <= len` are written.
            unsafe {
                std::ptr::copy_nonoverlapping(text.as_ptr(), buf as *mut u8, n);
                *buf.add(n) = 0;
            }
        }
        if !needed.is_null() {
            // SAFETY: per this function's contract.
            unsafe { *needed = text.len() };
        }
        GPUSCOPE_OK
    })
}

/// Reports a framework allocator's figures at the start
/// (`GPUSCOPE_AT_START`) or end (`GPUSCOPE_AT_END`) of the calling thread's
/// innermost open range: bytes in use by tensors, bytes the allocator holds
/// from the device, and its high-water mark of bytes in use (PyTorch's
/// automatic ranges send `torch.cuda.memory_stats` at steps and passes).
#[no_mangle]
pub extern "C" fn gpuscope_range_framework_memory(
    at: u32,
    allocated_bytes: u64,
    reserved_bytes: u64,
    peak_allocated_bytes: u64,
) -> c_int {
    guard(|| {
        if at > GPUSCOPE_AT_END {
            set_error(&format!(
                "gpuscope_range_framework_memory: at {at}; allowed: GPUSCOPE_AT_START (0) or GPUSCOPE_AT_END (1)"
            ));
            return GPUSCOPE_ERR_INVALID;
        }
        profiler::integration::range_framework_memory(
            at == GPUSCOPE_AT_END,
            allocated_bytes,
            reserved_bytes,
            peak_allocated_bytes,
        );
        GPUSCOPE_OK
    })
}

/// The last error on the calling thread ("" if none). The string stays
/// valid until the thread's next failing gpuscope call.
#[no_mangle]
pub extern "C" fn gpuscope_last_error() -> *const c_char {
    static EMPTY: &CStr = c"";
    // try_borrow: nothing may panic across the C boundary.
    LAST_ERROR.try_with(|e| e.try_borrow().map(|c| c.as_ptr()).unwrap_or(EMPTY.as_ptr())).unwrap_or(EMPTY.as_ptr())
}

/// The library version, e.g. "0.1.0". Static string.
#[no_mangle]
pub extern "C" fn gpuscope_version() -> *const c_char {
    static V: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => c"unknown",
    };
    V.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_writes_no_byte_past_the_caller_s_struct() {
        let whole = std::mem::size_of::<gpuscope_config>();
        for (size, legacy) in
            [(CONFIG_SIZE_0_1_0, true), (CONFIG_SIZE_V1, false), (CONFIG_SIZE_V1 + 4, false), (whole, false)]
        {
            // The caller's struct, then bytes that are not its own.
            let mut bytes = vec![0xabu8; whole + 16];
            let config = bytes.as_mut_ptr() as *mut gpuscope_config;
            // SAFETY: `bytes` holds more than `size` writable bytes.
            let code = unsafe {
                if legacy {
                    gpuscope_config_init(config)
                } else {
                    gpuscope_config_init_sized(config, size)
                }
            };
            assert_eq!(code, GPUSCOPE_OK);
            assert!(bytes[size..].iter().all(|&b| b == 0xab), "written past {size} bytes");
            // SAFETY: struct_size bytes were written.
            let c = unsafe { read_config(bytes.as_ptr() as *const gpuscope_config) };
            assert_eq!(c.struct_size as usize, size);
            assert!(profiler_from(&c).is_ok());
        }
        let mut small = [0u8; 8];
        // SAFETY: 8 writable bytes; refused before writing.
        let code = unsafe { gpuscope_config_init_sized(small.as_mut_ptr() as *mut gpuscope_config, 8) };
        assert_eq!(code, GPUSCOPE_ERR_INVALID);
        assert!(last_error().contains("a config of 8 bytes; allowed:"), "{}", last_error());
    }

    #[test]
    fn a_config_of_an_older_header_reads_its_own_bytes_and_defaults_the_rest() {
        // A caller's older struct, followed by bytes that are not its own.
        let mut bytes = vec![0xffu8; std::mem::size_of::<gpuscope_config>()];
        let mut old = default_config();
        old.struct_size = CONFIG_SIZE_V1 as u32;
        old.mode = GPUSCOPE_MODE_SAMPLING;
        // SAFETY: `bytes` holds a whole config; only its first part is written.
        unsafe { std::ptr::copy_nonoverlapping(&old as *const _ as *const u8, bytes.as_mut_ptr(), CONFIG_SIZE_V1) };
        // SAFETY: struct_size says CONFIG_SIZE_V1 bytes, all readable.
        let c = unsafe { read_config(bytes.as_ptr() as *const gpuscope_config) };
        assert_eq!((c.mode, c.sampling_interval_us), (GPUSCOPE_MODE_SAMPLING, old.sampling_interval_us));
        assert_eq!((c.trace_window_ms, c.trace_period_ms), (0, 0), "not read past struct_size");
        assert_eq!(c.device_memory, 1, "the default");
        assert!(profiler_from(&c).is_ok());
    }

    #[test]
    fn a_config_of_the_header_before_every_gets_the_defaults_of_the_later_fields() {
        let size = std::mem::offset_of!(gpuscope_config, every);
        let mut bytes = vec![0xffu8; std::mem::size_of::<gpuscope_config>()];
        let mut old = default_config();
        old.struct_size = size as u32;
        old.device_memory = 0;
        // SAFETY: `bytes` holds a whole config; only its first part is written.
        unsafe { std::ptr::copy_nonoverlapping(&old as *const _ as *const u8, bytes.as_mut_ptr(), size) };
        // SAFETY: struct_size says `size` bytes, all readable.
        let c = unsafe { read_config(bytes.as_ptr() as *const gpuscope_config) };
        assert_eq!(c.device_memory, 0, "its own field");
        assert_eq!((c.every, c.sync_records, c.max_buffers), (0, 1, 64), "the defaults");
        assert!(c.prometheus.is_null());
        assert!(profiler_from(&c).is_ok());
    }

    #[test]
    fn the_c_defaults_are_those_of_rust() {
        let debug = |p: Profiler| format!("{p:?}");
        let from_c = |mode| {
            let mut c = default_config();
            c.mode = mode;
            debug(profiler_from(&c).unwrap())
        };
        assert_eq!(from_c(GPUSCOPE_MODE_TRACE), debug(Profiler::new()));
        assert_eq!(from_c(GPUSCOPE_MODE_METRICS), debug(Profiler::new().metrics(MetricSet::default())));
        let interval = std::time::Duration::from_nanos(profiler::sampling::DEFAULT_INTERVAL_NS);
        assert_eq!(from_c(GPUSCOPE_MODE_SAMPLING), debug(Profiler::new().sampling(interval)));
    }

    #[test]
    fn launch_count_0_is_refused_as_in_the_environment_and_all_measures_every_launch() {
        let mut c = default_config();
        (c.mode, c.launch_count) = (GPUSCOPE_MODE_METRICS, 0);
        // SAFETY: a whole, initialised config.
        assert_eq!(unsafe { gpuscope_start(&c) }, GPUSCOPE_ERR_INVALID);
        assert!(last_error().contains("launch_count = 0; allowed: 1 or more, or GPUSCOPE_LAUNCH_COUNT_ALL"));
        c.launch_count = GPUSCOPE_LAUNCH_COUNT_ALL;
        let all = Profiler::new().metrics(MetricSet::default()).select(Selection::all());
        assert_eq!(format!("{:?}", profiler_from(&c).unwrap()), format!("{all:?}"));
    }

    #[test]
    fn bad_sizes_and_endpoints_are_refused_naming_the_field() {
        for (set, says) in [
            ((|c: &mut gpuscope_config| c.max_buffers = 0) as fn(&mut gpuscope_config), "max_buffers = 0"),
            (|c| c.buffer_size = 1000, "buffer_size = 1000 is out of range; allowed: bytes: 64 KiB to 256 MiB"),
            (|c| c.sync_records = 5, "gpuscope_config.sync_records = 5; allowed: 0 (off) or 1 (on)"),
            (|c| c.prometheus = c"9400".as_ptr(), "prometheus = \"9400\" is not valid; allowed: HOST:PORT"),
        ] {
            let mut c = default_config();
            set(&mut c);
            // SAFETY: a whole, initialised config.
            assert_eq!(unsafe { gpuscope_start(&c) }, GPUSCOPE_ERR_INVALID, "{says}");
            assert!(last_error().contains(says), "{}", last_error());
        }
    }

    #[test]
    fn settings_given_by_name_are_applied_and_bad_ones_refused_naming_what_was_typed() {
        let mut c = default_config();
        c.settings = c"sync_records=off, max_buffers=128,cross_thread_ranges=strict".as_ptr();
        let want = Profiler::new().sync_records(false).max_buffers(128).cross_thread_ranges(false);
        assert_eq!(format!("{:?}", profiler_from(&c).unwrap()), format!("{want:?}"));
        for (list, says) in [
            (c"sync_record=off", "\"sync_record\" is not a setting given by name (did you mean sync_records?)"),
            (c"max_buffers=0", "gpuscope_config.settings max_buffers=\"0\" is not valid; allowed: buffers, 1 to 1024"),
            (c"device_memory=maybe", "device_memory=\"maybe\" is not valid; allowed: on, off"),
            (
                c"mode=metrics",
                "\"mode\" is not given by name: it has its own field or keyword (C: mode, GPUSCOPE_MODE_*)",
            ),
            (c"quiet", "allowed: NAME=VALUE, comma-separated"),
        ] {
            c.settings = list.as_ptr();
            assert_eq!(profiler_from(&c).err(), Some(GPUSCOPE_ERR_INVALID), "{list:?}");
            assert!(last_error().contains(says), "{}", last_error());
        }
    }

    #[test]
    fn a_bad_device_memory_switch_or_bound_is_refused_naming_what_is_allowed() {
        let mut c = default_config();
        c.device_memory = 2;
        // SAFETY: a whole, initialised config.
        assert_eq!(unsafe { gpuscope_start(&c) }, GPUSCOPE_ERR_INVALID);
        let e = LAST_ERROR.with(|e| e.borrow().to_string_lossy().into_owned());
        assert!(e.contains("device_memory = 2; allowed: 0 (off) or 1 (on)"), "{e}");
        assert_eq!(gpuscope_range_framework_memory(7, 1, 2, 3), GPUSCOPE_ERR_INVALID);
        let e = LAST_ERROR.with(|e| e.borrow().to_string_lossy().into_owned());
        assert!(e.contains("at 7; allowed: GPUSCOPE_AT_START (0) or GPUSCOPE_AT_END (1)"), "{e}");
        assert_eq!(gpuscope_range_framework_memory(GPUSCOPE_AT_END, 1, 2, 3), GPUSCOPE_OK, "no range open: ignored");
    }

    #[test]
    fn bad_trace_windows_are_refused_before_anything_starts() {
        for (mode, w, p, says) in [
            (GPUSCOPE_MODE_SAMPLING, 5, 1000, "trace windows = 5 ms of every 1000 ms is not valid"),
            (GPUSCOPE_MODE_SAMPLING, 100, 100, "trace windows = 100 ms of every 100 ms is not valid"),
            (GPUSCOPE_MODE_SAMPLING, 0, 5, "trace windows = 0 ms of every 5 ms is not valid"),
            (GPUSCOPE_MODE_TRACE, 100, 1000, "trace windows need sampling mode"),
        ] {
            let mut c = default_config();
            (c.mode, c.trace_window_ms, c.trace_period_ms) = (mode, w, p);
            // SAFETY: a whole, initialised config.
            assert_eq!(unsafe { gpuscope_start(&c) }, GPUSCOPE_ERR_INVALID);
            let e = LAST_ERROR.with(|e| e.borrow().to_string_lossy().into_owned());
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn each_error_kind_has_the_c_code_its_callers_act_on() {
        use profiler::Error;
        for (kind, c) in [
            (ErrorKind::LibraryNotFound, GPUSCOPE_ERR_NO_GPU),
            (ErrorKind::NoDevice, GPUSCOPE_ERR_NO_GPU),
            (ErrorKind::CuptiBusy, GPUSCOPE_ERR_BUSY),
            (ErrorKind::InvalidConfig, GPUSCOPE_ERR_INVALID),
            (ErrorKind::SessionActive, GPUSCOPE_ERR_STATE),
            (ErrorKind::NotRunning, GPUSCOPE_ERR_STATE),
            (ErrorKind::Io, GPUSCOPE_ERR_IO),
            // Not "no GPU": the program asked for what cannot be done, and
            // Python raises rather than running on unprofiled.
            (ErrorKind::Unsupported, GPUSCOPE_ERR_UNSUPPORTED),
        ] {
            assert_eq!(code(&Error::new(kind, "m")), c, "{kind:?}");
        }
        assert_eq!(last_error(), "m");
    }

    #[test]
    fn stop_flush_snapshot_and_write_without_a_session_say_so() {
        assert_eq!(gpuscope_stop(), GPUSCOPE_ERR_STATE);
        assert!(last_error().contains("no session is running"), "{}", last_error());
        assert_eq!(gpuscope_flush(), GPUSCOPE_ERR_STATE);
        assert_eq!(gpuscope_snapshot(), GPUSCOPE_ERR_STATE);
        assert_eq!(last_error(), "gpuscope_snapshot: no session is running");
        // SAFETY: a C string.
        assert_eq!(unsafe { gpuscope_write_report(c"/tmp/x.json".as_ptr(), GPUSCOPE_FORMAT_JSON) }, GPUSCOPE_ERR_STATE);
    }
}
