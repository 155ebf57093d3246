//! Launches attributed to the Python functions on the launching thread's
//! stack: PyTorch modules without a hook per module per call.
//!
//! The program's Python side registers the code objects of the functions
//! that name work (each module class's `forward`, an optimizer's `step`).
//! At a traced launch on a thread that holds the GIL, the thread's frames
//! are walked from the innermost up to the first registered root (or at
//! most [`MAX_FRAMES`]) and the registered ones make the launch's path,
//! under the thread's own NVTX ranges: `step/LlamaModel/LlamaAttention`.
//! Between launches the chain is kept, so its ranges open at the first
//! launch inside a function and close at the exit of the last one (or at
//! the thread's next range of its own): their time is that of their
//! launches, not the Python call's. A function's activations are told
//! apart by their frame's address, which Python may reuse: two calls of
//! one function with no launch between may count as one.
//!
//! Cost: a thread-local check per launch when nothing is registered; with
//! functions registered, one walk of at most the frames between the
//! launch and the registered root, in traced periods only.

use super::Collection;
use crate::model::event::HostEvent;
use crate::model::path::{paths, PathId, STACK_DOMAIN};
use gpuscope_nvtx::tool::{self, DomainId};
use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Frames walked at most per launch.
pub(crate) const MAX_FRAMES: usize = 256;
/// Functions registered at most.
pub(crate) const MAX_FUNCTIONS: usize = 4096;
/// Paths a thread remembers having made, at most.
const MAX_MADE: usize = 4096;
/// Registered frames kept in one chain at most.
pub(crate) const MAX_LEVELS: usize = 16;

/// A registered function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Function {
    /// Its code object's address.
    pub code: usize,
    /// The name its frames get.
    pub name: Arc<str>,
    /// The walk stops at its frame (a model's outermost module).
    pub root: bool,
}

struct Registry {
    functions: Vec<Function>,
    levels: usize,
    layout: Option<Layout>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { functions: Vec::new(), levels: 0, layout: None });

/// Bumped at each registration; 0: never registered (the launch path's
/// only check).
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Replaces the registered functions (none: attribution off), keeping the
/// outermost `levels` (1 to [`MAX_LEVELS`]) of each chain. `here`: the code
/// objects of the caller's innermost Python frames, innermost first (three
/// or more, each called from the next), from which the interpreter's frame
/// layout is found; `first_local`: the address of the innermost one's
/// first local variable (a call's `self`, which tells sibling calls apart).
/// Returns the error to report, naming what is allowed.
pub(crate) fn register(
    functions: Vec<Function>,
    levels: usize,
    here: &[usize],
    first_local: usize,
) -> Result<(), String> {
    if functions.len() > MAX_FUNCTIONS {
        return Err(format!("{} functions; allowed: at most {MAX_FUNCTIONS}", functions.len()));
    }
    if !(1..=MAX_LEVELS).contains(&levels) {
        return Err(format!("{levels} levels; allowed: 1 to {MAX_LEVELS}"));
    }
    let known = REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).layout;
    let layout = if functions.is_empty() {
        known
    } else {
        if here.len() < MIN_HERE {
            return Err(format!("{} frames to find the frame layout from; allowed: {MIN_HERE} or more", here.len()));
        }
        let api = api().ok_or("the Python C API is not in this process (not loaded by a Python program)")?;
        // SAFETY: this thread's state, read with no other precondition.
        let tstate = unsafe { (api.this_thread_state)() } as usize;
        if tstate == 0 {
            return Err("this thread has no Python thread state".to_string());
        }
        // The layout found before, if it reads the caller's frames as given;
        // else found again.
        let reads_here = |l: &Layout| {
            let mut codes = Vec::with_capacity(here.len());
            let mut local = 0;
            walk(api, l, |frame, code| {
                if codes.is_empty() {
                    local = first_local_of(l, frame);
                }
                codes.push(code);
                codes.len() >= here.len()
            });
            codes == here && local == first_local
        };
        match known.filter(reads_here) {
            Some(l) => Some(l),
            None => {
                let maps = Readable::of_this_process().ok_or("/proc/self/maps cannot be read")?;
                let found = calibrate(tstate, here, first_local, &|a| maps.read(a));
                Some(found.ok_or("the Python interpreter's frame layout was not recognised from the frames given")?)
            }
        }
    };
    let mut r = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    r.functions = functions;
    r.levels = levels;
    r.layout = layout;
    GENERATION.fetch_add(1, Ordering::Release);
    Ok(())
}

