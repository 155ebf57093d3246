//! The receiving side: NVTX v3's tool interface. `initialize_injection` is
//! what `InitializeInjectionNvtx2` does for every NVTX copy in the process
//! (the Rust emitter of this crate, or any C/C++ library's nvtx3 headers when
//! `NVTX_INJECTION64_PATH` names a library exporting it): it fills the
//! copy's CORE and CORE2 slots with functions that turn each call into an
//! [`Event`] for the installed [`Handler`].

use crate::loader;
use crate::sys::{self, nvtxDomainHandle_t, nvtxEventAttributes_t, nvtxStringHandle_t};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// A domain as the tool numbers it: 0 is the default domain.
pub type DomainId = u32;

/// What came with a range or mark.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EventAttributes<'a> {
    /// The message (empty when none was given).
    pub message: Cow<'a, str>,
    /// User category.
    pub category: u32,
    /// ARGB colour.
    pub color: Option<u32>,
    /// Payload, if any.
    pub payload: Option<crate::Payload>,
    /// Extended payloads (`nvToolsExtPayload.h`), as the caller laid them
    /// out; borrowed for the call (empty when none).
    pub extended: ExtendedPayloads<'a>,
}

/// The extended payloads of one event (at most [`MAX_EXTENDED`]; empty,
/// null and oversized blobs skipped), read only when asked: every push of
/// a program's own ranges builds attributes, few carry these.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExtendedPayloads<'a> {
    /// The caller's array (null: none), aligned, of `len` structs.
    data: *const sys::nvtxPayloadData_t,
    len: usize,
    _call: std::marker::PhantomData<&'a [u8]>,
}

impl Default for ExtendedPayloads<'_> {
    fn default() -> Self {
        ExtendedPayloads { data: std::ptr::null(), len: 0, _call: std::marker::PhantomData }
    }
}

impl<'a> ExtendedPayloads<'a> {
    /// The payloads, in the caller's order.
    pub fn iter(&self) -> impl Iterator<Item = ExtendedPayload<'a>> + '_ {
        (0..self.len).filter_map(move |i| {
            // SAFETY: `data` holds `len` aligned structs, valid for the call
            // (the contract of `extended`, the only constructor of a
            // non-empty value).
            let d = unsafe { &*self.data.add(i) };
            (!d.payload.is_null() && d.size > 0 && d.size <= MAX_EXTENDED_BYTES).then(|| ExtendedPayload {
                schema: d.schemaId,
                // SAFETY: each blob is valid for its size for the call (the
                // same contract); bytes need no alignment.
                data: unsafe { std::slice::from_raw_parts(d.payload as *const u8, d.size) },
            })
        })
    }

    /// Whether the event had none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One extended payload: a blob and the id of the schema that lays it out
/// (a library's static ids start at
/// [`sys::NVTX_PAYLOAD_SCHEMA_ID_STATIC_START`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExtendedPayload<'a> {
    /// Schema id.
    pub schema: u64,
    /// The blob.
    pub data: &'a [u8],
}

/// Extended payloads read per event, at most.
pub const MAX_EXTENDED: usize = 8;
/// A blob longer than this is not read (it is not a payload any library
/// sends per call).
const MAX_EXTENDED_BYTES: usize = 4096;

/// One NVTX call, as a tool sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// `nvtx[Domain]RangePush*`: the calling thread's stack for `domain` grows.
    Push {
        /// Domain.
        domain: DomainId,
        /// Message and attributes.
        attributes: EventAttributes<'a>,
    },
    /// `nvtx[Domain]RangePop`.
    Pop {
        /// Domain.
        domain: DomainId,
    },
    /// `nvtx[Domain]RangeStart*`: a range that may end on another thread.
    Start {
        /// Domain.
        domain: DomainId,
        /// The id the tool gave it (what `RangeEnd` will name).
        id: u64,
        /// Message and attributes.
        attributes: EventAttributes<'a>,
    },
    /// `nvtx[Domain]RangeEnd`.
    End {
        /// Domain.
        domain: DomainId,
        /// The id from `Start`.
        id: u64,
    },
    /// `nvtx[Domain]Mark*`.
    Mark {
        /// Domain.
        domain: DomainId,
        /// Message and attributes.
        attributes: EventAttributes<'a>,
    },
    /// `nvtxNameOsThread*`.
    NameThread {
        /// OS thread id.
        os_tid: u32,
        /// Its name.
        name: Cow<'a, str>,
    },
    /// `nvtx[Domain]NameCategory*`.
    NameCategory {
        /// Domain.
        domain: DomainId,
        /// Category number.
        category: u32,
        /// Its name.
        name: Cow<'a, str>,
    },
}

