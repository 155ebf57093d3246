//! Launches counted between trace windows, per thread and NVTX range
//! instance.
//!
//! With kernel records off a launch has no record to join: it only counts
//! for the ranges open at it. One host event per launch cost ~2 us each on
//! the launch-bound PyTorch loop (1.09x of plain steps against 1.02x
//! without it), so each thread keeps a running count for its
//! current path instead, and sends it only when the path changes and when
//! the decoder collects every thread's count (every second, at a snapshot
//! and at the session's end). Counts go to paths, not range
//! instances: one sent late, after its instance closed, still lands on the
//! right ranges.

use crate::model::event::HostEvent;
use crate::model::path::PathId;
use std::sync::{Arc, Mutex};

/// One thread's running count. Locked by its thread at each launch and
/// range event, and by the decoder when it collects (once a second):
/// uncontended otherwise.
#[derive(Default)]
struct Tally(Mutex<Count>);

#[derive(Default, Clone, Copy)]
struct Count {
    /// The session counting ([`super::Collection::id`]).
    session: u64,
    path: PathId,
    /// The range instance the launches were made in.
    instance: u64,
    launches: u64,
    /// Of which CUDA graph launches.
    graphs: u64,
    /// When the first of them was made, ns.
    since: u64,
}

impl Count {
    fn event(&self, end: u64) -> HostEvent {
        let (path, instance, launches, graphs) = (self.path, self.instance, self.launches, self.graphs);
        HostEvent::UntracedLaunches { path, instance, launches, graphs, start: self.since, end }
    }
}

impl Tally {
    fn lock(&self) -> std::sync::MutexGuard<'_, Count> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the count of `session` (none of another), sent at `end`.
    fn take(&self, session: u64, end: u64) -> Option<HostEvent> {
        let mut c = self.lock();
        if c.session != session || c.launches == 0 {
            return None;
        }
        let e = c.event(end);
        (c.launches, c.graphs) = (0, 0);
        Some(e)
    }
}

/// Every thread's tally that counted since the last collection: ended
/// threads' go at the next one, which the decoder makes every second.
static THREADS: Mutex<Vec<Arc<Tally>>> = Mutex::new(Vec::new());

thread_local! {
    static LOCAL: Arc<Tally> = {
        let t = Arc::new(Tally::default());
        THREADS.lock().unwrap_or_else(|e| e.into_inner()).push(t.clone());
        t
    };
}

/// Counts a launch made on this thread inside range `instance` (of
/// `path`) while `session` has records off; `send` gets the count of the
/// instance it leaves; `graph`: a CUDA graph launch. `now` (CUPTI's
/// clock) is read only when a count begins or is sent, not per launch.
pub(super) fn count(
    session: u64,
    path: PathId,
    instance: u64,
    graph: bool,
    now: impl Fn() -> u64,
    send: impl FnOnce(HostEvent),
) {
    let sent = LOCAL.try_with(|t| {
        let mut c = t.lock();
        if c.session == session && c.instance == instance && c.path == path && c.launches > 0 {
            c.launches += 1;
            c.graphs += graph as u64;
            return None;
        }
        // A new count: this instance's first launch since its last send,
        // or one left from an ended session (after its last collection),
        // which is not this one's.
        let t = now();
        let done = (c.session == session && c.launches > 0).then(|| c.event(t));
        *c = Count { session, path, instance, launches: 1, graphs: graph as u64, since: t };
        done
    });
    match sent {
        Ok(Some(e)) => send(e),
        Ok(None) => {}
        // The thread is ending (its tally already gone): counted alone.
        Err(_) => {
            let t = now();
            send(HostEvent::UntracedLaunches { path, instance, launches: 1, graphs: graph as u64, start: t, end: t })
        }
    }
}

/// Sends this thread's count for `session` at `end`, before a range event
/// of the thread's: its launches then land on the instance they were made
/// in, still open.
pub(super) fn flush(session: u64, end: u64, send: impl FnOnce(HostEvent)) {
    if let Ok(Some(e)) = LOCAL.try_with(|t| t.take(session, end)) {
        send(e);
    }
}

