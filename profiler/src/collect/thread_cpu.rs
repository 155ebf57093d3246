//! CPU time of the threads that launch kernels, read from the decoder
//! thread: whether the host time between a program's CUDA calls was its
//! own code running or its threads waiting off a CPU (for a data loader's
//! queue, a lock, I/O).
//!
//! Linux gives every thread a CPU-time clock that any thread of the same
//! process may read: `clock_gettime` with the clock id made from the
//! thread's id (what glibc's `pthread_getcpuclockid` returns). One system
//! call a thread and reading, no file or handle kept; a thread that has
//! exited reads as an error and is forgotten.

use std::collections::{HashMap, HashSet};

/// Threads read at most (those past it are left out; the launching threads
/// of a training loop are a handful).
pub(crate) const MAX_THREADS: usize = 64;

/// Exited threads remembered, so that they are not asked again.
const MAX_GONE: usize = 4096;

/// The last reading of each thread's CPU clock.
#[derive(Default)]
pub(crate) struct ThreadClocks {
    last: HashMap<u32, u64>,
    gone: HashSet<u32>,
}

impl ThreadClocks {
    /// The CPU time `tids` used since the last reading, ns, all together;
    /// `None` unless every one of them was read then and now (a thread new
    /// since, past [`MAX_THREADS`], or exited leaves CPU time unknown, which
    /// would read as waiting). A thread read for the first time sets its
    /// starting point; one that cannot be read (it exited) is dropped and
    /// not asked again; one no longer asked for is forgotten.
    pub(crate) fn read(&mut self, tids: &[u32]) -> Option<u64> {
        self.last.retain(|t, _| tids.contains(t));
        let mut used = Some(0u64);
        for &tid in tids {
            if self.gone.contains(&tid) || (!self.last.contains_key(&tid) && self.last.len() >= MAX_THREADS) {
                used = None;
                continue;
            }
            match thread_cpu_ns(tid) {
                Some(now) => match self.last.insert(tid, now) {
                    Some(before) => used = used.map(|u| u.saturating_add(now.saturating_sub(before))),
                    None => used = None,
                },
                None => {
                    used = None;
                    self.last.remove(&tid);
                    if self.gone.len() >= MAX_GONE {
                        self.gone.clear();
                    }
                    self.gone.insert(tid);
                }
            }
        }
        used.filter(|_| !tids.is_empty())
    }
}

/// Thread `tid`'s CPU time so far, ns (`None`: not a thread of this
/// process, or it exited).
pub(crate) fn thread_cpu_ns(tid: u32) -> Option<u64> {
    if tid == 0 || tid > i32::MAX as u32 {
        return None;
    }
    // The kernel's per-thread CPU clock id: the thread id inverted and
    // shifted, with the per-thread bit (4) and the scheduler clock (2).
    clock_ns(((!(tid as libc::clockid_t)) << 3) | 6)
}

/// The calling thread's CPU time so far, ns (`None`: the clock cannot be
/// read).
pub(crate) fn own_cpu_ns() -> Option<u64> {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// `clock`'s time, ns (`None`: it cannot be read).
fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; an invalid clock id only
    // makes the call fail with EINVAL.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn gettid() -> u32 {
        // SAFETY: gettid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_gettid) as u32 }
    }

    #[test]
    fn another_threads_cpu_time_is_read_and_an_exited_thread_forgotten() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            let me = gettid();
            tx.send(me).unwrap();
            go_rx.recv().unwrap();
            // 60 ms on a CPU by its own clock (however loaded the machine),
            // then asleep until told to end.
            let start = thread_cpu_ns(me).unwrap();
            let mut x = 0u64;
            while thread_cpu_ns(me).unwrap() - start < 60_000_000 {
                for _ in 0..1000 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                }
            }
            std::hint::black_box(x);
            tx.send(me).unwrap();
            go_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        let mut clocks = ThreadClocks::default();
        assert_eq!(clocks.read(&[tid]), None, "the first reading is the starting point");
        go_tx.send(()).unwrap();
        rx.recv().unwrap();
        let used = clocks.read(&[tid]).expect("read twice");
        assert!((60_000_000..=75_000_000).contains(&used), "60 ms of CPU, read {used} ns");
        // Asleep: a reading adds (nearly) nothing.
        std::thread::sleep(Duration::from_millis(30));
        assert!(clocks.read(&[tid]).unwrap() < 5_000_000);
        go_tx.send(()).unwrap();
        worker.join().unwrap();
        // Exited: dropped, nothing added, not asked again.
        let t = Instant::now();
        while thread_cpu_ns(tid).is_some() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(clocks.read(&[tid]), None);
        assert!(clocks.last.is_empty() && clocks.gone.contains(&tid));
        // This thread alone from now on: the gone one is no longer asked.
        let me = gettid();
        assert_eq!(clocks.read(&[me]), None, "new");
        assert!(clocks.read(&[me]).is_some());
        // One new thread among known ones: that interval is unknown.
        assert_eq!(clocks.read(&[me, tid]), None);
        assert_eq!(clocks.read(&[]), None);
        assert_eq!(thread_cpu_ns(0), None);
        assert!(thread_cpu_ns(gettid()).is_some());
        // Another process's thread is not this one's to read.
        // SAFETY: getppid has no preconditions.
        assert_eq!(thread_cpu_ns(unsafe { libc::getppid() } as u32), None);
    }

    #[test]
    fn the_clock_id_is_the_one_pthread_gives() {
        let mut id: libc::clockid_t = 0;
        // SAFETY: pthread_self is this thread; `id` is writable.
        assert_eq!(unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) }, 0);
        assert_eq!(id, ((!(gettid() as libc::clockid_t)) << 3) | 6);
    }

    #[test]
    fn threads_past_the_bound_are_not_read() {
        let mut clocks = ThreadClocks::default();
        let me = gettid();
        for t in 0..MAX_THREADS as u32 {
            clocks.last.insert(1_000_000 + t, 0);
        }
        let mut tids = vec![me];
        tids.extend(clocks.last.keys().copied());
        assert_eq!(clocks.read(&tids), None, "a thread left out: CPU time unknown");
        assert!(!clocks.last.contains_key(&me));
    }
}