/// Receives NVTX events. Called on the thread that made the NVTX call, so it
/// must be quick and must not call NVTX itself.
pub trait Handler: Send + Sync {
    /// One event.
    fn event(&self, event: &Event<'_>);
}

static HANDLER: RwLock<Option<Arc<dyn Handler>>> = RwLock::new(None);

/// Changed by every [`set_handler`]: a thread keeps the handler it last
/// read, with this, and reads it again only when it has changed, so an
/// event writes nothing that other threads share.
static HANDLER_GENERATION: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The handler this thread read last, and the generation it read it in.
    static LOCAL_HANDLER: RefCell<(u64, Option<Arc<dyn Handler>>)> = const { RefCell::new((0, None)) };
}

/// Installs the handler every NVTX event goes to (`None`: drop events).
/// A thread holds the handler it used last until its next NVTX event or
/// its end, so a replaced handler is dropped only then: a handler must not
/// rely on being dropped here (to close a channel, say).
pub fn set_handler(handler: Option<Arc<dyn Handler>>) {
    let mut h = HANDLER.write().unwrap_or_else(|e| e.into_inner());
    *h = handler;
    HANDLER_GENERATION.fetch_add(1, Ordering::AcqRel);
}

fn dispatch(ev: Event<'_>) {
    let generation = HANDLER_GENERATION.load(Ordering::Acquire);
    let handled = LOCAL_HANDLER.try_with(|local| {
        if local.try_borrow().is_ok_and(|l| l.0 != generation) {
            // Read after the generation: a change in between is seen again
            // at the next event.
            let current = HANDLER.read().unwrap_or_else(|e| e.into_inner()).clone();
            let old = local.try_borrow_mut().ok().map(|mut l| std::mem::replace(&mut *l, (generation, current)));
            // Dropped with no lock or borrow held: a handler's drop may
            // install another handler.
            drop(old);
        }
        // Borrowed shared: a handler that emits NVTX (it must not) still
        // gets here.
        let Ok(l) = local.try_borrow() else { return false };
        if l.0 != generation {
            return false;
        }
        if let Some(h) = &l.1 {
            // A panic must not unwind into C.
            let _ = catch_unwind(AssertUnwindSafe(|| h.event(&ev)));
        }
        true
    });
    if handled != Ok(true) {
        // This thread's copy is being torn down or replaced: the shared one.
        let h = HANDLER.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(h) = h {
            // The lock is released: the handler may install another handler.
            let _ = catch_unwind(AssertUnwindSafe(|| h.event(&ev)));
        }
    }
}

// Domains and registered strings live as long as the process: their
// handles are indexes + 1 into these tables, and their names are leaked
// once (programs create a handful).
static DOMAINS: RwLock<Vec<&'static str>> = RwLock::new(Vec::new());
static STRINGS: RwLock<Vec<&'static str>> = RwLock::new(Vec::new());
static INTERN_LOCK: Mutex<()> = Mutex::new(());

fn intern(table: &RwLock<Vec<&'static str>>, s: &str) -> usize {
    let _g = INTERN_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut t = table.write().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = t.iter().position(|x| *x == s) {
        return i + 1;
    }
    t.push(Box::leak(s.to_owned().into_boxed_str()));
    t.len()
}

