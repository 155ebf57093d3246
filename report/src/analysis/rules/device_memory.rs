//! What the device memory rules share: each device's memory peak against
//! its capacity. Not a rule of its own.

use crate::model::device_memory::{DeviceMemory, FrameworkMemory};
use crate::model::units::fmt_bytes;
use crate::report::Report;

/// One device's memory peak against its capacity.
pub(super) struct Peak<'a> {
    pub d: &'a DeviceMemory,
    pub capacity: u64,
    /// The peak's share of the capacity.
    pub share: f64,
    /// "GPU 0's device memory peaked at 70 GiB of 80 GiB (88%)".
    pub text: String,
}

/// The devices whose capacity and peak are known.
pub(super) fn peaks(r: &Report) -> Vec<Peak<'_>> {
    r.memory
        .devices
        .iter()
        .filter_map(|d| {
            let capacity = r.devices.iter().find(|x| x.id == d.device).and_then(|x| x.memory_bytes)?;
            if capacity == 0 || d.peak_live_bytes == 0 {
                return None;
            }
            let share = d.peak_live_bytes as f64 / capacity as f64;
            let text = format!(
                "GPU {}'s device memory peaked at {} of {} ({:.0}%)",
                d.device,
                fmt_bytes(d.peak_live_bytes),
                fmt_bytes(capacity),
                100.0 * share
            );
            Some(Peak { d, capacity, share, text })
        })
        .collect()
}

/// PyTorch's caching allocator at the end of its last step: held against
/// in use.
pub(super) fn step_allocator(r: &Report) -> Option<FrameworkMemory> {
    r.ranges
        .iter()
        .filter(|g| g.path.frames.len() == 1 && g.path.frames[0].name == "step")
        .find_map(|g| g.memory.as_ref()?.framework.clone())
}
