//! The callback API (`cupti_callbacks.h`): the subscriber, which callbacks
//! it gets, detaching CUPTI, and its version.

use super::{check, missing};
use crate::error::{Error, ErrorKind, Result};
use cupti_sys::{self as sys, sym, Cupti};
use std::ffi::CStr;

/// `cuptiSubscribe_v2` (`cuptiSubscribe` on CUPTI 12, which lacks it):
/// becomes the process's one subscriber, named `name`, with `callback`
/// (which must catch every panic: it is called from C). Another
/// subscriber is a [`ErrorKind::CuptiBusy`] error naming it where CUPTI
/// says who it is.
pub(crate) fn subscribe(
    cupti: &Cupti,
    callback: sys::CUpti_CallbackFunc,
    name: &CStr,
) -> Result<sys::CUpti_SubscriberHandle> {
    let mut handle: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
    let mut old = [0 as std::ffi::c_char; 256];
    let mut params = sys::CUpti_SubscriberParams {
        structSize: std::mem::size_of::<sys::CUpti_SubscriberParams>(),
        subscriberName: name.as_ptr(),
        oldSubscriberName: old.as_mut_ptr(),
        oldSubscriberSize: old.len(),
    };
    let (r, call) = match sym!(cupti, cuptiSubscribe_v2) {
        // SAFETY: all pointers are valid for the call (the name outlives
        // it); the callback has CUPTI's signature.
        Ok(f) => (unsafe { f(&mut handle, callback, std::ptr::null_mut(), &mut params) }, "cuptiSubscribe_v2"),
        Err(_) => {
            let f = sym!(cupti, cuptiSubscribe).map_err(missing)?;
            // SAFETY: as above.
            (unsafe { f(&mut handle, callback, std::ptr::null_mut()) }, "cuptiSubscribe")
        }
    };
    if r == sys::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED || r == sys::CUPTI_ERROR_MAX_LIMIT_REACHED {
        // SAFETY: CUPTI NUL-terminates within the buffer we gave it (zeroed).
        let holder = unsafe { CStr::from_ptr(old.as_ptr()) }.to_string_lossy().into_owned();
        let who = if holder.is_empty() {
            "another tool (Nsight Systems/Compute, torch.profiler, ...)".to_string()
        } else {
            format!("{holder:?}")
        };
        return Err(Error::new(
            ErrorKind::CuptiBusy,
            format!("CUPTI is already in use by {who}; only one CUPTI subscriber per process is possible, so gpuscope is not profiling"),
        ));
    }
    check(cupti, r, call)?;
    Ok(handle)
}

/// `cuptiUnsubscribe`: no more callbacks to `sub`.
///
/// # Safety
/// `sub` came from [`subscribe`] and is not yet unsubscribed.
pub(crate) unsafe fn unsubscribe(cupti: &Cupti, sub: sys::CUpti_SubscriberHandle) -> Result<()> {
    let f = sym!(cupti, cuptiUnsubscribe).map_err(missing)?;
    // SAFETY: per this function's contract.
    check(cupti, unsafe { f(sub) }, "cuptiUnsubscribe")
}

/// `cuptiEnableCallback`: `sub`'s callback for `(domain, cbid)` on or off.
/// An id the loaded CUPTI does not know fails.
///
/// # Safety
/// `sub` came from [`subscribe`] and is not yet unsubscribed.
pub(crate) unsafe fn enable_callback(
    cupti: &Cupti,
    on: bool,
    sub: sys::CUpti_SubscriberHandle,
    domain: sys::CUpti_CallbackDomain,
    cbid: sys::CUpti_CallbackId,
) -> Result<()> {
    let f = sym!(cupti, cuptiEnableCallback).map_err(missing)?;
    // SAFETY: per this function's contract; the rest are plain values.
    check(cupti, unsafe { f(on as u32, sub, domain, cbid) }, "cuptiEnableCallback")
}

/// `cuptiEnableDomain`: every callback of `domain` to `sub` on or off.
///
/// # Safety
/// `sub` came from [`subscribe`] and is not yet unsubscribed.
pub(crate) unsafe fn enable_domain(
    cupti: &Cupti,
    on: bool,
    sub: sys::CUpti_SubscriberHandle,
    domain: sys::CUpti_CallbackDomain,
) -> Result<()> {
    let f = sym!(cupti, cuptiEnableDomain).map_err(missing)?;
    // SAFETY: per this function's contract; the rest are plain values.
    check(cupti, unsafe { f(on as u32, sub, domain) }, "cuptiEnableDomain")
}

/// `cuptiFinalize`: detaches CUPTI from the process (a later subscriber
/// attaches it again).
///
/// # Safety
/// The subscriber is gone, every activity buffer has been flushed, and no
/// other thread is inside a CUPTI call or a gpuscope callback, or enters
/// one before this returns.
pub(crate) unsafe fn finalize(cupti: &Cupti) -> Result<()> {
    let f = sym!(cupti, cuptiFinalize).map_err(missing)?;
    // SAFETY: per this function's contract; no arguments.
    check(cupti, unsafe { f() }, "cuptiFinalize")
}

/// `cuptiGetVersion`: CUPTI's API version (13.0: 130000 and up; 12.9: 28).
pub(crate) fn get_version(cupti: &Cupti) -> Result<u32> {
    let f = sym!(cupti, cuptiGetVersion).map_err(missing)?;
    let mut v = 0u32;
    // SAFETY: the out pointer is a valid local.
    check(cupti, unsafe { f(&mut v) }, "cuptiGetVersion")?;
    Ok(v)
}
