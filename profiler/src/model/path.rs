//! NVTX paths interned once per process, so that a launch carries a
//! 4-byte id instead of a string; the paths themselves (`RangePath`) are
//! the report's (`gpuscope_report::model::path`).

pub use gpuscope_report::model::path::*;

use gpuscope_nvtx::tool::{self, DomainId};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

/// Id of an interned path; [`ROOT`] is "no range open".
pub type PathId = u32;
/// The empty path.
pub const ROOT: PathId = 0;

struct Node {
    parent: PathId,
    domain: DomainId,
    name: Arc<str>,
}

/// Children of a (parent, domain) by name.
type ChildIndex = HashMap<(PathId, DomainId), HashMap<Arc<str>, PathId>>;

/// Distinct paths a process interns at most (its NVTX paths over all its
/// sessions). Past it a new range is recorded as `OVER_CAP` inside its
/// parent, and counted in the report's drops.
pub const MAX_PATHS: usize = 100_000;
/// Names under one parent that differ only in their numbers (`step 17`,
/// `step 18`, `request 4711`) are kept apart up to this many; further ones
/// are one range whose name has `#` for each number (`step #`).
pub const FOLD_AFTER: usize = 256;
/// The name of the range that stands for new paths past [`MAX_PATHS`].
pub const OVER_CAP: &str = "(ranges past gpuscope's path cap)";

/// `name` with each run of digits as `#`: names of one shape differ only
/// in their numbers.
pub fn shape(name: &str) -> std::borrow::Cow<'_, str> {
    if !name.bytes().any(|b| b.is_ascii_digit()) {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len());
    let mut in_digits = false;
    for c in name.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The table's lookup side: children by name, and how many distinct names
/// of each shape a (parent, domain) has (counted as their nodes are made).
#[derive(Default)]
struct Index {
    children: ChildIndex,
    shapes: HashMap<(PathId, DomainId), HashMap<String, usize>>,
}

/// Interned paths: (parent, domain, name) -> id, at most [`MAX_PATHS`]
/// (plus one `OVER_CAP` node per parent).
pub(crate) struct PathTable {
    nodes: RwLock<Vec<Node>>,
    index: RwLock<Index>,
    /// New paths recorded as `OVER_CAP` since the process started.
    over_cap: std::sync::atomic::AtomicU64,
    /// The table has reached `max_paths`: new names resolve to `OVER_CAP`
    /// (and are counted), so callers' caches must not keep them.
    full: std::sync::atomic::AtomicBool,
    max_paths: usize,
}

impl PathTable {
    pub(crate) fn new() -> Self {
        Self::with_cap(MAX_PATHS)
    }

    fn with_cap(max_paths: usize) -> Self {
        PathTable {
            nodes: RwLock::new(vec![Node { parent: ROOT, domain: 0, name: Arc::from("") }]),
            index: RwLock::new(Index::default()),
            over_cap: Default::default(),
            full: Default::default(),
            max_paths,
        }
    }