/// Frames [`register`] needs to find the layout from.
pub(crate) const MIN_HERE: usize = 3;

/// The CPython functions the walk calls, found in the process. None of
/// them needs the GIL: a launch is often made with it released.
struct Api {
    this_thread_state: unsafe extern "C" fn() -> *mut c_void,
    initialized: unsafe extern "C" fn() -> c_int,
}

fn api() -> Option<&'static Api> {
    static API: OnceLock<Option<Api>> = OnceLock::new();
    API.get_or_init(|| {
        let find = |name: &CStr| {
            // SAFETY: dlsym with RTLD_DEFAULT and a C string has no other
            // precondition.
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            (!p.is_null()).then_some(p)
        };
        // SAFETY: each symbol is CPython's function of that name, whose
        // signature is the one it is cast to (the stable ABI's).
        unsafe {
            Some(Api {
                this_thread_state: std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> *mut c_void>(find(
                    c"PyGILState_GetThisThreadState",
                )?),
                initialized: std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(find(
                    c"Py_IsInitialized",
                )?),
            })
        }
    })
    .as_ref()
}

/// Where the interpreter keeps a thread's frames: the innermost frame's
/// address at `thread_state + current` (or, through `cframe`, at
/// `*(thread_state + current) + cframe`: 3.11 and 3.12's `cframe`); each
/// frame's code at `frame + code` (low two bits are tags from 3.14), its
/// caller at `frame + back` and its first local variable at `frame +
/// local0`. Found by [`calibrate`], not by version
/// numbers, so that any CPython from 3.9 on is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    current: usize,
    cframe: Option<usize>,
    code: usize,
    back: usize,
    local0: usize,
}

/// Field offsets tried, bytes: CPython keeps the frame pointer within the
/// thread state's first 100 bytes or so (3.9 to 3.14), and a cframe's
/// within its first 16.
const THREAD_STATE_SPAN: usize = 256;
const CFRAME_SPAN: usize = 32;
const FRAME_SPAN: usize = 128;
/// Where a frame's first local variable may be, bytes (3.9 and 3.10 keep
/// the locals after a block stack of ~240 bytes).
const LOCALS_SPAN: usize = 512;

fn untag(p: usize) -> usize {
    p & !3
}

/// The layout under which the thread state at `tstate` holds a frame chain
/// whose codes start with `here` (innermost first), the innermost frame's
/// first local being `first_local`; `read` reads a word, or `None` where
/// the address cannot be read. Direct places are tried before those
/// through a pointer.
pub(crate) fn calibrate(
    tstate: usize,
    here: &[usize],
    first_local: usize,
    read: &dyn Fn(usize) -> Option<usize>,
) -> Option<Layout> {
    // A word at `base + off`: any word read may be a pointer or not.
    let at = |base: usize, off: usize| base.checked_add(off).and_then(read);
    let chain_from = |frame: usize, cframe: Option<usize>, current: usize| {
        for code in (0..FRAME_SPAN).step_by(8) {
            if at(frame, code).map(untag) != Some(here[0]) {
                continue;
            }
            'back: for back in (0..FRAME_SPAN).step_by(8) {
                let mut f = frame;
                for want in &here[1..] {
                    match at(f, back) {
                        Some(next) if next != 0 && at(next, code).map(untag) == Some(*want) => f = next,
                        _ => continue 'back,
                    }
                }
                // The locals come after the frame's fixed fields, first to
                // last: the first word holding it is the first local.
                let local0 = (0..LOCALS_SPAN).step_by(8).find(|&o| at(frame, o).map(untag) == Some(first_local))?;
                return Some(Layout { current, cframe, code, back, local0 });
            }
        }
        None
    };
    let fields = || (0..THREAD_STATE_SPAN).step_by(8).filter_map(|off| Some((off, at(tstate, off)?)));
    fields().filter(|(_, p)| *p != 0).find_map(|(off, p)| chain_from(p, None, off)).or_else(|| {
        fields().filter(|(_, p)| *p != 0).find_map(|(off, p)| {
            (0..CFRAME_SPAN).step_by(8).find_map(|c| match at(p, c) {
                Some(f) if f != 0 => chain_from(f, Some(c), off),
                _ => None,
            })
        })
    })
}

/// Reads of this process's memory that must not fault while the layout is
/// not yet known: through `process_vm_readv` (an address that went away
/// fails the call), else, where the system refuses it (seccomp), checked
/// against a snapshot of the readable mappings.
enum Readable {
    Syscall,
    Maps(Vec<(usize, usize)>),
}