/// The name of a domain (`None` for the default domain or an unknown id).
pub fn domain_name(id: DomainId) -> Option<&'static str> {
    thread_local! {
        /// The domains as this thread last read them: ids never change
        /// their name, so a copy is read again only for an id past it.
        static LOCAL_DOMAINS: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
    }
    let i = (id as usize).checked_sub(1)?;
    let shared = || DOMAINS.read().unwrap_or_else(|e| e.into_inner()).get(i).copied();
    LOCAL_DOMAINS
        .try_with(|local| {
            let mut l = local.try_borrow_mut().ok()?;
            if i >= l.len() {
                l.clone_from(&DOMAINS.read().unwrap_or_else(|e| e.into_inner()));
            }
            Some(l.get(i).copied())
        })
        .ok()
        .flatten()
        .unwrap_or_else(shared)
}

/// The id of the domain named `name`, made if no program created it: for
/// a tool's own ranges, kept apart from the program's by their domain.
pub fn domain(name: &str) -> DomainId {
    intern(&DOMAINS, name) as DomainId
}

fn domain_id(h: nvtxDomainHandle_t) -> DomainId {
    h as usize as DomainId
}

fn registered(h: nvtxStringHandle_t) -> Cow<'static, str> {
    let i = h as usize;
    let t = STRINGS.read().unwrap_or_else(|e| e.into_inner());
    match i.checked_sub(1).and_then(|i| t.get(i)) {
        Some(s) => Cow::Borrowed(*s),
        None => Cow::Borrowed(""),
    }
}

/// Reads a C string; invalid UTF-8 is replaced, not rejected.
///
/// # Safety
/// `p` is null or a NUL-terminated string valid for the returned lifetime.
unsafe fn ascii<'a>(p: *const c_char) -> Cow<'a, str> {
    if p.is_null() {
        return Cow::Borrowed("");
    }
    // Messages are short and ASCII: one pass finds the NUL and checks
    // every byte is ASCII (valid UTF-8 then), cheaper than `strlen` and a
    // UTF-8 check (which cost as much as the rest of an event).
    let mut len = 0;
    let mut high = 0u8;
    while len < SHORT {
        // SAFETY: the string is NUL-terminated and we stop at the NUL.
        let b = unsafe { *p.add(len) } as u8;
        if b == 0 {
            break;
        }
        high |= b;
        len += 1;
    }
    if len < SHORT && high < 0x80 {
        // SAFETY: `len` bytes before the NUL, all ASCII.
        return Cow::Borrowed(unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(p as *const u8, len))
        });
    }
    // SAFETY: per this function's contract.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Messages shorter than this are read in one pass of their own.
const SHORT: usize = 64;

/// Reads a `wchar_t` (UTF-32 on Linux) string.
///
/// # Safety
/// `p` is null or a NUL-terminated wide string.
unsafe fn wide<'a>(p: *const libc::wchar_t) -> Cow<'a, str> {
    let mut out = String::new();
    if p.is_null() {
        return Cow::Owned(out);
    }
    let mut i = 0;
    loop {
        // SAFETY: the string is NUL-terminated; we stop at the NUL.
        let c = unsafe { *p.add(i) };
        if c == 0 {
            break;
        }
        out.push(char::from_u32(c as u32).unwrap_or(char::REPLACEMENT_CHARACTER));
        i += 1;
    }
    Cow::Owned(out)
}

/// Decodes an event attribute struct.
///
/// # Safety
/// `a` is null or points to an `nvtxEventAttributes_t` whose message is valid.
unsafe fn attributes<'a>(a: *const nvtxEventAttributes_t) -> EventAttributes<'a> {
    if a.is_null() {
        return EventAttributes {
            message: Cow::Borrowed(""),
            category: 0,
            color: None,
            payload: None,
            extended: ExtendedPayloads::default(),
        };
    }
    // SAFETY: per this function's contract. Older callers may pass a smaller
    // struct (`size`), but every field read here exists since NVTX v1.
    let a = unsafe { &*a };
    // SAFETY: the union member read is the one messageType names.
    let message = unsafe {
        match a.messageType {
            sys::NVTX_MESSAGE_TYPE_ASCII => ascii(a.message.ascii),
            sys::NVTX_MESSAGE_TYPE_UNICODE => wide(a.message.unicode),
            sys::NVTX_MESSAGE_TYPE_REGISTERED => registered(a.message.registered),
            _ => Cow::Borrowed(""),
        }
    };
    let payload = match a.payloadType {
        sys::NVTX_PAYLOAD_TYPE_UNSIGNED_INT64 => Some(crate::Payload::U64(a.payload)),
        sys::NVTX_PAYLOAD_TYPE_INT64 => Some(crate::Payload::I64(a.payload as i64)),
        sys::NVTX_PAYLOAD_TYPE_DOUBLE => Some(crate::Payload::F64(f64::from_bits(a.payload))),
        _ => None,
    };
    let extended = if a.payloadType == sys::NVTX_PAYLOAD_TYPE_EXT {
        // SAFETY: an extended payload's `payload` points to `reserved0`
        // payload data structs, each naming its blob, valid for the call.
        unsafe { extended(a.payload as usize as *const sys::nvtxPayloadData_t, a.reserved0) }
    } else {
        ExtendedPayloads::default()
    };
    EventAttributes {
        message,
        category: a.category,
        color: (a.colorType == sys::NVTX_COLOR_ARGB).then_some(a.color),
        payload,
        extended,
    }
}

