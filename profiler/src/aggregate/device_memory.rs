//! Device memory accounting: allocations and releases as CUPTI records
//! them, live bytes per device, the peak and a bounded timeline.

use crate::decode::DeviceMemoryActivity;
use crate::model::device_memory::{DeviceMemory, Holder, MAX_HOLDERS};
use crate::model::path::PathId;
use rustc_hash::FxHashMap as HashMap;

/// Live allocations tracked at once (the program's live allocations, not
/// their count over time); beyond, new ones are counted as drops.
pub(crate) const MAX_LIVE: usize = 1 << 20;
/// Timeline points kept per device.
pub(crate) const MAX_POINTS: usize = 2048;
/// Allocation calls waiting for their record (a record normally follows
/// within a buffer's flush); when full, all are forgotten (their
/// allocations count as unattributed).
pub(crate) const MAX_CALLS: usize = 1 << 16;
/// Distinct holders tracked per device.
const MAX_PATHS: usize = 4096;

/// What is tracked of one live allocation.
#[derive(Debug, Clone, Copy)]
struct Live {
    bytes: u64,
    kind: Kind,
    /// The allocating call's path (`None`: not seen).
    path: Option<PathId>,
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
    /// Live device bytes by the allocating call's path, and a copy at the
    /// peak.
    held: HashMap<Option<PathId>, u64>,
    held_at_peak: Vec<(Option<PathId>, u64)>,
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
    /// Allocation calls by correlation id: their path.
    calls: HashMap<u32, PathId>,
    /// Allocations not tracked because `MAX_LIVE` were live.
    pub over_cap: u64,
}

impl DeviceMemoryAcc {
    /// An allocation call made inside `path`; its record follows.
    pub(crate) fn call(&mut self, correlation_id: u32, path: PathId) {
        if self.calls.len() >= MAX_CALLS {
            self.calls.clear();
        }
        self.calls.insert(correlation_id, path);
    }

