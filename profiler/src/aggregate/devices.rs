//! Devices seen in a session: their attributes, read from the driver once
//! per device when its first kernel record arrives (or fixed, for tests and
//! replays).

use super::occupancy::{self, LaunchShape};
use crate::collect::driver;
use crate::model::device::DeviceInfo;
use crate::model::occupancy::{Occupancy, SmLimits};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// Launch shapes whose occupancy is remembered; past it the cache starts
/// over (a program has a few hundred distinct shapes at most).
const OCCUPANCY_CACHE: usize = 1 << 16;

/// Devices seen in a session.
pub(crate) struct DeviceTable {
    query: bool,
    known: BTreeMap<u32, Option<DeviceInfo>>,
    /// Theoretical occupancy per (device, shape): computed once, read for
    /// every kernel record (the decoder's hot path).
    occupancy: FxHashMap<(u32, LaunchShape), Option<Occupancy>>,
}

impl DeviceTable {
    /// Devices read from the driver as they appear.
    pub(crate) fn from_driver() -> Self {
        DeviceTable { query: true, known: BTreeMap::new(), occupancy: FxHashMap::default() }
    }

    /// Fixed devices (tests, replaying saved records).
    pub(crate) fn fixed(devices: Vec<DeviceInfo>) -> Self {
        DeviceTable {
            query: false,
            known: devices.into_iter().map(|d| (d.id, Some(d))).collect(),
            occupancy: FxHashMap::default(),
        }
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

    /// Theoretical occupancy of `shape` on `device`, if its attributes
    /// could be read and the shape fits.
    pub(crate) fn occupancy(&mut self, device: u32, shape: &LaunchShape) -> Option<Occupancy> {
        if let Some(o) = self.occupancy.get(&(device, *shape)) {
            return *o;
        }
        let o = self.limits(device).and_then(|l| occupancy::theoretical(&l, shape));
        if self.occupancy.len() >= OCCUPANCY_CACHE {
            self.occupancy.clear();
        }
        self.occupancy.insert((device, *shape), o);
        o
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
