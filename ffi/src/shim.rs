//! The same library as a shim for programs that cannot be rebuilt.
//!
//! - `CUDA_INJECTION64_PATH=libgpuscope.so app`: the CUDA driver loads the
//!   library during `cuInit` and calls [`InitializeInjection`], which starts
//!   a session configured by the `GPUSCOPE_*` variables; the report is
//!   written at exit.
//! - `LD_PRELOAD=libgpuscope.so app`: a constructor points
//!   `CUDA_INJECTION64_PATH` and `NVTX_INJECTION64_PATH` at this library
//!   (when unset) and does nothing else, so a process that never touches
//!   CUDA is unaffected.
//! - `NVTX_INJECTION64_PATH=libgpuscope.so`: every NVTX v3 copy in the
//!   process (the app's, PyTorch's, cuBLAS's) calls
//!   [`InitializeInjectionNvtx2`] and delivers its ranges to gpuscope.
//!
//! Nothing crosses into the host: no panic, no stdout, no exit code change;
//! problems are one line on stderr and the program runs on unprofiled.

use profiler::config::EnvConfig;
use std::ffi::{c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

/// This library's file path, from the dynamic loader.
fn own_path() -> Option<String> {
    // SAFETY: all-zero is a valid Dl_info; dladdr fills it for an address
    // inside this library (the function itself).
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the pointer is a function of this library.
    let found = unsafe { libc::dladdr(preload_init as *const libc::c_void, &mut info) } != 0;
    if !found || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader.
    let p = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned();
    Some(std::fs::canonicalize(&p).map(|c| c.display().to_string()).unwrap_or(p))
}

fn preloaded(path: &str) -> bool {
    let Some(list) = std::env::var_os("LD_PRELOAD") else { return false };
    let name = std::path::Path::new(path).file_name();
    list.to_string_lossy().split([':', ' ']).filter(|e| !e.is_empty()).any(|e| {
        let p = std::path::Path::new(e);
        std::fs::canonicalize(p).map(|c| c.display().to_string() == path).unwrap_or(false) || p.file_name() == name
    })
}

/// Runs when the library is loaded. Only under LD_PRELOAD does it do
/// anything: check the configuration, then arm the injection variables.
extern "C" fn preload_init() {
    let _ = catch_unwind(|| {
        let Some(path) = own_path() else { return };
        if !preloaded(&path) {
            return;
        }
        // A misspelt variable would do nothing.
        let names: Vec<String> = std::env::vars_os().map(|(k, _)| k.to_string_lossy().into_owned()).collect();
        if let Some(said) = profiler::config::unknown_variables_said(names.iter().map(String::as_str)) {
            say_once(&said);
        }
        if let Err(e) = EnvConfig::from_env() {
            say_once(&format!("gpuscope: {e}. The program runs unprofiled."));
            return;
        }
        // Single-threaded here (loader constructors run before main).
        for var in ["CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"] {
            if std::env::var_os(var).is_none() {
                std::env::set_var(var, &path);
            }
        }
    });
}

/// Says `said` once per job: the processes this one starts inherit the
/// preload and `GPUSCOPE_SAID`, which holds the keys of what was said.
/// Single-threaded (loader constructors run before main).
fn say_once(said: &str) {
    let key = profiler::config::said_key(said);
    let before = std::env::var("GPUSCOPE_SAID").unwrap_or_default();
    if before.split(',').any(|k| k == key) {
        return;
    }
    eprintln!("{said}");
    let keys = if before.is_empty() { key } else { format!("{before},{key}") };
    std::env::set_var("GPUSCOPE_SAID", keys);
}

#[used]
#[link_section = ".init_array"]
static PRELOAD_INIT: extern "C" fn() = preload_init;

static STARTED: AtomicBool = AtomicBool::new(false);

/// Called by the CUDA driver when `CUDA_INJECTION64_PATH` names this
/// library: starts profiling the process. Always returns 1 (a failure to
/// profile must not fail the program's CUDA initialisation).
#[no_mangle]
pub extern "C" fn InitializeInjection() -> c_int {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if STARTED.swap(true, Ordering::AcqRel) {
            return;
        }
        let cfg = match EnvConfig::from_env() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("gpuscope: {e}. The program runs unprofiled.");
                return;
            }
        };
        if let Err(e) = cfg.declare() {
            eprintln!("gpuscope: {e}. The program runs unprofiled.");
            return;
        }
        match cfg.profiler().start() {
            // Stopped, and the report written, at process exit.
            Ok(session) => std::mem::forget(session),
            Err(e) => eprintln!("gpuscope: {e}. The program runs unprofiled."),
        }
    }));
    1
}

/// The NVTX v3 tool entry point (`NVTX_INJECTION64_PATH`): attaches
/// gpuscope to the NVTX copy that calls it.
///
/// # Safety
/// Called by an NVTX copy with its `nvtxGetExportTable`.
#[no_mangle]
pub unsafe extern "C" fn InitializeInjectionNvtx2(
    get_export_table: gpuscope_nvtx::sys::NvtxGetExportTableFunc_t,
) -> c_int {
    catch_unwind(|| {
        profiler::integration::install_nvtx_handler();
        // SAFETY: forwarded as received from the NVTX copy.
        unsafe { gpuscope_nvtx::tool::initialize_injection(get_export_table) }
    })
    .unwrap_or(0)
}
