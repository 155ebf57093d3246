//! Launches counted between trace windows, per thread and NVTX range
//! instance.
//!
//! With kernel records off a launch has no record to join: it only counts
//! for the ranges open at it. One host event per launch cost ~2 us each on
//! the launch-bound PyTorch loop (1.09x of plain steps against 1.02x
//! without it), so each thread keeps a running count for its
//! current path instead, and sends it only when the path changes and when
//! the decoder collects every thread's count (every 10 ms, at a snapshot
//! and at the session's end). Counts go to paths, not range
//! instances: one sent late, after its instance closed, still lands on the
//! right ranges. Each launch is also logged (its time and function), and
//! the log sent in batches: the steps a program repeats are found in it
//! (`report::steps`).

use crate::model::event::HostEvent;
use crate::model::path::PathId;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Launches a thread logs (time and function) before it sends them: one
/// host event per this many launches. The decoder keeps the last ones
/// (`aggregate::KERNEL_STREAM`) to find the steps the program repeats
/// without kernel records (`report::steps`).
pub(super) const LOG_BATCH: usize = 256;

struct Tally {
    /// The thread's lane in the launch log (its order of first launch).
    lane: u32,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    count: Count,
    /// The session the log is of, and its launches not sent yet: (time,
    /// the launched function's handle).
    log_session: u64,
    log: Vec<(u64, u64)>,
}

#[derive(Default, Clone, Copy)]
struct Count {
    session: u64,
    path: PathId,
    instance: u64,
    launches: u64,
    graphs: u64,
    since: u64,
}

impl Count {
    fn event(&self, end: u64) -> HostEvent {
        let (path, instance, launches, graphs) = (self.path, self.instance, self.launches, self.graphs);
        HostEvent::UntracedLaunches { path, instance, launches, graphs, start: self.since, end }
    }
}

impl Tally {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The count of `session` so far, and its log when `log` is set.
    fn take(&self, session: u64, end: u64, log: bool) -> [Option<HostEvent>; 2] {
        let mut st = self.lock();
        // Copied out on the decoder's side: the thread keeps its buffer, so
        // its next launch allocates nothing.
        let entries = (log && st.log_session == session && !st.log.is_empty()).then(|| st.log.drain(..).collect());
        let logged = entries.map(|entries| HostEvent::LaunchLog { lane: self.lane, entries });
        let c = &mut st.count;
        if c.session != session || c.launches == 0 {
            return [logged, None];
        }
        let e = c.event(end);
        (c.launches, c.graphs) = (0, 0);
        [logged, Some(e)]
    }
}

static THREADS: Mutex<Vec<Arc<Tally>>> = Mutex::new(Vec::new());
static LANES: AtomicU32 = AtomicU32::new(0);

thread_local! {
    static LOCAL: Arc<Tally> = {
        let t = Arc::new(Tally { lane: LANES.fetch_add(1, Ordering::Relaxed), state: Mutex::default() });
        THREADS.lock().unwrap_or_else(|e| e.into_inner()).push(t.clone());
        t
    };
}

/// Counts a launch of `function` (its handle; 0: unknown) by this thread
/// inside `path` (its innermost open range `instance`) for `session`, and
/// logs it at `now()`. Sends the thread's previous count when the range
/// changed, and its log every [`LOG_BATCH`] launches.
pub(super) fn count(
    session: u64,
    path: PathId,
    instance: u64,
    graph: bool,
    function: u64,
    now: impl Fn() -> u64,
    mut send: impl FnMut(HostEvent),
) {
    let sent = LOCAL.try_with(|t| {
        let mut st = t.lock();
        let ts = now();
        if st.log_session != session {
            st.log.clear();
            st.log_session = session;
        }
        if st.log.capacity() == 0 {
            st.log.reserve_exact(LOG_BATCH);
        }
        st.log.push((ts, function));
        let full = st.log.len() >= LOG_BATCH;
        let logged = full.then(|| HostEvent::LaunchLog { lane: t.lane, entries: std::mem::take(&mut st.log) });
        let c = &mut st.count;
        if c.session == session && c.instance == instance && c.path == path && c.launches > 0 {
            c.launches += 1;
            c.graphs += graph as u64;
            return [logged, None];
        }
        let done = (c.session == session && c.launches > 0).then(|| c.event(ts));
        *c = Count { session, path, instance, launches: 1, graphs: graph as u64, since: ts };
        [done, logged]
    });
    match sent {
        Ok(events) => events.into_iter().flatten().for_each(&mut send),
        Err(_) => {
            let t = now();
            send(HostEvent::UntracedLaunches { path, instance, launches: 1, graphs: graph as u64, start: t, end: t })
        }
    }
}