/// The `count` extended payloads at `data` (at most [`MAX_EXTENDED`]; none
/// from a null or misaligned array), read when iterated.
///
/// # Safety
/// `data` is null or points to `count` `nvtxPayloadData_t`s whose blobs are
/// valid for their sizes for the returned lifetime.
unsafe fn extended<'a>(data: *const sys::nvtxPayloadData_t, count: i32) -> ExtendedPayloads<'a> {
    // A misaligned array is no caller's: reading it would be undefined.
    if data.is_null() || count <= 0 || !data.is_aligned() {
        return ExtendedPayloads::default();
    }
    ExtendedPayloads { data, len: (count as usize).min(MAX_EXTENDED), _call: std::marker::PhantomData }
}

fn plain(message: Cow<'_, str>) -> EventAttributes<'_> {
    EventAttributes { message, category: 0, color: None, payload: None, extended: ExtendedPayloads::default() }
}

static NEXT_RANGE_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    // Push depth per thread, all domains together: what push/pop return.
    static DEPTH: Cell<i32> = const { Cell::new(0) };
}

fn push_depth() -> c_int {
    DEPTH.with(|d| {
        let v = d.get();
        d.set(v + 1);
        v
    })
}

fn pop_depth() -> c_int {
    DEPTH.with(|d| {
        let v = d.get();
        if v == 0 {
            return -1;
        }
        d.set(v - 1);
        v - 1
    })
}

// Every function below runs inside the host's NVTX call: nothing may unwind
// out of it, so each body is wrapped.
fn guarded<R>(default: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(default)
}

