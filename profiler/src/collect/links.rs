//! A GPU's links to its peers, from NVML: NVLinks to an NVSwitch and the
//! PCIe link, for the peak a collective's bus bandwidth is compared with.
//! The `unsafe` of calling through NVML's pointers stays here. Called on
//! gpuscope's decoder thread when a device is first seen (NVML's start
//! took 10 ms on an H200 host), never on a thread of the program's.

use crate::collect::debug::debug;
use cupti_sys::nvml::{
    Nvml, NvmlDevice, NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_SUPPORTED, NVML_FEATURE_ENABLED,
    NVML_NVLINK_DEVICE_TYPE_SWITCH, NVML_NVLINK_MAX_LINKS,
};
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

/// A device's links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Links {
    /// Active NVLinks, all to NVSwitches; `None` where NVML could not
    /// tell, or some go straight to another GPU (the peak between two GPUs
    /// of a mesh depends on which links join them).
    pub nvlinks: Option<u32>,
    /// PCIe generation and lanes, where NVML gives them.
    pub pcie: Option<(u32, u32)>,
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
    let (mut generation, mut width) = (0, 0);
    // SAFETY: `dev` came from NVML; valid out pointers.
    let pcie_ok =
        unsafe { (n.max_pcie_generation)(dev, &mut generation) == 0 && (n.max_pcie_width)(dev, &mut width) == 0 };
    Some(Links {
        nvlinks: nvlinks(n, dev),
        pcie: (pcie_ok && generation > 0 && width > 0).then_some((generation, width)),
    })
}

/// Active NVLinks of `dev`, if all go to NVSwitches.
fn nvlinks(n: &Nvml, dev: NvmlDevice) -> Option<u32> {
    let mut active = 0;
    for l in 0..NVML_NVLINK_MAX_LINKS {
        let mut on = 0;
        // SAFETY: `dev` came from NVML; a valid out pointer.
        match unsafe { (n.nvlink_state)(dev, l, &mut on) } {
            0 if on == NVML_FEATURE_ENABLED => {}
            0 => continue,
            // Links the GPU lacks, or no NVLink at all.
            NVML_ERROR_INVALID_ARGUMENT | NVML_ERROR_NOT_SUPPORTED => continue,
            rc => {
                debug(&format!("NVLink {l}'s state: NVML error {rc}"));
                return None;
            }
        }
        let mut kind = 0;
        // SAFETY: as above.
        if unsafe { (n.nvlink_remote_type)(dev, l, &mut kind) } != 0 || kind != NVML_NVLINK_DEVICE_TYPE_SWITCH {
            return None;
        }
        active += 1;
    }
    Some(active)
}
