//! NVTX attribution: every thread's open ranges, and the interned paths they
//! form.
//!
//! The NVTX handler keeps, per thread, the stack of open push/pop ranges of
//! every domain, and the id of the path they form (outermost first). A
//! launch callback on the same thread reads that id: one thread-local load,
//! no allocation. Stacks live as long as the process (not a session), so a
//! session started inside an open range still sees the whole path.

use crate::session::{self, HostEvent};
use nvtx_rs::tool::{self, DomainId, Event};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// Id of an interned path; [`ROOT`] is "no range open".
pub type PathId = u32;
/// The empty path.
pub const ROOT: PathId = 0;

/// One range of a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RangeFrame {
    /// NVTX domain name; `None` for the default domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// The range's message.
    pub name: String,
}

/// The NVTX ranges open on a thread at one moment, outermost first, all
/// domains interleaved in push order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RangePath {
    /// Outermost first.
    pub frames: Vec<RangeFrame>,
}

impl RangePath {
    /// The path of one domain (`None`: the default domain), outermost first.
    pub fn for_domain(&self, domain: Option<&str>) -> Vec<&str> {
        self.frames.iter().filter(|f| f.domain.as_deref() == domain).map(|f| f.name.as_str()).collect()
    }

    /// True when no range was open.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

impl std::fmt::Display for RangePath {
    /// `outer/inner`, with frames of named domains as `domain::name`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.frames.is_empty() {
            return f.write_str("(no range)");
        }
        for (i, fr) in self.frames.iter().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            if let Some(d) = &fr.domain {
                write!(f, "{d}::")?;
            }
            f.write_str(&fr.name)?;
        }
        Ok(())
    }
}

struct Node {
    parent: PathId,
    domain: DomainId,
    name: Arc<str>,
}

/// Children of a (parent, domain) by name.
type ChildIndex = HashMap<(PathId, DomainId), HashMap<Arc<str>, PathId>>;

/// Interned paths: (parent, domain, name) -> id.
pub(crate) struct PathTable {
    nodes: RwLock<Vec<Node>>,
    index: RwLock<ChildIndex>,
}

impl PathTable {
    fn new() -> Self {
        PathTable {
            nodes: RwLock::new(vec![Node { parent: ROOT, domain: 0, name: Arc::from("") }]),
            index: RwLock::new(HashMap::new()),
        }
    }

    pub(crate) fn intern(&self, parent: PathId, domain: DomainId, name: &str) -> PathId {
        if let Some(id) =
            self.index.read().unwrap_or_else(|e| e.into_inner()).get(&(parent, domain)).and_then(|m| m.get(name))
        {
            return *id;
        }
        let mut index = self.index.write().unwrap_or_else(|e| e.into_inner());
        let by_name = index.entry((parent, domain)).or_default();
        if let Some(id) = by_name.get(name) {
            return *id;
        }
        let mut nodes = self.nodes.write().unwrap_or_else(|e| e.into_inner());
        let id = nodes.len() as PathId;
        let name: Arc<str> = Arc::from(name);
        nodes.push(Node { parent, domain, name: name.clone() });
        by_name.insert(name, id);
        id
    }

    /// The full path of `id`.
    pub(crate) fn path(&self, id: PathId) -> RangePath {
        let nodes = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        let mut frames = Vec::new();
        let mut cur = id;
        while cur != ROOT {
            let Some(n) = nodes.get(cur as usize) else { break };
            frames
                .push(RangeFrame { domain: tool::domain_name(n.domain).map(str::to_owned), name: n.name.to_string() });
            cur = n.parent;
        }
        frames.reverse();
        RangePath { frames }
    }
}

/// The process's path table.
pub(crate) fn paths() -> &'static PathTable {
    static PATHS: OnceLock<PathTable> = OnceLock::new();
    PATHS.get_or_init(PathTable::new)
}

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
        session::send_host_event(|ts| HostEvent::Push {
            instance,
            parent: parent.instance,
            path: node,
            tid: r.tid,
            ts,
        });
    });
}

fn pop(domain: DomainId) {
    let _ = RANGES.try_with(|r| {
        let Ok(mut r) = r.try_borrow_mut() else { return };
        let tid = r.tid;
        // The innermost open range of this domain; other domains' ranges
        // pushed after it stay open, re-parented onto what is left.
        let Some(i) = r.frames.iter().rposition(|f| f.domain == domain) else {
            session::send_host_event(|_| HostEvent::UnbalancedPop { tid });
            return;
        };
        let gone = r.frames.remove(i);
        for j in i..r.frames.len() {
            let parent = if j == 0 { ROOT } else { r.frames[j - 1].node };
            let f = r.frames[j];
            let name = paths().nodes.read().unwrap_or_else(|e| e.into_inner())[f.node as usize].name.clone();
            r.frames[j].node = paths().intern(parent, f.domain, &name);
        }
        session::send_host_event(|ts| HostEvent::Pop { instance: gone.instance, ts });
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
                session::send_host_event(|ts| HostEvent::Start { id: *id, path, tid, ts });
            }
            Event::End { id, .. } => session::send_host_event(|ts| HostEvent::End { id: *id, ts }),
            Event::NameThread { os_tid, name } => {
                let (tid, name) = (*os_tid, name.to_string());
                session::send_host_event(|_| HostEvent::ThreadName { tid, name });
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

    #[test]
    fn interning_is_stable_and_paths_read_back() {
        let t = PathTable::new();
        let a = t.intern(ROOT, 0, "train");
        let b = t.intern(a, 0, "forward");
        assert_eq!(t.intern(ROOT, 0, "train"), a);
        assert_eq!(t.intern(a, 0, "forward"), b);
        assert_ne!(t.intern(ROOT, 0, "forward"), b, "same name, other parent");
        assert_eq!(t.path(b).to_string(), "train/forward");
        assert!(t.path(ROOT).is_empty());
    }
}