impl Readable {
    fn of_this_process() -> Option<Self> {
        let probe = 0x5eed_usize;
        if read_by_syscall(&probe as *const usize as usize) == Some(probe) {
            return Some(Readable::Syscall);
        }
        let text = std::fs::read_to_string("/proc/self/maps").ok()?;
        let mut v = Vec::new();
        for line in text.lines() {
            let mut it = line.split_whitespace();
            let (Some(range), Some(perms)) = (it.next(), it.next()) else { continue };
            let Some((a, b)) = range.split_once('-') else { continue };
            if let (Ok(a), Ok(b), true) =
                (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16), perms.starts_with('r'))
            {
                v.push((a, b));
            }
        }
        v.sort_unstable();
        Some(Readable::Maps(v))
    }

    fn read(&self, addr: usize) -> Option<usize> {
        if addr % 8 != 0 {
            return None;
        }
        match self {
            Readable::Syscall => read_by_syscall(addr),
            Readable::Maps(maps) => {
                let i = maps.partition_point(|(a, _)| *a <= addr).checked_sub(1)?;
                if addr.checked_add(8)? > maps[i].1 {
                    return None;
                }
                // SAFETY: aligned and inside a readable mapping of this
                // process when the snapshot was taken (a mapping another
                // thread removes since is the risk this fallback takes).
                Some(unsafe { (addr as *const usize).read_volatile() })
            }
        }
    }
}

/// A word of this process's memory read by the kernel: `None` where the
/// address is not readable, never a fault.
fn read_by_syscall(addr: usize) -> Option<usize> {
    let mut out = 0usize;
    let local = libc::iovec { iov_base: &mut out as *mut usize as *mut c_void, iov_len: 8 };
    let remote = libc::iovec { iov_base: addr as *mut c_void, iov_len: 8 };
    // SAFETY: `local` points to a writable word of ours; the kernel checks
    // `remote` and fails the call rather than fault.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    (n == 8).then_some(out)
}

/// One registered frame of a chain: its frame's address, its function's
/// index in the thread's copy of the registry, and its first local (the
/// call's `self`): a frame's address is reused by the next call at the
/// same depth, the instance it is called on tells sibling calls apart.
type Link = (usize, u32, usize);

/// The first local variable of `frame`, one of the calling thread's
/// frames read by [`walk`] in this same call.
fn first_local_of(layout: &Layout, frame: usize) -> usize {
    // SAFETY: as in `walk`: a live frame of the calling thread, whose
    // fixed-size part holds this word (the layout was found on such a
    // frame).
    untag(unsafe { *((frame + layout.local0) as *const usize) })
}

/// The calling thread's Python frames, innermost first, as `(frame, code)`
/// addresses, until `visit` returns true; none where the thread runs no
/// Python.
fn walk(api: &Api, layout: &Layout, mut visit: impl FnMut(usize, usize) -> bool) {
    // SAFETY: the layout was found on this interpreter's own frames. A
    // thread's frames change only on that thread, which is inside this
    // launch call: the chain read here stands still, GIL held or not. The
    // thread state lives while its thread is a Python thread.
    unsafe {
        if (api.initialized)() == 0 {
            return;
        }
        let tstate = (api.this_thread_state)() as usize;
        if tstate == 0 {
            return;
        }
        let mut frame = *((tstate + layout.current) as *const usize);
        if let Some(c) = layout.cframe {
            if frame == 0 {
                return;
            }
            frame = *((frame + c) as *const usize);
        }
        for _ in 0..MAX_FRAMES {
            if frame == 0 {
                return;
            }
            let code = untag(*((frame + layout.code) as *const usize));
            if visit(frame, code) {
                return;
            }
            frame = *((frame + layout.back) as *const usize);
        }
    }
}

/// A range this thread opened for a registered frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Open {
    link: Link,
    instance: u64,
    path: PathId,
}

/// One thread's chain and its copy of the registry.
#[derive(Default)]
struct Stack {
    generation: u64,
    functions: HashMap<usize, u32>,
    names: Vec<(Arc<str>, bool)>,
    levels: usize,
    layout: Option<Layout>,
    /// The session the open ranges were sent to.
    session: u64,
    /// What the outermost open range hangs from: the thread's own range
    /// instance and path.
    base: (u64, PathId),
    open: Vec<Open>,
    /// When the thread's last launch was made, ns.
    last_ts: u64,
    /// Paths made: (parent, function) -> path.
    made: HashMap<(PathId, u32), PathId>,
    /// Scratch for a walk.
    chain: Vec<Link>,
}

