//! Device memory accounting: allocations and releases as CUPTI records
//! them, live bytes per device, the peak and a bounded timeline.

use crate::decode::DeviceMemoryActivity;
use crate::model::device_memory::DeviceMemory;
use rustc_hash::FxHashMap as HashMap;

/// Live allocations tracked at once (the program's live allocations, not
/// their count over time); beyond, new ones are counted as drops.
pub(crate) const MAX_LIVE: usize = 1 << 20;
/// Timeline points kept per device.
pub(crate) const MAX_POINTS: usize = 2048;

/// What is tracked of one live allocation.
#[derive(Debug, Clone, Copy)]
struct Live {
    bytes: u64,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Device,
    /// Device memory of loaded modules' variables: live device bytes too.
    Static,
    Pinned,
    Managed,
}

fn kind(memory_kind: u8) -> Option<Kind> {
    use cupti_sys as s;
    match memory_kind as u32 {
        s::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE | s::CUPTI_ACTIVITY_MEMORY_KIND_ARRAY => Some(Kind::Device),
        s::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC => Some(Kind::Static),
        s::CUPTI_ACTIVITY_MEMORY_KIND_PINNED => Some(Kind::Pinned),
        s::CUPTI_ACTIVITY_MEMORY_KIND_MANAGED | s::CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC => Some(Kind::Managed),
        _ => None,
    }
}

/// One device's running figures.
#[derive(Debug, Default)]
struct DeviceAcc {
    out: DeviceMemory,
    live: u64,
    statics: u64,
    pinned: u64,
    managed: u64,
    /// Points are kept one per `stride` changes (the highest of them);
    /// the stride doubles when the list is full.
    stride: u64,
    pending: Option<(u64, u64)>,
    pending_n: u64,
}

impl DeviceAcc {
    fn point(&mut self, ts: u64) {
        let live = self.live;
        self.pending = Some(match self.pending {
            Some((t, b)) if b >= live => (t, b),
            _ => (ts, live),
        });
        self.pending_n += 1;
        if self.pending_n < self.stride.max(1) {
            return;
        }
        if let Some(p) = self.pending.take() {
            self.out.timeline.push(p);
        }
        self.pending_n = 0;
        if self.out.timeline.len() >= MAX_POINTS {
            // Halve: the higher point of each pair.
            let t = std::mem::take(&mut self.out.timeline);
            self.out.timeline = t.chunks(2).map(|c| *c.iter().max_by_key(|p| p.1).expect("a chunk")).collect();
            self.stride = self.stride.max(1) * 2;
        }
    }
}

/// Every device's memory.
#[derive(Debug, Default)]
pub(crate) struct DeviceMemoryAcc {
    live: HashMap<(u32, u64), Live>,
    devices: HashMap<u32, DeviceAcc>,
    /// Allocations not tracked because `MAX_LIVE` were live.
    pub over_cap: u64,
}

impl DeviceMemoryAcc {
    /// Takes one record; `Some(alloc)` when it allocated or released
    /// device memory that is tracked.
    pub(crate) fn record(&mut self, m: &DeviceMemoryActivity) -> Option<bool> {
        let k = kind(m.memory_kind)?;
        let d = self.devices.entry(m.device).or_insert_with(|| DeviceAcc {
            out: DeviceMemory { device: m.device, ..Default::default() },
            stride: 1,
            ..Default::default()
        });
        let key = (m.device, m.address);
        if m.alloc {
            if self.live.len() >= MAX_LIVE && !self.live.contains_key(&key) {
                self.over_cap += 1;
                return None;
            }
            if let Some(old) = self.live.insert(key, Live { bytes: m.bytes, kind: k }) {
                // Released without a record: take it out before.
                sub(d, old);
            }
            match k {
                Kind::Device | Kind::Static => {
                    if k == Kind::Static {
                        d.statics = d.statics.saturating_add(m.bytes);
                        d.out.static_peak_bytes = d.out.static_peak_bytes.max(d.statics);
                    }
                    d.out.allocations += 1;
                    d.out.allocated_bytes = d.out.allocated_bytes.saturating_add(m.bytes);
                    d.out.pool_allocations += m.pool as u64;
                    d.live = d.live.saturating_add(m.bytes);
                    if d.live > d.out.peak_live_bytes {
                        d.out.peak_live_bytes = d.live;
                        d.out.peak_ns = m.ts;
                    }
                    d.point(m.ts);
                    return Some(true);
                }
                Kind::Pinned => {
                    d.pinned = d.pinned.saturating_add(m.bytes);
                    d.out.pinned_host_peak_bytes = d.out.pinned_host_peak_bytes.max(d.pinned);
                }
                Kind::Managed => {
                    d.managed = d.managed.saturating_add(m.bytes);
                    d.out.managed_peak_bytes = d.out.managed_peak_bytes.max(d.managed);
                }
            }
        } else {
            match self.live.remove(&key) {
                Some(old) => {
                    sub(d, old);
                    if matches!(old.kind, Kind::Device | Kind::Static) {
                        d.out.releases += 1;
                        d.out.released_bytes = d.out.released_bytes.saturating_add(old.bytes);
                        d.point(m.ts);
                        return Some(false);
                    }
                }
                None if matches!(k, Kind::Device | Kind::Static) => {
                    d.out.earlier_releases += 1;
                    d.out.earlier_released_bytes = d.out.earlier_released_bytes.saturating_add(m.bytes);
                    return Some(false);
                }
                None => {}
            }
        }
        None
    }

