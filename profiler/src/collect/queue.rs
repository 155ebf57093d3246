//! Host events from the program's threads to the decoder: a queue per
//! thread, so an event writes only lines its own thread and the decoder
//! share (one queue for all threads made every event of every thread
//! write the same tail: ~3.7 us per NVTX push+pop on 8 threads at once).
//!
//! A thread's queue has one producer (the thread) and one consumer at a
//! time (a drain), so a push is a write into the current chunk and one
//! release store, with no read-modify-write (a lock-free multi-producer
//! queue cost ~45 ns a push). Each queue is bounded
//! ([`HostQueues::per_thread`] events waiting; a full one drops, counted)
//! and grows in chunks as events wait, so an idle thread holds one chunk.
//! The decoder drains every queue and merges them by time: a thread's
//! events keep their order, and threads' events interleave by when they
//! were sent (an event's key is the latest timestamp its thread had sent
//! so far, so a range closed at an earlier time than it was sent still
//! follows what its thread sent before it). Queues of threads that ended
//! go once drained.

use super::clock::{Anchors, Convert};
use crate::model::event::HostEvent;
use crossbeam_queue::SegQueue;
use crossbeam_utils::CachePadded;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::fence;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Events a chunk holds.
const CHUNK: usize = 256;

/// Drained chunks a queue keeps for its thread to write again, at most
/// (about 400 KB a thread: 8,192 events, what a thread sending 1.6M a
/// second sends between drains): otherwise a thread writes its events into
/// memory new to the process, and pays a page fault every 85 events
/// (measured 12-24 per 1000 NVTX push+pops, a third of what an event cost
/// in a session).
const SPARE_CHUNKS: usize = 32;

/// A run of a thread's events, linked to the next.
struct Chunk {
    slots: [UnsafeCell<MaybeUninit<HostEvent>>; CHUNK],
    next: AtomicPtr<Chunk>,
}

impl Chunk {
    fn new() -> *mut Chunk {
        Box::into_raw(Box::new(Chunk {
            slots: [const { UnsafeCell::new(MaybeUninit::uninit()) }; CHUNK],
            next: AtomicPtr::new(ptr::null_mut()),
        }))
    }
}

/// Where the next event goes: only the queue's own thread uses it.
struct Tail {
    chunk: Cell<*mut Chunk>,
    index: Cell<usize>,
    /// Events pushed so far (published with release: the slots written
    /// before it are readable by whoever reads it with acquire).
    pushed: AtomicU64,
}

/// Where the next event is taken from: only under the queue's lock.
struct Head {
    chunk: *mut Chunk,
    index: usize,
}

/// One thread's events waiting for the decoder.
struct ThreadQueue {
    tail: CachePadded<Tail>,
    head: Mutex<Head>,
    /// Events taken so far (written under `head`'s lock, read by the
    /// producer to bound the queue).
    taken: CachePadded<AtomicU64>,
    /// The merge key of the last event taken (by drains, one at a time).
    key: AtomicU64,
    /// Drained chunks, owned by this list (their slots empty, their links
    /// null), for the producer to reuse.
    spare: Mutex<Vec<*mut Chunk>>,
}

// SAFETY: `tail`'s cells are used only by the thread that owns the queue
// (`push`'s contract); `head` is behind a lock; slots are written by the
// producer before `pushed` is released and read by a consumer only after
// acquiring it, each slot by one side at a time.
unsafe impl Sync for ThreadQueue {}
// SAFETY: the raw chunk pointers are owned by the queue; events are Send.
unsafe impl Send for ThreadQueue {}

impl ThreadQueue {
    fn new() -> Self {
        let first = Chunk::new();
        ThreadQueue {
            tail: CachePadded::new(Tail { chunk: Cell::new(first), index: Cell::new(0), pushed: AtomicU64::new(0) }),
            head: Mutex::new(Head { chunk: first, index: 0 }),
            taken: CachePadded::new(AtomicU64::new(0)),
            key: AtomicU64::new(0),
            spare: Mutex::new(Vec::new()),
        }
    }

    /// A chunk to write next: a drained one if the list is free now (the
    /// producer never waits for it), or a new one.
    fn next_chunk(&self) -> *mut Chunk {
        match self.spare.try_lock().ok().and_then(|mut s| s.pop()) {
            Some(c) => c,
            None => Chunk::new(),
        }
    }

