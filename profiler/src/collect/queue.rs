//! Host events from the program's threads to the decoder: a queue per
//! thread, so an event writes only lines its own thread and the decoder
//! share (one queue for all threads made every event of every thread
//! write the same tail: ~3.7 us per NVTX push+pop on 8 threads at once).
//!
//! Each queue is bounded ([`HostQueues::per_thread`] events waiting; a
//! full one drops, counted) and grows in small blocks as events wait, so
//! an idle thread holds next to nothing. The decoder drains every queue
//! and merges them by time: a thread's events keep their order, and
//! threads' events interleave by when they were sent (an event's key is
//! the latest timestamp its thread had sent so far, so a range closed at
//! an earlier time than it was sent still follows what its thread sent
//! before it). Queues of threads that ended go once drained.

use crate::model::event::HostEvent;
use crossbeam_queue::SegQueue;
use crossbeam_utils::CachePadded;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One thread's events waiting for the decoder.
#[derive(Default)]
struct Queue {
    events: SegQueue<HostEvent>,
    /// Events waiting (bounds the queue).
    waiting: CachePadded<AtomicUsize>,
    /// The decoder's merge key of the last event it took (written by the
    /// decoder only).
    key: AtomicU64,
}

impl Queue {
    fn push(&self, e: HostEvent, most: usize) -> bool {
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= most {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        self.events.push(e);
        true
    }

    /// Takes its events into `into`, each with its merge key.
    fn take(&self, into: &mut Vec<(u64, HostEvent)>) {
        let mut key = self.key.load(Ordering::Relaxed);
        while let Some(e) = self.events.pop() {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            key = key.max(sent_at(&e).unwrap_or(key));
            into.push((key, e));
        }
        self.key.store(key, Ordering::Relaxed);
    }
}

/// When `e` was sent, as far as it says: its timestamp, or the end of the
/// interval it reports.
fn sent_at(e: &HostEvent) -> Option<u64> {
    use HostEvent::*;
    match e {
        Push { ts, .. }
        | Pop { ts, .. }
        | Start { ts, .. }
        | End { ts, .. }
        | Launch { ts, .. }
        | CommMessage { ts, .. }
        | Forked { ts }
        | OwnCost { ts, .. } => Some(*ts),
        UntracedLaunches { end, .. } | HostCopy { end, .. } | HostWait { end, .. } | Overhead { end, .. } => Some(*end),
        LaunchLog { entries, .. } => entries.last().map(|e| e.0),
        _ => None,
    }
}

thread_local! {
    /// The calling thread's queue, and the session it is of.
    static MINE: RefCell<Option<(u64, Arc<Queue>)>> = const { RefCell::new(None) };
}

/// A session's host events: a queue per sending thread.
pub(crate) struct HostQueues {
    session: u64,
    /// Events a thread may have waiting.
    per_thread: usize,
    queues: Mutex<Vec<Arc<Queue>>>,
    /// For a thread whose own queue cannot be reached (its thread-locals
    /// are being torn down), shared.
    shared: Arc<Queue>,
}

impl HostQueues {
    /// The queues of session `session`, each holding at most `per_thread`
    /// events.
    pub(crate) fn new(session: u64, per_thread: usize) -> Self {
        HostQueues { session, per_thread: per_thread.max(1), queues: Mutex::new(Vec::new()), shared: Arc::default() }
    }

    /// Queues `e` on the calling thread's queue; never blocks. `false`: the
    /// queue was full and `e` is dropped.
    pub(crate) fn send(&self, e: HostEvent) -> bool {
        let mut e = Some(e);
        let sent = MINE.try_with(|mine| {
            let mut mine = mine.try_borrow_mut().ok()?;
            if mine.as_ref().map(|(session, _)| *session) != Some(self.session) {
                let q = Arc::new(Queue::default());
                self.queues.lock().unwrap_or_else(|p| p.into_inner()).push(q.clone());
                *mine = Some((self.session, q));
            }
            let q = &mine.as_ref()?.1;
            Some(q.push(e.take()?, self.per_thread))
        });
        match (sent, e) {
            (Ok(Some(sent)), _) => sent,
            (_, Some(e)) => self.shared.push(e, self.per_thread),
            (_, None) => false,
        }
    }

    /// Every event waiting, merged by when it was sent (each thread's in
    /// its order). Forgets the drained queues of threads that ended.
    pub(crate) fn drain(&self) -> Vec<HostEvent> {
        let queues: Vec<Arc<Queue>> = self.queues.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut taken = Vec::new();
        for q in queues.iter().chain(std::iter::once(&self.shared)) {
            q.take(&mut taken);
        }
        drop(queues);
        // Stable: a thread's events, in order and with keys that never
        // decrease, stay in order.
        taken.sort_by_key(|(key, _)| *key);
        self.queues.lock().unwrap_or_else(|p| p.into_inner()).retain(|q| {
            // Only this list holds it: its thread ended (or moved to
            // another session) and nothing waits in it.
            Arc::strong_count(q) > 1 || q.waiting.load(Ordering::Relaxed) > 0
        });
        taken.into_iter().map(|(_, e)| e).collect()
    }

    /// Threads with a queue now.
    #[cfg(test)]
    fn threads(&self) -> usize {
        self.queues.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pop(ts: u64, instance: u64) -> HostEvent {
        HostEvent::Pop { instance, ts }
    }

    #[test]
    fn threads_events_merge_by_time_each_thread_s_in_its_order() {
        let q = Arc::new(HostQueues::new(1, 100));
        q.send(pop(10, 1));
        let other = q.clone();
        // Joined, not scoped: its thread-locals are gone when join returns.
        std::thread::spawn(move || {
            other.send(pop(5, 2));
            other.send(pop(20, 3));
            // Sent after ts 20 with an earlier time: stays after it.
            other.send(pop(15, 4));
            other.send(HostEvent::Discard { instance: 5 });
        })
        .join()
        .unwrap();
        q.send(pop(17, 6));
        let order: Vec<u64> = q
            .drain()
            .iter()
            .map(|e| match e {
                HostEvent::Pop { instance, .. } | HostEvent::Discard { instance } => *instance,
                _ => 0,
            })
            .collect();
        assert_eq!(order, [2, 1, 6, 3, 4, 5]);
        assert_eq!(q.threads(), 1, "the ended thread's drained queue is forgotten");
        assert!(q.drain().is_empty());
    }

    #[test]
    fn a_full_queue_drops_and_another_session_gets_a_queue_of_its_own() {
        let a = HostQueues::new(101, 2);
        assert!(a.send(pop(1, 1)) && a.send(pop(2, 2)));
        assert!(!a.send(pop(3, 3)), "full");
        assert_eq!(a.drain().len(), 2);
        assert!(a.send(pop(4, 4)), "room again once drained");
        let b = HostQueues::new(102, 2);
        assert!(b.send(pop(5, 5)));
        assert_eq!(b.drain().len(), 1);
        assert_eq!(a.drain().len(), 1, "the first session's event stayed in its queue");
    }
}
