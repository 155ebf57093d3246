//! What an NVTX push+pop costs the thread that makes it under gpuscope, on
//! one thread and on several at once: with no session (gpuscope keeps the
//! thread's range stack only) and, where a GPU is present, inside a trace
//! session (the stack, the range's events to the decoder).
//!
//! Each thread opens a `step` range, then pushes and pops `layer` PAIRS
//! times; a thread's cost is its time over PAIRS. The median thread of
//! the median of ROUNDS rounds is printed, one line per configuration.
//!
//!     cargo run --release --example nvtx_cost [PAIRS] [THREADS...]
//!
//! Defaults: 200000 pairs, 1 and 8 threads.
//!
//! Each configuration runs with `&str` messages (the Rust emitter copies
//! them to add a NUL) and with C strings (`push_c`, as C, C++ and Python
//! callers pass them), and prints the page faults the threads took per
//! 1000 pairs (in a session, events the decoder has not folded yet wait
//! in memory; it folds ~5M range events a second, and a thread sending
//! back to back sends more). Then paced: C-string pairs each followed by
//! ~2 us of work, against the work alone in interleaved rounds (a quarter
//! of PAIRS each): the cost where the decoder keeps up.
//!
//! In a session it also times, alone on one thread, the parts an event
//! is made of: CUPTI's timestamp (the time of every event but NVTX's where
//! the CPU's counter can be used), the system clocks, a pair of
//! sequentially consistent counter updates (a hold of the session), for
//! comparison a push into a lock-free multi-producer queue (what each
//! event cost before a thread's events went into a queue of its own), and
//! the session's own part of an event (held, timed and queued, without
//! the NVTX call or the range stack); then how long stop took (the
//! decoder's backlog).

use std::sync::Barrier;
use std::time::Instant;

const ROUNDS: usize = 5;

/// Work between pairs in paced rounds, ns: a thread then sends ~1M range
/// events a second, which the decoder folds as they come (~5M a second).
const PACE_NS: f64 = 2_000.0;

/// The calling thread's minor page faults so far.
fn faults() -> i64 {
    // SAFETY: a zeroed rusage is a valid out value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD with a valid out pointer.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    u.ru_minflt
}

/// What a benchmark thread does per pair.
#[derive(Clone, Copy, PartialEq)]
enum Pair {
    /// `push("layer")` and its pop: Rust's `&str`, which the emitter
    /// copies to add a NUL.
    Str,
    /// `push_c(c"layer")` and its pop: a C string, as C, C++ and Python
    /// callers pass it.
    C,
    /// No NVTX call (the work alone, for paced rounds).
    Bare,
}

/// Iterations of [`work`] between pairs in paced rounds (0: back to back).
fn work(n: u64) {
    let mut x = 1u64;
    for i in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x);
}

/// ns per pair and page faults per 1000 pairs on each of `threads`
/// threads started together, each pair followed by `spin` iterations of
/// [`work`].
fn per_pair(threads: usize, pairs: usize, kind: Pair, spin: u64) -> Vec<(f64, f64)> {
    let layer = move || match kind {
        Pair::Str => Some(gpuscope::nvtx::push("layer")),
        Pair::C => Some(gpuscope::nvtx::push_c(c"layer")),
        Pair::Bare => None,
    };
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    // Warm: the thread's stack and the paths exist.
                    for _ in 0..1000 {
                        drop(layer());
                    }
                    barrier.wait();
                    let f0 = faults();
                    let t0 = Instant::now();
                    let step = gpuscope::nvtx::push("step");
                    for _ in 0..pairs {
                        drop(layer());
                        work(spin);
                    }
                    drop(step);
                    let ns = t0.elapsed().as_nanos() as f64 / pairs as f64;
                    (ns, (faults() - f0) as f64 * 1000.0 / pairs as f64)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a benchmark thread panicked")).collect()
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// The median thread's ns per pair and faults per 1000 pairs, median of
/// [`ROUNDS`] rounds (and the rounds' range).
fn rounds(threads: usize, pairs: usize, kind: Pair, spin: u64) -> (f64, f64, f64, f64) {
    let mut faults = Vec::new();
    let ns: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let r = per_pair(threads, pairs, kind, spin);
            faults.push(median(r.iter().map(|x| x.1).collect()));
            median(r.iter().map(|x| x.0).collect())
        })
        .collect();
    let (lo, hi) = ns.iter().fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    (median(ns), lo, hi, median(faults))
}

fn run(label: &str, threads: &[usize], pairs: usize, spin: u64) {
    for &t in threads {
        for (kind, name) in [(Pair::Str, ""), (Pair::C, ", C string")] {
            let (ns, lo, hi, faults) = rounds(t, pairs, kind, 0);
            println!(
                "{:<20} {t:>2} threads: {ns:7.1} ns per push+pop (rounds {lo:.1}-{hi:.1}), page faults per 1000 pairs {faults:.1}",
                format!("{label}{name}")
            );
        }
        // Paced: the pairs spread out by work, as in a program, so that
        // the decoder keeps up; the cost is the time over the work alone,
        // their rounds interleaved.
        let (mut with, mut bare, mut faults) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let (ns, _, _, f) = rounds(t, pairs / 4, Pair::C, spin);
            with.push(ns);
            faults.push(f);
            bare.push(rounds(t, pairs / 4, Pair::Bare, spin).0);
        }
        let diffs: Vec<f64> = with.iter().zip(&bare).map(|(w, b)| w - b).collect();
        let (lo, hi) = diffs.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        println!(
            "{:<20} {t:>2} threads: {:7.1} ns per push+pop over {:.0} ns of work a pair (rounds {lo:.1}-{hi:.1}), page faults per 1000 pairs {:.1}",
            format!("{label}, paced"),
            median(diffs),
            median(bare),
            median(faults)
        );
    }
}

