//! The process's one loaded CUPTI, and the only code that calls it.
//!
//! Each function of the submodules makes one CUPTI call (a call that asks
//! for a size and then the data may call its function twice) and returns a
//! `Result`: every result code is checked here, so none can be dropped by
//! accident elsewhere. Functions whose arguments are plain values or Rust
//! buffers are safe; those that take a CUPTI object (a subscriber, a range
//! profiler, a host or PM sampling object) or a counter data image are
//! `unsafe fn`s whose contract is that the object is live. The safe types
//! built on them ([`HostObject`](super::metrics::rangeprof::HostObject),
//! [`ContextProfiler`](super::metrics::rangeprof::ContextProfiler),
//! [`PmDevice`](super::sampling::pmsampler::PmDevice)) keep those
//! contracts. A test reads gpuscope's sources and fails on a CUPTI call
//! made anywhere else.

pub(crate) mod activity;
pub(crate) mod callback;
pub(crate) mod host;
pub(crate) mod pm;
pub(crate) mod profiler;
pub(crate) mod range;

use super::debug::debug;
use crate::error::{Error, ErrorKind, Result};
use cupti_sys::{sym, CUptiResult, Cupti, CUPTI_SUCCESS};
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// CUPTI's `*_STRUCT_SIZE`: up to the end of the last field, without the
/// trailing padding `size_of` counts (CUPTI rejects the padded size with
/// CUPTI_ERROR_INVALID_PARAMETER).
macro_rules! struct_size {
    ($t:ty, $last:ident: $ft:ty) => {
        std::mem::offset_of!($t, $last) + std::mem::size_of::<$ft>()
    };
}
use struct_size;

static CUPTI: OnceLock<Result<Cupti>> = OnceLock::new();

