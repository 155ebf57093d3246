//! NVTX hooks: every thread's open ranges, kept from the NVTX tool's events.
//!
//! The NVTX handler keeps, per thread, the stack of open push/pop ranges of
//! every domain, and the id of the path they form (outermost first). A
//! launch callback on the same thread reads that id: one thread-local load,
//! no allocation. Stacks live as long as the process (not a session), so a
//! session started inside an open range still sees the whole path.

use super::send_host_event;
use crate::model::event::HostEvent;
use crate::model::path::{paths, PathId, ROOT};
use nvtx_rs::tool::{self, DomainId, Event};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Clone, Copy)]
struct Frame {
    domain: DomainId,
    node: PathId,
    instance: u64,
}

/// What a launch on this thread is attributed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ThreadContext {
    /// OS thread id.
    pub tid: u32,
    /// Path of the open ranges.
    pub path: PathId,
    /// Innermost open range instance (0: none).
    pub instance: u64,
}

struct ThreadRanges {
    tid: u32,
    frames: Vec<Frame>,
}

impl ThreadRanges {
    fn current(&self) -> ThreadContext {
        let (path, instance) = self.frames.last().map_or((ROOT, 0), |f| (f.node, f.instance));
        ThreadContext { tid: self.tid, path, instance }
    }
}

thread_local! {
    static RANGES: RefCell<ThreadRanges> = RefCell::new(ThreadRanges {
        // SAFETY: gettid has no preconditions.
        tid: unsafe { libc::gettid() } as u32,
        frames: Vec::new(),
    });
}

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// The calling thread's open ranges, for a launch callback.
pub(crate) fn current() -> ThreadContext {
    RANGES.try_with(|r| r.try_borrow().map(|r| r.current()).ok()).ok().flatten().unwrap_or(ThreadContext {
        tid: 0,
        path: ROOT,
        instance: 0,
    })
}

fn push(domain: DomainId, name: &str) {
    let _ = RANGES.try_with(|r| {
        let Ok(mut r) = r.try_borrow_mut() else { return };
        let parent = r.current();
        let node = paths().intern(parent.path, domain, name);
        let instance = NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed);
        r.frames.push(Frame { domain, node, instance });
        send_host_event(|ts| HostEvent::Push { instance, parent: parent.instance, path: node, tid: r.tid, ts });
    });
}

fn pop(domain: DomainId) {
    let _ = RANGES.try_with(|r| {
        let Ok(mut r) = r.try_borrow_mut() else { return };
        let tid = r.tid;
        // The innermost open range of this domain; other domains' ranges
        // pushed after it stay open, re-parented onto what is left.
        let Some(i) = r.frames.iter().rposition(|f| f.domain == domain) else {
            send_host_event(|_| HostEvent::UnbalancedPop { tid });
            return;
        };
        let gone = r.frames.remove(i);
        for j in i..r.frames.len() {
            let parent = if j == 0 { ROOT } else { r.frames[j - 1].node };
            let f = r.frames[j];
            let name = paths().name(f.node);
            r.frames[j].node = paths().intern(parent, f.domain, &name);
        }
        send_host_event(|ts| HostEvent::Pop { instance: gone.instance, ts });
    });
}

/// The NVTX tool handler: keeps the stacks, forwards to the session.
pub(crate) struct NvtxHandler;

impl tool::Handler for NvtxHandler {
    fn event(&self, e: &Event<'_>) {
        match e {
            Event::Push { domain, attributes } => push(*domain, &attributes.message),
            Event::Pop { domain } => pop(*domain),
            Event::Start { domain, id, attributes } => {
                let path = paths().intern(ROOT, *domain, &attributes.message);
                let tid = current().tid;
                send_host_event(|ts| HostEvent::Start { id: *id, path, tid, ts });
            }
            Event::End { id, .. } => send_host_event(|ts| HostEvent::End { id: *id, ts }),
            Event::NameThread { os_tid, name } => {
                let (tid, name) = (*os_tid, name.to_string());
                send_host_event(|_| HostEvent::ThreadName { tid, name });
            }
            Event::Mark { .. } | Event::NameCategory { .. } => {}
        }
    }
}

/// Routes NVTX events into the per-thread stacks (no attaching).
pub(crate) fn install_handler() {
    tool::set_handler(Some(Arc::new(NvtxHandler)));
}

/// Attaches the NVTX tool to this crate's emitter (once per process) and
/// installs the handler. Returns false if NVTX could not be attached.
///
/// Attaching may re-enter: when NVTX_INJECTION64_PATH names gpuscope's own
/// shim, the emitter's loader calls the shim's InitializeInjectionNvtx2,
/// which installs the handler. So this is a non-blocking state machine, not
/// a `OnceLock` (whose re-entrant initialisation deadlocks).
pub(crate) fn install() -> bool {
    use std::sync::atomic::AtomicU8;
    const NEW: u8 = 0;
    const ATTACHING: u8 = 1;
    const OK: u8 = 2;
    const FAILED: u8 = 3;
    static STATE: AtomicU8 = AtomicU8::new(NEW);
    let ok = match STATE.compare_exchange(NEW, ATTACHING, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            let ok = nvtx_rs::tool::attach();
            STATE.store(if ok { OK } else { FAILED }, Ordering::Release);
            ok
        }
        Err(s) => s != FAILED,
    };
    install_handler();
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_now() -> String {
        paths().path(current().path).to_string()
    }

    #[test]
    fn nvtx_calls_build_per_thread_paths_across_domains() {
        assert!(install());
        let io = nvtx_rs::Domain::new("io");
        {
            let _a = nvtx_rs::push("step");
            let _b = io.push("read");
            let _c = nvtx_rs::push("decode");
            assert_eq!(path_now(), "step/io::read/decode");
            // Another thread has its own stack.
            std::thread::spawn(|| {
                assert_eq!(path_now(), "(no range)");
                let _w = nvtx_rs::push("worker");
                assert_eq!(path_now(), "worker");
            })
            .join()
            .unwrap();
            // Popping the io range while "decode" is still open: "decode"
            // stays, re-parented.
            io.pop();
            assert_eq!(path_now(), "step/decode");
            std::mem::forget(_b);
        }
        assert_eq!(path_now(), "(no range)");
        // An unbalanced pop changes nothing.
        nvtx_rs::pop();
        assert_eq!(path_now(), "(no range)");
        let p = paths().path(paths().intern(ROOT, 0, "x"));
        assert_eq!(p.for_domain(None), vec!["x"]);
    }
}