/// Iterations of [`work`] that take about `ns`.
fn spin_for(ns: f64) -> u64 {
    let n = 1_000_000;
    let t0 = Instant::now();
    work(n);
    (ns * n as f64 / t0.elapsed().as_nanos().max(1) as f64) as u64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let pairs: usize = args.next().map_or(200_000, |a| a.parse().expect("PAIRS: a positive number"));
    let mut threads: Vec<usize> = args.map(|a| a.parse().expect("THREADS: positive numbers")).collect();
    if threads.is_empty() {
        threads = vec![1, 8];
    }
    println!("{} CPUs; {pairs} pairs a thread, median of {ROUNDS} rounds", num_cpus());
    if !gpuscope::testing::route_nvtx() {
        eprintln!("NVTX could not be attached to gpuscope: nothing to measure");
        std::process::exit(1);
    }
    let spin = spin_for(PACE_NS);
    run("no session", &threads, pairs, spin);
    if !gpuscope::driver_present() {
        println!("session: no NVIDIA driver here, not measured");
        parts();
        return;
    }
    // Room for every event a thread sends (both kinds of message, every
    // round, and the parts on this one), none drained: a drop would make
    // the rest cheaper.
    let most = 2 * ROUNDS * (2 * pairs + 2 * 1000 + 2) * 2 + 10 * PART_EVENTS + 4096;
    let session = match gpuscope::Profiler::new().host_queue(most.next_power_of_two()).quiet(true).start() {
        Ok(s) => s,
        Err(e) => {
            println!("session: not started ({e}), not measured");
            return;
        }
    };
    run("session", &threads, pairs, spin);
    parts();
    let t0 = Instant::now();
    match session.stop() {
        Ok(r) => println!(
            "session: {} host events dropped; stop took {:.0} ms (the decoder's backlog)",
            r.drops.host_events,
            t0.elapsed().as_secs_f64() * 1e3
        ),
        Err(e) => println!("session: stop failed: {e}"),
    }
}

/// Range events the session's part is timed over, a round.
const PART_EVENTS: usize = 200_000;

/// ns per call of `f`, best of 5 rounds of `n` calls.
fn per_call(n: usize, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t0 = Instant::now();
            for _ in 0..n {
                f();
            }
            t0.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::MAX, f64::min)
}

/// The parts of an event's cost, each alone on this thread.
fn parts() {
    use std::hint::black_box;
    use std::sync::atomic::{AtomicUsize, Ordering};
    const N: usize = 1_000_000;
    let clock = |id: libc::clockid_t| {
        per_call(N, || {
            let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: a valid clock id and a local out value.
            unsafe { libc::clock_gettime(id, &mut t) };
            black_box(t);
        })
    };
    let cupti = cupti_sys::load_cupti().ok();
    let timestamp = cupti.as_ref().and_then(|c| c.cuptiGetTimestamp.as_ref().ok()).map(|&f| {
        per_call(N, || {
            let mut t = 0u64;
            // SAFETY: a valid out pointer; CUPTI is loaded (the session's).
            unsafe { f(&mut t) };
            black_box(t);
        })
    });
    let counter = AtomicUsize::new(0);
    let hold = per_call(N, || {
        counter.fetch_add(1, Ordering::SeqCst);
        counter.fetch_sub(1, Ordering::SeqCst);
    });
    let queue = crossbeam_queue::SegQueue::<[u64; 6]>::new();
    let push = per_call(N, || queue.push(black_box([1; 6])));
    println!(
        "parts, ns a call: CUPTI timestamp {}, CLOCK_MONOTONIC_RAW {:.1}, CLOCK_MONOTONIC {:.1}, \
         SeqCst add+sub {hold:.1}, multi-producer queue push {push:.1}",
        timestamp.map_or("-".to_string(), |t| format!("{t:.1}")),
        clock(libc::CLOCK_MONOTONIC_RAW),
        clock(libc::CLOCK_MONOTONIC),
    );
    // The session's own part of an event: held, timed and queued, without
    // the NVTX call or the range stack (best of 5 rounds).
    if let Some(ns) = (0..5).filter_map(|_| gpuscope::testing::range_event_cost(PART_EVENTS)).reduce(f64::min) {
        println!("parts, ns a call: a range event into the session {ns:.1}");
    }
    let best = (0..5)
        .filter_map(|_| gpuscope::testing::range_event_parts(PART_EVENTS))
        .reduce(|a, b| ([a.0[0].min(b.0[0]), a.0[1].min(b.0[1]), a.0[2].min(b.0[2])], a.1));
    if let Some(([hold, clock, send], light)) = best {
        println!(
            "parts, ns a call: a hold {hold:.1} ({}), the range clock {clock:.1}, a queued event {send:.1}",
            if light { "plain stores, membarrier at stop" } else { "read-modify-writes" }
        );
    }
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
