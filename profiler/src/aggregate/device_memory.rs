//! Device memory accounting: allocations and releases as CUPTI records
//! them, live bytes per device, the peak and who held it, a bounded
//! timeline, and each range's share.

use crate::decode::DeviceMemoryActivity;
use crate::model::device_memory::{library_of, DeviceMemory, Holder, LibraryHolder, RangeMemory, MAX_HOLDERS};
use crate::model::path::PathId;
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;
use std::ffi::{c_char, CStr};

/// Live allocations tracked at once (the program's live allocations, not
/// their count over time); beyond, new ones are counted as drops.
pub(crate) const MAX_LIVE: usize = 1 << 20;
/// Timeline points kept per device.
pub(crate) const MAX_POINTS: usize = 2048;
/// Allocation calls waiting for their record (a record normally follows
/// within a buffer's flush); when full, all are forgotten (their
/// allocations count as unattributed).
pub(crate) const MAX_CALLS: usize = 1 << 16;
/// Distinct holders tracked per device, and range paths with figures.
const MAX_PATHS: usize = 4096;
/// Distinct libraries told apart; more are "(other)".
const MAX_LIBRARIES: usize = 64;
/// Changes of the live bytes kept for the ranges still to be finished; the
/// oldest half goes when full (a range that began before what is kept gets
/// a partial peak, counted).
const MAX_LOG: usize = 1 << 16;
/// Changes logged between walks of the held ranges for the oldest one
/// (older changes are then forgotten).
pub(crate) const TRIM_EVERY: usize = 4096;

/// What is tracked of one live allocation.
#[derive(Debug, Clone, Copy)]
struct Live {
    bytes: u64,
    kind: Kind,
    /// The allocating call's path (`None`: not seen).
    path: Option<PathId>,
    /// The allocating library, an index into `libraries` (`None`: not
    /// said).
    library: Option<u8>,
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

/// Holders of live bytes: by the allocating call's path, and by library.
type Holders = (Vec<(Option<PathId>, u64)>, Vec<(Option<u8>, u64)>);

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
    /// The same by allocating library.
    held_by_library: HashMap<Option<u8>, u64>,
    held_by_library_at_peak: Vec<(Option<u8>, u64)>,
    /// A new peak whose holders are not copied yet: they are what is held
    /// until the next release (only allocations come until then, each a
    /// new peak), so the copy waits for it.
    peak_unsaved: bool,
}

impl DeviceAcc {
    /// Who holds memory now, as the holders at the peak: (by path, by
    /// library).
    fn holders(&self) -> Holders {
        (
            self.held.iter().filter(|(_, b)| **b > 0).map(|(p, b)| (*p, *b)).collect(),
            self.held_by_library.iter().filter(|(_, b)| **b > 0).map(|(l, b)| (*l, *b)).collect(),
        )
    }

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

/// One range path's own figures (its nested ranges' are added when the
/// report is made).
#[derive(Debug, Default, Clone)]
struct PathAcc {
    allocations: u64,
    allocated_bytes: u64,
    releases: u64,
    released_bytes: u64,
    peak_live_bytes: u64,
    live_at_end_bytes: u64,
    /// End of the call `live_at_end_bytes` is of.
    last_end: u64,
}

/// Every device's memory.
#[derive(Debug, Default)]
pub(crate) struct DeviceMemoryAcc {
    live: HashMap<(u32, u64), Live>,
    devices: HashMap<u32, DeviceAcc>,
    /// Allocation and release calls by correlation id: their path.
    calls: HashMap<u32, PathId>,
    /// Allocations not tracked because `MAX_LIVE` were live.
    pub over_cap: u64,
    /// Library names by CUPTI's source string, and the names.
    library_by_ptr: HashMap<usize, Option<u8>>,
    libraries: Vec<String>,
    /// Live device bytes of all devices after each change (ts, bytes), for
    /// the ranges still to be finished; `log_base` is what was live before
    /// the first one kept, `log_cut` the time up to which changes were
    /// dropped for room.
    log: VecDeque<(u64, u64)>,
    log_base: u64,
    log_cut: Option<u64>,
    /// Log length at which the changes no held range needs are forgotten.
    trim_at: usize,
    total_live: u64,
    by_path: HashMap<PathId, PathAcc>,
    /// Ranges whose peak missed changes dropped for room.
    pub partial_ranges: u64,
}

impl DeviceMemoryAcc {
    /// An allocation or release call made inside `path`; its record
    /// follows.
    pub(crate) fn call(&mut self, correlation_id: u32, path: PathId) {
        if self.calls.len() >= MAX_CALLS {
            self.calls.clear();
        }
        self.calls.insert(correlation_id, path);
    }

