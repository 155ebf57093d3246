//! NVTX paths: the ranges open on a thread, outermost first, as the
//! report names them.

use serde::{Deserialize, Serialize};

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

    /// The NVTX domain of the innermost range (`None`: the default domain,
    /// or no range).
    pub fn leaf_domain(&self) -> Option<&str> {
        self.frames.last().and_then(|f| f.domain.as_deref())
    }
}

/// NVIDIA libraries that annotate their calls with NVTX domains of their
/// own; compared without case.
const LIBRARY_DOMAINS: &[&str] = &[
    "CCCL", "CUB", "Thrust", "cuBLAS", "cuBLASLt", "cuDNN", "cuFFT", "cuSPARSE", "cuSOLVER", "cuRAND", "cuTENSOR",
    "CUTLASS", "NCCL", "NVSHMEM", "nvJPEG", "NPP", "TensorRT", "cuDSS", "cuFile",
];

/// The domain of the ranges gpuscope opens for the Python functions on a
/// launching thread's stack (PyTorch modules): shown without the domain's
/// name, never a program's step.
pub const STACK_DOMAIN: &str = "gpuscope.stack";

/// The domain of the ranges framework integrations open through gpuscope
/// (`enter_range`: the PyTorch hooks' step, data, forward, backward, modules
/// and optimizer): a stack of their own beside the program's NVTX ranges,
/// shown without the domain's name.
pub const HOOKS_DOMAIN: &str = "gpuscope.hooks";

/// Whether frames of `domain` are shown without its name (gpuscope's own
/// ranges).
fn is_gpuscope_domain(domain: &str) -> bool {
    domain == STACK_DOMAIN || domain == HOOKS_DOMAIN
}

/// Frameworks whose NVTX domains annotate their own internals (XLA, under
/// JAX and TensorFlow, uses TSL's), not the program's steps.
const FRAMEWORK_DOMAINS: &[&str] = &["TSL", "XLA", "JAX", "TensorFlow", "Triton", "Inductor"];

/// Whether `domain` is an NVIDIA library's NVTX domain.
pub fn is_library_domain(name: &str) -> bool {
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
    // XLA names the ranges of running a compiled module or a thunk of it
    // after the program's own functions (`XlaModule:#hlo_module=jit_train_pass...`):
    // execution, whatever those names hold.
    if name.starts_with("XlaModule") || name.starts_with("Thunk") || name.contains("hlo_module=") {
        return false;
    }
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

impl std::fmt::Display for RangeFrame {
    /// `domain::name` for a named domain's range (gpuscope's own shown
    /// without it), else `name`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(d) = self.domain.as_deref().filter(|d| !is_gpuscope_domain(d)) {
            write!(f, "{d}::")?;
        }
        f.write_str(&self.name)
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
            write!(f, "{fr}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xla_s_compilation_is_told_from_running_what_it_compiled() {
        for name in ["XlaCompile", "backend_compile", "RunHloPasses", "GemmAutotuner", "LLVM lowering"] {
            assert!(is_compile_range(name), "{name}");
        }
        // Ranges of running a module or a thunk, named after the program's
        // own functions.
        for name in [
            "XlaModule:#hlo_module=jit_train_pass,program_id=3#",
            "Thunk:#hlo_op=fusion.1,hlo_module=jit_optimizer_step#",
        ] {
            assert!(!is_compile_range(name), "{name}");
        }
    }
}
