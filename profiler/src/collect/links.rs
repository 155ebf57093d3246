//! A GPU's links to its peers, from NVML: active NVLinks and the PCIe
//! link, for the peak a collective's bus bandwidth is compared with. The
//! `unsafe` of calling through NVML's pointers stays here.

use crate::collect::debug::debug;
use cupti_sys::nvml::{Nvml, NvmlDevice, NVML_FEATURE_ENABLED, NVML_NVLINK_MAX_LINKS};
use std::sync::OnceLock;

/// NVML, loaded and initialised once per process; `None` where it is
/// missing or does not initialise (no link figures then).
fn nvml() -> Option<&'static Nvml> {
    static NVML: OnceLock<Option<Nvml>> = OnceLock::new();
    NVML.get_or_init(|| {
        let n = Nvml::load().map_err(|e| debug(&format!("no link figures: {e}"))).ok()?;
        // SAFETY: no arguments; NVML may be initialised more than once in
        // a process (it counts).
        let rc = unsafe { (n.init)() };
        if rc != 0 {
            debug(&format!("no link figures: nvmlInit_v2 returned {rc}"));
            return None;
        }
        Some(n)
    })
    .as_ref()
}

/// A device's links: active NVLinks and its PCIe link's generation and
/// lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Links {
    /// Active NVLinks.
    pub nvlinks: u32,
    /// PCIe generation and lanes (0: unknown).
    pub pcie: (u32, u32),
}

/// The links of the GPU with this UUID (`GPU-...`); `None` where NVML
/// cannot say.
pub(crate) fn links(uuid: &str) -> Option<Links> {
    let n = nvml()?;
    let uuid = std::ffi::CString::new(uuid).ok()?;
    let mut dev: NvmlDevice = std::ptr::null_mut();
    // SAFETY: a NUL-terminated string and a valid out pointer.
    if unsafe { (n.device_by_uuid)(uuid.as_ptr(), &mut dev) } != 0 {
        return None;
    }
    let nvlinks = (0..NVML_NVLINK_MAX_LINKS)
        .filter(|&l| {
            let mut on = 0;
            // SAFETY: `dev` came from NVML; a valid out pointer. Links the
            // GPU lacks return an error (not counted).
            (unsafe { (n.nvlink_state)(dev, l, &mut on) } == 0) && on == NVML_FEATURE_ENABLED
        })
        .count() as u32;
    let (mut generation, mut width) = (0, 0);
    // SAFETY: as above.
    let pcie_ok =
        unsafe { (n.max_pcie_generation)(dev, &mut generation) == 0 && (n.max_pcie_width)(dev, &mut width) == 0 };
    Some(Links { nvlinks, pcie: if pcie_ok { (generation, width) } else { (0, 0) } })
}