/// CUPTI, loaded on first use (see `cupti_sys::cupti_candidates` for where).
pub(crate) fn lib() -> Result<&'static Cupti> {
    CUPTI
        .get_or_init(|| {
            let cupti = cupti_sys::load_cupti().map_err(|e| {
                Error::new(
                    ErrorKind::LibraryNotFound,
                    format!(
                        "{e}\nset GPUSCOPE_CUPTI_PATH to libcupti.so.13 (CUDA 13) or libcupti.so.12 (CUDA 12.9), \
                         or the folder that holds it"
                    ),
                )
            })?;
            let version = api_version(&cupti);
            debug(&format!("CUPTI loaded, API version {version}"));
            CUPTI_12.store(layout_of(version)?, Ordering::Relaxed);
            Ok(cupti)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The loaded CUPTI is 12.x (12.9): it writes CUPTI 12's records
/// (`CUpti_ActivityKernel9`) and its range profiler differs from 13's.
static CUPTI_12: AtomicBool = AtomicBool::new(false);

/// Whether the loaded CUPTI is 12.x rather than 13 (false before it
/// loads): it writes CUPTI 12's kernel records, which the decoder must be
/// told before it reads any.
pub(crate) fn is_cupti_12() -> bool {
    CUPTI_12.load(Ordering::Relaxed)
}

/// CUPTI 13.0's API version; 12.9's is 28.
const CUPTI_13: u32 = 130_000;
const CUPTI_12_9: u32 = 28;

/// Whether a CUPTI of this API version writes CUPTI 12's records (`true`)
/// or 13's; an error for versions whose records gpuscope has not read.
fn layout_of(version: u32) -> Result<bool> {
    match version {
        v if v >= CUPTI_13 => Ok(false),
        v if v >= CUPTI_12_9 => Ok(true),
        // A CUPTI too old is one missing: the program runs on unprofiled.
        v => Err(Error::new(
            ErrorKind::LibraryNotFound,
            format!(
                "the loaded CUPTI has API version {v}, older than CUDA 12.9's (28), whose records gpuscope has not \
                 been checked against; use CUPTI from CUDA 12.9 or 13 (pip install nvidia-cuda-cupti-cu12==12.9.*, \
                 then GPUSCOPE_CUPTI_PATH=.../nvidia/cuda_cupti/lib)"
            ),
        )),
    }
}

/// CUPTI's API version; 0 (too old for gpuscope) if it cannot be read.
pub(crate) fn api_version(cupti: &Cupti) -> u32 {
    callback::get_version(cupti).unwrap_or_else(|e| {
        debug(&format!("CUPTI's version: {e}"));
        0
    })
}

/// CUPTI's name for a result code (its own number if CUPTI has none).
pub(crate) fn result_name(cupti: &Cupti, code: CUptiResult) -> String {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    if let Ok(f) = sym!(cupti, cuptiGetResultString) {
        // SAFETY: out pointer is a valid local; CUPTI returns a static string.
        if unsafe { f(code, &mut p) } == CUPTI_SUCCESS && !p.is_null() {
            // SAFETY: CUPTI's result strings are static and NUL-terminated.
            return unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        }
    }
    format!("CUPTI error {code}")
}

/// Ok for `CUPTI_SUCCESS`, else an error naming the call.
pub(crate) fn check(cupti: &Cupti, code: CUptiResult, call: &str) -> Result<()> {
    if code == CUPTI_SUCCESS {
        Ok(())
    } else {
        Err(Error::cupti(code, format!("{call} failed: {}", result_name(cupti, code))))
    }
}

/// Like [`check`], but the failures a user can fix (no counter permission,
/// counters held by another profiler) get messages with the fix.
pub(crate) fn counters(cupti: &Cupti, code: CUptiResult, call: &str) -> Result<()> {
    match fixable(code, call) {
        Some(e) => Err(e),
        None => check(cupti, code, call),
    }
}

/// The error with a fix for `code`, if the user can fix it.
fn fixable(code: CUptiResult, call: &str) -> Option<Error> {
    match code {
        cupti_sys::CUPTI_ERROR_INSUFFICIENT_PRIVILEGES => Some(no_permission(call)),
        cupti_sys::CUPTI_ERROR_HARDWARE_BUSY => Some(counters_busy(call)),
        _ => None,
    }
}

/// The error for `CUPTI_ERROR_INSUFFICIENT_PRIVILEGES` from `call`, with the fix.
pub(crate) fn no_permission(call: &str) -> Error {
    Error::new(
        ErrorKind::NoPermission,
        format!(
            "{call}: reading GPU performance counters is not permitted for this user \
             (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES). Fix: load the driver with \
             NVreg_RestrictProfilingToAdminUsers=0, or run with CAP_SYS_ADMIN (CAP_PERFMON on newer drivers)"
        ),
    )
}

/// The error for `CUPTI_ERROR_HARDWARE_BUSY` from `call`, with the fix.
pub(crate) fn counters_busy(call: &str) -> Error {
    Error::new(
        ErrorKind::CountersBusy,
        format!(
            "{call}: the GPU's performance counters are in use by another profiler \
             (Nsight Compute, Nsight Systems GPU metrics, DCGM profiling, or gpuscope metrics mode in \
             another process) (CUPTI_ERROR_HARDWARE_BUSY). Fix: let the other profiler finish, or pause \
             DCGM profiling (`dcgmi profile --pause`) while gpuscope measures"
        ),
    )
}

/// A missing symbol as a gpuscope error.
pub(crate) fn missing(e: cupti_sys::MissingSymbol) -> Error {
    Error::new(ErrorKind::LibraryNotFound, format!("{e} (CUPTI from CUDA 12.9 or 13 is required)"))
}

/// A failure gpuscope can only tolerate (at teardown, or a setting CUPTI
/// may refuse): it changes nothing for the caller, so it is only logged
/// (`GPUSCOPE_DEBUG=1`), with `what` was being done.
pub(crate) fn tolerate(r: Result<()>, what: &str) {
    if let Err(e) = r {
        debug(&format!("{what}: {e} (tolerated)"));
    }
}

/// CUPTI's timestamp (ns, the activity records' clock); 0 if it cannot be
/// read (logged).
pub(crate) fn timestamp(cupti: &Cupti) -> u64 {
    activity::get_timestamp(cupti).unwrap_or_else(|e| {
        debug(&format!("CUPTI's timestamp: {e}"));
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_layout_follows_the_api_version() {
        assert!(!layout_of(130_001).unwrap(), "CUPTI 13: its own records");
        assert!(layout_of(28).unwrap(), "CUPTI 12.9: Kernel9 records");
        let e = layout_of(24).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LibraryNotFound);
        assert!(e.message().contains("API version 24") && e.message().contains("GPUSCOPE_CUPTI_PATH"), "{e}");
    }

    #[test]
    fn counter_failures_a_user_can_fix_name_the_fix() {
        let busy = fixable(cupti_sys::CUPTI_ERROR_HARDWARE_BUSY, "cuptiRangeProfilerStart").expect("busy is fixable");
        assert_eq!(busy.kind(), ErrorKind::CountersBusy);
        for part in ["cuptiRangeProfilerStart", "in use by another profiler", "HARDWARE_BUSY", "dcgmi profile --pause"]
        {
            assert!(busy.message().contains(part), "{part}: {}", busy.message());
        }
        let denied =
            fixable(cupti_sys::CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, "cuptiRangeProfilerEnable").expect("fixable");
        assert_eq!(denied.kind(), ErrorKind::NoPermission);
        assert!(denied.message().contains("NVreg_RestrictProfilingToAdminUsers=0"));
        assert!(fixable(CUPTI_SUCCESS, "x").is_none());
        assert!(fixable(cupti_sys::CUPTI_ERROR_UNKNOWN, "x").is_none());
    }

    /// Source files of `profiler/src`, relative paths and text.
    fn sources() -> Vec<(String, String)> {
        fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<(String, String)>) {
            for e in std::fs::read_dir(dir).expect("profiler/src is readable").flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, root, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let rel = p.strip_prefix(root).expect("under root").to_string_lossy().replace('\\', "/");
                    out.push((rel, std::fs::read_to_string(&p).expect("a readable source")));
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut out = Vec::new();
        walk(&root, &root, &mut out);
        out
    }

    /// What a line calls CUPTI with outside this layer: `sym!`, a function
    /// field or generated method of `Cupti` (`x.cuptiFoo`), or a layer call
    /// whose result is thrown away.
    fn raw_cupti_call(line: &str) -> Option<&'static str> {
        let code = line.split("//").next().unwrap_or("");
        if code.contains("sym!(") {
            return Some("sym!");
        }
        let bytes = code.as_bytes();
        if code.match_indices(".cupti").any(|(i, m)| bytes.get(i + m.len()).is_some_and(u8::is_ascii_uppercase)) {
            return Some("a CUPTI function field or method");
        }
        let discarded = code.trim_start().starts_with("let _ =") && code.contains("cupti::");
        discarded.then_some("a discarded CUPTI result")
    }

    #[test]
    fn cupti_is_called_only_through_this_layer_and_no_result_is_dropped() {
        let mut found = Vec::new();
        for (path, text) in sources() {
            if path.starts_with("collect/cupti/") {
                continue;
            }
            for (n, line) in text.lines().enumerate() {
                if let Some(what) = raw_cupti_call(line) {
                    found.push(format!("{path}:{}: {what}: {}", n + 1, line.trim()));
                }
            }
        }
        assert!(found.is_empty(), "CUPTI called outside collect/cupti/:\n{}", found.join("\n"));
        // The rule itself catches each form.
        assert_eq!(raw_cupti_call("let f = sym!(c, cuptiFinalize)?;"), Some("sym!"));
        assert_eq!(
            raw_cupti_call("unsafe { s.cupti.cuptiGetTimestamp(&mut t) };"),
            Some("a CUPTI function field or method")
        );
        assert_eq!(raw_cupti_call("    let _ = cupti::activity::flush_all(c, 0);"), Some("a discarded CUPTI result"));
        assert_eq!(raw_cupti_call("let c = s.cupti; // sym!( in a comment"), None);
    }
}