    /// Each device's figures, by device.
    pub(crate) fn summary(&self) -> Vec<DeviceMemory> {
        let mut v: Vec<DeviceMemory> = self
            .devices
            .values()
            .map(|d| {
                let mut out = d.out.clone();
                out.live_at_end_bytes = d.live;
                if let Some(p) = d.pending {
                    out.timeline.push(p);
                }
                out
            })
            .collect();
        v.sort_by_key(|d| d.device);
        v
    }
}

fn sub(d: &mut DeviceAcc, old: Live) {
    match old.kind {
        Kind::Device => d.live = d.live.saturating_sub(old.bytes),
        Kind::Static => {
            d.live = d.live.saturating_sub(old.bytes);
            d.statics = d.statics.saturating_sub(old.bytes);
        }
        Kind::Pinned => d.pinned = d.pinned.saturating_sub(old.bytes),
        Kind::Managed => d.managed = d.managed.saturating_sub(old.bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cupti_sys as s;

    fn rec(alloc: bool, address: u64, bytes: u64, ts: u64) -> DeviceMemoryActivity {
        DeviceMemoryActivity {
            alloc,
            memory_kind: s::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE as u8,
            address,
            bytes,
            ts,
            device: 0,
            correlation_id: 0,
            pool: false,
        }
    }

    #[test]
    fn live_bytes_peak_and_releases_of_earlier_allocations() {
        let mut a = DeviceMemoryAcc::default();
        a.record(&rec(true, 0x1000, 100, 10));
        a.record(&rec(true, 0x2000, 50, 20));
        a.record(&rec(false, 0x1000, 100, 30));
        a.record(&rec(true, 0x3000, 70, 40));
        // Made before the session: not live here, counted apart.
        a.record(&rec(false, 0x9000, 1_000, 50));
        let mut pinned = rec(true, 0x5000, 4_096, 60);
        pinned.memory_kind = s::CUPTI_ACTIVITY_MEMORY_KIND_PINNED as u8;
        a.record(&pinned);
        let d = &a.summary()[0];
        assert_eq!((d.allocations, d.releases, d.allocated_bytes, d.released_bytes), (3, 1, 220, 100));
        assert_eq!((d.peak_live_bytes, d.peak_ns), (150, 20));
        assert_eq!(d.live_at_end_bytes, 120);
        assert_eq!((d.earlier_releases, d.earlier_released_bytes), (1, 1_000));
        assert_eq!(d.pinned_host_peak_bytes, 4_096, "pinned host memory kept apart");
        assert_eq!(d.timeline, vec![(10, 100), (20, 150), (30, 50), (40, 120)]);
    }

    #[test]
    fn the_timeline_stays_bounded_and_keeps_the_peak() {
        let mut a = DeviceMemoryAcc::default();
        for i in 0..100_000u64 {
            // Alternating allocate and release; one spike in the middle.
            let bytes = if i == 50_000 { 1 << 30 } else { 10 };
            a.record(&rec(true, 0x1000 + i, bytes, 2 * i));
            a.record(&rec(false, 0x1000 + i, bytes, 2 * i + 1));
        }
        let d = &a.summary()[0];
        assert!(d.timeline.len() <= MAX_POINTS + 1, "{}", d.timeline.len());
        assert_eq!(d.timeline.iter().map(|p| p.1).max(), Some(1 << 30), "the spike survives the thinning");
        assert_eq!(d.peak_live_bytes, 1 << 30);
        assert_eq!(a.live.len(), 0, "nothing left live");
    }
}