unsafe extern "C" fn mark_ex(a: *const nvtxEventAttributes_t) {
    // SAFETY: NVTX passes valid attributes.
    guarded((), || dispatch(Event::Mark { domain: 0, attributes: unsafe { attributes(a) } }))
}
unsafe extern "C" fn mark_a(m: *const c_char) {
    // SAFETY: NVTX passes a valid C string.
    guarded((), || dispatch(Event::Mark { domain: 0, attributes: plain(unsafe { ascii(m) }) }))
}
unsafe extern "C" fn mark_w(m: *const libc::wchar_t) {
    // SAFETY: NVTX passes a valid wide string.
    guarded((), || dispatch(Event::Mark { domain: 0, attributes: plain(unsafe { wide(m) }) }))
}
fn start(domain: DomainId, attributes: EventAttributes<'_>) -> u64 {
    let id = NEXT_RANGE_ID.fetch_add(1, Ordering::Relaxed);
    dispatch(Event::Start { domain, id, attributes });
    id
}
unsafe extern "C" fn range_start_ex(a: *const nvtxEventAttributes_t) -> u64 {
    // SAFETY: NVTX passes valid attributes.
    guarded(0, || start(0, unsafe { attributes(a) }))
}
unsafe extern "C" fn range_start_a(m: *const c_char) -> u64 {
    // SAFETY: NVTX passes a valid C string.
    guarded(0, || start(0, plain(unsafe { ascii(m) })))
}
unsafe extern "C" fn range_start_w(m: *const libc::wchar_t) -> u64 {
    // SAFETY: NVTX passes a valid wide string.
    guarded(0, || start(0, plain(unsafe { wide(m) })))
}
unsafe extern "C" fn range_end(id: u64) {
    guarded((), || dispatch(Event::End { domain: 0, id }))
}
fn push(domain: DomainId, attributes: EventAttributes<'_>) -> c_int {
    let depth = push_depth();
    dispatch(Event::Push { domain, attributes });
    depth
}
fn pop(domain: DomainId) -> c_int {
    let depth = pop_depth();
    dispatch(Event::Pop { domain });
    depth
}
unsafe extern "C" fn range_push_ex(a: *const nvtxEventAttributes_t) -> c_int {
    // SAFETY: NVTX passes valid attributes.
    guarded(-1, || push(0, unsafe { attributes(a) }))
}
unsafe extern "C" fn range_push_a(m: *const c_char) -> c_int {
    // SAFETY: NVTX passes a valid C string.
    guarded(-1, || push(0, plain(unsafe { ascii(m) })))
}
unsafe extern "C" fn range_push_w(m: *const libc::wchar_t) -> c_int {
    // SAFETY: NVTX passes a valid wide string.
    guarded(-1, || push(0, plain(unsafe { wide(m) })))
}
unsafe extern "C" fn range_pop() -> c_int {
    guarded(-1, || pop(0))
}
unsafe extern "C" fn name_category_a(category: u32, n: *const c_char) {
    // SAFETY: NVTX passes a valid C string.
    guarded((), || dispatch(Event::NameCategory { domain: 0, category, name: unsafe { ascii(n) } }))
}
unsafe extern "C" fn name_category_w(category: u32, n: *const libc::wchar_t) {
    // SAFETY: NVTX passes a valid wide string.
    guarded((), || dispatch(Event::NameCategory { domain: 0, category, name: unsafe { wide(n) } }))
}
unsafe extern "C" fn name_os_thread_a(os_tid: u32, n: *const c_char) {
    // SAFETY: NVTX passes a valid C string.
    guarded((), || dispatch(Event::NameThread { os_tid, name: unsafe { ascii(n) } }))
}
unsafe extern "C" fn name_os_thread_w(os_tid: u32, n: *const libc::wchar_t) {
    // SAFETY: NVTX passes a valid wide string.
    guarded((), || dispatch(Event::NameThread { os_tid, name: unsafe { wide(n) } }))
}
unsafe extern "C" fn domain_mark_ex(d: nvtxDomainHandle_t, a: *const nvtxEventAttributes_t) {
    // SAFETY: NVTX passes valid attributes.
    guarded((), || dispatch(Event::Mark { domain: domain_id(d), attributes: unsafe { attributes(a) } }))
}
unsafe extern "C" fn domain_range_start_ex(d: nvtxDomainHandle_t, a: *const nvtxEventAttributes_t) -> u64 {
    // SAFETY: NVTX passes valid attributes.
    guarded(0, || start(domain_id(d), unsafe { attributes(a) }))
}
unsafe extern "C" fn domain_range_end(d: nvtxDomainHandle_t, id: u64) {
    guarded((), || dispatch(Event::End { domain: domain_id(d), id }))
}
unsafe extern "C" fn domain_range_push_ex(d: nvtxDomainHandle_t, a: *const nvtxEventAttributes_t) -> c_int {
    // SAFETY: NVTX passes valid attributes.
    guarded(-1, || push(domain_id(d), unsafe { attributes(a) }))
}
unsafe extern "C" fn domain_range_pop(d: nvtxDomainHandle_t) -> c_int {
    guarded(-1, || pop(domain_id(d)))
}
unsafe extern "C" fn domain_name_category_a(d: nvtxDomainHandle_t, category: u32, n: *const c_char) {
    // SAFETY: NVTX passes a valid C string.
    guarded((), || dispatch(Event::NameCategory { domain: domain_id(d), category, name: unsafe { ascii(n) } }))
}
unsafe extern "C" fn domain_name_category_w(d: nvtxDomainHandle_t, category: u32, n: *const libc::wchar_t) {
    // SAFETY: NVTX passes a valid wide string.
    guarded((), || dispatch(Event::NameCategory { domain: domain_id(d), category, name: unsafe { wide(n) } }))
}
unsafe extern "C" fn domain_register_string_a(_d: nvtxDomainHandle_t, s: *const c_char) -> nvtxStringHandle_t {
    // SAFETY: NVTX passes a valid C string.
    guarded(std::ptr::null_mut(), || intern(&STRINGS, &unsafe { ascii(s) }) as nvtxStringHandle_t)
}
unsafe extern "C" fn domain_register_string_w(_d: nvtxDomainHandle_t, s: *const libc::wchar_t) -> nvtxStringHandle_t {
    // SAFETY: NVTX passes a valid wide string.
    guarded(std::ptr::null_mut(), || intern(&STRINGS, &unsafe { wide(s) }) as nvtxStringHandle_t)
}
unsafe extern "C" fn domain_create_a(n: *const c_char) -> nvtxDomainHandle_t {
    // SAFETY: NVTX passes a valid C string.
    guarded(std::ptr::null_mut(), || intern(&DOMAINS, &unsafe { ascii(n) }) as nvtxDomainHandle_t)
}
unsafe extern "C" fn domain_create_w(n: *const libc::wchar_t) -> nvtxDomainHandle_t {
    // SAFETY: NVTX passes a valid wide string.
    guarded(std::ptr::null_mut(), || intern(&DOMAINS, &unsafe { wide(n) }) as nvtxDomainHandle_t)
}
unsafe extern "C" fn domain_destroy(_d: nvtxDomainHandle_t) {}
unsafe extern "C" fn initialize(_reserved: *const c_void) {}

