//! The few NVML calls a profiler needs (a GPU's NVLink and PCIe links),
//! loaded at run time from `libnvidia-ml.so.1`, which the driver installs.

use crate::LoadError;
use std::ffi::{c_char, c_uint, c_void};

/// `nvmlReturn_t`: 0 is success.
pub type NvmlReturn = c_uint;
/// `nvmlDevice_t`: an opaque handle.
pub type NvmlDevice = *mut c_void;
/// `NVML_NVLINK_MAX_LINKS` (nvml.h of CUDA 12 and 13).
pub const NVML_NVLINK_MAX_LINKS: c_uint = 18;
/// `NVML_FEATURE_ENABLED` of `nvmlEnableState_t`.
pub const NVML_FEATURE_ENABLED: c_uint = 1;
/// `NVML_ERROR_INVALID_ARGUMENT`: a link number the GPU does not have.
pub const NVML_ERROR_INVALID_ARGUMENT: NvmlReturn = 2;
/// `NVML_ERROR_NOT_SUPPORTED`: a GPU without NVLink.
pub const NVML_ERROR_NOT_SUPPORTED: NvmlReturn = 3;
/// `NVML_NVLINK_DEVICE_TYPE_SWITCH` of `nvmlIntNvLinkDeviceType_t`: the
/// link goes to an NVSwitch.
pub const NVML_NVLINK_DEVICE_TYPE_SWITCH: c_uint = 2;

/// The NVML entry points gpuscope uses.
pub struct Nvml {
    _lib: libloading::Library,
    /// `nvmlInit_v2`.
    pub init: unsafe extern "C" fn() -> NvmlReturn,
    /// `nvmlDeviceGetHandleByUUID`: the device of a `GPU-...` UUID string.
    pub device_by_uuid: unsafe extern "C" fn(uuid: *const c_char, device: *mut NvmlDevice) -> NvmlReturn,
    /// `nvmlDeviceGetNvLinkState`: whether a link is active. The out
    /// parameter is an `nvmlEnableState_t`, a C enum of 0 and 1: an
    /// `unsigned int` in the C ABIs gpuscope runs on.
    pub nvlink_state: unsafe extern "C" fn(device: NvmlDevice, link: c_uint, active: *mut c_uint) -> NvmlReturn,
    /// `nvmlDeviceGetNvLinkRemoteDeviceType`: what a link goes to (an
    /// `nvmlIntNvLinkDeviceType_t`, a C enum: `unsigned int` as above).
    pub nvlink_remote_type: unsafe extern "C" fn(device: NvmlDevice, link: c_uint, kind: *mut c_uint) -> NvmlReturn,
    /// `nvmlDeviceGetMaxPcieLinkGeneration`: the highest PCIe generation
    /// the device and system support.
    pub max_pcie_generation: unsafe extern "C" fn(device: NvmlDevice, generation: *mut c_uint) -> NvmlReturn,
    /// `nvmlDeviceGetMaxPcieLinkWidth`: lanes.
    pub max_pcie_width: unsafe extern "C" fn(device: NvmlDevice, width: *mut c_uint) -> NvmlReturn,
}

/// NVML's soname.
pub const NVML_SONAME: &str = "libnvidia-ml.so.1";

impl Nvml {
    /// Loads `libnvidia-ml.so.1` from the default search path.
    pub fn load() -> Result<Self, LoadError> {
        let lib = crate::load_first(NVML_SONAME, &[NVML_SONAME.to_string()])?;
        let missing = |name: &str, e: libloading::Error| LoadError {
            library: NVML_SONAME,
            tried: vec![(format!("symbol {name}"), e.to_string())],
        };
        macro_rules! get {
            ($name:literal) => {
                // SAFETY: the symbol's C signature is the field's type, as
                // declared in nvml.h (its enum out parameters are
                // `unsigned int`-sized, as the fields' comments say).
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| missing($name, e))?
            };
        }
        Ok(Nvml {
            init: get!("nvmlInit_v2"),
            device_by_uuid: get!("nvmlDeviceGetHandleByUUID"),
            nvlink_state: get!("nvmlDeviceGetNvLinkState"),
            nvlink_remote_type: get!("nvmlDeviceGetNvLinkRemoteDeviceType"),
            max_pcie_generation: get!("nvmlDeviceGetMaxPcieLinkGeneration"),
            max_pcie_width: get!("nvmlDeviceGetMaxPcieLinkWidth"),
            _lib: lib,
        })
    }
}
