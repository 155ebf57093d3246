//! How fast gpuscope's decoder thread folds a launch-heavy load: the shape
//! of `tests/stress.rs` (64 threads, each pushing a `batch` range with 10
//! empty `tick` ranges and 50 launches in it), replayed on the CPU as host
//! events and CUPTI 13 kernel records in ~4 MB buffers. Prints host events
//! and records per second. If records come in faster than this (the stress
//! test launches ~577k kernels/s on the H100), CUPTI runs out of buffers
//! and drops them.
//!
//!     cargo run --release -p gpuscope --example decoder_throughput
//!
//! `BATCHES` (per thread, default 300; 3125 is the stress test's 10 M
//! launches) sizes it; `KEEP_EVERY=N` keeps one kernel record in N (the
//! rest are lost, as when CUPTI drops them); `LAG=N` decodes each buffer
//! only once N more have been filled (a decoder running N buffers behind
//! its host events, ~19,000 records each); `STEP_NS` sets the time between
//! launches (default 30; the stress test's pace on the H200 is ~1,800);
//! `DEVICES=N` spreads the
//! threads over N GPUs (each GPU then gets its own idle timeline); RSS is
//! printed at each tenth.
//!
//! Then NVTX ranges alone (`RANGES`, default 2,000,000 push+pops inside
//! one `step`, no kernel): nothing decides their time, so up to 100,000
//! are held at once, and a thread in `nvtx_cost` sends ~10M events a
//! second.

#[path = "../tests/rss/mod.rs"]
mod rss;
use rss::rss_mb;
#[path = "../tests/records/mod.rs"]
mod records;
use gpuscope::testing::{HostEvent, Replay};
use records::*;

fn main() {
    let env = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let devices = env("DEVICES", 1).clamp(1, 64) as u32;
    let mut rp = Replay::new(
        (0..devices)
            .map(|id| {
                let mut d = h200();
                d.id = id;
                d
            })
            .collect(),
        0,
    );
    let stress = rp.path(&["stress"]);
    let batch = rp.path(&["stress", "batch"]);
    let tick = rp.path(&["stress", "batch", "tick"]);
    let threads = 64u64;
    let batches = env("BATCHES", 300); // per thread
    let keep_every = env("KEEP_EVERY", 1).max(1);
    let lag = env("LAG", 0) as usize;
    let step_ns = env("STEP_NS", 30);
    let mut lagging: std::collections::VecDeque<Vec<u8>> = std::collections::VecDeque::new();
    let mut inst = 1u64;
    let mut corr = 1u32;
    let mut ts = 1_000u64;
    let mut buf: Vec<u8> = Vec::new();
    let mut nrec = 0;
    let mut hev = 0u64;
    let t0 = std::time::Instant::now();
    let mut t_host = std::time::Duration::ZERO;
    let mut t_buf = std::time::Duration::ZERO;
    let roots: Vec<u64> = (0..threads)
        .map(|t| {
            let i = inst;
            inst += 1;
            let h = std::time::Instant::now();
            rp.host_event(HostEvent::Push { instance: i, parent: 0, path: stress, tid: t as u32, ts });
            t_host += h.elapsed();
            i
        })
        .collect();
    for b in 0..batches {
        if b % (batches / 10).max(1) == 0 {
            println!("decoder: {:>3}% of the batches, RSS {:.0} MB", b * 100 / batches, rss_mb());
        }
        for t in 0..threads {
            let bi = inst;
            inst += 1;
            let mut evs =
                vec![HostEvent::Push { instance: bi, parent: roots[t as usize], path: batch, tid: t as u32, ts }];
            for _ in 0..10 {
                let ti = inst;
                inst += 1;
                evs.push(HostEvent::Push { instance: ti, parent: bi, path: tick, tid: t as u32, ts });
                ts += 10;
                evs.push(HostEvent::Pop { instance: ti, ts });
            }
            for _ in 0..50 {
                evs.push(HostEvent::launch(corr, t as u32, batch, bi, ts));
                if u64::from(corr) % keep_every == 0 {
                    nrec += 1;
                    let k = K {
                        name: c"tiny",
                        corr,
                        start: ts + 5_000,
                        end: ts + 7_000,
                        block: 32,
                        regs: 16,
                        dyn_smem: 0,
                        stream: t as u32 + 1,
                    };
                    buf.extend(kernel_on(&k, t as u32 % devices));
                }
                corr += 1;
                ts += step_ns;
            }
            evs.push(HostEvent::Pop { instance: bi, ts });
            hev += evs.len() as u64;
            let h = std::time::Instant::now();
            for e in evs {
                rp.host_event(e);
            }
            t_host += h.elapsed();
            if nrec >= 19_000 {
                lagging.push_back(std::mem::take(&mut buf));
                if lagging.len() > lag {
                    let b = lagging.pop_front().expect("one buffer at least");
                    let h = std::time::Instant::now();
                    rp.buffer(&b);
                    t_buf += h.elapsed();
                }
                nrec = 0;
            }
        }
    }
    lagging.push_back(buf);
    let h = std::time::Instant::now();
    for b in lagging {
        rp.buffer(&b);
    }
    t_buf += h.elapsed();
    let launches = threads * batches * 50;
    let el = t0.elapsed();
    println!("decoder: {launches} launches, {hev} host events in {:.2} s: host {:.2} s ({:.0} ev/s), buffers {:.2} s ({:.0} rec/s)", el.as_secs_f64(), t_host.as_secs_f64(), hev as f64 / t_host.as_secs_f64(), t_buf.as_secs_f64(), launches as f64 / t_buf.as_secs_f64());
    println!("decoder: RSS {:.0} MB before the report", rss_mb());
    let r = rp.finish(0, ts + 10_000);
    println!("decoder: {:?}", r.drops);
    ranges_alone(env("RANGES", 2_000_000));
}

/// Host events a second for push+pop pairs with no kernel.
fn ranges_alone(pairs: u64) {
    let mut rp = Replay::new(vec![h200()], 0);
    let step = rp.path(&["step"]);
    let layer = rp.path(&["step", "layer"]);
    let t0 = std::time::Instant::now();
    rp.host_event(HostEvent::Push { instance: 1, parent: 0, path: step, tid: 1, ts: 1_000 });
    for i in 0..pairs {
        let ts = 2_000 + i * 100;
        rp.host_event(HostEvent::Push { instance: i + 2, parent: 1, path: layer, tid: 1, ts });
        rp.host_event(HostEvent::Pop { instance: i + 2, ts: ts + 50 });
    }
    let el = t0.elapsed().as_secs_f64();
    println!(
        "decoder: {} range events alone (no kernel) in {el:.2} s: {:.0} ev/s, {:.0} ns an event",
        2 * pairs,
        2.0 * pairs as f64 / el,
        el * 1e9 / (2 * pairs) as f64
    );
    let r = rp.finish(0, 2_000 + pairs * 100);
    println!("decoder: {:?}", r.drops);
}