/// Fills one module's slots: `fns[i]` goes to slot `i` where the emitter's
/// table has that slot (older emitters have fewer).
///
/// # Safety
/// `get` is a valid `GetModuleFunctionTable`.
unsafe fn fill(
    get: unsafe extern "C" fn(u32, *mut sys::NvtxFunctionTable, *mut u32) -> c_int,
    module: u32,
    fns: &[(usize, *mut c_void)],
) -> bool {
    let mut table: sys::NvtxFunctionTable = std::ptr::null_mut();
    let mut size = 0u32;
    // SAFETY: out pointers are valid locals.
    if unsafe { get(module, &mut table, &mut size) } == 0 || table.is_null() {
        return false;
    }
    for &(i, f) in fns {
        if i < size as usize {
            // SAFETY: entries 1..size of the table point at the emitter's
            // slots, which the NVTX protocol lets the tool write.
            let slot = unsafe { *table.add(i) };
            if !slot.is_null() {
                // Other threads may be calling through this slot: the
                // store is atomic (a pointer-sized, aligned slot).
                // SAFETY: a valid, aligned slot that lives as long as the
                // emitter's NVTX copy; every write to it here is atomic.
                let slot = unsafe { std::sync::atomic::AtomicPtr::from_ptr(slot.cast::<*mut c_void>()) };
                slot.store(f, Ordering::Release);
            }
        }
    }
    true
}

