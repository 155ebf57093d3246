//! Entry points for framework integrations: gpuscope's C library and
//! Python package open ranges, attribute Python functions and count costs
//! through them (public with the `internal` feature).

use crate::collect;
#[cfg(doc)]
use crate::collect::declare::declare_flops;
use crate::error::{Error, ErrorKind, Result};

/// Routes NVTX events of this process into gpuscope's per-thread range
/// stacks now, before any session: for injection shims, whose NVTX tool is
/// attached when the program first calls NVTX. `Profiler::start` does this
/// too.
pub fn install_nvtx_handler() {
    collect::nvtx::install_handler();
}

/// Opens a range on the calling thread straight in gpuscope's range stacks,
/// for framework integrations that open ranges for the program (gpuscope's
/// PyTorch hooks): cheaper than an NVTX call, and other NVTX tools do not
/// see it. Close it with [`exit_range`] on the same thread. `follow`: the
/// range continues the lead thread's work (a module's backward on
/// autograd's worker thread): on a thread with no range of its own it
/// nests under the ranges of the training loop's thread.
pub fn enter_range(name: &str, follow: bool) {
    collect::nvtx::enter(name, follow);
}

/// An id of the calling thread's innermost open NVTX range of the
/// program's own (not a library's, not one opened by [`enter_range`]), or
/// 0 where none is open: a framework integration asks it to tell whether
/// the program marks its steps itself (a new id at each step).
pub fn program_range_here() -> u64 {
    collect::nvtx::program_range_here()
}

/// A Python function whose frames name the launches made inside them
/// (for [`attribute_python_functions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonFunction {
    /// The address of its code object (`id(f.__code__)`); the caller keeps
    /// the code object alive while it is registered.
    pub code: usize,
    /// The name of its ranges (a module's class name).
    pub name: String,
    /// Frames above its frame are not looked at (a model's outermost
    /// module, an optimizer's `step`).
    pub root: bool,
}

/// Attributes launches to the Python functions on the launching thread's
/// stack: at each traced launch on a thread holding the GIL, the frames of
/// `functions` on its stack (outermost `levels` of them, 1 to 16) make
/// ranges under the thread's own, open from the first launch inside a
/// call to the end of the last one. No call per function call: a walk of
/// the frames at each launch. An empty `functions` turns it off. `here`:
/// the code objects' addresses of the caller's innermost Python frames,
/// innermost first, three or more, each called from the next by Python
/// (the interpreter's frame layout is found from them); `first_local`: the
/// address of the innermost one's first local variable. For framework
/// integrations (gpuscope's PyTorch modules without hooks); only in a
/// Python process.
pub fn attribute_python_functions(
    functions: &[PythonFunction],
    levels: usize,
    here: &[usize],
    first_local: usize,
) -> Result<()> {
    let fs = functions
        .iter()
        .map(|f| collect::python_stack::Function { code: f.code, name: f.name.as_str().into(), root: f.root })
        .collect();
    collect::python_stack::register(fs, levels, here, first_local).map_err(|e| Error::new(ErrorKind::InvalidConfig, e))
}

/// The names of the registered Python functions ([`attribute_python_functions`])
/// on the calling thread's Python stack, outermost first: the ranges a
/// launch made here would be attributed to, under the thread's own.
pub fn python_functions_here() -> Vec<String> {
    collect::python_stack::names_here().iter().map(|n| n.to_string()).collect()
}

/// Closes the calling thread's innermost range opened by [`enter_range`]
/// (never one of the program's own NVTX ranges). `discard`: leave this opening
/// of it out of the report (it did none of the work it names: a `step`
/// opened by a data fetch that found the end of the data).
pub fn exit_range(discard: bool) {
    collect::nvtx::exit(discard);
}

/// Counts `flops` model FLOPs (computed from operand shapes) for the
/// calling thread's innermost open range and every range around it: the
/// report gives their model FLOPs utilisation without declared FLOPs.
/// Declared FLOPs ([`declare_flops`]) win over counted ones.
pub fn add_range_flops(flops: f64) {
    collect::nvtx::add_flops(flops);
}

/// Counts `ns` of the calling thread's time as gpuscope's own cost, for
/// its innermost open range and those around it: the time a framework
/// integration's hooks (PyTorch's automatic ranges) took. Like the cost of
/// gpuscope's launch callbacks, it is taken out of the host's share of
/// idle GPU time before verdicts.
pub fn add_own_cost(ns: u64) {
    collect::nvtx::add_own_cost(ns);
}

/// Reports a framework allocator's figures (PyTorch's caching allocator:
/// bytes in use by tensors, bytes held from the device, and the high-water
/// mark of bytes in use) at the start (`at_end` false) or the end of the
/// calling thread's innermost open range: the report shows, per range,
/// what its calls kept and the highest use reached inside them.
pub fn range_framework_memory(at_end: bool, allocated: u64, reserved: u64, peak: u64) {
    collect::nvtx::framework_memory(at_end, allocated, reserved, peak);
}