    /// The id of `name` inside `parent`: its own node, its folded node, or
    /// the stand-in past the cap. Names seen before (folded ones and those
    /// past the cap too) resolve under the read lock.
    pub(crate) fn intern(&self, parent: PathId, domain: DomainId, name: &str) -> PathId {
        {
            let index = self.index.read().unwrap_or_else(|e| e.into_inner());
            if let Some(id) = self.existing(&index, parent, domain, name) {
                return id;
            }
        }
        let mut index = self.index.write().unwrap_or_else(|e| e.into_inner());
        if let Some(id) = self.existing(&index, parent, domain, name) {
            return id;
        }
        let mut nodes = self.nodes.write().unwrap_or_else(|e| e.into_inner());
        let shape = shape(name);
        let folds = shape != name
            && index.shapes.get(&(parent, domain)).and_then(|m| m.get(&*shape)).is_some_and(|&n| n >= FOLD_AFTER);
        let over = nodes.len() >= self.max_paths && name != OVER_CAP;
        let (made, counts_shape) = match (over, folds) {
            (true, _) => {
                self.over_cap.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                (OVER_CAP, false)
            }
            (false, true) => (&*shape, false),
            (false, false) => (name, shape != name),
        };
        if let Some(id) = index.children.get(&(parent, domain)).and_then(|m| m.get(made)) {
            return *id;
        }
        if counts_shape {
            *index.shapes.entry((parent, domain)).or_default().entry(shape.to_string()).or_default() += 1;
        }
        let id = nodes.len() as PathId;
        let made: Arc<str> = Arc::from(made);
        nodes.push(Node { parent, domain, name: made.clone() });
        if nodes.len() >= self.max_paths {
            self.full.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        index.children.entry((parent, domain)).or_default().insert(made, id);
        id
    }

    /// `name`'s node if it has one, the folded node of its shape once that
    /// shape folds, or the stand-in once the table is full.
    fn existing(&self, index: &Index, parent: PathId, domain: DomainId, name: &str) -> Option<PathId> {
        let children = index.children.get(&(parent, domain));
        if let Some(id) = children.and_then(|m| m.get(name)) {
            return Some(*id);
        }
        let shape = shape(name);
        if shape != name
            && index.shapes.get(&(parent, domain)).and_then(|m| m.get(&*shape)).is_some_and(|&n| n >= FOLD_AFTER)
        {
            if let Some(id) = children.and_then(|m| m.get(&*shape)) {
                return Some(*id);
            }
        }
        if self.nodes.read().unwrap_or_else(|e| e.into_inner()).len() >= self.max_paths {
            let id = children.and_then(|m| m.get(OVER_CAP))?;
            self.over_cap.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Some(*id);
        }
        None
    }

    /// Whether the table has reached its cap.
    pub(crate) fn is_full(&self) -> bool {
        self.full.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// New ranges recorded as `OVER_CAP` since the process started.
    pub(crate) fn over_cap(&self) -> u64 {
        self.over_cap.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The path `id` is inside (`None`: `id` is the root or unknown).
    pub(crate) fn parent(&self, id: PathId) -> Option<PathId> {
        if id == ROOT {
            return None;
        }
        self.nodes.read().unwrap_or_else(|e| e.into_inner()).get(id as usize).map(|n| n.parent)
    }

    /// The last frame's name of `id`.
    pub(crate) fn name(&self, id: PathId) -> Arc<str> {
        let nodes = self.nodes.read().unwrap_or_else(|e| e.into_inner());
        nodes.get(id as usize).map_or_else(|| Arc::from(""), |n| n.name.clone())
    }

    /// `path`'s frames below `base` (all of them when `base` is not around
    /// it), opened inside `onto`.
    pub(crate) fn rebase(&self, path: PathId, base: PathId, onto: PathId) -> PathId {
        let mut below = Vec::new();
        {
            let nodes = self.nodes.read().unwrap_or_else(|e| e.into_inner());
            let mut cur = path;
            while cur != base && cur != ROOT {
                let Some(n) = nodes.get(cur as usize) else { break };
                below.push((n.domain, n.name.clone()));
                cur = n.parent;
            }
        }
        below.iter().rev().fold(onto, |parent, (domain, name)| self.intern(parent, *domain, name))
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
/// A thread's recent [`PathTable::intern`] answers, so that a range opened
/// again (every step's `forward`) takes no lock shared with other threads:
/// direct-mapped, [`PathCache::SLOTS`] entries, names compared in full.
/// Paths never change their id, so entries stay right; none is kept once
/// the table is full (each opening past the cap is counted).
pub(crate) struct PathCache {
    slots: Vec<Option<Cached>>,
}

/// A cached answer: (parent, domain, name) -> path.
type Cached = (PathId, DomainId, Box<str>, PathId);

impl Default for PathCache {
    fn default() -> Self {
        PathCache { slots: vec![None; Self::SLOTS] }
    }
}

impl PathCache {
    /// Entries a thread keeps.
    pub(crate) const SLOTS: usize = 256;

    /// [`PathTable::intern`] of `table`, answered from the cache when it
    /// can be.
    pub(crate) fn intern(&mut self, table: &PathTable, parent: PathId, domain: DomainId, name: &str) -> PathId {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        (parent, domain, name).hash(&mut h);
        let slot = &mut self.slots[h.finish() as usize % Self::SLOTS];
        if let Some((p, d, n, id)) = slot {
            if *p == parent && *d == domain && **n == *name {
                return *id;
            }
        }
        let id = table.intern(parent, domain, name);
        if !table.is_full() {
            *slot = Some((parent, domain, name.into(), id));
        }
        id
    }
}

pub(crate) fn paths() -> &'static PathTable {
    static PATHS: OnceLock<PathTable> = OnceLock::new();
    PATHS.get_or_init(PathTable::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_stable_and_paths_read_back() {
        let t = PathTable::new();
        let a = t.intern(ROOT, 0, "train");
        let b = t.intern(a, 0, "forward");
        assert_eq!(t.intern(ROOT, 0, "train"), a);
        assert_eq!(t.intern(a, 0, "forward"), b);
        assert_ne!(t.intern(ROOT, 0, "forward"), b, "same name, other parent");
        assert_eq!(t.path(b).to_string(), "train/forward");
        assert_eq!(&*t.name(b), "forward");
        assert!(t.path(ROOT).is_empty());
    }

    #[test]
    fn names_that_differ_only_by_a_number_fold_once_there_are_many() {
        assert_eq!(shape("step 12"), "step #");
        assert_eq!(shape("layers.3.attn_v2"), "layers.#.attn_v#");
        assert_eq!(shape("forward"), "forward");
        let t = PathTable::new();
        let train = t.intern(ROOT, 0, "train");
        let ids: Vec<PathId> = (0..FOLD_AFTER + 50).map(|i| t.intern(train, 0, &format!("step {i}"))).collect();
        let distinct: std::collections::HashSet<PathId> = ids.iter().copied().collect();
        assert_eq!(distinct.len(), FOLD_AFTER + 1, "the first {FOLD_AFTER} apart, the rest as one");
        assert_eq!(t.path(ids[FOLD_AFTER + 49]).to_string(), "train/step #");
        assert_eq!(t.path(ids[3]).to_string(), "train/step 3");
        assert_eq!(t.intern(train, 0, "step 3"), ids[3], "a name kept apart stays so");
        // Another parent, and names of another shape, count on their own.
        assert_ne!(t.path(t.intern(ROOT, 0, "step 999")).to_string(), "step #");
        assert_eq!(t.path(t.intern(train, 0, "eval 999")).to_string(), "train/eval 999");
    }

    #[test]
    fn the_table_stops_growing_at_its_cap_and_counts_what_it_refused() {
        let t = PathTable::with_cap(10);
        let a = t.intern(ROOT, 0, "a");
        let names = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda"];
        let ids: Vec<PathId> = names.iter().map(|n| t.intern(a, 0, n)).collect();
        assert_eq!(t.nodes.read().unwrap().len(), 11, "10 paths and one stand-in");
        assert_eq!(t.path(ids[10]).to_string(), format!("a/{OVER_CAP}"));
        assert_eq!(ids[9], ids[10], "every path past the cap is the one stand-in");
        assert_eq!(t.over_cap(), 3);
        assert_eq!(t.intern(a, 0, "alpha"), ids[0], "known paths still resolve");
        for i in 0..1000 {
            t.intern(a, 0, &format!("x{i}y"));
            t.intern(a, 0, &format!("req-{:x}-{i}", i * 7919));
        }
        assert_eq!(t.nodes.read().unwrap().len(), 11, "bounded");
        let shapes: usize = t.index.read().unwrap().shapes.values().map(|m| m.len()).sum();
        assert_eq!(shapes, 0, "names past the cap leave nothing behind");
        assert_eq!(t.over_cap(), 2003);
    }

    #[test]
    fn a_thread_s_cache_answers_as_the_table_does_and_keeps_nothing_past_the_cap() {
        let t = PathTable::with_cap(6);
        let mut cache = PathCache::default();
        let step = cache.intern(&t, ROOT, 0, "step");
        let layer = cache.intern(&t, step, 0, "layer");
        for _ in 0..3 {
            assert_eq!(cache.intern(&t, step, 0, "layer"), layer);
            assert_eq!(cache.intern(&t, step, 1, "layer"), t.intern(step, 1, "layer"), "the domain tells apart");
            assert_eq!(cache.intern(&t, ROOT, 0, "step"), step);
        }
        // More names than slots: evicted entries are asked of the table again.
        let many: Vec<PathId> =
            (0..2 * PathCache::SLOTS).map(|i| cache.intern(&t, layer, 0, &format!("n{i}"))).collect();
        assert!(t.is_full());
        assert_eq!(many[0], t.intern(layer, 0, "n0"));
        let before = t.over_cap();
        cache.intern(&t, layer, 0, "n999");
        cache.intern(&t, layer, 0, "n999");
        assert_eq!(t.over_cap(), before + 2, "every opening past the cap is counted");
        assert_eq!(cache.intern(&t, step, 0, "layer"), layer, "known paths still resolve");
    }
}