    /// A finished call of the range `path`, open from `start` to `end`: the
    /// device memory live meanwhile.
    pub(crate) fn range(&mut self, path: PathId, start: u64, end: u64) {
        if self.devices.is_empty() {
            return;
        }
        if self.log_cut.is_some_and(|cut| start < cut) {
            self.partial_ranges += 1;
        }
        let i = self.log.partition_point(|e| e.0 <= start);
        let mut live = if i == 0 { self.log_base } else { self.log[i - 1].1 };
        let mut peak = live;
        for &(ts, bytes) in self.log.range(i..) {
            if ts > end {
                break;
            }
            live = bytes;
            peak = peak.max(bytes);
        }
        let Some(p) = self.path_acc(Some(path)) else { return };
        p.peak_live_bytes = p.peak_live_bytes.max(peak);
        if end >= p.last_end {
            (p.live_at_end_bytes, p.last_end) = (live, end);
        }
    }

    /// Changes kept now.
    #[cfg(test)]
    pub(crate) fn log_len(&self) -> usize {
        self.log.len()
    }

    /// Whether enough changes were logged since the last trim to look for
    /// the oldest range still held ([`DeviceMemoryAcc::forget_before`]).
    pub(crate) fn wants_trim(&self) -> bool {
        self.log.len() >= self.trim_at.max(TRIM_EVERY)
    }

    /// Forgets the changes before `t`: no range still to be finished began
    /// before it.
    pub(crate) fn forget_before(&mut self, t: u64) {
        while let Some(&(ts, bytes)) = self.log.front() {
            if ts >= t {
                break;
            }
            self.log.pop_front();
            self.log_base = bytes;
        }
        self.trim_at = self.log.len() + TRIM_EVERY;
    }

    fn logged(&mut self, ts: u64, delta: i128) {
        self.total_live = (self.total_live as i128 + delta).clamp(0, u64::MAX as i128) as u64;
        if self.log.len() >= MAX_LOG {
            for _ in 0..MAX_LOG / 2 {
                if let Some((t, bytes)) = self.log.pop_front() {
                    self.log_base = bytes;
                    self.log_cut = Some(t);
                }
            }
        }
        self.log.push_back((ts, self.total_live));
    }

    fn path_acc(&mut self, path: Option<PathId>) -> Option<&mut PathAcc> {
        let path = path?;
        if self.by_path.len() >= MAX_PATHS && !self.by_path.contains_key(&path) {
            return None;
        }
        Some(self.by_path.entry(path).or_default())
    }

    fn library(&mut self, source: *const c_char) -> Option<u8> {
        if source.is_null() {
            return None;
        }
        if let Some(l) = self.library_by_ptr.get(&(source as usize)) {
            return *l;
        }
        // SAFETY: CUPTI's source strings are NUL-terminated and, like its
        // kernel names, live until CUPTI is finalized, after the session's
        // last record.
        let file = unsafe { CStr::from_ptr(source) }.to_string_lossy();
        let name = library_of(&file);
        let id = match self.libraries.iter().position(|l| *l == name) {
            Some(i) => Some(i as u8),
            None if self.libraries.len() < MAX_LIBRARIES => {
                self.libraries.push(name);
                Some((self.libraries.len() - 1) as u8)
            }
            None => None,
        };
        if self.library_by_ptr.len() < 4 * MAX_LIBRARIES {
            self.library_by_ptr.insert(source as usize, id);
        }
        id
    }

