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

use std::collections::HashMap;

/// Threads read at most (the busiest launchers come first in practice: a
/// thread is added at its first launch).
pub(crate) const MAX_THREADS: usize = 64;

/// The last reading of each thread's CPU clock.
#[derive(Default)]
pub(crate) struct ThreadClocks {
    last: HashMap<u32, u64>,
}

impl ThreadClocks {
    /// The CPU time `tids` used since the last reading, ns, all together.
    /// A thread read for the first time sets its starting point (and adds
    /// nothing); one that cannot be read (it exited) is dropped.
    pub(crate) fn read(&mut self, tids: impl IntoIterator<Item = u32>) -> u64 {
        let mut used = 0u64;
        for tid in tids {
            let known = self.last.contains_key(&tid);
            if !known && self.last.len() >= MAX_THREADS {
                continue;
            }
            match thread_cpu_ns(tid) {
                Some(now) => {
                    if let Some(before) = self.last.insert(tid, now) {
                        used = used.saturating_add(now.saturating_sub(before));
                    }
                }
                None => {
                    self.last.remove(&tid);
                }
            }
        }
        used
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
    let clock = ((!(tid as libc::clockid_t)) << 3) | 6;
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
            tx.send(gettid()).unwrap();
            go_rx.recv().unwrap();
            // 60 ms on a CPU, then 60 ms asleep.
            let t = Instant::now();
            let mut x = 0u64;
            while t.elapsed() < Duration::from_millis(60) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            std::hint::black_box(x);
            std::thread::sleep(Duration::from_millis(60));
            go_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        let mut clocks = ThreadClocks::default();
        assert_eq!(clocks.read([tid]), 0, "the first reading is the starting point");
        go_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(150));
        let used = clocks.read([tid]);
        assert!((40_000_000..=130_000_000).contains(&used), "60 ms of CPU in 150 ms of wall time, read {used} ns");
        go_tx.send(()).unwrap();
        worker.join().unwrap();
        // Exited: dropped, and nothing added.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(clocks.read([tid]), 0);
        assert!(clocks.last.is_empty());
        assert_eq!(thread_cpu_ns(0), None);
        assert!(thread_cpu_ns(gettid()).is_some());
    }

    #[test]
    fn threads_past_the_bound_are_not_read() {
        let mut clocks = ThreadClocks::default();
        let me = gettid();
        for t in 0..MAX_THREADS as u32 {
            clocks.last.insert(1_000_000 + t, 0);
        }
        clocks.read([me]);
        assert!(!clocks.last.contains_key(&me));
    }
}