thread_local! {
    static STACK: RefCell<Stack> = RefCell::new(Stack::default());
}

fn domain() -> DomainId {
    static DOMAIN: OnceLock<DomainId> = OnceLock::new();
    *DOMAIN.get_or_init(|| tool::domain(STACK_DOMAIN))
}

impl Stack {
    /// Takes the registry's current functions if they changed.
    fn refresh(&mut self, generation: u64) {
        if self.generation == generation {
            return;
        }
        let r = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        self.generation = generation;
        self.functions.clear();
        self.names.clear();
        self.made.clear();
        for (i, f) in r.functions.iter().enumerate() {
            self.functions.insert(f.code, i as u32);
            self.names.push((f.name.clone(), f.root));
        }
        self.levels = r.levels.max(1);
        self.layout = r.layout;
    }

    /// Moves the open ranges to `chain` (outermost first) under `base`,
    /// sending their pops and pushes through `send`; returns the innermost
    /// open range's (instance, path), or `None` where `chain` is empty.
    fn follow(
        &mut self,
        session: u64,
        base: (u64, PathId),
        tid: u32,
        ts: u64,
        last_end: u64,
        send: &mut impl FnMut(HostEvent),
    ) -> Option<(u64, PathId)> {
        if self.session != session {
            // A new session: the old one's ranges are not its.
            self.open.clear();
            self.session = session;
        }
        let kept = if self.base == base {
            self.open.iter().zip(&self.chain).take_while(|(o, l)| o.link == **l).count()
        } else {
            0
        };
        self.close_from(kept, last_end, send);
        self.base = base;
        for i in kept..self.chain.len() {
            let (parent_instance, parent_path) = match self.open.last() {
                Some(o) => (o.instance, o.path),
                None => base,
            };
            let link = self.chain[i];
            let name = &self.names[link.1 as usize].0;
            if self.made.len() >= MAX_MADE {
                // Bounded: programs whose range names change every step.
                self.made.clear();
            }
            let path =
                *self.made.entry((parent_path, link.1)).or_insert_with(|| paths().intern(parent_path, domain(), name));
            let instance = super::nvtx::next_instance();
            send(HostEvent::Push { instance, parent: parent_instance, path, tid, ts });
            self.open.push(Open { link, instance, path });
        }
        self.open.last().map(|o| (o.instance, o.path))
    }

    /// Closes the open ranges from the `keep`th on, innermost first, at
    /// `end` (when the last launch inside them returned).
    fn close_from(&mut self, keep: usize, end: u64, send: &mut impl FnMut(HostEvent)) {
        while self.open.len() > keep {
            let Some(o) = self.open.pop() else { break };
            send(HostEvent::Pop { instance: o.instance, ts: end });
        }
    }
}

/// Whether any function is registered: launches then walk the stack.
pub(crate) fn active() -> bool {
    GENERATION.load(Ordering::Relaxed) != 0
}

/// What a launch at `ts` on this thread is attributed to: `ctx` (the
/// thread's NVTX context) or, with registered functions on its Python
/// stack, the innermost of their ranges under it. `prev_call_ns`: how long
/// the thread's previous launch call took.
pub(crate) fn launch_context(
    s: &Collection,
    ctx: super::nvtx::ThreadContext,
    ts: u64,
    prev_call_ns: u32,
) -> super::nvtx::ThreadContext {
    let generation = GENERATION.load(Ordering::Acquire);
    if generation == 0 {
        return ctx;
    }
    if ctx.library {
        // A library's launch (inside its NVTX range) is the library's; the
        // ranges open around it stay open past it.
        let _ = STACK.try_with(|st| {
            if let Ok(mut st) = st.try_borrow_mut() {
                if !st.open.is_empty() {
                    st.last_ts = ts;
                }
            }
        });
        return ctx;
    }
    let Some(api) = api() else { return ctx };
    STACK
        .try_with(|st| {
            let Ok(mut st) = st.try_borrow_mut() else { return ctx };
            st.refresh(generation);
            let Some(layout) = st.layout else { return ctx };
            if st.functions.is_empty() && st.open.is_empty() {
                return ctx;
            }
            let st = &mut *st;
            // The previous launch's return ends what it was inside.
            let last_end = st.last_ts.saturating_add(prev_call_ns as u64).min(ts);
            st.chain.clear();
            let (functions, names, chain) = (&st.functions, &st.names, &mut st.chain);
            walk(api, &layout, |frame, code| match functions.get(&code) {
                Some(&i) => {
                    chain.push((frame, i, first_local_of(&layout, frame)));
                    names[i as usize].1 || chain.len() >= MAX_FRAMES
                }
                None => false,
            });
            chain.reverse();
            chain.truncate(st.levels);
            let mut send = |e: HostEvent| s.send(e);
            let inner = st.follow(s.id, (ctx.instance, ctx.path), ctx.tid, ts, last_end, &mut send);
            st.last_ts = ts;
            match inner {
                Some((instance, path)) => super::nvtx::ThreadContext { path, instance, inherited: false, ..ctx },
                None => ctx,
            }
        })
        .unwrap_or(ctx)
}