    /// Keeps chunk `c`, which the consumer has read to its end, for reuse,
    /// or frees it.
    ///
    /// # Safety
    /// `c` is a chunk of this queue that the producer has moved past and
    /// whose events were all taken; no one else holds it.
    unsafe fn recycle(&self, c: *mut Chunk) {
        // SAFETY: the caller's contract: the chunk is ours alone now.
        unsafe { &*c }.next.store(ptr::null_mut(), Ordering::Relaxed);
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        if spare.len() < SPARE_CHUNKS {
            // Handed over through the lock: the producer sees the null link.
            spare.push(c);
        } else {
            drop(spare);
            // SAFETY: the caller's contract; not kept anywhere else.
            drop(unsafe { Box::from_raw(c) });
        }
    }

    /// Events waiting.
    fn waiting(&self) -> u64 {
        self.tail.pushed.load(Ordering::Acquire).saturating_sub(self.taken.load(Ordering::Acquire))
    }

    /// Queues `e`; `false`: `most` wait already.
    ///
    /// # Safety
    /// Only one thread ever pushes to a queue (the thread that made it).
    unsafe fn push(&self, e: HostEvent, most: usize) -> bool {
        let t = &*self.tail;
        let pushed = t.pushed.load(Ordering::Relaxed);
        if pushed.saturating_sub(self.taken.load(Ordering::Acquire)) >= most as u64 {
            return false;
        }
        let mut chunk = t.chunk.get();
        let mut i = t.index.get();
        if i == CHUNK {
            let next = self.next_chunk();
            // SAFETY: the tail chunk is live (a consumer frees a chunk only
            // once it has moved past it, which needs this link).
            unsafe { &*chunk }.next.store(next, Ordering::Release);
            chunk = next;
            i = 0;
            t.chunk.set(chunk);
        }
        // SAFETY: slot `i` of the tail chunk is past every published event,
        // so no consumer reads it until `pushed` is released below.
        unsafe { (*(*chunk).slots[i].get()).write(e) };
        t.index.set(i + 1);
        t.pushed.store(pushed + 1, Ordering::Release);
        true
    }

    /// Takes its events into `into`, in order, each with a merge key of 0
    /// for [`keyed`] to set.
    fn take(&self, into: &mut Vec<(u64, HostEvent)>) {
        let mut head = self.head.lock().unwrap_or_else(|p| p.into_inner());
        let taken = self.taken.load(Ordering::Relaxed);
        let pushed = self.tail.pushed.load(Ordering::Acquire);
        // Before any slot is read: nothing below may unwind with slots read
        // and `taken` not yet moved past them.
        into.reserve(pushed.saturating_sub(taken) as usize);
        for _ in taken..pushed {
            if head.index == CHUNK {
                // SAFETY: the producer linked the next chunk before it
                // published an event in it, and this one is done with.
                let next = unsafe { &*head.chunk }.next.load(Ordering::Acquire);
                // SAFETY: every slot of the old chunk was read; the producer
                // writes only its tail chunk, which is `next` or later.
                unsafe { self.recycle(head.chunk) };
                head.chunk = next;
                head.index = 0;
            }
            // SAFETY: a published slot, written once and read once (here).
            let e = unsafe { (*(*head.chunk).slots[head.index].get()).assume_init_read() };
            head.index += 1;
            into.push((0, e));
        }
        self.taken.store(pushed, Ordering::Release);
    }
}

impl Drop for ThreadQueue {
    fn drop(&mut self) {
        let mut rest = Vec::new();
        self.take(&mut rest);
        drop(rest);
        let head = self.head.get_mut().unwrap_or_else(|p| p.into_inner());
        let mut chunk = head.chunk;
        while !chunk.is_null() {
            // SAFETY: every event was taken, and nothing else holds the
            // queue: the chunks from the head on are its alone, each freed
            // once, after its link is read.
            let next = unsafe { &*chunk }.next.load(Ordering::Relaxed);
            // SAFETY: as above.
            drop(unsafe { Box::from_raw(chunk) });
            chunk = next;
        }
        for c in self.spare.get_mut().unwrap_or_else(|p| p.into_inner()).drain(..) {
            // SAFETY: spare chunks belong to the list alone, each once.
            drop(unsafe { Box::from_raw(c) });
        }
    }
}

