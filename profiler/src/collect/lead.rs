//! The lead thread: of the threads with NVTX ranges of their own open, the
//! one whose outermost range opened first. Launches on threads with no
//! range of their own (autograd's worker) are attributed to its innermost
//! range, read at every such launch.
//!
//! Each thread with ranges of its own publishes its innermost one in a cell
//! only it writes (a sequence lock: no read-modify-write, no lock taken),
//! on every push and pop. Which thread leads changes only when a thread's
//! outermost range opens or closes (a step begins or ends): that takes a
//! lock and points [`LEAD`] at the new lead's cell. Cells are never freed,
//! only reused by later threads, so a pointer read at a launch stays valid;
//! there are at most as many as threads that had ranges at once.

use crate::model::path::PathId;
use crossbeam_utils::CachePadded;
use std::collections::BTreeMap;
use std::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

/// A thread's innermost open range of its own, as other threads read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Lead {
    /// 0: no lead thread.
    pub tid: u32,
    pub path: PathId,
    pub instance: u64,
}

/// One thread's published innermost range: written only by that thread.
#[derive(Default)]
pub(crate) struct LeadCell {
    /// Odd while a write is in progress.
    seq: AtomicU64,
    tid_path: AtomicU64,
    instance: AtomicU64,
}

impl LeadCell {
    /// Publishes `l`. Only the cell's owner thread calls this.
    pub(crate) fn write(&self, l: Lead) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.tid_path.store((l.tid as u64) << 32 | l.path as u64, Ordering::Relaxed);
        self.instance.store(l.instance, Ordering::Relaxed);
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// What was published last; `None` when a write stayed in progress
    /// for every try (its thread descheduled in it for all of them).
    pub(crate) fn read(&self) -> Option<Lead> {
        for attempt in 0..1024 {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                // A write is two stores: past a few spins its thread is off
                // the CPU, so let it run.
                if attempt < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
                continue;
            }
            let (tid_path, instance) = (self.tid_path.load(Ordering::Relaxed), self.instance.load(Ordering::Relaxed));
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return Some(Lead { tid: (tid_path >> 32) as u32, path: tid_path as u32, instance });
            }
        }
        None
    }
}

/// The lead thread's cell (null: no thread has ranges of its own open).
static LEAD: AtomicPtr<LeadCell> = AtomicPtr::new(std::ptr::null_mut());

/// Threads with ranges of their own open: when their outermost range opened
/// (the oldest leads) and their cell.
static OWNERS: Mutex<BTreeMap<u32, (u64, &'static LeadCell)>> = Mutex::new(BTreeMap::new());

/// Cells of threads that ended, for the next threads to use.
static FREE: Mutex<Vec<&'static LeadCell>> = Mutex::new(Vec::new());

/// Orders threads' outermost ranges by when they opened.
static OPENED: AtomicU64 = AtomicU64::new(1);

/// A key later than every one taken before: when a thread's outermost
/// range opened, for [`register`].
pub(crate) fn opened_now() -> u64 {
    OPENED.fetch_add(1, Ordering::Relaxed)
}

/// A cell for the calling thread: a free one, or a new one (never freed).
pub(crate) fn take_cell() -> &'static LeadCell {
    let free = FREE.lock().unwrap_or_else(|e| e.into_inner()).pop();
    // A cache line of its own: threads write their cells at every push
    // and pop.
    free.unwrap_or_else(|| &**Box::leak(Box::new(CachePadded::new(LeadCell::default()))))
}

/// Gives back the cell of a thread that ends (not registered any more).
pub(crate) fn give_cell(cell: &'static LeadCell) {
    cell.write(Lead::default());
    FREE.lock().unwrap_or_else(|e| e.into_inner()).push(cell);
}

/// Registers thread `tid`'s outermost range of its own (when it opened, from
/// [`opened_now`], and its cell; `None`: it has none open now), and points [`LEAD`] at the
/// thread whose outermost is the oldest.
pub(crate) fn register(tid: u32, own: Option<(u64, &'static LeadCell)>) {
    let mut owners = OWNERS.lock().unwrap_or_else(|e| e.into_inner());
    match own {
        Some(o) => owners.insert(tid, o),
        None => owners.remove(&tid),
    };
    let lead = owners.values().min_by_key(|(opened, _)| *opened).map(|(_, cell)| *cell);
    LEAD.store(lead.map_or(std::ptr::null_mut(), |c| c as *const LeadCell as *mut LeadCell), Ordering::Release);
}

/// The lead thread's innermost range, unless the lead is thread `tid`.
pub(crate) fn lead_for(tid: u32) -> Option<Lead> {
    let p = LEAD.load(Ordering::Acquire);
    // SAFETY: LEAD holds null or a cell leaked by `take_cell`, never freed.
    let cell = unsafe { p.as_ref() }?;
    let l = cell.read()?;
    (l.tid != 0 && l.tid != tid).then_some(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_reads_what_its_thread_wrote_while_another_reads_it() {
        let cell: &'static LeadCell = Box::leak(Box::default());
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 1..200_000u64 {
                    cell.write(Lead { tid: 7, path: i as u32, instance: i });
                }
            });
            s.spawn(|| {
                for _ in 0..200_000 {
                    if let Some(l) = cell.read() {
                        assert_eq!(l.path as u64, l.instance, "a read never mixes two writes");
                    }
                }
            });
        });
    }
}
