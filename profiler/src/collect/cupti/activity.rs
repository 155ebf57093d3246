//! The activity API (`cupti_activity.h`): kinds on and off, the buffer
//! callbacks, flushing, walking a completed buffer, and CUPTI's clock.

use super::{check, missing};
use crate::error::Result;
use cupti_sys::{self as sys, sym, Cupti};

/// `cuptiActivityEnable`: records of `kind` from now on.
pub(crate) fn enable(cupti: &Cupti, kind: sys::CUpti_ActivityKind) -> Result<()> {
    let f = sym!(cupti, cuptiActivityEnable).map_err(missing)?;
    // SAFETY: a plain integer argument.
    check(cupti, unsafe { f(kind) }, "cuptiActivityEnable")
}

/// `cuptiActivityDisable`: no more records of `kind`.
pub(crate) fn disable(cupti: &Cupti, kind: sys::CUpti_ActivityKind) -> Result<()> {
    let f = sym!(cupti, cuptiActivityDisable).map_err(missing)?;
    // SAFETY: a plain integer argument.
    check(cupti, unsafe { f(kind) }, "cuptiActivityDisable")
}

/// `cuptiActivityEnableAllocationSource`: allocation records name the
/// shared library whose call made them.
pub(crate) fn enable_allocation_source(cupti: &Cupti) -> Result<()> {
    let f = sym!(cupti, cuptiActivityEnableAllocationSource).map_err(missing)?;
    // SAFETY: a plain integer argument.
    check(cupti, unsafe { f(1) }, "cuptiActivityEnableAllocationSource")
}

/// `cuptiActivityFlushAll`: the buffers completed so far go to the
/// buffer-completed callback (with `CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`,
/// partial ones too), on the calling thread.
pub(crate) fn flush_all(cupti: &Cupti, flags: u32) -> Result<()> {
    let f = sym!(cupti, cuptiActivityFlushAll).map_err(missing)?;
    // SAFETY: a plain flag; the buffer callbacks it runs catch panics.
    check(cupti, unsafe { f(flags) }, "cuptiActivityFlushAll")
}

/// `cuptiActivityRegisterCallbacks`: where CUPTI gets buffers and hands
/// them back. Both must catch every panic (they are called from C).
pub(crate) fn register_callbacks(
    cupti: &Cupti,
    requested: sys::CUpti_BuffersCallbackRequestFunc,
    completed: sys::CUpti_BuffersCallbackCompleteFunc,
) -> Result<()> {
    let f = sym!(cupti, cuptiActivityRegisterCallbacks).map_err(missing)?;
    // SAFETY: two function pointers of CUPTI's callback types.
    check(cupti, unsafe { f(requested, completed) }, "cuptiActivityRegisterCallbacks")
}

/// `cuptiActivitySetAttribute` for an attribute whose value is a `uint8_t`.
pub(crate) fn set_attribute_u8(cupti: &Cupti, attr: sys::CUpti_ActivityAttribute, value: u8) -> Result<()> {
    let f = sym!(cupti, cuptiActivitySetAttribute).map_err(missing)?;
    let mut value = value;
    let mut size = std::mem::size_of::<u8>();
    // SAFETY: both pointers are valid locals for the call, and `size` says
    // how many bytes `value` has.
    check(cupti, unsafe { f(attr, &mut size, (&mut value as *mut u8).cast()) }, "cuptiActivitySetAttribute")
}

/// `cuptiActivityGetNumDroppedRecords`: records CUPTI dropped for `ctx`
/// and `stream_id` (as a buffer-completed callback received them) since it
/// was last asked; reading resets the count.
pub(crate) fn num_dropped_records(cupti: &Cupti, ctx: sys::CUcontext, stream_id: u32) -> Result<usize> {
    let f = sym!(cupti, cuptiActivityGetNumDroppedRecords).map_err(missing)?;
    let mut n = 0usize;
    // SAFETY: the out pointer is a valid local; the context is only a key
    // CUPTI looks its counts up by (null is allowed).
    check(cupti, unsafe { f(ctx, stream_id, &mut n) }, "cuptiActivityGetNumDroppedRecords")?;
    Ok(n)
}

/// `cuptiActivityGetNextRecord`: moves `record` to the buffer's next record
/// (`true`), or says the buffer has no more (`false`).
///
/// # Safety
/// `buffer` holds `valid` bytes of records CUPTI completed; `record` is
/// null (first call) or the record the previous call returned.
pub(crate) unsafe fn next_record(
    cupti: &Cupti,
    buffer: *mut u8,
    valid: usize,
    record: &mut *mut sys::CUpti_Activity,
) -> Result<bool> {
    let f = sym!(cupti, cuptiActivityGetNextRecord).map_err(missing)?;
    // SAFETY: per this function's contract.
    match unsafe { f(buffer, valid, record) } {
        sys::CUPTI_ERROR_MAX_LIMIT_REACHED => Ok(false),
        r => check(cupti, r, "cuptiActivityGetNextRecord").map(|()| true),
    }
}

/// `cuptiGetTimestamp`: CUPTI's clock, ns (the activity records' timebase).
pub(crate) fn get_timestamp(cupti: &Cupti) -> Result<u64> {
    let f = sym!(cupti, cuptiGetTimestamp).map_err(missing)?;
    let mut t = 0u64;
    // SAFETY: the out pointer is a valid local.
    check(cupti, unsafe { f(&mut t) }, "cuptiGetTimestamp")?;
    Ok(t)
}

/// `cuptiGetGraphNodeId`: the id kernel records give the graph node that
/// launched them.
pub(crate) fn graph_node_id(cupti: &Cupti, node: sys::CUgraphNode) -> Result<u64> {
    let f = sym!(cupti, cuptiGetGraphNodeId).map_err(missing)?;
    let mut id = 0u64;
    // SAFETY: `node` is a handle CUPTI passed to a graph callback; the out
    // pointer is a valid local.
    check(cupti, unsafe { f(node, &mut id) }, "cuptiGetGraphNodeId")?;
    Ok(id)
}