/// Events of threads whose own queue cannot be reached (their
/// thread-locals are being torn down): any thread may push.
#[derive(Default)]
struct SharedQueue {
    events: SegQueue<HostEvent>,
    /// Events waiting (bounds the queue).
    waiting: CachePadded<AtomicUsize>,
    key: AtomicU64,
}

impl SharedQueue {
    fn push(&self, e: HostEvent, most: usize) -> bool {
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= most {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        self.events.push(e);
        true
    }

    fn take(&self, into: &mut Vec<(u64, HostEvent)>) {
        while let Some(e) = self.events.pop() {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            into.push((0, e));
        }
    }
}

/// A queue's events taken, put in ns in place (range events' counter
/// readings turned by `clock`: the only events timed by the counter are
/// [`super::send_range_event`]'s), each given its merge key, which goes on
/// from the queue's `key`.
fn keyed(events: &mut [(u64, HostEvent)], clock: &Convert, key: &AtomicU64) {
    let mut k = key.load(Ordering::Relaxed);
    for (key, e) in events {
        if let HostEvent::Push { ts, .. } | HostEvent::Pop { ts, .. } = e {
            *ts = clock.ns(*ts);
        }
        k = k.max(sent_at(e).unwrap_or(k));
        *key = k;
    }
    key.store(k, Ordering::Relaxed);
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

/// The calling thread's queue, and the session it is of; clears
/// [`LAST`] when the thread's locals are torn down.
struct Mine(Option<(u64, Arc<ThreadQueue>)>);

impl Drop for Mine {
    fn drop(&mut self) {
        let _ = LAST.try_with(|l| l.set((0, ptr::null())));
    }
}

thread_local! {
    static MINE: RefCell<Mine> = const { RefCell::new(Mine(None)) };
    /// The queue [`MINE`] holds and its session, read without a borrow on
    /// every event (no destructor: readable while other locals are torn
    /// down, when it is cleared).
    static LAST: Cell<(u64, *const ThreadQueue)> = const { Cell::new((0, ptr::null())) };
}

/// A session's host events: a queue per sending thread.
pub(crate) struct HostQueues {
    session: u64,
    /// Events a thread may have waiting.
    per_thread: usize,
    queues: Mutex<Vec<Arc<ThreadQueue>>>,
    /// For a thread whose own queue cannot be reached (its thread-locals
    /// are being torn down), shared.
    shared: SharedQueue,
    /// Range events' counter readings into the session's clock.
    clock: Anchors,
    /// Drains one at a time (the merge keys go on from one to the next).
    draining: Mutex<()>,
}

impl HostQueues {
    /// The queues of session `session`, each holding at most `per_thread`
    /// events, all timed in ns.
    #[cfg(test)]
    pub(crate) fn new(session: u64, per_thread: usize) -> Self {
        Self::timed(session, per_thread, Anchors::none())
    }

    /// The same, with range events timed by the CPU's counter where it can
    /// be and turned into the clock `clock` anchors on.
    pub(crate) fn timed(session: u64, per_thread: usize, clock: Anchors) -> Self {
        HostQueues {
            session,
            per_thread: per_thread.max(1),
            queues: Mutex::new(Vec::new()),
            shared: SharedQueue::default(),
            clock,
            draining: Mutex::new(()),
        }
    }

    /// Whether range events are timed by the CPU's counter
    /// ([`super::clock::ticks`]) in this session.
    pub(crate) fn counter(&self) -> bool {
        self.clock.counter()
    }

    /// Queues `e` on the calling thread's queue; never blocks. `false`: the
    /// queue was full and `e` is dropped.
    pub(crate) fn send(&self, e: HostEvent) -> bool {
        let (session, q) = LAST.try_with(Cell::get).unwrap_or((0, ptr::null()));
        if session == self.session && !q.is_null() {
            // SAFETY: `LAST` points into the queue `MINE` holds, which
            // clears it before letting the queue go; this thread made the
            // queue, and no other thread pushes to it.
            return unsafe { (*q).push(e, self.per_thread) };
        }
        self.send_first(e)
    }

    /// [`HostQueues::send`] for a thread without a queue of this session.
    fn send_first(&self, e: HostEvent) -> bool {
        let mut e = Some(e);
        let sent = MINE.try_with(|mine| {
            let mut mine = mine.try_borrow_mut().ok()?;
            if mine.0.as_ref().map(|(session, _)| *session) != Some(self.session) {
                let q = Arc::new(ThreadQueue::new());
                self.queues.lock().unwrap_or_else(|p| p.into_inner()).push(q.clone());
                let _ = LAST.try_with(|l| l.set((self.session, Arc::as_ptr(&q))));
                mine.0 = Some((self.session, q));
            }
            let q = &mine.0.as_ref()?.1;
            // SAFETY: this thread made the queue and keeps it in its own
            // thread-local: no other thread pushes to it.
            Some(unsafe { q.push(e.take()?, self.per_thread) })
        });
        match (sent, e) {
            (Ok(Some(sent)), _) => sent,
            (_, Some(e)) => self.shared.push(e, self.per_thread),
            (_, None) => false,
        }
    }

    /// Every event waiting, in order ([`HostQueues::drain_into`]).
    #[cfg(test)]
    pub(crate) fn drain(&self) -> Vec<HostEvent> {
        let mut keyed = Vec::new();
        self.drain_into(&mut keyed);
        keyed.into_iter().map(|(_, e)| e).collect()
    }

    /// Every event waiting, merged by when it was sent (each thread's in
    /// its order), into `into` (cleared first), each with its merge key:
    /// the decoder keeps the vector from one drain to the next, so a steady
    /// flow of events writes into memory it already has. Forgets the
    /// drained queues of threads that ended.
    pub(crate) fn drain_into(&self, into: &mut Vec<(u64, HostEvent)>) {
        into.clear();
        let _one = self.draining.lock().unwrap_or_else(|p| p.into_inner());
        let queues: Vec<Arc<ThreadQueue>> = self.queues.lock().unwrap_or_else(|p| p.into_inner()).clone();
        // Where each queue's events begin in `into`.
        let mut runs = Vec::with_capacity(queues.len() + 1);
        for q in &queues {
            runs.push(into.len());
            q.take(into);
        }
        runs.push(into.len());
        self.shared.take(into);
        // Read after every event taken was sent: none is converted past
        // this reading.
        let clock = self.clock.now();
        let mut sorted = true;
        let mut last = 0;
        for (i, q) in queues.iter().enumerate() {
            let run = &mut into[runs[i]..runs[i + 1]];
            keyed(run, &clock, &q.key);
            if let (Some(first), Some(end)) = (run.first(), run.last()) {
                sorted &= first.0 >= last;
                last = end.0;
            }
        }
        let shared = runs[queues.len()];
        keyed(&mut into[shared..], &clock, &self.shared.key);
        sorted &= into[shared..].first().map_or(true, |e| e.0 >= last);
        drop(queues);
        // Stable: a thread's events, in order and with keys that never
        // decrease, stay in order. Most drains hold one thread's events.
        if !sorted {
            into.sort_by_key(|(key, _)| *key);
        }
        self.queues.lock().unwrap_or_else(|p| p.into_inner()).retain(|q| {
            // Only this list holds it: its thread ended (or moved to
            // another session). Its last events were pushed before its
            // reference went (released); the fence makes them seen before
            // the queue is judged empty.
            if Arc::strong_count(q) > 1 {
                return true;
            }
            fence(Ordering::Acquire);
            q.waiting() > 0
        });
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
    fn a_thread_s_events_arrive_whole_and_in_order_while_drained_meanwhile() {
        const N: u64 = 100_000;
        let q = Arc::new(HostQueues::new(103, N as usize));
        let producer = q.clone();
        let sender = std::thread::spawn(move || {
            for i in 0..N {
                assert!(producer.send(pop(i, i)), "never full");
            }
        });
        let mut got = Vec::new();
        while !sender.is_finished() {
            got.extend(q.drain());
        }
        sender.join().unwrap();
        got.extend(q.drain());
        let instances: Vec<u64> = got
            .iter()
            .map(|e| match e {
                HostEvent::Pop { instance, .. } => *instance,
                _ => u64::MAX,
            })
            .collect();
        assert_eq!(instances, (0..N).collect::<Vec<_>>(), "every event once, in order, across chunks");
        assert_eq!(q.threads(), 0, "the ended thread's queue is forgotten once drained");
    }

    #[test]
    fn events_left_in_a_queue_are_freed_with_it() {
        // Run under Miri or a leak checker: events holding heap data left
        // in chunks are dropped with the queue.
        let q = HostQueues::new(104, 10_000);
        for i in 0..(3 * CHUNK as u32 + 5) {
            assert!(q.send(HostEvent::ThreadName { tid: i, name: format!("thread {i}") }));
        }
        assert_eq!(q.drain().len(), 3 * CHUNK + 5);
        for i in 0..(2 * CHUNK as u32) {
            q.send(HostEvent::ThreadName { tid: i, name: "left".into() });
        }
        drop(q);
    }

    #[test]
    fn a_thread_writes_again_into_the_chunks_drained_and_reads_back_what_it_wrote() {
        let q = ThreadQueue::new();
        let first = q.tail.chunk.get();
        let mut out = Vec::new();
        for round in 0..4u64 {
            for i in 0..(2 * CHUNK as u64) {
                // SAFETY: this thread is the queue's only producer.
                assert!(unsafe { q.push(pop(round * 1000 + i, i), usize::MAX) });
            }
            out.clear();
            q.take(&mut out);
            let want: Vec<u64> = (0..2 * CHUNK as u64).map(|i| round * 1000 + i).collect();
            let got: Vec<u64> =
                out.iter().map(|(_, e)| if let HostEvent::Pop { ts, .. } = e { *ts } else { 0 }).collect();
            assert_eq!(got, want, "round {round}");
        }
        let spare: Vec<*mut Chunk> = q.spare.lock().unwrap().clone();
        assert!(!spare.is_empty() && spare.len() <= 2, "drained chunks kept for reuse: {}", spare.len());
        assert!(spare.contains(&first) || q.tail.chunk.get() == first, "the first chunk went round again");
    }

    #[test]
    fn range_times_read_from_the_cpu_s_counter_come_out_in_the_session_s_clock() {
        let start = std::time::Instant::now();
        let ns = move || start.elapsed().as_nanos() as u64 + 5_000_000;
        let q = HostQueues::timed(105, 100, Anchors::new(Box::new(ns)));
        let before = ns();
        q.send(pop(if q.counter() { super::super::clock::ticks() } else { ns() }, 1));
        let after = ns();
        let ts = match q.drain()[..] {
            [HostEvent::Pop { ts, .. }] => ts,
            ref other => panic!("{other:?}"),
        };
        assert!(before <= ts + 1_000 && ts <= after + 1_000, "{before} <= {ts} <= {after}");
    }

    #[test]
    fn range_times_across_drains_keep_their_order() {
        let start = std::time::Instant::now();
        let ns = move || start.elapsed().as_nanos() as u64 + 5_000_000;
        let q = HostQueues::timed(106, 10_000, Anchors::new(Box::new(ns)));
        let mut times = Vec::new();
        for round in 0..20u64 {
            for i in 0..50 {
                q.send(pop(if q.counter() { super::super::clock::ticks() } else { ns() }, round * 50 + i));
            }
            times.extend(q.drain().iter().map(|e| match e {
                HostEvent::Pop { ts, .. } => *ts,
                _ => 0,
            }));
        }
        assert_eq!(times.len(), 1000);
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "a thread's times never step back from one drain to the next");
    }

    #[test]
    fn an_event_sent_while_the_thread_s_locals_are_torn_down_still_arrives() {
        struct SendsWhenDropped(Arc<HostQueues>);
        impl Drop for SendsWhenDropped {
            fn drop(&mut self) {
                assert!(self.0.send(pop(9, 9)));
            }
        }
        thread_local! {
            static LATE: RefCell<Option<SendsWhenDropped>> = const { RefCell::new(None) };
        }
        let q = Arc::new(HostQueues::new(107, 100));
        let mine = q.clone();
        std::thread::spawn(move || {
            mine.send(pop(1, 1));
            LATE.with(|l| *l.borrow_mut() = Some(SendsWhenDropped(mine)));
        })
        .join()
        .unwrap();
        assert_eq!(q.drain().len(), 2, "the event sent from a thread-local's destructor too");
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
