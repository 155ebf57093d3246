//! The emitting side: ranges, marks, domains and registered strings, through
//! the NVTX v3 slots of [`crate::loader`]. With no tool attached every call
//! is two atomic loads and nothing else.

use crate::loader;
use crate::sys::{self, fn_types as f, nvtxDomainHandle_t, nvtxEventAttributes_t};
use std::ffi::{c_char, c_void};
use std::marker::PhantomData;

/// Runs `f` with `s` as a NUL-terminated C string (cut at an inner NUL),
/// without allocating for strings under 256 bytes.
fn with_cstr<R>(s: &str, f: impl FnOnce(*const c_char) -> R) -> R {
    let s = match s.as_bytes().iter().position(|&b| b == 0) {
        Some(i) => &s[..i],
        None => s,
    };
    let mut buf = [0u8; 256];
    if s.len() < buf.len() {
        buf[..s.len()].copy_from_slice(s.as_bytes());
        f(buf.as_ptr() as *const c_char)
    } else {
        let owned = std::ffi::CString::new(s).unwrap_or_default();
        f(owned.as_ptr())
    }
}

/// An ARGB colour, a category and a payload to go with a message.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Attributes {
    /// ARGB colour, if any.
    pub color: Option<u32>,
    /// User category (0: none).
    pub category: u32,
    /// A number carried with the event.
    pub payload: Option<Payload>,
}

/// An NVTX payload value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Payload {
    /// `NVTX_PAYLOAD_TYPE_UNSIGNED_INT64`.
    U64(u64),
    /// `NVTX_PAYLOAD_TYPE_INT64`.
    I64(i64),
    /// `NVTX_PAYLOAD_TYPE_DOUBLE`.
    F64(f64),
}

fn raw_attributes(a: &Attributes, message: sys::nvtxMessageValue_t, ty: i32) -> nvtxEventAttributes_t {
    let (payload_type, payload) = match a.payload {
        None => (sys::NVTX_PAYLOAD_UNKNOWN, 0),
        Some(Payload::U64(v)) => (sys::NVTX_PAYLOAD_TYPE_UNSIGNED_INT64, v),
        Some(Payload::I64(v)) => (sys::NVTX_PAYLOAD_TYPE_INT64, v as u64),
        Some(Payload::F64(v)) => (sys::NVTX_PAYLOAD_TYPE_DOUBLE, v.to_bits()),
    };
    nvtxEventAttributes_t {
        version: sys::NVTX_VERSION,
        size: sys::NVTX_EVENT_ATTRIB_STRUCT_SIZE,
        category: a.category,
        colorType: if a.color.is_some() { sys::NVTX_COLOR_ARGB } else { 0 },
        color: a.color.unwrap_or(0),
        payloadType: payload_type,
        reserved0: 0,
        payload,
        messageType: ty,
        message,
    }
}

/// Calls `f` with event attributes for `msg`, if slot `slot` is filled.
fn with_ascii_attrs(msg: &str, a: &Attributes, f: impl FnOnce(&nvtxEventAttributes_t)) {
    with_cstr(msg, |p| {
        let raw = raw_attributes(a, sys::nvtxMessageValue_t { ascii: p }, sys::NVTX_MESSAGE_TYPE_ASCII);
        f(&raw)
    })
}

/// An NVTX domain: ranges in it nest separately from other domains' and the
/// default domain's. Domains live as long as the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Domain {
    handle: usize,
}

impl Domain {
    /// The default domain (the one `nvtxRangePushA` uses).
    pub const DEFAULT: Domain = Domain { handle: 0 };

    /// Creates (or looks up, tools de-duplicate by name) a domain.
    pub fn new(name: &str) -> Domain {
        let slot = loader::core2(sys::core2::DomainCreateA);
        if slot.is_null() {
            // No tool: events of this domain go nowhere, like the default's.
            return Domain::DEFAULT;
        }
        // SAFETY: a filled DomainCreateA slot holds a function of that type.
        let create: f::DomainCreateA = unsafe { std::mem::transmute(slot) };
        // SAFETY: the pointer is a valid C string for the call.
        let handle = with_cstr(name, |p| unsafe { create(p) });
        Domain { handle: handle as usize }
    }

    fn raw(&self) -> nvtxDomainHandle_t {
        self.handle as nvtxDomainHandle_t
    }

    /// Pushes a range on this thread's stack for this domain; it pops when
    /// the guard drops.
    pub fn push(&self, message: &str) -> RangeGuard {
        self.push_with(message, &Attributes::default())
    }

