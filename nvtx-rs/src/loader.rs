//! The emitting side's NVTX v3 globals: function-pointer slots that a tool
//! fills, the export tables it reaches them through, and the loader protocol
//! (`NVTX_INJECTION64_PATH` -> `InitializeInjectionNvtx2`), as in
//! `nvtxDetail/nvtxImpl.h` and `nvtxInit.h`.
//!
//! Slots start empty; the first emitting call runs the loader once. An empty
//! slot after init means "no tool": the call is a no-op and builds nothing.

use crate::sys::{self, NvtxFunctionPointer};
use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

const FRESH: u32 = 0;
const STARTED: u32 = 1;
const COMPLETE: u32 = 2;

/// One module's slots; index 0 is unused, as in C.
#[repr(C)]
struct Slots<const N: usize>([AtomicPtr<c_void>; N]);

impl<const N: usize> Slots<N> {
    const fn new() -> Self {
        Slots([const { AtomicPtr::new(ptr::null_mut()) }; N])
    }
    fn clear(&self) {
        for s in &self.0 {
            s.store(ptr::null_mut(), Ordering::Release);
        }
    }
}

/// A module's table: pointers to its slots, null first and last.
#[repr(C)]
struct Table<const M: usize>([*mut NvtxFunctionPointer; M]);
// SAFETY: the table is immutable; the pointers it holds point into the
// static, atomic `Slots`, which are Sync.
unsafe impl<const M: usize> Sync for Table<M> {}

macro_rules! table {
    ($slots:expr, $n:expr) => {{
        let mut t = [ptr::null_mut::<NvtxFunctionPointer>(); $n + 1];
        let mut i = 1;
        while i < $n {
            // AtomicPtr<c_void> has the layout of *mut c_void, which is what
            // a tool writes through these pointers.
            t[i] = $slots.0[i].as_ptr() as *mut NvtxFunctionPointer;
            i += 1;
        }
        Table(t)
    }};
}

static STATE: AtomicU32 = AtomicU32::new(FRESH);
static CORE: Slots<{ sys::core::SIZE }> = Slots::new();
static CORE2: Slots<{ sys::core2::SIZE }> = Slots::new();
static CUDA: Slots<{ sys::NVTX_CBID_CUDA_SIZE }> = Slots::new();
static OPENCL: Slots<{ sys::NVTX_CBID_OPENCL_SIZE }> = Slots::new();
static CUDART: Slots<{ sys::NVTX_CBID_CUDART_SIZE }> = Slots::new();
static SYNC: Slots<{ sys::NVTX_CBID_SYNC_SIZE }> = Slots::new();

static CORE_T: Table<{ sys::core::SIZE + 1 }> = table!(CORE, sys::core::SIZE);
static CORE2_T: Table<{ sys::core2::SIZE + 1 }> = table!(CORE2, sys::core2::SIZE);
static CUDA_T: Table<{ sys::NVTX_CBID_CUDA_SIZE + 1 }> = table!(CUDA, sys::NVTX_CBID_CUDA_SIZE);
static OPENCL_T: Table<{ sys::NVTX_CBID_OPENCL_SIZE + 1 }> = table!(OPENCL, sys::NVTX_CBID_OPENCL_SIZE);
static CUDART_T: Table<{ sys::NVTX_CBID_CUDART_SIZE + 1 }> = table!(CUDART, sys::NVTX_CBID_CUDART_SIZE);
static SYNC_T: Table<{ sys::NVTX_CBID_SYNC_SIZE + 1 }> = table!(SYNC, sys::NVTX_CBID_SYNC_SIZE);

unsafe extern "C" fn get_module_function_table(
    module: u32,
    out_table: *mut sys::NvtxFunctionTable,
    out_size: *mut u32,
) -> c_int {
    let (table, len) = match module {
        sys::NVTX_CB_MODULE_CORE => (CORE_T.0.as_ptr(), CORE_T.0.len()),
        sys::NVTX_CB_MODULE_CORE2 => (CORE2_T.0.as_ptr(), CORE2_T.0.len()),
        sys::NVTX_CB_MODULE_CUDA => (CUDA_T.0.as_ptr(), CUDA_T.0.len()),
        sys::NVTX_CB_MODULE_OPENCL => (OPENCL_T.0.as_ptr(), OPENCL_T.0.len()),
        sys::NVTX_CB_MODULE_CUDART => (CUDART_T.0.as_ptr(), CUDART_T.0.len()),
        sys::NVTX_CB_MODULE_SYNC => (SYNC_T.0.as_ptr(), SYNC_T.0.len()),
        _ => return 0,
    };
    if !out_size.is_null() {
        // SAFETY: the tool passes a valid out pointer or null (checked).
        unsafe { *out_size = (len - 1) as u32 };
    }
    if !out_table.is_null() {
        // SAFETY: as above; the table is static and never written by tools.
        unsafe { *out_table = table as sys::NvtxFunctionTable };
    }
    1
}

unsafe extern "C" fn set_injection_nvtx_version(_version: u32) {}

struct ExportTables {
    callbacks: sys::NvtxExportTableCallbacks,
    version: sys::NvtxExportTableVersionInfo,
}

