//! A GPU as the report describes it.

use super::occupancy::SmLimits;
use serde::{Deserialize, Serialize};

/// A GPU.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
        }
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
