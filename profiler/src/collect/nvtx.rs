//! NVTX hooks: every thread's open ranges, kept from the NVTX tool's events.
//!
//! The NVTX handler keeps, per thread, the stack of open push/pop ranges of
//! every domain, and the id of the path they form (outermost first). A
//! launch callback on the same thread reads that id: one thread-local load,
//! no allocation. Stacks live as long as the process (not a session), so a
//! session started inside an open range still sees the whole path.
//!
//! # Ranges across threads
//! Frameworks launch much of their work on threads the program never
//! annotates: PyTorch runs `loss.backward()` on autograd's worker thread
//! while the calling thread, inside its `backward` range, waits. So a launch
//! on a thread with no range of its own is attributed to the ranges open on
//! the *lead thread*: of the threads with ranges of their own open, the one
//! whose outermost open range is the oldest (the training loop's `step`).
//! Ranges of NVIDIA libraries' domains (CCCL, cuBLAS, cuDNN, NCCL, ...)
//! do not make a range of the thread's own: opened on such a thread they
//! nest under the lead thread's ranges. Threads that annotate their own
//! work (a data thread's `load` range) keep it. [`set_inherit`]`(false)`
//! keeps strict per-thread NVTX semantics instead.

use super::lead::{self, Lead, LeadCell};
use super::{panic_guard, send_host_event, send_range_event};
use crate::model::comm::nccl_message_bytes;
use crate::model::event::HostEvent;
use crate::model::path::{is_library_domain, paths, PathCache, PathId, ROOT};
use gpuscope_nvtx::tool::{self, DomainId, Event};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Clone, Copy)]
struct Frame {
    domain: DomainId,
    node: PathId,
    instance: u64,
    /// A range that follows the lead thread's instead of making one of
    /// the thread's own: a library domain's, or one opened with
    /// [`enter`]'s `follow`.
    follows: bool,
    /// A library domain's range.
    library: bool,
    /// It hangs under the lead thread's ranges (the thread's `base`).
    inherited: bool,
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
    /// The ranges are another thread's (the lead thread's).
    pub inherited: bool,
    /// The innermost open range is a library domain's.
    pub library: bool,
}

