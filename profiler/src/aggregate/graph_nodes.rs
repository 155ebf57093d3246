//! CUDA graph nodes and the ranges they were captured in. A graph's
//! kernels are launched once at capture and replayed many times by one
//! `cudaGraphLaunch`: at replay the ranges open are those around the
//! launch (the compiled model's call), not the modules that issued each
//! kernel during capture. Each node keeps the ranges opened inside the
//! capture, and its replayed kernels run them inside the launch's.

use crate::model::path::{paths, PathId};
use rustc_hash::FxHashMap;

/// Nodes remembered at most: those made inside ranges opened during their
/// capture (a captured model has thousands). Past it new nodes keep their
/// launch's ranges (the caller counts them).
pub(crate) const MAX_NODES: usize = 1 << 20;

/// Rebased paths remembered at most, (launch path, node) pairs.
const MAX_REBASED: usize = 1 << 16;

#[derive(Default)]
pub(crate) struct GraphNodes {
    /// Node id -> (path at its making, path when its capture began).
    nodes: FxHashMap<u64, (PathId, PathId)>,
    /// (launch path, node) -> the node's path inside it.
    rebased: FxHashMap<(PathId, u64), PathId>,
}

impl GraphNodes {
    /// A node made with the ranges at `path` open, `base` when its capture
    /// began. False when it had ranges of its own but the table was full.
    pub(crate) fn made(&mut self, node: u64, path: PathId, base: PathId) -> bool {
        if path == base {
            return true;
        }
        if self.nodes.len() >= MAX_NODES && !self.nodes.contains_key(&node) {
            return false;
        }
        self.nodes.insert(node, (path, base));
        true
    }

    /// `node` copied from `original` (instantiation clones every node);
    /// false as for [`made`](Self::made).
    pub(crate) fn cloned(&mut self, node: u64, original: u64) -> bool {
        match self.nodes.get(&original) {
            Some(&(path, base)) => self.made(node, path, base),
            None => true,
        }
    }

    /// The path a kernel of graph node `node` (0: not a graph's) launched
    /// inside `launch` counts for.
    pub(crate) fn path(&mut self, node: u64, launch: PathId) -> PathId {
        if node == 0 || self.nodes.is_empty() {
            return launch;
        }
        let Some(&(path, base)) = self.nodes.get(&node) else { return launch };
        if let Some(&p) = self.rebased.get(&(launch, node)) {
            return p;
        }
        let p = paths().rebase(path, base, launch);
        if self.rebased.len() >= MAX_REBASED {
            self.rebased.clear();
        }
        self.rebased.insert((launch, node), p);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::path::ROOT;

    #[test]
    fn replayed_kernels_run_the_ranges_opened_during_capture_inside_the_launchs() {
        let t = paths();
        let warmup = t.intern(ROOT, 0, "graph-warmup");
        let captured = t.intern(t.intern(warmup, 0, "layers.3"), 0, "self_attn");
        let step = t.intern(ROOT, 0, "graph-step");
        let mut g = GraphNodes::default();
        assert!(g.made(11, captured, warmup) && g.made(12, warmup, warmup));
        assert!(g.cloned(21, 11) && g.cloned(22, 12));
        let at = |g: &mut GraphNodes, node| t.path(g.path(node, step)).to_string();
        assert_eq!(at(&mut g, 21), "graph-step/layers.3/self_attn", "the clone replays the captured node's ranges");
        assert_eq!(at(&mut g, 11), "graph-step/layers.3/self_attn");
        assert_eq!(at(&mut g, 22), "graph-step", "made with no range of the capture's own open");
        assert_eq!(at(&mut g, 0), "graph-step", "not a graph kernel");
        assert_eq!(at(&mut g, 99), "graph-step", "an unknown node");
        // A node made outside any capture, inside no range of its own.
        assert!(g.made(31, captured, ROOT));
        assert_eq!(at(&mut g, 31), "graph-step/graph-warmup/layers.3/self_attn");
    }
}