    /// [`Domain::push`] with colour, category and payload.
    pub fn push_with(&self, message: &str, attributes: &Attributes) -> RangeGuard {
        let slot = loader::core2(sys::core2::DomainRangePushEx);
        if !slot.is_null() {
            // SAFETY: a filled slot holds a function of the slot's type.
            let push: f::DomainRangePushEx = unsafe { std::mem::transmute(slot) };
            // SAFETY: the attributes and their message outlive the call.
            with_ascii_attrs(message, attributes, |a| unsafe {
                push(self.raw(), a);
            });
        }
        RangeGuard { domain: *self, _not_send: PhantomData }
    }

    /// Pushes a range named by a registered string.
    pub fn push_registered(&self, message: RegisteredString) -> RangeGuard {
        let slot = loader::core2(sys::core2::DomainRangePushEx);
        if !slot.is_null() {
            // SAFETY: a filled slot holds a function of the slot's type.
            let push: f::DomainRangePushEx = unsafe { std::mem::transmute(slot) };
            let raw = raw_attributes(
                &Attributes::default(),
                sys::nvtxMessageValue_t { registered: message.handle as *mut c_void },
                sys::NVTX_MESSAGE_TYPE_REGISTERED,
            );
            // SAFETY: `raw` outlives the call.
            unsafe { push(self.raw(), &raw) };
        }
        RangeGuard { domain: *self, _not_send: PhantomData }
    }

    /// Pops this thread's innermost range of this domain. Prefer the guard;
    /// this exists for code whose push and pop are in different scopes.
    pub fn pop(&self) {
        let slot = loader::core2(sys::core2::DomainRangePop);
        if !slot.is_null() {
            // SAFETY: a filled slot holds a function of the slot's type.
            let pop: f::DomainRangePop = unsafe { std::mem::transmute(slot) };
            // SAFETY: no pointers are passed.
            unsafe { pop(self.raw()) };
        }
    }

    /// Starts a range that may end on another thread.
    pub fn start_range(&self, message: &str) -> StartedRange {
        let slot = loader::core2(sys::core2::DomainRangeStartEx);
        let mut id = 0;
        if !slot.is_null() {
            // SAFETY: a filled slot holds a function of the slot's type.
            let start: f::DomainRangeStartEx = unsafe { std::mem::transmute(slot) };
            // SAFETY: the attributes outlive the call.
            with_ascii_attrs(message, &Attributes::default(), |a| id = unsafe { start(self.raw(), a) });
        }
        StartedRange { domain: *self, id }
    }

    /// An instantaneous event.
    pub fn mark(&self, message: &str) {
        let slot = loader::core2(sys::core2::DomainMarkEx);
        if !slot.is_null() {
            // SAFETY: a filled slot holds a function of the slot's type.
            let mark: f::DomainMarkEx = unsafe { std::mem::transmute(slot) };
            // SAFETY: the attributes outlive the call.
            with_ascii_attrs(message, &Attributes::default(), |a| unsafe { mark(self.raw(), a) });
        }
    }

    /// Registers a string once, so hot code can push it without copying.
    pub fn register_string(&self, s: &str) -> RegisteredString {
        let slot = loader::core2(sys::core2::DomainRegisterStringA);
        if slot.is_null() {
            return RegisteredString { handle: 0 };
        }
        // SAFETY: a filled slot holds a function of the slot's type.
        let reg: f::DomainRegisterStringA = unsafe { std::mem::transmute(slot) };
        // SAFETY: the C string is valid for the call.
        let h = with_cstr(s, |p| unsafe { reg(self.raw(), p) });
        RegisteredString { handle: h as usize }
    }

    /// Names a category number of this domain.
    pub fn name_category(&self, category: u32, name: &str) {
        let slot = loader::core2(sys::core2::DomainNameCategoryA);
        if !slot.is_null() {
            // SAFETY: a filled slot holds a function of the slot's type.
            let name_fn: f::DomainNameCategoryA = unsafe { std::mem::transmute(slot) };
            // SAFETY: the C string is valid for the call.
            with_cstr(name, |p| unsafe { name_fn(self.raw(), category, p) });
        }
    }
}

/// A string registered with a domain ([`Domain::register_string`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisteredString {
    handle: usize,
}

/// An open push/pop range; pops on drop. Not `Send`: NVTX ranges of this
/// kind belong to the thread that pushed them.
#[must_use = "the range pops when this guard drops; bind it with `let _r = ...`"]
#[derive(Debug)]
pub struct RangeGuard {
    domain: Domain,
    _not_send: PhantomData<*const ()>,
}

impl Drop for RangeGuard {
    fn drop(&mut self) {
        if self.domain == Domain::DEFAULT {
            pop();
        } else {
            self.domain.pop();
        }
    }
}

/// A start/end range: may be ended on any thread; ends on drop.
#[must_use = "the range ends when this value drops"]
#[derive(Debug)]
pub struct StartedRange {
    domain: Domain,
    id: u64,
}