/// What `InitializeInjectionNvtx2` does: attach this tool to the NVTX copy
/// whose export table `get_export_table` returns. Returns 1 on success.
///
/// # Safety
/// `get_export_table` is an NVTX `nvtxGetExportTable` function.
pub unsafe extern "C" fn initialize_injection(get_export_table: sys::NvtxGetExportTableFunc_t) -> c_int {
    guarded(0, || {
        // SAFETY: the export table function comes from an NVTX copy.
        let cb = unsafe { get_export_table(sys::NVTX_ETID_CALLBACKS) } as *const sys::NvtxExportTableCallbacks;
        if cb.is_null() {
            return 0;
        }
        // SAFETY: a non-null callbacks table is a valid static struct.
        let Some(get) = (unsafe { &*cb }).GetModuleFunctionTable else {
            return 0;
        };
        use sys::{core as c, core2 as c2};
        let core: [(usize, *mut c_void); 15] = [
            (c::MarkEx, mark_ex as *mut c_void),
            (c::MarkA, mark_a as *mut c_void),
            (c::MarkW, mark_w as *mut c_void),
            (c::RangeStartEx, range_start_ex as *mut c_void),
            (c::RangeStartA, range_start_a as *mut c_void),
            (c::RangeStartW, range_start_w as *mut c_void),
            (c::RangeEnd, range_end as *mut c_void),
            (c::RangePushEx, range_push_ex as *mut c_void),
            (c::RangePushA, range_push_a as *mut c_void),
            (c::RangePushW, range_push_w as *mut c_void),
            (c::RangePop, range_pop as *mut c_void),
            (c::NameCategoryA, name_category_a as *mut c_void),
            (c::NameCategoryW, name_category_w as *mut c_void),
            (c::NameOsThreadA, name_os_thread_a as *mut c_void),
            (c::NameOsThreadW, name_os_thread_w as *mut c_void),
        ];
        let core2: [(usize, *mut c_void); 13] = [
            (c2::DomainMarkEx, domain_mark_ex as *mut c_void),
            (c2::DomainRangeStartEx, domain_range_start_ex as *mut c_void),
            (c2::DomainRangeEnd, domain_range_end as *mut c_void),
            (c2::DomainRangePushEx, domain_range_push_ex as *mut c_void),
            (c2::DomainRangePop, domain_range_pop as *mut c_void),
            (c2::DomainNameCategoryA, domain_name_category_a as *mut c_void),
            (c2::DomainNameCategoryW, domain_name_category_w as *mut c_void),
            (c2::DomainRegisterStringA, domain_register_string_a as *mut c_void),
            (c2::DomainRegisterStringW, domain_register_string_w as *mut c_void),
            (c2::DomainCreateA, domain_create_a as *mut c_void),
            (c2::DomainCreateW, domain_create_w as *mut c_void),
            (c2::DomainDestroy, domain_destroy as *mut c_void),
            (c2::Initialize, initialize as *mut c_void),
        ];
        // SAFETY: `get` is the copy's GetModuleFunctionTable.
        let ok = unsafe { fill(get, sys::NVTX_CB_MODULE_CORE, &core) && fill(get, sys::NVTX_CB_MODULE_CORE2, &core2) };
        if !ok {
            return 0;
        }
        // SAFETY: as for the callbacks table.
        let vi = unsafe { get_export_table(sys::NVTX_ETID_VERSIONINFO) } as *const sys::NvtxExportTableVersionInfo;
        if !vi.is_null() {
            // SAFETY: a non-null version table is a valid static struct.
            if let Some(set) = unsafe { &*vi }.SetInjectionNvtxVersion {
                // SAFETY: the function takes a plain integer.
                unsafe { set(sys::NVTX_VERSION as u32) };
            }
        }
        1
    })
}

#[cfg(feature = "export-injection-symbol")]
/// The NVTX v3 tool entry point, exported for `NVTX_INJECTION64_PATH`.
///
/// # Safety
/// Called by an NVTX copy with its `nvtxGetExportTable`.
#[no_mangle]
pub unsafe extern "C" fn InitializeInjectionNvtx2(get_export_table: sys::NvtxGetExportTableFunc_t) -> c_int {
    // SAFETY: forwarded as received.
    unsafe { initialize_injection(get_export_table) }
}

static ATTACHED: OnceLock<Mutex<Option<loader::PreviousSlots>>> = OnceLock::new();

/// Routes this crate's own emitter (`gpuscope_nvtx::push` and friends) to the
/// tool side in this process. A tool that `NVTX_INJECTION64_PATH` loaded
/// (Nsight Systems, say) stops seeing Rust ranges until [`detach`].
/// Returns false if the tool could not attach.
pub fn attach() -> bool {
    let cell = ATTACHED.get_or_init(|| Mutex::new(None));
    let mut g = cell.lock().unwrap_or_else(|e| e.into_inner());
    if g.is_some() {
        return true;
    }
    let (ok, prev) = loader::attach(initialize_injection);
    if ok {
        *g = Some(prev);
    }
    ok
}

