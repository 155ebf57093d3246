//! The process's one loaded CUPTI, and turning its result codes into errors.

use crate::error::{Error, ErrorKind, Result};
use cupti_sys::{sym, CUptiResult, Cupti, CUPTI_SUCCESS};
use std::ffi::CStr;
use std::sync::OnceLock;

static CUPTI: OnceLock<Result<Cupti>> = OnceLock::new();

/// CUPTI, loaded on first use (see `cupti_sys::cupti_candidates` for where).
pub(crate) fn lib() -> Result<&'static Cupti> {
    CUPTI
        .get_or_init(|| {
            cupti_sys::load_cupti().map_err(|e| {
                Error::new(
                    ErrorKind::LibraryNotFound,
                    format!("{e}\nset GPUSCOPE_CUPTI_PATH to libcupti.so.13 or the folder that holds it"),
                )
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// CUPTI's name for a result code.
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

/// A missing symbol as a gpuscope error.
pub(crate) fn missing(e: cupti_sys::MissingSymbol) -> Error {
    Error::new(ErrorKind::LibraryNotFound, format!("{e} (libcupti.so.13 from CUDA 13 is required)"))
}

/// CUPTI's timestamp (ns, the activity records' clock); 0 if unavailable.
pub(crate) fn timestamp(cupti: &Cupti) -> u64 {
    let mut t = 0u64;
    if let Ok(f) = sym!(cupti, cuptiGetTimestamp) {
        // SAFETY: out pointer is a valid local.
        unsafe { f(&mut t) };
    }
    t
}