impl StartedRange {
    /// Ends the range now.
    pub fn end(self) {}
}

impl Drop for StartedRange {
    fn drop(&mut self) {
        if self.domain == Domain::DEFAULT {
            let slot = loader::core(sys::core::RangeEnd);
            if !slot.is_null() {
                // SAFETY: a filled slot holds a function of the slot's type.
                let end: f::RangeEnd = unsafe { std::mem::transmute(slot) };
                // SAFETY: no pointers are passed.
                unsafe { end(self.id) };
            }
        } else {
            let slot = loader::core2(sys::core2::DomainRangeEnd);
            if !slot.is_null() {
                // SAFETY: a filled slot holds a function of the slot's type.
                let end: f::DomainRangeEnd = unsafe { std::mem::transmute(slot) };
                // SAFETY: no pointers are passed.
                unsafe { end(self.domain.raw(), self.id) };
            }
        }
    }
}

/// Pushes a range of the default domain; it pops when the guard drops.
pub fn push(message: &str) -> RangeGuard {
    push_with(message, &Attributes::default())
}

/// [`push`] of a C string (`c"forward"`), passed on as it is: [`push`]
/// copies its message to add the NUL a tool reads it up to, which costs
/// about as much as the rest of the call when no tool is attached.
pub fn push_c(message: &std::ffi::CStr) -> RangeGuard {
    let slot = loader::core(sys::core::RangePushEx);
    if !slot.is_null() {
        // SAFETY: a filled slot holds a function of the slot's type.
        let push: f::RangePushEx = unsafe { std::mem::transmute(slot) };
        let raw = raw_attributes(
            &Attributes::default(),
            sys::nvtxMessageValue_t { ascii: message.as_ptr() },
            sys::NVTX_MESSAGE_TYPE_ASCII,
        );
        // SAFETY: `raw` and the message it points to outlive the call.
        unsafe { push(&raw) };
    }
    RangeGuard { domain: Domain::DEFAULT, _not_send: PhantomData }
}

/// [`push`] with colour, category and payload.
pub fn push_with(message: &str, attributes: &Attributes) -> RangeGuard {
    let slot = loader::core(sys::core::RangePushEx);
    if !slot.is_null() {
        // SAFETY: a filled slot holds a function of the slot's type.
        let push: f::RangePushEx = unsafe { std::mem::transmute(slot) };
        // SAFETY: the attributes outlive the call.
        with_ascii_attrs(message, attributes, |a| unsafe {
            push(a);
        });
    }
    RangeGuard { domain: Domain::DEFAULT, _not_send: PhantomData }
}

/// Pops the innermost default-domain range of this thread. Prefer the guard.
pub fn pop() {
    let slot = loader::core(sys::core::RangePop);
    if !slot.is_null() {
        // SAFETY: a filled slot holds a function of the slot's type.
        let pop: f::RangePop = unsafe { std::mem::transmute(slot) };
        // SAFETY: no arguments.
        unsafe { pop() };
    }
}

/// Starts a default-domain range that may end on another thread.
pub fn start_range(message: &str) -> StartedRange {
    Domain::DEFAULT.start_range_default(message)
}

impl Domain {
    fn start_range_default(&self, message: &str) -> StartedRange {
        let slot = loader::core(sys::core::RangeStartEx);
        let mut id = 0;
        if !slot.is_null() {
            // SAFETY: a filled slot holds a function of the slot's type.
            let start: f::RangeStartEx = unsafe { std::mem::transmute(slot) };
            // SAFETY: the attributes outlive the call.
            with_ascii_attrs(message, &Attributes::default(), |a| id = unsafe { start(a) });
        }
        StartedRange { domain: Domain::DEFAULT, id }
    }
}

/// An instantaneous default-domain event.
pub fn mark(message: &str) {
    let slot = loader::core(sys::core::MarkEx);
    if !slot.is_null() {
        // SAFETY: a filled slot holds a function of the slot's type.
        let mark: f::MarkEx = unsafe { std::mem::transmute(slot) };
        // SAFETY: the attributes outlive the call.
        with_ascii_attrs(message, &Attributes::default(), |a| unsafe { mark(a) });
    }
}

/// Names the calling OS thread in tools' timelines.
pub fn name_current_thread(name: &str) {
    let slot = loader::core(sys::core::NameOsThreadA);
    if !slot.is_null() {
        // SAFETY: a filled slot holds a function of the slot's type.
        let name_fn: f::NameOsThreadA = unsafe { std::mem::transmute(slot) };
        // SAFETY: gettid has no preconditions (the raw system call: glibc
        // has a wrapper only from 2.30 on, and wheels run on older ones).
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        // SAFETY: the C string is valid for the call.
        with_cstr(name, |p| unsafe { name_fn(tid, p) });
    }
}