/// Sends the calling thread's count for `session` (before its range event:
/// the launches so far were made inside the range still open).
pub(super) fn flush(session: u64, end: u64, send: impl FnMut(HostEvent)) {
    if let Ok(events) = LOCAL.try_with(|t| t.take(session, end, false)) {
        events.into_iter().flatten().for_each(send);
    }
}

/// Sends every thread's count and log for `session` so far, and forgets
/// ended threads (the decoder: every 10 ms, and before it reads the host
/// queue for a snapshot or the session's end).
pub(crate) fn collect(session: u64, end: u64, send: impl FnMut(HostEvent)) {
    let taken: Vec<HostEvent> = {
        let mut threads = THREADS.lock().unwrap_or_else(|e| e.into_inner());
        let taken = threads.iter().flat_map(|t| t.take(session, end, true)).flatten().collect();
        threads.retain(|t| Arc::strong_count(t) > 1);
        taken
    };
    taken.into_iter().for_each(send);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(events: &[HostEvent]) -> Vec<(PathId, u64)> {
        events
            .iter()
            .filter_map(|e| match e {
                HostEvent::UntracedLaunches { path, launches, .. } => Some((*path, *launches)),
                HostEvent::LaunchLog { .. } => None,
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
            count(S, path, path as u64 + 100, false, 0, || 0, |e| sent.push(e));
        }
        // Sent when the path changed: 3 in 7, then 1 in 8.
        assert_eq!(counts(&sent), [(7, 3), (8, 1)]);
        // The rest at collection, once; another session's collection takes
        // nothing of this one's.
        assert_eq!(collected(S + 1), []);
        assert_eq!(collected(S), [(7, 2)]);
        assert_eq!(collected(S), []);
        // A count left from an ended session is not carried into the next.
        count(S, 9, 1, false, 0, || 0, |_| panic!("nothing to send"));
        count(S + 2, 9, 1, false, 0, || 0, |_| panic!("the old count is dropped, not sent"));
        assert_eq!(collected(S + 2), [(9, 1)]);

        // Threads count apart; ended threads' counts come at the next
        // collection, and their tallies go with it.
        let before = THREADS.lock().unwrap().len();
        let threads: Vec<_> = (0..4u32)
            .map(|k| {
                std::thread::spawn(move || {
                    let mut logs = 0;
                    for _ in 0..1000 {
                        count(
                            S + 3,
                            100 + k,
                            7,
                            false,
                            0,
                            || 0,
                            |e| match e {
                                HostEvent::LaunchLog { entries, .. } => logs += entries.len(),
                                e => panic!("one path per thread: {e:?}"),
                            },
                        );
                    }
                    assert_eq!(logs, 1000 / LOG_BATCH * LOG_BATCH, "the log sent in whole batches");
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
        // The clock is read once a launch (the log's time).
        let mut sent = Vec::new();
        let clock = std::cell::Cell::new(100);
        let now = || {
            clock.set(clock.get() + 10);
            clock.get()
        };
        for (instance, graph) in [(1, true), (1, false), (2, false)] {
            count(S + 4, 7, instance, graph, 40 + instance, now, |e| sent.push(e));
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
        assert_eq!(by_instance, [(1, 2, 1, 110, 130), (2, 1, 0, 130, 500)]);
        // The log: every launch with its time and function, sent at
        // collection with the thread's lane.
        let mut logged = Vec::new();
        collect(S + 4, 700, |e| logged.push(e));
        match &logged[..] {
            [HostEvent::LaunchLog { lane, entries }] => {
                assert_eq!(entries, &[(110, 41), (120, 41), (130, 42)]);
                assert_eq!(*lane, LOCAL.with(|t| t.lane));
            }
            e => panic!("{e:?}"),
        }
    }
}
