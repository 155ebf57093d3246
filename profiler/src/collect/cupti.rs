//! The process's one loaded CUPTI, and turning its result codes into errors.

use crate::error::{Error, ErrorKind, Result};
use cupti_sys::{sym, CUptiResult, Cupti, CUPTI_SUCCESS};
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

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
            super::debug::debug(&format!("CUPTI loaded, API version {version}"));
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

/// `cuptiGetVersion` (0 if unavailable).
pub(crate) fn api_version(cupti: &Cupti) -> u32 {
    let mut v = 0u32;
    if let Ok(f) = sym!(cupti, cuptiGetVersion) {
        // SAFETY: out pointer is a valid local.
        unsafe { f(&mut v) };
    }
    v
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
    Error::new(ErrorKind::LibraryNotFound, format!("{e} (CUPTI from CUDA 12.9 or 13 is required)"))
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
}
