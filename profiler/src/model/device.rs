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
}