    /// Takes one record; `Some(alloc)` when it was an allocation or
    /// release of the program's device memory outside stream-ordered pools
    /// (what the churn finding counts: a pool's release does not wait for
    /// the device).
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
            let library = self.library(m.source);
            let d = self.devices.get_mut(&m.device).expect("made above");
            if let Some(old) = self.live.insert(key, Live { bytes: m.bytes, kind: k, path, library }) {
                // Released without a record: take it out before.
                sub(d, old);
                if matches!(old.kind, Kind::Device | Kind::Static) {
                    self.logged(m.ts, -(old.bytes as i128));
                }
            }
            let d = self.devices.get_mut(&m.device).expect("made above");
            match k {
                Kind::Device | Kind::Static => {
                    if k == Kind::Device {
                        d.out.allocations += 1;
                        d.out.allocated_bytes = d.out.allocated_bytes.saturating_add(m.bytes);
                        d.out.pool_allocations += m.pool as u64;
                        d.out.unattributed_allocations += path.is_none() as u64;
                        let holder = if d.held.len() < MAX_PATHS || d.held.contains_key(&path) { path } else { None };
                        *d.held.entry(holder).or_default() += m.bytes;
                        *d.held_by_library.entry(library).or_default() += m.bytes;
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
                        d.peak_unsaved = true;
                    }
                    d.point(m.ts);
                    self.logged(m.ts, m.bytes as i128);
                    if k == Kind::Device {
                        if let Some(p) = self.path_acc(path) {
                            p.allocations += 1;
                            p.allocated_bytes = p.allocated_bytes.saturating_add(m.bytes);
                        }
                    }
                    return (k == Kind::Device && !m.pool).then_some(true);
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
            let path = self.calls.remove(&m.correlation_id);
            match self.live.remove(&key) {
                Some(old) => {
                    sub(d, old);
                    match old.kind {
                        Kind::Device => {
                            d.out.releases += 1;
                            d.out.released_bytes = d.out.released_bytes.saturating_add(old.bytes);
                            d.point(m.ts);
                            self.logged(m.ts, -(old.bytes as i128));
                            if let Some(p) = self.path_acc(path) {
                                p.releases += 1;
                                p.released_bytes = p.released_bytes.saturating_add(old.bytes);
                            }
                            return (!m.pool).then_some(false);
                        }
                        Kind::Static => {
                            d.point(m.ts);
                            self.logged(m.ts, -(old.bytes as i128));
                        }
                        Kind::Pinned | Kind::Managed => {}
                    }
                }
                None if k == Kind::Device => {
                    d.out.earlier_releases += 1;
                    d.out.earlier_released_bytes = d.out.earlier_released_bytes.saturating_add(m.bytes);
                    return (!m.pool).then_some(false);
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
                let (mut held, mut by_library) = if d.peak_unsaved {
                    d.holders()
                } else {
                    (d.held_at_peak.clone(), d.held_by_library_at_peak.clone())
                };
                held.sort_by_key(|h| std::cmp::Reverse(h.1));
                out.held_at_peak = held
                    .into_iter()
                    .take(MAX_HOLDERS)
                    .map(|(p, bytes)| Holder { path: p.map_or_else(|| "(unknown)".to_string(), &mut name), bytes })
                    .collect();
                by_library.sort_by_key(|h| std::cmp::Reverse(h.1));
                out.held_at_peak_by_library = by_library
                    .into_iter()
                    .take(MAX_HOLDERS)
                    .map(|(l, bytes)| LibraryHolder {
                        library: l.map_or_else(|| "(unknown)".to_string(), |l| self.libraries[l as usize].clone()),
                        bytes,
                    })
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

    /// Each range path's figures, its nested ranges' allocations and
    /// releases added in; `parent` gives a path's parent.
    pub(crate) fn ranges(&self, parent: impl Fn(PathId) -> Option<PathId>) -> HashMap<PathId, RangeMemory> {
        let mut out: HashMap<PathId, RangeMemory> = self
            .by_path
            .iter()
            .map(|(p, a)| {
                let m = RangeMemory {
                    peak_live_bytes: a.peak_live_bytes,
                    live_at_end_bytes: a.live_at_end_bytes,
                    ..Default::default()
                };
                (*p, m)
            })
            .collect();
        for (p, a) in &self.by_path {
            let mut at = Some(*p);
            // Bounded like any walk up a path (a corrupt parent chain must
            // not loop).
            for _ in 0..4096 {
                let Some(id) = at else { break };
                let m = out.entry(id).or_default();
                m.allocations += a.allocations;
                m.allocated_bytes = m.allocated_bytes.saturating_add(a.allocated_bytes);
                m.releases += a.releases;
                m.released_bytes = m.released_bytes.saturating_add(a.released_bytes);
                at = parent(id).filter(|&q| q != id);
            }
        }
        out
    }
}

fn sub(d: &mut DeviceAcc, old: Live) {
    if d.peak_unsaved {
        (d.held_at_peak, d.held_by_library_at_peak) = d.holders();
        d.peak_unsaved = false;
    }
    if old.kind == Kind::Device {
        let holder = if d.held.contains_key(&old.path) { old.path } else { None };
        if let Some(b) = d.held.get_mut(&holder) {
            *b = b.saturating_sub(old.bytes);
        }
        if let Some(b) = d.held_by_library.get_mut(&old.library) {
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
        DeviceMemoryActivity::sample(alloc, address, bytes, ts)
    }

    fn by(mut m: DeviceMemoryActivity, correlation_id: u32, source: &'static std::ffi::CStr) -> DeviceMemoryActivity {
        m.correlation_id = correlation_id;
        m.source = source.as_ptr();
        m
    }

    #[test]
    fn stream_ordered_pool_allocations_are_live_bytes_but_not_churn() {
        let mut a = DeviceMemoryAcc::default();
        let mut m = rec(true, 0x1000, 64, 10);
        m.pool = true;
        assert_eq!(a.record(&m), None, "no churn: a pool's release does not wait for the device");
        m.alloc = false;
        assert_eq!(a.record(&m), None);
        assert_eq!(a.record(&rec(true, 0x2000, 8, 20)), Some(true));
        assert_eq!(a.record(&rec(false, 0x2000, 8, 30)), Some(false));
        let d = &a.summary(|_| String::new())[0];
        assert_eq!((d.allocations, d.pool_allocations, d.peak_live_bytes), (2, 1, 64));
    }

    #[test]
    fn held_at_the_peak_by_library_from_the_allocation_source() {
        let mut a = DeviceMemoryAcc::default();
        let torch = c"/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so";
        let blas = c"/venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublasLt.so.12";
        a.record(&by(rec(true, 0x1000, 4_000, 10), 0, torch));
        a.record(&by(rec(true, 0x2000, 128, 20), 0, blas));
        a.record(&by(rec(true, 0x3000, 1_000, 30), 0, torch));
        a.record(&rec(true, 0x4000, 7, 40));
        a.record(&by(rec(false, 0x1000, 4_000, 50), 0, torch));
        let d = &a.summary(|_| String::new())[0];
        let held: Vec<(&str, u64)> = d.held_at_peak_by_library.iter().map(|h| (h.library.as_str(), h.bytes)).collect();
        assert_eq!(held, vec![("PyTorch", 5_000), ("cuBLAS", 128), ("(unknown)", 7)]);
        assert_eq!(a.libraries, vec!["PyTorch".to_string(), "cuBLAS".to_string()], "one name per library");
    }

    #[test]
    fn each_range_gets_its_calls_allocations_and_releases_and_the_peak_while_it_was_open() {
        let mut a = DeviceMemoryAcc::default();
        let (step, fwd, opt): (PathId, PathId, PathId) = (1, 2, 3);
        let parent = |p: PathId| match p {
            2 | 3 => Some(1),
            _ => None,
        };
        // Live before the session: released inside it, not live here.
        a.call(9, opt);
        let mut early = rec(false, 0x9000, 500, 5);
        early.correlation_id = 9;
        a.record(&early);
        // Forward (10..100) allocates 300 then 200 and releases the 300.
        a.call(1, fwd);
        a.record(&by(rec(true, 0x1000, 300, 20), 1, c""));
        a.call(2, fwd);
        a.record(&by(rec(true, 0x2000, 200, 30), 2, c""));
        a.call(3, fwd);
        a.record(&by(rec(false, 0x1000, 300, 40), 3, c""));
        // Optimizer (110..200) allocates 50.
        a.call(4, opt);
        a.record(&by(rec(true, 0x3000, 50, 150), 4, c""));
        a.range(fwd, 10, 100);
        a.range(opt, 110, 200);
        a.range(step, 0, 210);
        let r = a.ranges(parent);
        let f = &r[&fwd];
        assert_eq!((f.allocations, f.allocated_bytes, f.releases, f.released_bytes), (2, 500, 1, 300));
        assert_eq!((f.peak_live_bytes, f.live_at_end_bytes), (500, 200));
        let o = &r[&opt];
        assert_eq!((o.allocations, o.allocated_bytes, o.peak_live_bytes, o.live_at_end_bytes), (1, 50, 250, 250));
        assert_eq!(o.releases, 0, "a release of memory from before the session is no release of its memory");
        let s = &r[&step];
        assert_eq!((s.allocations, s.allocated_bytes, s.releases), (3, 550, 1), "nested ranges included");
        assert_eq!((s.peak_live_bytes, s.live_at_end_bytes), (500, 250));
        // A range with no change inside: what was live when it began.
        a.range(4, 300, 400);
        assert_eq!(a.ranges(parent)[&4].peak_live_bytes, 250);
    }

    #[test]
    fn the_changes_kept_for_ranges_stay_bounded_and_a_range_older_than_them_is_counted_partial() {
        let mut a = DeviceMemoryAcc::default();
        for i in 0..(3 * MAX_LOG as u64) {
            a.record(&rec(true, 0x1000 + i, 1, 10 + i));
            a.record(&rec(false, 0x1000 + i, 1, 10 + i));
        }
        assert!(a.log.len() <= MAX_LOG, "{}", a.log.len());
        a.range(1, 0, 20);
        assert_eq!(a.partial_ranges, 1, "its changes were dropped for room");
        let now = 10 + 3 * MAX_LOG as u64;
        a.range(2, now - 5, now);
        assert_eq!(a.partial_ranges, 1, "a recent range has every change");
        // Nothing older than the oldest range still held is kept.
        a.forget_before(now - 2);
        assert!(a.log.iter().all(|e| e.0 >= now - 2));
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
        // A peak with no release after it: its holders are those of the end.
        let mut b = DeviceMemoryAcc::default();
        b.call(1, fwd);
        let mut m = rec(true, 0x2000, 300, 10);
        m.correlation_id = 1;
        b.record(&m);
        b.record(&rec(true, 0x3000, 5, 20));
        let d = &b.summary(|_| "step/forward".into())[0];
        let held: Vec<(&str, u64)> = d.held_at_peak.iter().map(|h| (h.path.as_str(), h.bytes)).collect();
        assert_eq!(held, vec![("step/forward", 300), ("(unknown)", 5)]);
        assert_eq!(d.held_at_peak_by_library.iter().map(|h| h.bytes).sum::<u64>(), 305);
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