/// Sends every thread's count for `session` so far, and forgets ended
/// threads (the decoder: every second, and before it reads the host queue
/// for a snapshot or the session's end).
pub(crate) fn collect(session: u64, end: u64, mut send: impl FnMut(HostEvent)) {
    let taken: Vec<HostEvent> = {
        let mut threads = THREADS.lock().unwrap_or_else(|e| e.into_inner());
        let taken = threads.iter().filter_map(|t| t.take(session, end)).collect();
        threads.retain(|t| Arc::strong_count(t) > 1);
        taken
    };
    for e in taken {
        send(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(events: &[HostEvent]) -> Vec<(PathId, u64)> {
        events
            .iter()
            .map(|e| match e {
                HostEvent::UntracedLaunches { path, launches, .. } => (*path, *launches),
                e => panic!("{e:?}"),
            })
            .collect()
    }

    fn collected(session: u64) -> Vec<(PathId, u64)> {
        let mut got = Vec::new();
        collect(session, 0, |e| got.push(e));
        let mut c = counts(&got);
        c.sort_unstable();
        c
    }

    // One test: the registry is the process's, and its size is checked.
    #[test]
    fn launches_are_counted_per_thread_and_path_and_sent_on_change_or_collection() {
        const S: u64 = 1 << 40;
        let mut sent = Vec::new();
        for path in [7, 7, 7, 8, 7, 7] {
            count(S, path, path as u64 + 100, false, || 0, |e| sent.push(e));
        }
        // Sent when the path changed: 3 in 7, then 1 in 8.
        assert_eq!(counts(&sent), [(7, 3), (8, 1)]);
        // The rest at collection, once; another session's collection takes
        // nothing of this one's.
        assert_eq!(collected(S + 1), []);
        assert_eq!(collected(S), [(7, 2)]);
        assert_eq!(collected(S), []);
        // A count left from an ended session is not carried into the next.
        count(S, 9, 1, false, || 0, |_| panic!("nothing to send"));
        count(S + 2, 9, 1, false, || 0, |_| panic!("the old count is dropped, not sent"));
        assert_eq!(collected(S + 2), [(9, 1)]);

        // Threads count apart; ended threads' counts come at the next
        // collection, and their tallies go with it.
        let before = THREADS.lock().unwrap().len();
        let threads: Vec<_> = (0..4u32)
            .map(|k| {
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        count(S + 3, 100 + k, 7, false, || 0, |_| panic!("one path per thread"));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(THREADS.lock().unwrap().len(), before + 4);
        assert_eq!(collected(S + 3), [(100, 1000), (101, 1000), (102, 1000), (103, 1000)]);
        assert_eq!(THREADS.lock().unwrap().len(), before, "ended threads' tallies are forgotten");
        // Instances of one path count apart, and a range event flushes the
        // count of the instance still open.
        // The clock is read when a count begins and when it is sent.
        let mut sent = Vec::new();
        let clock = std::cell::Cell::new(100);
        let now = || {
            clock.set(clock.get() + 10);
            clock.get()
        };
        for (instance, graph) in [(1, true), (1, false), (2, false)] {
            count(S + 4, 7, instance, graph, now, |e| sent.push(e));
        }
        flush(S + 4, 500, |e| sent.push(e));
        flush(S + 4, 600, |_| panic!("nothing left"));
        let by_instance: Vec<(u64, u64, u64, u64, u64)> = sent
            .iter()
            .map(|e| match e {
                HostEvent::UntracedLaunches { instance, launches, graphs, start, end, .. } => {
                    (*instance, *launches, *graphs, *start, *end)
                }
                e => panic!("{e:?}"),
            })
            .collect();
        assert_eq!(by_instance, [(1, 2, 1, 110, 120), (2, 1, 0, 120, 500)], "two clock reads, not one per launch");
    }
}