/// The names of the registered functions on the calling thread's Python
/// stack, outermost first and cut to the registered levels: what a launch
/// made here is attributed to, under the thread's own ranges.
pub(crate) fn names_here() -> Vec<Arc<str>> {
    let r = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    let (Some(api), Some(layout)) = (api(), r.layout) else { return Vec::new() };
    let mut found = Vec::new();
    walk(api, &layout, |_, code| match r.functions.iter().find(|f| f.code == code) {
        Some(f) => {
            found.push(f.name.clone());
            f.root
        }
        None => false,
    });
    found.reverse();
    found.truncate(r.levels);
    found
}

/// Closes this thread's open ranges before a range of the thread's own
/// opens or closes (`own` says whether it is one): they nest inside it.
pub(crate) fn close_here(own: impl FnOnce() -> bool) {
    if GENERATION.load(Ordering::Relaxed) == 0 {
        return;
    }
    let _ = STACK.try_with(|st| {
        let Ok(mut st) = st.try_borrow_mut() else { return };
        if st.open.is_empty() || !own() {
            return;
        }
        let Some(s) = super::hold() else { return };
        if st.session == s.id {
            let end = st.last_ts.saturating_add(super::callbacks::last_call_ns() as u64);
            st.close_from(0, end, &mut |e| s.send(e));
        } else {
            st.open.clear();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(names: &[&str], levels: usize) -> Stack {
        let mut st = Stack { levels, ..Stack::default() };
        for (i, n) in names.iter().enumerate() {
            st.functions.insert(1000 + i, i as u32);
            st.names.push((Arc::from(*n), i == 0));
        }
        st
    }

    fn run(st: &mut Stack, chain: &[Link], base: (u64, PathId), ts: u64) -> (Option<(u64, PathId)>, Vec<HostEvent>) {
        let mut sent = Vec::new();
        st.chain = chain.to_vec();
        st.chain.truncate(st.levels);
        let last_end = st.last_ts + 5;
        let inner = st.follow(1, base, 7, ts, last_end, &mut |e| sent.push(e));
        st.last_ts = ts;
        (inner, sent)
    }

    fn kinds(sent: &[HostEvent]) -> Vec<String> {
        sent.iter()
            .map(|e| match e {
                HostEvent::Push { path, ts, .. } => format!("push {} @{ts}", paths().path(*path)),
                HostEvent::Pop { ts, .. } => format!("pop @{ts}"),
                _ => "other".into(),
            })
            .collect()
    }

    #[test]
    fn a_chain_opens_once_and_closes_at_the_end_of_its_last_launch() {
        let mut st = stack(&["PsModel", "PsLayer", "PsLinear"], 8);
        let base = (0, crate::model::path::ROOT);
        let (_, sent) = run(&mut st, &[(10, 0, 1010), (20, 1, 1020), (30, 2, 1030)], base, 100);
        assert_eq!(
            kinds(&sent),
            ["push PsModel @100", "push PsModel/PsLayer @100", "push PsModel/PsLayer/PsLinear @100"]
        );
        // Same frames: nothing sent.
        let (inner, sent) = run(&mut st, &[(10, 0, 1010), (20, 1, 1020), (30, 2, 1030)], base, 200);
        assert!(sent.is_empty());
        assert_eq!(inner.map(|(_, p)| paths().path(p).to_string()), Some("PsModel/PsLayer/PsLinear".into()));
        // Another Linear (another frame) in the same layer.
        let (_, sent) = run(&mut st, &[(10, 0, 1010), (20, 1, 1020), (31, 2, 1031)], base, 300);
        assert_eq!(kinds(&sent), ["pop @205", "push PsModel/PsLayer/PsLinear @300"]);
        // The next layer: its frame at the same address (Python reuses it),
        // called on another module: a new call.
        let (_, sent) = run(&mut st, &[(10, 0, 1010), (20, 1, 2020), (31, 2, 1031)], base, 350);
        assert_eq!(
            kinds(&sent),
            ["pop @305", "pop @305", "push PsModel/PsLayer @350", "push PsModel/PsLayer/PsLinear @350"]
        );
        // Back in the model only: both inner ones close at the last launch's end.
        let (_, sent) = run(&mut st, &[(10, 0, 1010)], base, 400);
        assert_eq!(kinds(&sent), ["pop @355", "pop @355"]);
    }

    #[test]
    fn a_new_base_or_session_reopens_the_chain_and_levels_cut_the_innermost() {
        let mut st = stack(&["PsRoot2", "PsBlock2", "PsLeaf2"], 2);
        let root = crate::model::path::ROOT;
        let step = paths().intern(root, 0, "ps-step");
        let (_, sent) = run(&mut st, &[(1, 0, 1001), (2, 1, 1002), (3, 2, 1003)], (5, step), 10);
        assert_eq!(kinds(&sent), ["push ps-step/PsRoot2 @10", "push ps-step/PsRoot2/PsBlock2 @10"]);
        if let HostEvent::Push { parent, .. } = sent[0] {
            assert_eq!(parent, 5, "the outermost hangs from the thread's range");
        }
        // The program's next step: the same frames reopen under it.
        let (_, sent) = run(&mut st, &[(1, 0, 1001), (2, 1, 1002), (3, 2, 1003)], (6, step), 20);
        assert_eq!(
            kinds(&sent),
            ["pop @15", "pop @15", "push ps-step/PsRoot2 @20", "push ps-step/PsRoot2/PsBlock2 @20"]
        );
        // Closed before a range of the program's own.
        let mut sent = Vec::new();
        st.close_from(0, st.last_ts + 5, &mut |e| sent.push(e));
        assert_eq!(kinds(&sent), ["pop @25", "pop @25"]);
        // No registered frame: nothing open, the thread's context stands.
        let (inner, sent) = run(&mut st, &[], (6, step), 30);
        assert!(inner.is_none() && sent.is_empty());
    }

    #[test]
    fn the_frame_layout_is_found_directly_or_through_a_pointer() {
        // Word-addressed fake memory: address = 8 * index + BASE.
        const BASE: usize = 0x10_0000;
        let at = |i: usize| BASE + 8 * i;
        let read_of = |mem: Vec<usize>| {
            move |a: usize| (a >= BASE && (a - BASE) % 8 == 0).then(|| mem.get((a - BASE) / 8).copied()).flatten()
        };
        // Three frames of 6 words each at 100, 110, 120: code at +16
        // (tagged in the first, as 3.14 does), caller at +40.
        let mut mem = vec![0usize; 200];
        let codes = [0x7000, 0x7100, 0x7200];
        for (k, f) in [100, 110, 120].into_iter().enumerate() {
            mem[f + 2] = codes[k] | if k == 0 { 1 } else { 0 };
            mem[f + 5] = if k < 2 { at(f + 10) } else { 0 };
        }
        // The innermost frame's first local, at +56 (tagged).
        let local = 0x9000;
        mem[107] = local | 1;
        // The thread state: a decoy pointer to the second frame, then the
        // current frame at +24.
        let mut direct = mem.clone();
        direct[1] = at(110);
        direct[3] = at(100);
        let found = calibrate(at(0), &codes, local, &read_of(direct));
        assert_eq!(found, Some(Layout { current: 24, cframe: None, code: 16, back: 40, local0: 56 }));
        // 3.11/3.12: the thread state points to a cframe whose second word
        // is the current frame.
        let mut indirect = mem.clone();
        indirect[4] = at(50);
        indirect[51] = at(100);
        let found = calibrate(at(0), &codes, local, &read_of(indirect));
        assert_eq!(found, Some(Layout { current: 32, cframe: Some(8), code: 16, back: 40, local0: 56 }));
        // Frames that do not chain as given: nothing.
        let mut wrong = mem;
        wrong[3] = at(100);
        assert_eq!(calibrate(at(0), &[codes[0], codes[2], codes[1]], local, &read_of(wrong.clone())), None);
        // Nor without the first local.
        assert_eq!(calibrate(at(0), &codes, 0x9100, &read_of(wrong)), None);
    }
}
