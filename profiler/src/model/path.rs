//! NVTX paths: the ranges open on a thread, outermost first, interned once
//! per process so that a launch carries a 4-byte id instead of a string.

use nvtx_rs::tool::{self, DomainId};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
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

/// NVIDIA libraries that annotate their calls with NVTX domains of their
/// own; compared without case.
const LIBRARY_DOMAINS: &[&str] = &[
    "CCCL", "CUB", "Thrust", "cuBLAS", "cuBLASLt", "cuDNN", "cuFFT", "cuSPARSE", "cuSOLVER", "cuRAND", "cuTENSOR",
    "CUTLASS", "NCCL", "NVSHMEM", "nvJPEG", "NPP", "TensorRT", "cuDSS", "cuFile",
];

/// Frameworks whose NVTX domains annotate their own internals (XLA, under
/// JAX and TensorFlow, uses TSL's), not the program's steps.
const FRAMEWORK_DOMAINS: &[&str] = &["TSL", "XLA", "JAX", "TensorFlow", "Triton", "Inductor"];

/// Whether `domain` is an NVIDIA library's NVTX domain.
pub(crate) fn is_library_domain(name: &str) -> bool {
    LIBRARY_DOMAINS.iter().any(|d| d.eq_ignore_ascii_case(name))
}

/// Whether `domain` is a library's or a framework's NVTX domain: its ranges
/// are the library's internals, folded into the program's range around
/// them.
pub fn is_internal_domain(name: &str) -> bool {
    is_library_domain(name) || FRAMEWORK_DOMAINS.iter().any(|d| d.eq_ignore_ascii_case(name))
}

/// Whether a range name of a framework's domain is compilation work (XLA's
/// passes and autotuning, compilers' lowering).
pub fn is_compile_range(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["compil", "pass", "autotun", "lowering", "optimiz"].iter().any(|w| n.contains(w))
}

impl RangePath {
    /// The first frame of a library's or framework's domain, if any: the
    /// range is that library's internals.
    pub fn internal_domain(&self) -> Option<&str> {
        self.frames.iter().filter_map(|f| f.domain.as_deref()).find(|d| is_internal_domain(d))
    }

    /// The path without frames of libraries' and frameworks' domains (and
    /// what they opened inside): where the program itself was.
    pub fn user_prefix(&self) -> RangePath {
        RangePath { frames: self.user_frames().to_vec() }
    }

    /// The frames of [`RangePath::user_prefix`], borrowed.
    pub fn user_frames(&self) -> &[RangeFrame] {
        let n = self.frames.iter().position(|f| f.domain.as_deref().is_some_and(is_internal_domain));
        &self.frames[..n.unwrap_or(self.frames.len())]
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
    pub(crate) fn new() -> Self {
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
}
