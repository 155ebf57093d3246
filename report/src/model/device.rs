//! A GPU as the report describes it.

use super::occupancy::SmLimits;
use serde::{Deserialize, Serialize};

/// A GPU.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct DeviceInfo {
    /// Ordinal.
    pub id: u32,
    /// Marketing name.
    pub name: String,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// SM limits used for occupancy.
    pub limits: SmLimits,
    /// Peak SM clock, kHz (for computed peaks of GPUs gpuscope has no
    /// datasheet figures for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_khz: Option<u32>,
    /// Peak memory clock, kHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_clock_khz: Option<u32>,
    /// Memory bus width, bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bus_bits: Option<u32>,
    /// Device memory, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// The GPU's UUID as `nvidia-smi` and DCGM print it
    /// (`GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`): what joins gpuscope's
    /// series to dcgm-exporter's. On a MIG instance the driver gives the
    /// instance's UUID, which DCGM does not label its series with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// Active NVLinks, all to NVSwitches (NVML's; 0: none; absent: not
    /// known, or some go straight to another GPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvlinks: Option<u32>,
    /// Its PCIe link's highest generation and lanes (NVML's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie: Option<(u32, u32)>,
}

/// A UUID's 16 bytes as `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn gpu_uuid(b: &[u8; 16]) -> String {
    let hex = |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!("GPU-{}-{}-{}-{}-{}", hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16))
}

impl DeviceInfo {
    /// A device without clock figures.
    pub fn new(id: u32, name: impl Into<String>, sm_count: u32, limits: SmLimits) -> Self {
        DeviceInfo {
            id,
            name: name.into(),
            sm_count,
            limits,
            clock_khz: None,
            memory_clock_khz: None,
            memory_bus_bits: None,
            memory_bytes: None,
            uuid: None,
            nvlinks: None,
            pcie: None,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn uuids_read_as_nvidia_smi_prints_them() {
        let b = [0x1d, 0x2c, 0x3b, 0x4a, 0x59, 0x68, 0x77, 0x86, 0x95, 0xa4, 0xb3, 0xc2, 0xd1, 0xe0, 0xff, 0x0e];
        assert_eq!(super::gpu_uuid(&b), "GPU-1d2c3b4a-5968-7786-95a4-b3c2d1e0ff0e");
    }
}

/// One GPU's own time, in a process that drove several: the session's idle
/// figures count a gap only when no GPU ran a kernel, which hides a GPU
/// that waited while another worked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeviceTime {
    /// The device ([`DeviceInfo::id`]).
    pub device: u32,
    /// Session time some kernel of it ran (the union over its streams), ns.
    pub busy_ns: u64,
    /// Its idle time over the session, by cause.
    pub idle: super::idle::IdleSplit,
    /// Its idle time over the session's steady state (the window of
    /// `session_steady`), by cause; busy is the rest of that window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_idle: Option<super::idle::IdleSplit>,
}