    /// Takes one record; `Some(alloc)` when it was an allocation or
    /// release of the program's device memory.
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
            let path = self.calls.remove(&m.correlation_id);
            if let Some(old) = self.live.insert(key, Live { bytes: m.bytes, kind: k, path }) {
                // Released without a record: take it out before.
                sub(d, old);
            }
            match k {
                Kind::Device | Kind::Static => {
                    if k == Kind::Device {
                        d.out.allocations += 1;
                        d.out.allocated_bytes = d.out.allocated_bytes.saturating_add(m.bytes);
                        d.out.pool_allocations += m.pool as u64;
                        d.out.unattributed_allocations += path.is_none() as u64;
                        let holder = if d.held.len() < MAX_PATHS || d.held.contains_key(&path) { path } else { None };
                        *d.held.entry(holder).or_default() += m.bytes;
                    } else {
                        // Static memory comes with loaded modules, from no
                        // call of the program's: live bytes, shown apart,
                        // not an allocation.
                        d.statics = d.statics.saturating_add(m.bytes);
                        d.out.static_peak_bytes = d.out.static_peak_bytes.max(d.statics);
                    }
                    d.live = d.live.saturating_add(m.bytes);
                    if d.live > d.out.peak_live_bytes {
                        d.out.peak_live_bytes = d.live;
                        d.out.peak_ns = m.ts;
                        d.held_at_peak = d.held.iter().filter(|(_, b)| **b > 0).map(|(p, b)| (*p, *b)).collect();
                    }
                    d.point(m.ts);
                    return (k == Kind::Device).then_some(true);
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
                    match old.kind {
                        Kind::Device => {
                            d.out.releases += 1;
                            d.out.released_bytes = d.out.released_bytes.saturating_add(old.bytes);
                            d.point(m.ts);
                            return Some(false);
                        }
                        Kind::Static => d.point(m.ts),
                        Kind::Pinned | Kind::Managed => {}
                    }
                }
                None if k == Kind::Device => {
                    d.out.earlier_releases += 1;
                    d.out.earlier_released_bytes = d.out.earlier_released_bytes.saturating_add(m.bytes);
                    return Some(false);
                }
                None => {}
            }
        }
        None
    }

    /// Each device's figures, by device; `name` writes a path.
    pub(crate) fn summary(&self, mut name: impl FnMut(PathId) -> String) -> Vec<DeviceMemory> {
        let mut v: Vec<DeviceMemory> = self
            .devices
            .values()
            .map(|d| {
                let mut out = d.out.clone();
                let mut held = d.held_at_peak.clone();
                held.sort_by_key(|h| std::cmp::Reverse(h.1));
                out.held_at_peak = held
                    .into_iter()
                    .take(MAX_HOLDERS)
                    .map(|(p, bytes)| Holder { path: p.map_or_else(|| "(unknown)".to_string(), &mut name), bytes })
                    .collect();
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
    if old.kind == Kind::Device {
        let holder = if d.held.contains_key(&old.path) { old.path } else { None };
        if let Some(b) = d.held.get_mut(&holder) {
            *b = b.saturating_sub(old.bytes);
        }
    }
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
        let d = &a.summary(|_| String::new())[0];
        assert_eq!((d.allocations, d.releases, d.allocated_bytes, d.released_bytes), (3, 1, 220, 100));
        assert_eq!((d.peak_live_bytes, d.peak_ns), (150, 20));
        assert_eq!(d.live_at_end_bytes, 120);
        assert_eq!((d.earlier_releases, d.earlier_released_bytes), (1, 1_000));
        assert_eq!(d.pinned_host_peak_bytes, 4_096, "pinned host memory kept apart");
        // Static memory of a loaded module: live bytes, not an allocation.
        let mut a2 = DeviceMemoryAcc::default();
        let mut module = rec(true, 0x7000, 64, 70);
        module.memory_kind = s::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC as u8;
        assert_eq!(a2.record(&module), None, "no allocation of the program's");
        let d2 = &a2.summary(|_| String::new())[0];
        assert_eq!((d2.allocations, d2.peak_live_bytes, d2.static_peak_bytes), (0, 64, 64));
        assert_eq!(d.timeline, vec![(10, 100), (20, 150), (30, 50), (40, 120)]);
    }

    #[test]
    fn who_holds_memory_at_the_peak_by_the_path_of_the_allocating_call() {
        let mut a = DeviceMemoryAcc::default();
        let (fwd, opt): (PathId, PathId) = (7, 9);
        a.call(1, fwd);
        a.call(2, opt);
        let mut m = rec(true, 0x2000, 300, 10);
        m.correlation_id = 1;
        a.record(&m);
        let mut m = rec(true, 0x3000, 100, 20);
        m.correlation_id = 2;
        a.record(&m);
        // Not seen: unknown.
        a.record(&rec(true, 0x4000, 50, 30));
        // After the peak: does not change who held it then.
        a.record(&rec(false, 0x2000, 300, 40));
        let d = &a.summary(|p| if p == fwd { "step/forward".into() } else { "step/optimizer".into() })[0];
        let held: Vec<(&str, u64)> = d.held_at_peak.iter().map(|h| (h.path.as_str(), h.bytes)).collect();
        assert_eq!(held, vec![("step/forward", 300), ("step/optimizer", 100), ("(unknown)", 50)]);
        assert_eq!(d.unattributed_allocations, 1, "the one not seen");
        assert!(a.calls.is_empty(), "matched calls are forgotten");
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
        let d = &a.summary(|_| String::new())[0];
        assert!(d.timeline.len() <= MAX_POINTS + 1, "{}", d.timeline.len());
        assert_eq!(d.timeline.iter().map(|p| p.1).max(), Some(1 << 30), "the spike survives the thinning");
        assert_eq!(d.peak_live_bytes, 1 << 30);
        assert_eq!(a.live.len(), 0, "nothing left live");
    }
}