/// Gives the emitter's slots back to whatever held them before [`attach`].
pub fn detach() {
    if let Some(cell) = ATTACHED.get() {
        if let Some(prev) = cell.lock().unwrap_or_else(|e| e.into_inner()).take() {
            loader::restore(&prev);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_strings_read_as_they_are_short_or_long_and_invalid_bytes_replaced() {
        let read = |bytes: &[u8]| {
            let c = std::ffi::CString::new(bytes).unwrap();
            // SAFETY: a NUL-terminated string alive for the call.
            unsafe { ascii(c.as_ptr()) }.into_owned()
        };
        assert_eq!(read(b""), "");
        assert_eq!(read(b"layer"), "layer");
        assert_eq!(read("größe".as_bytes()), "größe");
        let long = "x".repeat(SHORT) + "ö";
        assert_eq!(read(long.as_bytes()), long);
        assert_eq!(read(&b"a".repeat(SHORT)), "a".repeat(SHORT));
        assert_eq!(read(b"bad \xff byte"), "bad \u{fffd} byte");
        // SAFETY: null is allowed.
        assert_eq!(unsafe { ascii(std::ptr::null()) }, "");
    }

    fn with_payload(ty: i32, payload: u64, count: i32) -> nvtxEventAttributes_t {
        nvtxEventAttributes_t {
            version: 3,
            size: sys::NVTX_EVENT_ATTRIB_STRUCT_SIZE,
            category: 0,
            colorType: 0,
            color: 0,
            payloadType: ty,
            reserved0: count,
            payload,
            messageType: sys::NVTX_MESSAGE_TYPE_ASCII,
            message: sys::nvtxMessageValue_t { ascii: c"ncclAllReduce".as_ptr() },
        }
    }

    #[test]
    fn extended_payloads_are_read_as_laid_out_and_bounded() {
        // As NCCL's NVTX3_FUNC_WITH_PARAMS passes them: one blob per call.
        let blob: [u64; 3] = [0xc0ffee, 1 << 30, 0];
        let big = vec![0u8; MAX_EXTENDED_BYTES + 1];
        let data = [
            sys::nvtxPayloadData_t { schemaId: (1 << 24) + 5, size: 24, payload: blob.as_ptr().cast() },
            sys::nvtxPayloadData_t { schemaId: 7, size: 0, payload: blob.as_ptr().cast() },
            sys::nvtxPayloadData_t { schemaId: 8, size: 8, payload: std::ptr::null() },
            sys::nvtxPayloadData_t { schemaId: 9, size: big.len(), payload: big.as_ptr().cast() },
        ];
        let a = with_payload(sys::NVTX_PAYLOAD_TYPE_EXT, data.as_ptr() as u64, data.len() as i32);
        // SAFETY: the attributes, payload structs and blobs live on this frame.
        let got = unsafe { attributes(&a) };
        assert_eq!(got.message, "ncclAllReduce");
        assert_eq!(got.payload, None);
        assert_eq!(got.extended.iter().count(), 1, "empty, null and oversized blobs are skipped");
        let first = got.extended.iter().next().unwrap();
        assert_eq!(first.schema, (1 << 24) + 5);
        assert_eq!(&first.data[8..16], &(1u64 << 30).to_ne_bytes());
        // A count beyond what any caller passes is capped, a negative one read as none.
        let many = [data[0]; MAX_EXTENDED + 4];
        let a = with_payload(sys::NVTX_PAYLOAD_TYPE_EXT, many.as_ptr() as u64, many.len() as i32);
        // SAFETY: as above.
        assert_eq!(unsafe { attributes(&a) }.extended.iter().count(), MAX_EXTENDED);
        let a = with_payload(sys::NVTX_PAYLOAD_TYPE_EXT, data.as_ptr() as u64, -1);
        // SAFETY: as above.
        assert!(unsafe { attributes(&a) }.extended.is_empty());
        let a = with_payload(sys::NVTX_PAYLOAD_TYPE_UNSIGNED_INT64, 5, 1);
        // SAFETY: as above.
        let plain = unsafe { attributes(&a) };
        assert!(plain.extended.is_empty());
        assert_eq!(plain.payload, Some(crate::Payload::U64(5)));
    }
}