static EXPORT: ExportTables = ExportTables {
    callbacks: sys::NvtxExportTableCallbacks {
        struct_size: std::mem::size_of::<sys::NvtxExportTableCallbacks>(),
        GetModuleFunctionTable: Some(get_module_function_table),
    },
    version: sys::NvtxExportTableVersionInfo {
        struct_size: std::mem::size_of::<sys::NvtxExportTableVersionInfo>(),
        version: sys::NVTX_VERSION as u32,
        reserved0: 0,
        SetInjectionNvtxVersion: Some(set_injection_nvtx_version),
    },
};

/// This emitter's `nvtxGetExportTable`: what an injection's
/// `InitializeInjectionNvtx2` receives.
///
/// # Safety
/// Always safe to call; `unsafe extern "C"` is the type NVTX requires.
pub unsafe extern "C" fn get_export_table(id: u32) -> *const c_void {
    match id {
        sys::NVTX_ETID_CALLBACKS => &EXPORT.callbacks as *const _ as *const c_void,
        sys::NVTX_ETID_VERSIONINFO => &EXPORT.version as *const _ as *const c_void,
        _ => ptr::null(),
    }
}

fn clear_all() {
    CORE.clear();
    CORE2.clear();
    CUDA.clear();
    OPENCL.clear();
    CUDART.clear();
    SYNC.clear();
}

/// Runs the loader once: the library named by `NVTX_INJECTION64_PATH`, if
/// any, gets our export table. Concurrent first calls wait for the winner.
fn init_once() {
    match STATE.compare_exchange(FRESH, STARTED, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            if !load_injection_library() {
                clear_all();
            }
            STATE.store(COMPLETE, Ordering::Release);
        }
        Err(_) => {
            while STATE.load(Ordering::Acquire) != COMPLETE {
                std::thread::yield_now();
            }
        }
    }
}

fn load_injection_library() -> bool {
    let Some(path) = std::env::var_os("NVTX_INJECTION64_PATH") else {
        return false;
    };
    // SAFETY: loading the injection library is what NVTX_INJECTION64_PATH
    // asks for; its initialisers are the tool's.
    let lib = match unsafe { libloading::Library::new(&path) } {
        Ok(lib) => lib,
        Err(_) => return false,
    };
    // SAFETY: InitializeInjectionNvtx2 has this signature by the NVTX spec.
    let init: Result<libloading::Symbol<sys::NvtxInitializeInjectionNvtxFunc_t>, _> =
        unsafe { lib.get(b"InitializeInjectionNvtx2\0") };
    let Ok(init) = init else { return false };
    // SAFETY: calling the tool's entry point with our export table, as the
    // C loader does.
    let ok = unsafe { init(get_export_table) } != 0;
    if ok {
        // The tool's functions now sit in our slots: keep it loaded forever.
        std::mem::forget(lib);
    }
    ok
}

/// Attaches an in-process tool: runs the loader first (so a tool named by
/// `NVTX_INJECTION64_PATH`, e.g. Nsight Systems, is in place), then calls
/// `init` with this emitter's export table. Returns the slots as they were
/// before, so the new tool can forward to the old one.
pub fn attach(init: sys::NvtxInitializeInjectionNvtxFunc_t) -> (bool, PreviousSlots) {
    init_once();
    let prev = PreviousSlots::snapshot();
    // SAFETY: `init` is an InitializeInjectionNvtx2; our export table is
    // static and valid for the whole process.
    let ok = unsafe { init(get_export_table) } != 0;
    (ok, prev)
}

/// The CORE and CORE2 slots at one moment (what a tool replaced).
#[derive(Clone, Debug)]
pub struct PreviousSlots {
    /// CORE slots.
    pub core: [usize; sys::core::SIZE],
    /// CORE2 slots.
    pub core2: [usize; sys::core2::SIZE],
}

impl PreviousSlots {
    fn snapshot() -> Self {
        let mut core = [0; sys::core::SIZE];
        let mut core2 = [0; sys::core2::SIZE];
        for (d, s) in core.iter_mut().zip(&CORE.0) {
            *d = s.load(Ordering::Acquire) as usize;
        }
        for (d, s) in core2.iter_mut().zip(&CORE2.0) {
            *d = s.load(Ordering::Acquire) as usize;
        }
        PreviousSlots { core, core2 }
    }
}

/// Restores slots saved by [`attach`] (detaching the in-process tool).
pub fn restore(prev: &PreviousSlots) {
    for (s, v) in CORE.0.iter().zip(prev.core) {
        s.store(v as *mut c_void, Ordering::Release);
    }
    for (s, v) in CORE2.0.iter().zip(prev.core2) {
        s.store(v as *mut c_void, Ordering::Release);
    }
}

/// The CORE slot `i`, after init; null when no tool handles it.
#[inline]
pub(crate) fn core(i: usize) -> *mut c_void {
    if STATE.load(Ordering::Acquire) != COMPLETE {
        init_once();
    }
    CORE.0[i].load(Ordering::Acquire)
}

/// The CORE2 slot `i`, after init; null when no tool handles it.
#[inline]
pub(crate) fn core2(i: usize) -> *mut c_void {
    if STATE.load(Ordering::Acquire) != COMPLETE {
        init_once();
    }
    CORE2.0[i].load(Ordering::Acquire)
}
