//! How callbacks reach the running collection without holding a lock
//! while they work, and how stop knows they are done.
//!
//! The collection lives in a slot behind a read-write lock. Holding the
//! lock's read guard for a whole callback made stop wait for the slowest
//! callback in flight (a range profiler start, ~225 ms the first time in a
//! process), and while a writer waits, a read-write lock lets no new reader
//! in: every thread's NVTX events, buffer callbacks and launches stalled
//! behind it. So a callback takes the lock only to clone the `Arc` out
//! ([`hold`]) and then works without it.
//!
//! The `Arc` keeps the collection's memory alive, but not CUPTI: stop
//! detaches CUPTI (`cuptiFinalize`) and no callback may be inside CUPTI
//! then. Each holder therefore also counts itself in the collection's
//! [`Gate`]. Stop, once the subscriber is gone (no new callbacks are
//! delivered), closes the gate and waits for the count to reach zero
//! before it finalizes; a callback already delivered that comes to the
//! gate after it closed gets nothing and returns. A holder increments the
//! count before it reads `closed`, and stop sets `closed` before it reads
//! the count (both sequentially consistent), so one of them always sees
//! the other: no holder can slip in after stop has seen the count at zero.
//! The wait is bounded: a callback still inside after it leaves CUPTI
//! attached rather than finalizing under it.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Counts the callbacks and threads using a collection; closed by stop.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    inside: AtomicUsize,
    closed: AtomicBool,
}

impl Gate {
    /// Counts one more user, unless the gate is closed (`false`).
    pub(crate) fn enter(&self) -> bool {
        self.inside.fetch_add(1, Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            self.leave();
            return false;
        }
        true
    }

    /// One user is done.
    pub(crate) fn leave(&self) {
        self.inside.fetch_sub(1, Ordering::SeqCst);
    }

    /// Lets no one in from now on, and waits at most `limit` for those
    /// inside to leave. Whether none is left.
    pub(crate) fn close(&self, limit: Duration) -> bool {
        self.closed.store(true, Ordering::SeqCst);
        let began = Instant::now();
        while self.inside.load(Ordering::SeqCst) != 0 {
            if began.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        true
    }

    /// Runs `f` counted in, or returns `None` when the gate is closed.
    pub(crate) fn within<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        if !self.enter() {
            return None;
        }
        struct Leave<'a>(&'a Gate);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.leave();
            }
        }
        let _leave = Leave(self);
        Some(f())
    }
}

/// What has a [`Gate`] ([`super::Collection`]).
pub(crate) trait Gated {
    /// Its gate.
    fn gate(&self) -> &Gate;
}

/// A collection held by a callback or a thread of gpuscope's, counted in
/// its gate until dropped.
pub(crate) struct Held<T: Gated> {
    it: Arc<T>,
}

impl<T: Gated> Held<T> {
    /// The `Arc` held (for threads that outlive the holder: they must hold
    /// it [`again`](Held::again) if they call CUPTI).
    pub(crate) fn arc(&self) -> &Arc<T> {
        &self.it
    }

    /// Another hold of the same collection, for a thread this holder
    /// starts; `None` once the gate has closed.
    pub(crate) fn again(&self) -> Option<Held<T>> {
        if self.it.gate().enter() {
            Some(Held { it: self.it.clone() })
        } else {
            None
        }
    }
}

impl<T: Gated> Deref for Held<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.it
    }
}

impl<T: Gated> Drop for Held<T> {
    fn drop(&mut self) {
        self.it.gate().leave();
    }
}

/// The collection in `slot`, held, if there is one and its gate is open.
/// The lock is held only while the `Arc` is cloned.
pub(crate) fn hold<T: Gated>(slot: &RwLock<Option<Arc<T>>>) -> Option<Held<T>> {
    let it = slot.read().unwrap_or_else(|e| e.into_inner()).clone()?;
    // Built only once counted in: a `Held` leaves the gate when dropped.
    if it.gate().enter() {
        Some(Held { it })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[derive(Default)]
    struct Collection {
        gate: Gate,
    }

    impl Gated for Collection {
        fn gate(&self) -> &Gate {
            &self.gate
        }
    }

    #[test]
    fn a_long_callback_holds_no_lock_and_stop_waits_for_it_before_finalizing() {
        let slot: &'static RwLock<Option<Arc<Collection>>> = Box::leak(Box::new(RwLock::new(None)));
        let session = Arc::new(Collection::default());
        *slot.write().unwrap() = Some(session.clone());
        // A callback in a long CUPTI call (a PM sampler's set-up, ~0.4 s).
        let (inside_tx, inside_rx) = mpsc::channel();
        let (finish_tx, finish_rx) = mpsc::channel::<()>();
        let callback = std::thread::spawn(move || {
            let held = hold(slot).expect("a session is running");
            inside_tx.send(()).unwrap();
            finish_rx.recv().unwrap();
            drop(held);
        });
        inside_rx.recv().unwrap();
        // Other threads' callbacks get in meanwhile, and so does a writer
        // (stop clearing the slot): neither waits for the long call.
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            assert!(hold(slot).is_some(), "a second callback gets the session");
            *slot.write().unwrap() = None;
            done_tx.send(()).unwrap();
        });
        done_rx.recv_timeout(Duration::from_secs(5)).expect("the slot was cleared while the long callback ran");
        // Stop closes the gate: it sees the callback still inside and does
        // not finalize under it; no one new gets in.
        assert!(!session.gate.close(Duration::from_millis(50)), "the long callback is still inside");
        *slot.write().unwrap() = Some(session.clone());
        assert!(hold(slot).is_none(), "a callback after the gate closed gets nothing");
        // Once it leaves, stop may finalize.
        finish_tx.send(()).unwrap();
        callback.join().unwrap();
        assert!(session.gate.close(Duration::from_secs(5)), "none inside");
        assert_eq!(session.gate.within(|| 1), None);
    }

    #[test]
    fn a_hold_taken_again_counts_until_dropped_and_not_after_close() {
        let slot = RwLock::new(Some(Arc::new(Collection::default())));
        let first = hold(&slot).unwrap();
        let second = first.again().unwrap();
        drop(first);
        assert_eq!(second.gate.inside.load(Ordering::SeqCst), 1, "the second hold still counts");
        assert!(!second.gate.close(Duration::ZERO), "stop sees the thread's hold");
        assert!(second.again().is_none(), "no new hold once closed");
        let gate_is_empty_after = {
            let it = second.arc().clone();
            drop(second);
            it.gate.inside.load(Ordering::SeqCst) == 0
        };
        assert!(gate_is_empty_after);
    }
}
