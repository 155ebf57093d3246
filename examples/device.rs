//! Device 0 for the examples, or one sentence saying why there is none.

use cudarc::driver::CudaContext;
use std::sync::Arc;

/// Device 0's context; `None` (after saying why, as `program`) without a
/// driver or a GPU.
pub fn open(program: &str) -> Option<Arc<CudaContext>> {
    // SAFETY: only tries to dlopen libcuda; nothing is called.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        eprintln!("{program}: {}.", gpuscope::NO_DRIVER);
        return None;
    }
    match CudaContext::new(0) {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("{program}: the NVIDIA driver is present but no GPU could be opened: {e}");
            None
        }
    }
}