fn is_library(domain: DomainId) -> bool {
    thread_local! {
        /// Per domain id: 0 not looked up yet, 1 the program's, 2 a library's.
        static KNOWN: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    if domain == 0 {
        return false;
    }
    let look_up = || tool::domain_name(domain).is_some_and(is_library_domain);
    let cached = KNOWN.try_with(|k| {
        let mut k = k.try_borrow_mut().ok()?;
        let i = domain as usize;
        // Bounded: ids are indexes into the process's domains.
        if i >= k.len() && i < 4096 {
            k.resize(i + 1, 0);
        }
        let slot = k.get_mut(i)?;
        if *slot == 0 {
            *slot = if look_up() { 2 } else { 1 };
        }
        Some(*slot == 2)
    });
    cached.ok().flatten().unwrap_or_else(look_up)
}

struct ThreadRanges {
    tid: u32,
    frames: Vec<Frame>,
    /// The lead thread's context the first frame was opened under (library
    /// ranges opened on a thread with no range of its own): what inherited
    /// frames hang from.
    base: Option<Lead>,
    /// Where the thread publishes its innermost range of its own (taken
    /// at its first).
    cell: Option<&'static LeadCell>,
    /// The outermost range of its own the lead thread is chosen by, as
    /// registered for the thread (its instance), if any.
    registered: Option<u64>,
    /// Paths this thread opened recently.
    paths: PathCache,
    /// Frames were re-parented since the ranges of its own were last
    /// published (which of them are its own may have changed).
    stale: bool,
}

impl ThreadRanges {
    /// What a frame at depth `j` hangs from (`library`: a library domain's;
    /// `follows`: it continues the lead thread's work): the frame below it,
    /// except that a range of the program's own never nests inside a
    /// library's. It hangs from the program's innermost range below it;
    /// with none, a range of the thread's own starts its tree at the root
    /// (a library range left open, as NCCL's communicator set-up is on a
    /// DDP loop, would otherwise hold the program's steps as its
    /// internals), and one that follows hangs from the thread's base.
    fn parent_of(&self, j: usize, library: bool, follows: bool) -> ThreadContext {
        let below = &self.frames[..j];
        let frame = if library { below.last() } else { below.iter().rev().find(|f| !f.library) };
        let (path, instance, inherited) = match (frame, self.base) {
            (Some(f), _) => (f.node, f.instance, f.inherited),
            (None, Some(b)) if follows => (b.path, b.instance, true),
            (None, _) => (ROOT, 0, false),
        };
        ThreadContext { tid: self.tid, path, instance, inherited, library: frame.is_some_and(|f| f.library) }
    }

    fn current(&self) -> ThreadContext {
        if let Some(f) = self.frames.last() {
            return ThreadContext {
                tid: self.tid,
                path: f.node,
                instance: f.instance,
                inherited: f.inherited,
                library: f.library,
            };
        }
        match lead_for(self.tid) {
            Some(l) => {
                ThreadContext { tid: self.tid, path: l.path, instance: l.instance, inherited: true, library: false }
            }
            None => ThreadContext { tid: self.tid, path: ROOT, instance: 0, inherited: false, library: false },
        }
    }

    /// The innermost open range of the thread's own, and its outermost
    /// one's instance (`None`: it has none, or they are inherited).
    fn own(&self) -> Option<(u64, Lead)> {
        let mine = |f: &&Frame| !f.follows && !f.inherited;
        let first = self.frames.iter().find(mine)?;
        let last = self.frames.iter().rev().find(mine)?;
        Some((first.instance, Lead { tid: self.tid, path: last.node, instance: last.instance }))
    }
}

impl ThreadRanges {
    /// [`ThreadRanges::publish_own`] after a push of a range of the
    /// thread's own (the innermost frame): with an outermost one already
    /// registered and no frame re-parented since, only the cell changes.
    fn publish_pushed(&mut self) {
        if let (false, Some(_), Some(cell), Some(f)) = (self.stale, self.registered, self.cell, self.frames.last()) {
            cell.write(Lead { tid: self.tid, path: f.node, instance: f.instance });
            return;
        }
        self.publish_own();
    }

    /// Publishes the thread's ranges of its own after a push or pop of one:
    /// its innermost in its cell, and, only when its outermost changed (a
    /// step began or ended), which thread leads.
    fn publish_own(&mut self) {
        self.stale = false;
        let own = self.own();
        let cell = *self.cell.get_or_insert_with(lead::take_cell);
        if let Some((_, innermost)) = own {
            cell.write(innermost);
        }
        let outermost = own.map(|(outer, _)| outer);
        if outermost != self.registered {
            self.registered = outermost;
            // Instance ids come in blocks per thread: the order in which
            // threads' outermost ranges opened is taken here.
            lead::register(self.tid, outermost.map(|_| (lead::opened_now(), cell)));
        }
    }
}

impl Drop for ThreadRanges {
    fn drop(&mut self) {
        // A thread that ends inside its ranges leads no more.
        if self.registered.is_some() {
            lead::register(self.tid, None);
        }
        if let Some(cell) = self.cell.take() {
            lead::give_cell(cell);
        }
    }
}

thread_local! {
    static RANGES: RefCell<ThreadRanges> = RefCell::new(ThreadRanges {
        // SAFETY: gettid has no preconditions (the raw system call: glibc
        // has a wrapper only from 2.30 on, and wheels run on older ones).
        tid: unsafe { libc::syscall(libc::SYS_gettid) } as u32,
        frames: Vec::new(),
        base: None,
        cell: None,
        registered: None,
        paths: PathCache::default(),
        stale: false,
    });
}

/// The next block of range instance ids a thread takes.
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// Instance ids a thread takes at once: one shared write per this many
/// ranges instead of one per range.
const INSTANCE_BLOCK: u64 = 1024;

thread_local! {
    /// The calling thread's next instance id and the end of its block.
    static INSTANCES: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Ranges of other threads are inherited (the default).
static INHERIT: AtomicBool = AtomicBool::new(true);

/// Whether threads with no range of their own inherit the lead thread's
/// (true, the default) or keep strict per-thread NVTX semantics.
pub(crate) fn set_inherit(on: bool) {
    INHERIT.store(on, Ordering::Relaxed);
}

/// The lead thread's context, for a launch on thread `tid` with no range.
fn lead_for(tid: u32) -> Option<Lead> {
    if !INHERIT.load(Ordering::Relaxed) {
        return None;
    }
    lead::lead_for(tid)
}

/// The calling thread's open ranges, for a launch callback.
pub(crate) fn current() -> ThreadContext {
    RANGES.try_with(|r| r.try_borrow().map(|r| r.current()).ok()).ok().flatten().unwrap_or(ThreadContext {
        tid: 0,
        path: ROOT,
        instance: 0,
        inherited: false,
        library: false,
    })
}

/// The instance of the calling thread's innermost open range of the
/// program's own (not a library's, not opened by [`enter`]); 0: none.
pub(crate) fn program_range_here() -> u64 {
    let hooks = hooks_domain();
    RANGES
        .try_with(|r| {
            r.try_borrow().ok().and_then(|r| {
                r.frames.iter().rev().find(|f| !f.library && !f.inherited && f.domain != hooks).map(|f| f.instance)
            })
        })
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// A new range instance id, unique in the process (increasing on each
/// thread; not in time order across threads).
pub(crate) fn next_instance() -> u64 {
    let block = || {
        let first = NEXT_INSTANCE.fetch_add(INSTANCE_BLOCK, Ordering::Relaxed);
        (first, first + INSTANCE_BLOCK)
    };
    INSTANCES
        .try_with(|c| {
            let (mut next, mut end) = c.get();
            if next >= end {
                (next, end) = block();
            }
            c.set((next + 1, end));
            next
        })
        .unwrap_or_else(|_| block().0)
}

fn push(domain: DomainId, name: &str, follows: bool, library: bool) {
    // The Python stack's ranges nest inside the thread's own, not a
    // library's.
    super::python_stack::close_here(|| !library);
    let _ = RANGES.try_with(|r| {
        let Ok(mut r) = r.try_borrow_mut() else { return };
        if r.frames.is_empty() {
            // What the thread's frames that follow hang from: the lead
            // thread's ranges now (a range of its own starts its tree).
            let c = r.current();
            r.base = (follows && c.inherited).then_some(Lead { tid: r.tid, path: c.path, instance: c.instance });
        }
        let parent = r.parent_of(r.frames.len(), library, follows);
        let node = r.paths.intern(paths(), parent.path, domain, name);
        let instance = next_instance();
        r.frames.push(Frame { domain, node, instance, follows, library, inherited: parent.inherited });
        let tid = r.tid;
        send_range_event(|ts| HostEvent::Push { instance, parent: parent.instance, path: node, tid, ts });
        if !follows && !parent.inherited {
            r.publish_pushed();
        }
    });
}

/// Closes the innermost open range of `domain`; `discard`: that opening is
/// left out of the report.
fn pop(domain: DomainId, discard: bool) {
    super::python_stack::close_here(|| !is_library(domain));
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
        if i < r.frames.len() {
            r.stale = true;
        }
        for j in i..r.frames.len() {
            let f = r.frames[j];
            let parent = r.parent_of(j, f.library, f.follows);
            let name = paths().name(f.node);
            r.frames[j].node = r.paths.intern(paths(), parent.path, f.domain, &name);
            r.frames[j].inherited = parent.inherited;
        }
        let inherited = gone.inherited;
        if r.frames.is_empty() {
            r.base = None;
        }
        if discard {
            send_host_event(|_| HostEvent::Discard { instance: gone.instance });
        }
        send_range_event(|ts| HostEvent::Pop { instance: gone.instance, ts });
        if !gone.follows && !inherited {
            r.publish_own();
        }
    });
}

/// The domain of the ranges [`enter`] opens: closed only by [`exit`], never
/// by the program's pops, and the other way round.
fn hooks_domain() -> DomainId {
    static DOMAIN: std::sync::OnceLock<DomainId> = std::sync::OnceLock::new();
    *DOMAIN.get_or_init(|| tool::domain(crate::model::path::HOOKS_DOMAIN))
}

/// Opens a range on the calling thread straight in gpuscope's stacks (no
/// NVTX call: other tools do not see it), in gpuscope's hooks' domain: the
/// program's ranges and these nest by time, and each side closes only its
/// own.
/// `follow`: the range continues work of the lead thread (autograd's
/// worker running a module's backward) and, on a thread with no range of
/// its own, nests under the lead thread's ranges, as library ranges do.
pub(crate) fn enter(name: &str, follow: bool) {
    push(hooks_domain(), name, follow, false);
}

/// Closes the calling thread's innermost range opened by [`enter`];
/// `discard`: the range did no work of the kind it names (a `step` opened
/// by a data fetch that found the epoch's end) and is left out of the
/// report.
pub(crate) fn exit(discard: bool) {
    pop(hooks_domain(), discard);
}

/// Model FLOPs done by the calling thread's innermost open range (the lead
/// thread's, on a thread with none): they count for it and every range
/// around it.
pub(crate) fn add_flops(flops: f64) {
    let ctx = current();
    if ctx.instance != 0 && flops.is_finite() && flops > 0.0 {
        send_host_event(|_| HostEvent::Flops { instance: ctx.instance, flops });
    }
}

/// A framework allocator's figures (bytes in use, held from the device,
/// high-water mark of in use) at the start (`at_end` false) or end of the
/// calling thread's innermost open range.
pub(crate) fn framework_memory(at_end: bool, allocated: u64, reserved: u64, peak: u64) {
    let ctx = current();
    if ctx.instance != 0 {
        send_host_event(|_| HostEvent::FrameworkMemory { instance: ctx.instance, at_end, allocated, reserved, peak });
    }
}

/// `ns` of the calling thread's time went to instrumentation of
/// gpuscope's own (a framework integration's hooks), inside its innermost
/// open range: counted as gpuscope's cost.
pub(crate) fn add_own_cost(ns: u64) {
    if ns > 0 {
        let ctx = current();
        send_host_event(|ts| HostEvent::OwnCost { tid: ctx.tid, instance: ctx.instance, ns, ts });
    }
}

/// Whether the calling thread is the process's main thread, asked of the
/// kernel (a thread's cached id is its parent's in a forked child).
pub(crate) fn on_main_thread() -> bool {
    // SAFETY: gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    tid == std::process::id()
}

/// The NVTX tool handler: keeps the stacks, forwards to the session.
pub(crate) struct NvtxHandler;

impl tool::Handler for NvtxHandler {
    fn event(&self, e: &Event<'_>) {
        panic_guard::catch(|| {
            panic_guard::fault("nvtx");
            on_event(e);
        });
    }
}

/// One NVTX event into the stacks and the session.
fn on_event(e: &Event<'_>) {
    match e {
        Event::Push { domain, attributes } => {
            let library = is_library(*domain);
            push(*domain, &attributes.message, library, library);
            // NCCL's calls carry their message size: it gives their
            // kernels' bandwidth.
            if !attributes.extended.is_empty() && tool::domain_name(*domain) == Some("NCCL") {
                let blobs = attributes.extended.iter().map(|p| (p.schema, p.data));
                if let Some(bytes) = nccl_message_bytes(&attributes.message, blobs) {
                    let tid = current().tid;
                    send_host_event(|ts| HostEvent::CommMessage { tid, bytes, ts });
                }
            }
        }
        Event::Pop { domain } => pop(*domain, false),
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
            let ok = gpuscope_nvtx::tool::attach();
            STATE.store(if ok { OK } else { FAILED }, Ordering::Release);
            ok
        }
        Err(s) => s != FAILED,
    };
    install_handler();
    ok
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An NVTX event whose handling panics at its start: caught, counted.
    pub(crate) fn event_with_a_fault() {
        let before = panic_guard::caught();
        panic_guard::inject(Some("nvtx"));
        tool::Handler::event(&NvtxHandler, &Event::Pop { domain: 0 });
        panic_guard::inject(None);
        assert!(panic_guard::caught() > before, "the handler's panic counted");
    }

    #[test]
    fn the_nvtx_handler_catches_its_panic() {
        event_with_a_fault();
    }

    /// The lead thread is process-wide: these tests take turns.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn path_now() -> String {
        paths().path(current().path).to_string()
    }

    fn on_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| s.spawn(f).join().unwrap())
    }

    #[test]
    fn nvtx_calls_build_per_thread_paths_across_domains() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(install());
        set_inherit(false);
        let io = gpuscope_nvtx::Domain::new("io");
        {
            let _a = gpuscope_nvtx::push("step");
            let _b = io.push("read");
            let _c = gpuscope_nvtx::push("decode");
            assert_eq!(path_now(), "step/io::read/decode");
            // Another thread has its own stack.
            on_thread(|| {
                assert_eq!(path_now(), "(no range)");
                let _w = gpuscope_nvtx::push("worker");
                assert_eq!(path_now(), "worker");
            });
            // Popping the io range while "decode" is still open: "decode"
            // stays, re-parented.
            io.pop();
            assert_eq!(path_now(), "step/decode");
            std::mem::forget(_b);
        }
        assert_eq!(path_now(), "(no range)");
        // An unbalanced pop changes nothing.
        gpuscope_nvtx::pop();
        assert_eq!(path_now(), "(no range)");
        let p = paths().path(paths().intern(ROOT, 0, "x"));
        assert_eq!(p.for_domain(None), vec!["x"]);
        set_inherit(true);
    }

    #[test]
    fn the_programs_ranges_never_nest_inside_a_library_range_left_open() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(install());
        set_inherit(true);
        let nccl = gpuscope_nvtx::Domain::new("NCCL");
        on_thread(|| {
            // NCCL's communicator set-up, left open.
            let _init = nccl.push("ncclCommInitRankConfig");
            assert_eq!(path_now(), "NCCL::ncclCommInitRankConfig");
            let step = gpuscope_nvtx::push("step");
            assert_eq!(path_now(), "step", "the program's step is its own, not NCCL's");
            assert!(!current().inherited);
            assert_eq!(on_thread(path_now), "step", "and it leads");
            // Library ranges inside the step nest under it.
            let _ar = nccl.push("ncclAllReduce");
            assert_eq!(path_now(), "step/NCCL::ncclAllReduce");
            nccl.pop();
            std::mem::forget(_ar);
            drop(step);
            assert_eq!(path_now(), "NCCL::ncclCommInitRankConfig");
            // A program range under a user range opened after the library's:
            // popping the library range keeps it where it was.
            let outer = gpuscope_nvtx::push("outer");
            let _x = nccl.push("ncclGroupStart");
            let inner = gpuscope_nvtx::push("inner");
            assert_eq!(path_now(), "outer/inner");
            nccl.pop();
            std::mem::forget(_x);
            assert_eq!(path_now(), "outer/inner");
            drop(inner);
            drop(outer);
            nccl.pop();
            std::mem::forget(_init);
            assert_eq!(path_now(), "(no range)");
        });
    }

    #[test]
    fn a_program_range_under_an_inherited_library_range_is_the_thread_s_own() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(install());
        set_inherit(true);
        let nccl = gpuscope_nvtx::Domain::new("NCCL");
        // Another thread leads with a range of its own.
        let lead = gpuscope_nvtx::push("loader");
        on_thread(|| {
            // NCCL's set-up on a thread with no range yet: it follows the
            // lead's.
            let _init = nccl.push("ncclCommInitRankConfig");
            assert_eq!(path_now(), "loader/NCCL::ncclCommInitRankConfig");
            assert!(current().inherited);
            // The program's own step starts its own tree, and leads once the
            // other thread's range closes.
            let step = gpuscope_nvtx::push("step");
            assert_eq!(path_now(), "step");
            assert!(!current().inherited);
            let ar = nccl.push("ncclAllReduce");
            assert_eq!(path_now(), "step/NCCL::ncclAllReduce");
            assert!(!current().inherited);
            nccl.pop();
            std::mem::forget(ar);
            drop(step);
            assert!(current().inherited, "back under NCCL's set-up, which follows the lead");
            nccl.pop();
            std::mem::forget(_init);
        });
        drop(lead);
        assert_eq!(path_now(), "(no range)");
    }

    #[test]
    fn threads_without_ranges_inherit_the_lead_threads_and_library_ranges_nest_under_it() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(install());
        set_inherit(true);
        let cccl = gpuscope_nvtx::Domain::new("CCCL");
        let data = gpuscope_nvtx::Domain::new("data");
        let step = gpuscope_nvtx::push("step");
        let backward = gpuscope_nvtx::push("backward");
        let main_instance = current().instance;
        // Autograd's worker: no range of its own, so the loop thread's.
        let (plain, in_lib, ctx) = on_thread(|| {
            let plain = (path_now(), current());
            let _r = cccl.push("cub::DeviceReduce");
            let in_lib = (path_now(), current());
            cccl.pop();
            std::mem::forget(_r);
            (plain, in_lib, current())
        });
        assert_eq!(plain.0, "step/backward");
        assert!(plain.1.inherited);
        assert_eq!(plain.1.instance, main_instance, "the lead thread's range instance");
        assert_eq!(in_lib.0, "step/backward/CCCL::cub::DeviceReduce");
        assert!(in_lib.1.inherited);
        assert!(ctx.inherited, "back to the lead thread's ranges");
        // A thread with a range of its own (a data thread) keeps it, and
        // does not become the lead while the older step is open.
        on_thread(|| {
            let _l = data.push("load");
            assert_eq!(path_now(), "data::load");
            assert!(!current().inherited);
            let lead = on_thread(path_now);
            assert_eq!(lead, "step/backward", "the oldest outermost range leads");
            data.pop();
            std::mem::forget(_l);
        });
        drop(backward);
        let _opt = gpuscope_nvtx::push("optimizer");
        assert_eq!(on_thread(path_now), "step/optimizer", "the lead moves with its ranges");
        drop(_opt);
        drop(step);
        assert_eq!(on_thread(path_now), "(no range)", "nothing is open: nothing is inherited");
        // Strict per-thread semantics.
        let _s = gpuscope_nvtx::push("step");
        set_inherit(false);
        assert_eq!(on_thread(path_now), "(no range)");
        set_inherit(true);
        assert_eq!(on_thread(path_now), "step");
        drop(_s);
        assert!(is_library_domain("cublas") && is_library_domain("NCCL") && !is_library_domain("data"));
    }

    #[test]
    fn the_lead_thread_s_innermost_range_is_seen_after_its_ranges_were_re_parented() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(install());
        set_inherit(true);
        let io = gpuscope_nvtx::Domain::new("io");
        let step = gpuscope_nvtx::push("step");
        assert_eq!(on_thread(path_now), "step");
        let read = io.push("read");
        let decode = gpuscope_nvtx::push("decode");
        assert_eq!(on_thread(path_now), "step/io::read/decode");
        // The io range closes under `decode`, which is re-parented.
        io.pop();
        std::mem::forget(read);
        assert_eq!(on_thread(path_now), "step/decode");
        let leaf = gpuscope_nvtx::push("leaf");
        assert_eq!(on_thread(path_now), "step/decode/leaf", "seen by the other thread after the re-parenting");
        drop(leaf);
        assert_eq!(on_thread(path_now), "step/decode");
        drop(decode);
        let again = gpuscope_nvtx::push("again");
        assert_eq!(on_thread(path_now), "step/again");
        drop(again);
        drop(step);
        assert_eq!(on_thread(path_now), "(no range)");
    }

    #[test]
    fn follower_ranges_nest_under_the_lead_threads_and_never_lead() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(install());
        set_inherit(true);
        enter("step", false);
        enter("backward", false);
        let (inside, nested, after) = on_thread(|| {
            enter("layers.3", true);
            let inside = (path_now(), current().inherited);
            enter("self_attn", true);
            let nested = path_now();
            // A third thread still inherits the loop thread's ranges: a
            // follower range does not make its thread the lead.
            let third = on_thread(path_now);
            exit(false);
            exit(false);
            (inside, (nested, third), path_now())
        });
        assert_eq!(inside, ("step/backward/layers.3".to_string(), true));
        assert_eq!(nested, ("step/backward/layers.3/self_attn".to_string(), "step/backward".to_string()));
        assert_eq!(after, "step/backward", "closed: the lead thread's again");
        exit(false);
        exit(false);
        assert_eq!(path_now(), "(no range)");
    }

    #[test]
    fn the_hooks_ranges_and_the_programs_nest_by_time_and_each_closes_its_own() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(install());
        set_inherit(true);
        // A range of the program opened inside a module: the module closes,
        // the program's range stays open.
        enter("i46-forward", false);
        let inner = gpuscope_nvtx::push("i46-custom");
        assert_eq!(path_now(), "i46-forward/i46-custom");
        exit(false);
        assert_eq!(path_now(), "i46-custom", "the program's range is left open");
        drop(inner);
        assert_eq!(path_now(), "(no range)");
        // A module that outlives a range of the program: the program's pop
        // closes the program's range.
        let step = gpuscope_nvtx::push("i46-train_step");
        enter("i46-model", false);
        assert_eq!(path_now(), "i46-train_step/i46-model");
        drop(step);
        assert_eq!(path_now(), "i46-model", "the hooks' range is left open");
        exit(false);
        assert_eq!(path_now(), "(no range)");
        // The program wraps the data fetch that the hooks mark.
        assert_eq!(program_range_here(), 0);
        {
            let _fetch = gpuscope_nvtx::push("i46-fetch");
            let fetch = program_range_here();
            assert_ne!(fetch, 0, "the program's range is open");
            enter("i46-data", false);
            assert_eq!(program_range_here(), fetch, "the hooks' range is not the program's");
            assert_eq!(path_now(), "i46-fetch/i46-data");
            exit(false);
            assert_eq!(path_now(), "i46-fetch");
        }
        // The program's step with the hooks' step inside, then its
        // inference: siblings, not nested.
        {
            let _train = gpuscope_nvtx::push("i46-train");
            enter("step", false);
            enter("forward", false);
            assert_eq!(path_now(), "i46-train/step/forward");
            exit(false);
            exit(false);
        }
        {
            let _infer = gpuscope_nvtx::push("i46-infer");
            assert_eq!(path_now(), "i46-infer");
        }
        // A hooks' range on autograd's thread follows the loop thread's
        // step, and the loop thread's pop does not touch it.
        let step = gpuscope_nvtx::push("i46-step");
        let worker = on_thread(|| {
            enter("i46-layer", true);
            let inside = path_now();
            exit(false);
            (inside, path_now())
        });
        assert_eq!(worker, ("i46-step/i46-layer".to_string(), "i46-step".to_string()));
        drop(step);
        assert_eq!(path_now(), "(no range)");
        // The paths shown have no domain name for gpuscope's own ranges.
        let forward = paths().intern(ROOT, hooks_domain(), "i46-shown");
        assert_eq!(paths().path(forward).to_string(), "i46-shown");
        assert_eq!(paths().path(forward).frames[0].domain.as_deref(), Some(crate::model::path::HOOKS_DOMAIN));
    }
}
