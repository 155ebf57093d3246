//! Devices seen in a session: their attributes, read from the driver once
//! per device when its first kernel record arrives (or fixed, for tests and
//! replays).

use crate::collect::driver;
use crate::model::device::DeviceInfo;
use crate::model::occupancy::SmLimits;
use std::collections::BTreeMap;

/// Devices seen in a session.
pub(crate) struct DeviceTable {
    query: bool,
    known: BTreeMap<u32, Option<DeviceInfo>>,
}

impl DeviceTable {
    /// Devices read from the driver as they appear.
    pub(crate) fn from_driver() -> Self {
        DeviceTable { query: true, known: BTreeMap::new() }
    }

    /// Fixed devices (tests, replaying saved records).
    pub(crate) fn fixed(devices: Vec<DeviceInfo>) -> Self {
        DeviceTable { query: false, known: devices.into_iter().map(|d| (d.id, Some(d))).collect() }
    }

    /// SM limits of `device`, if its attributes could be read.
    pub(crate) fn limits(&mut self, device: u32) -> Option<SmLimits> {
        let query = self.query;
        self.known
            .entry(device)
            .or_insert_with(|| if query { driver::query(device) } else { None })
            .as_ref()
            .map(|d| d.limits)
    }

    /// SM count of `device`, if its attributes could be read.
    pub(crate) fn sm_count(&mut self, device: u32) -> Option<u32> {
        self.limits(device)?;
        self.known.get(&device).and_then(|d| d.as_ref()).map(|d| d.sm_count)
    }

    pub(crate) fn infos(&self) -> Vec<DeviceInfo> {
        self.known.values().flatten().cloned().collect()
    }
}
