//! The answer with periodic trace windows (sampling mode, kernel records on
//! for the first 100 ms of every second), from a loop folded by the
//! aggregator with its records switched on and off and its PM samples.

use crate::aggregate::devices::DeviceTable;
use crate::aggregate::{AggregateOptions, Aggregator};
use crate::analysis::analyze;
use crate::analysis::answer::{BUSY_SAMPLED, BUSY_TRACED};
use crate::decode::KernelActivity;
use crate::model::device::DeviceInfo;
use crate::model::event::HostEvent;
use crate::model::occupancy::SmLimits;
use crate::model::path::{paths, ROOT};
use crate::model::sampled::Sample;
use crate::report::Report;

const MS: u64 = 1_000_000;

/// A 1 ms sample with the engine busy `busy` % of it.
fn sample(t: u64, busy: f64) -> Sample {
    let eff = if busy > 0.0 { 60.0 } else { 0.0 };
    let cycles = 1_800_000.0 * eff / 100.0;
    let mut v = vec![eff, 50.0, cycles, 5e5, 5e5, 0.0];
    v.extend([10.0 * cycles / 100.0, busy * 18_000.0, 1_800_000.0, 4.0, 1.0]);
    Sample::from_values(0, t, t + MS, &v)
}

/// Kernel records on for the first `WINDOW` ms of every `PERIOD` ms.
const WINDOW: u64 = 100;
/// See `WINDOW`.
const PERIOD: u64 = 1000;

/// A sampling-mode aggregator with those trace windows.
fn windowed() -> Aggregator {
    let opts =
        AggregateOptions { sampling: true, trace_windows: Some((WINDOW * MS, PERIOD * MS)), ..Default::default() };
    Aggregator::new(opts, DeviceTable::fixed(vec![]))
}

/// The report of an 8 s session folded into `a`, with the launches logged
/// between windows (`log`: time, function) and the PM samples.
fn report(mut a: Aggregator, log: &[(u64, u64)], samples: &[Sample]) -> Report {
    for entries in log.chunks(256) {
        a.host_event(HostEvent::LaunchLog { lane: 1, entries: entries.to_vec() });
    }
    a.samples(samples);
    let mut r = Report::build(a.finish(8000 * MS), 0, 8000 * MS);
    r.devices = vec![DeviceInfo::new(0, "NVIDIA H100 80GB HBM3", 132, SmLimits::SM_90)];
    r
}

/// From 0.5 s to 8 s, steps of `step_ms`: `kernels` 1 ms kernels back to
/// back, then the host waits (for its data) the rest of the step; each
/// step in the range `range` if given. Kernel records on for the first
/// 100 ms of every second; launches counted between.
fn loader_loop(step_ms: u64, kernels: u64, range: Option<&str>) -> Report {
    loop_of(step_ms, kernels, range, Kernels { gap_ns: 20_000, engine_pct: 98.0 })
}

/// Each millisecond of a loop's kernels: a gap before the kernel, and the
/// engine's sampled activity over it.
#[derive(Clone, Copy)]
struct Kernels {
    gap_ns: u64,
    engine_pct: f64,
}

/// [`loader_loop`] with kernels `k`.
fn loop_of(step_ms: u64, kernels: u64, range: Option<&str>, k: Kernels) -> Report {
    let (window, period) = (WINDOW, PERIOD);
    let mut a = windowed();
    let traced = |ms: u64| ms % period < window;
    let mut on = true;
    let switch = |a: &mut Aggregator, on: &mut bool, ms: u64| {
        let now = traced(ms);
        if now != *on {
            a.tracing(now, (ms / period * period + if now { 0 } else { window }) * MS);
            *on = now;
        }
    };
    let path = range.map(|n| paths().intern(ROOT, 0, n));
    let (mut id, mut instance, mut samples, mut log) = (0u32, 0u64, Vec::new(), Vec::new());
    let mut t = 500u64;
    while t + step_ms <= 8000 {
        instance += 1;
        let (p, i) = path.map_or((ROOT, 0), |p| (p, instance));
        if path.is_some() {
            a.host_event(HostEvent::Push { instance, parent: 0, path: p, tid: 1, ts: t * MS + 1 });
        }
        for ms in t..t + step_ms {
            switch(&mut a, &mut on, ms);
            if ms < t + kernels {
                id += 1;
                if on {
                    a.host_event(HostEvent::launch(id, 1, p, i, ms * MS + 10_000));
                    a.kernel(&KernelActivity::sample(id, ms * MS + k.gap_ns, (ms + 1) * MS));
                } else {
                    let (start, end) = (ms * MS, (ms + 1) * MS);
                    a.host_event(HostEvent::UntracedLaunches {
                        path: p,
                        instance: i,
                        launches: 1,
                        graphs: 0,
                        start,
                        end,
                    });
                    // Logged as the launch callbacks log them between windows.
                    log.push((start, 0x7f00 + ms - t));
                }
            }
            samples.push(sample(ms * MS, if ms < t + kernels { k.engine_pct } else { 0.0 }));
        }
        if path.is_some() {
            a.host_event(HostEvent::Pop { instance, ts: (t + step_ms) * MS - 1 });
        }
        t += step_ms;
    }
    let mut all: Vec<Sample> = (0..500).map(|i| sample(i * MS, 0.0)).collect();
    all.extend(samples);
    report(a, &log, &all)
}

#[test]
fn a_loop_waiting_longer_than_a_window_is_answered_from_its_samples() {
    // 250 ms steps, 30 ms of kernels: busy 12%. The windows see the waits
    // cut at their edges, so classify little of the idle time in them.
    let r = loader_loop(250, 30, None);
    let an = analyze(&r);
    let a = an.answer.as_ref().expect("an answer");
    assert_eq!(a.busy_source, BUSY_SAMPLED, "{a:?}");
    assert!((a.gpu_busy_pct - 11.8).abs() < 2.0, "busy {}", a.gpu_busy_pct);
    // Steps from the launches logged between the windows, not the windows'
    // period the kernel stream repeats at; their median (launches in a
    // window are not logged: a step there merges with the next, so the
    // mean reads long).
    let f = a.found_steps.expect("steps found");
    assert!(f.from_launches && f.median_ns == 250 * MS && a.per_step_ns == 250 * MS, "{f:?}");
    assert_eq!(a.parts.iter().map(|p| p.what).collect::<Vec<_>>(), ["GPU idle", "GPU busy"], "{:?}", a.parts);
    let note = &a.notes[0];
    assert!(note.contains("too little to split it") && note.contains("trace windows longer than a step"), "{note}");
    // No session finding from the windows' idle time over the whole wall
    // time (a share ten times too small): the answer's action stands.
    assert!(an.findings.iter().all(|f| f.range.is_some() || f.kernel.is_some()), "{:?}", an.findings);
    assert!(r.to_table(140).contains("in the trace windows (gaps across a window's edge not classified)"));
    // The job of two such ranks counts the untraced idle time as the host's.
    let job = gpuscope_report::analysis::job::answer(&[("r0".into(), r.clone()), ("r1".into(), r.clone())])
        .expect("a job answer");
    assert!(job.ranks.len() == 2 && job.ranks.iter().all(|k| k.host_ns > k.compute_ns), "{:?}", job.ranks);
}

#[test]
fn steps_shorter_than_a_window_have_their_idle_time_split_as_in_the_windows() {
    // 20 ms steps, 17 ms of kernels: busy 83% by the samples (the engine
    // 98% of each kernel's millisecond); each window holds five steps and
    // classifies their 3 ms waits.
    let r = loader_loop(20, 17, None);
    let a = analyze(&r).answer.expect("an answer");
    assert_eq!(a.busy_source, BUSY_SAMPLED, "{a:?}");
    assert!((a.gpu_busy_pct - 83.3).abs() < 2.0, "busy {}", a.gpu_busy_pct);
    let host = a.parts.iter().find(|p| p.what == "host work").expect("the idle time split");
    // Most of it the waits (the rest the kernels' launch gaps).
    assert!(host.pct > 0.8 * (100.0 - a.gpu_busy_pct), "{:?}", a.parts);
    assert!(a.notes[0].contains("split by cause as in the traced time, scaled to the rest"), "{:?}", a.notes);
    // Busy over half the step (its kernels' latency bounds it), its host
    // work still an action, as trace mode gives it.
    assert_eq!(a.verdict.bound, crate::analysis::Bound::Latency, "{:?}", a.verdict);
    let act = a.actions.first().expect("the host work's action");
    assert!((act.saves_pct - host.pct).abs() < 0.5 && act.why.contains("the trace windows' split"), "{act:?}");
    // Without the engine's counter: the windows' idle time scaled to the
    // steady state, trace mode's answer.
    let mut blind = r.clone();
    if let Some(f) = blind.session_steady.as_mut().and_then(|s| s.sampled.as_mut()) {
        f.gpu_busy_pct = None;
    }
    let a = analyze(&blind).answer.expect("an answer");
    assert!(a.busy_source == BUSY_TRACED && (a.gpu_busy_pct - 85.0).abs() < 3.0, "{a:?}");
    assert!(a.notes.iter().any(|n| n.contains("kernel records only in trace windows") && n.contains("scaled")));
    // Windows that ended up covering the whole session: kernel records
    // answer, as in trace mode.
    let mut all = r.clone();
    if let Some(w) = all.sampling.as_mut().and_then(|m| m.trace_windows.as_mut()) {
        w.untraced_ns = 0;
    }
    assert_eq!(analyze(&all).answer.expect("an answer").busy_source, BUSY_TRACED);
}

#[test]
fn the_engine_s_activity_between_back_to_back_kernels_is_not_counted_busy() {
    // 20 ms steps, 17 ms of kernels, each millisecond 0.1 ms of gap and
    // 0.9 ms of kernel while the engine reads active 99% of it (it sets up
    // the next kernel in the gaps): the kernels' union is 76.5% of the
    // step, the engine's share 84%.
    let r = loop_of(20, 17, None, Kernels { gap_ns: 100_000, engine_pct: 99.0 });
    let w = r.session_steady.and_then(|s| s.windows).expect("the steady state's windows");
    // Over the samples whose gaps are all known: the windows' edges, where
    // the waits cross them, are left out, so more of it is kernels.
    assert!(w.traced_ns >= 300 * MS && w.engine_pct > 84.0 && w.engine_pct < 99.0, "{w:?}");
    let share = w.kernel_share().expect("enough traced");
    assert!((share - 0.9 / 0.99).abs() < 0.02, "{share} {w:?}");
    let a = analyze(&r).answer.expect("an answer");
    assert_eq!(a.busy_source, BUSY_SAMPLED, "{a:?}");
    assert!((a.gpu_busy_pct - 76.5).abs() < 2.0, "busy {} {a:?}", a.gpu_busy_pct);
    let busy = a.parts.iter().find(|p| p.what == "GPU busy").expect("busy");
    assert!((busy.pct - a.gpu_busy_pct).abs() < 0.01, "{:?}", a.parts);
    assert!(a.notes.iter().any(|n| n.contains("times the kernels' share of the engine's activity")), "{:?}", a.notes);
    // The engine's own share where no window fell in the steady state.
    let mut raw = r.clone();
    if let Some(s) = raw.session_steady.as_mut() {
        s.windows = None;
    }
    let a = analyze(&raw).answer.expect("an answer");
    assert!((a.gpu_busy_pct - 99.0 * 17.0 / 20.0).abs() < 2.0, "busy {}", a.gpu_busy_pct);
    assert!(a.notes.iter().all(|n| !n.contains("kernels' share of the engine")), "{:?}", a.notes);
    // Half a default window traced is needed.
    let mut short = w;
    short.traced_ns = 45 * MS;
    assert_eq!(short.kernel_share(), None);
    // An engine that read less than the kernels (sampling noise) is not
    // scaled up.
    let mut low = w;
    low.engine_pct = 50.0;
    assert_eq!(low.kernel_share(), Some(1.0));
}

#[test]
fn a_host_running_ahead_does_not_make_the_windows_kernels_read_low() {
    // A GPU-bound loop: 1 ms kernels every 1.1 ms (busy 90.9%), each
    // launched 20 ms before it runs, so a window opens on 20 ms of kernels
    // launched before it, without records, and closes with 20 ms of them
    // still to run. The engine reads 99%. Samples of 1 ms, half a
    // millisecond off the windows' edges, decoded 50 ms late, fed between
    // the windows' switches.
    const AHEAD: u64 = 20 * MS;
    let mut a = windowed();
    let traced = |t: u64| t % (PERIOD * MS) < WINDOW * MS;
    let (mut on, mut sent, mut samples) = (true, 0u64, Vec::new());
    let mut id = 0u32;
    let mut t = 500 * MS;
    while t + AHEAD < 8000 * MS {
        let launch = t - AHEAD;
        let now = traced(launch);
        if now != on {
            a.tracing(now, launch / (PERIOD * MS) * PERIOD * MS + if now { 0 } else { WINDOW * MS });
            on = now;
        }
        id += 1;
        if on {
            a.host_event(HostEvent::launch(id, 1, ROOT, 0, launch));
            a.kernel(&KernelActivity::sample(id, t, t + MS));
        } else {
            a.host_event(HostEvent::UntracedLaunches {
                path: ROOT,
                instance: 0,
                launches: 1,
                graphs: 0,
                start: launch,
                end: launch + 1,
            });
        }
        // The samples up to 50 ms ago.
        while sent + MS + 50 * MS <= launch {
            samples.push(sample(sent + MS / 2, if sent >= 500 * MS { 99.0 } else { 0.0 }));
            sent += MS;
        }
        if samples.len() >= 100 {
            a.samples(&samples);
            samples.clear();
        }
        t += 11 * MS / 10;
    }
    a.samples(&samples);
    let r = report(a, &[], &[]);
    let w = r.session_steady.and_then(|s| s.windows).expect("the steady state's windows");
    let share = w.kernel_share().expect("enough traced");
    assert!((share - (1.0 / 1.1) / 0.99).abs() < 0.01, "{share} {w:?}");
    let a = analyze(&r).answer.expect("an answer");
    assert!((a.gpu_busy_pct - 100.0 / 1.1).abs() < 2.5, "busy {} {a:?}", a.gpu_busy_pct);
}

#[test]
fn an_idle_gpu_is_judged_on_the_windows_split_of_its_idle_time() {
    // 20 ms steps, 8 ms of kernels: busy 39% by the samples, the waits in
    // the windows classified as the host's.
    let a = analyze(&loader_loop(20, 8, None)).answer.expect("an answer");
    assert!((a.gpu_busy_pct - 39.2).abs() < 2.0, "busy {}", a.gpu_busy_pct);
    let v = &a.verdict;
    assert_eq!(v.bound, crate::analysis::Bound::Host, "{v:?}");
    assert!(
        v.evidence.starts_with("GPU idle 61%: host") && v.evidence.contains("as the trace windows traced it"),
        "{v:?}"
    );
    // Its action says the same cause.
    let act = a.actions.first().expect("an action");
    assert!(act.why.contains("waiting for the host"), "{act:?}");
}

#[test]
fn xla_s_own_syncs_in_the_windows_split_are_no_action_and_say_why() {
    // The waits classified as syncs, made on XLA's threads (none on the
    // main one): no action to take them out, trace mode's note instead.
    let mut r = loader_loop(20, 8, None);
    r.kernels.clear();
    r.frameworks = vec!["jax".into()];
    r.memory.synchronizations = 1000;
    r.memory.synchronization_ns = 100 * MS;
    (r.memory.main_thread_synchronizations, r.memory.main_thread_synchronization_ns) = (Some(0), Some(0));
    if let Some(s) = r.session_steady.as_mut() {
        (s.idle.sync_ns, s.idle.host_ns) = (s.idle.host_ns, 0);
    }
    let a = analyze(&r).answer.expect("an answer");
    assert_eq!(a.verdict.bound, crate::analysis::Bound::Sync, "{:?}", a.verdict);
    assert!(a.actions.iter().all(|x| !x.advice.starts_with("Take host synchronisations")), "{:?}", a.actions);
    assert!(a.notes.iter().any(|n| n.contains("XLA's runtime's own")), "{:?}", a.notes);
}

#[test]
fn a_steady_state_between_two_windows_is_not_read_as_busy() {
    // The steady state from 3.2 to 3.9 s: no window in it, nothing
    // classified. From the samples; without the engine's counter, busy
    // unknown rather than the windows' idle time (none) over its wall time.
    let mut r = loader_loop(20, 17, None);
    if let Some(s) = r.session_steady.as_mut() {
        (s.start_ns, s.end_ns, s.idle) = (3200 * MS, 3900 * MS, Default::default());
    }
    let a = analyze(&r).answer.expect("an answer");
    assert_eq!(a.busy_source, BUSY_SAMPLED, "{a:?}");
    assert!(a.notes[0].contains("none of it in the steady state's idle time"), "{:?}", a.notes);
    if let Some(f) = r.session_steady.as_mut().and_then(|s| s.sampled.as_mut()) {
        f.gpu_busy_pct = None;
    }
    let a = analyze(&r).answer.expect("an answer");
    assert_eq!(a.busy_source, crate::analysis::answer::BUSY_UNKNOWN, "{a:?}");
}

#[test]
fn a_step_range_no_window_held_whole_says_so() {
    let r = loader_loop(250, 30, Some("windows-step"));
    let a = analyze(&r).answer.expect("an answer");
    assert_eq!((a.range.as_deref(), a.busy_source), (Some("windows-step"), BUSY_SAMPLED), "{a:?}");
    assert!((a.gpu_busy_pct - 11.8).abs() < 2.0, "busy {}", a.gpu_busy_pct);
    let note = &a.notes[0];
    assert!(note.contains("none of which held a whole call of the step"), "{note}");
}

/// From 0.5 s to 8 s, a loop the GPU paces: steps of five 1 ms kernels
/// back to back, the engine busy throughout. In the windows (the first
/// 100 ms of every second) the host launches each kernel as the GPU takes
/// it; between them it refills the queue first (its first 30 steps 2 ms
/// apart), then launches at the GPU's pace. `named`: the kernel records
/// carry the step's five names (else one name: they show no step).
fn gpu_paced_loop(named: bool) -> Report {
    const NAMES: [&std::ffi::CStr; 5] = [c"embed", c"attn", c"mlp", c"head", c"adam"];
    let (window, period) = (WINDOW, PERIOD);
    let mut a = windowed();
    let (mut id, mut log, mut samples) = (0u32, Vec::new(), Vec::new());
    a.tracing(true, 0);
    for second in 0..8u64 {
        let t0 = second * period;
        if second > 0 {
            a.tracing(true, t0 * MS);
        }
        for ms in t0.max(500)..t0 + window {
            id += 1;
            a.host_event(HostEvent::launch(id, 1, ROOT, 0, ms * MS + 5_000));
            let mut k = KernelActivity::sample(id, ms * MS + 10_000, (ms + 1) * MS);
            if named {
                k.name = NAMES[(ms % 5) as usize].as_ptr();
            }
            a.kernel(&k);
        }
        a.tracing(false, (t0 + window) * MS);
        let (mut t, mut step) = ((t0 + window) * MS, 0);
        while t < (t0 + period) * MS {
            if t >= 500 * MS {
                let each = if step < 30 { 400_000 } else { MS };
                for (k, _) in NAMES.iter().enumerate() {
                    log.push((t + k as u64 * each, 0x7f00 + k as u64));
                }
                a.host_event(HostEvent::UntracedLaunches {
                    path: ROOT,
                    instance: 0,
                    launches: 5,
                    graphs: 0,
                    start: t,
                    end: t + 5 * each,
                });
                t += 5 * each;
            } else {
                t += 5 * MS;
            }
            step += 1;
        }
        samples.extend((t0..t0 + period).map(|ms| sample(ms * MS, if ms >= 500 { 98.0 } else { 0.0 })));
    }
    report(a, &log, &samples)
}

#[test]
fn a_loop_the_gpu_paces_takes_its_steps_from_the_kernels_in_the_windows() {
    let r = gpu_paced_loop(true);
    let f = r.session_steady.and_then(|s| s.steps).expect("steps found");
    // Not the launches' 4.9 ms mean between windows (the refills).
    assert!(!f.from_launches && f.kernels_per_step == 5 && f.step_ns() == 5 * MS, "{f:?}");
    // Seven windows of 20 steps (the first from 0.5 s).
    assert!(f.steps_seen >= 7 * 18, "{f:?}");
    // The answer's step.
    let a = analyze(&r).answer.expect("an answer");
    assert_eq!(a.per_step_ns, 5 * MS, "{a:?}");
    // Kernel records that show no step: the launches', by their median
    // (the refills do not move it; their mean reads 4.9 ms).
    let f = gpu_paced_loop(false).session_steady.and_then(|s| s.steps).expect("steps found");
    assert!(f.from_launches && !f.by_mean() && f.step_ns() == 5 * MS, "{f:?}");
}

/// From 0.5 s to 8 s, steps of 316 ms the GPU runs back to back: an
/// embedding, 38 layers of 4 kernels and 5 more, each 2 ms, the host
/// launching each as the GPU takes it. A window holds a third of a step,
/// all layers: they repeat inside it.
fn long_step_loop() -> Report {
    const LAYER: [&std::ffi::CStr; 4] = [c"qkv", c"attn", c"proj", c"mlp"];
    const REST: [&std::ffi::CStr; 5] = [c"head", c"loss", c"adam_m", c"adam_v", c"adam_p"];
    let mut step: Vec<&std::ffi::CStr> = vec![c"embed"];
    step.extend(std::iter::repeat_n(LAYER, 38).flatten());
    step.extend(REST);
    let (window, period) = (WINDOW, PERIOD);
    let mut a = windowed();
    let traced = |ms: u64| ms % period < window;
    let (mut id, mut log, mut on) = (0u32, Vec::new(), true);
    a.tracing(true, 0);
    let mut t = 500;
    'run: loop {
        for (k, name) in step.iter().enumerate() {
            if t + 2 > 8000 {
                break 'run;
            }
            for ms in [t, t + 1] {
                if traced(ms) != on {
                    on = traced(ms);
                    a.tracing(on, ms * MS);
                }
            }
            id += 1;
            if traced(t) {
                a.host_event(HostEvent::launch(id, 1, ROOT, 0, t * MS));
                let mut r = KernelActivity::sample(id, t * MS + 10_000, (t + 2) * MS);
                r.name = name.as_ptr();
                a.kernel(&r);
            } else {
                // The launched function: one per kernel name.
                let function = step.iter().position(|n| n == name).unwrap_or(k);
                log.push((t * MS, 0x7f00 + function as u64));
                let (start, end) = (t * MS, (t + 2) * MS);
                a.host_event(HostEvent::UntracedLaunches {
                    path: ROOT,
                    instance: 0,
                    launches: 1,
                    graphs: 0,
                    start,
                    end,
                });
            }
            t += 2;
        }
    }
    let samples: Vec<Sample> = (0..8000).map(|ms| sample(ms * MS, if ms >= 500 { 98.0 } else { 0.0 })).collect();
    report(a, &log, &samples)
}

#[test]
fn a_step_longer_than_a_window_is_not_a_layer_repeating_inside_one() {
    let f = long_step_loop().session_steady.and_then(|s| s.steps).expect("steps found");
    // The launches between windows hold whole steps: the layers' period
    // breaks at the embedding and the head.
    assert!(f.from_launches && f.kernels_per_step == 158 && f.step_ns() == 316 * MS, "{f:?}");
}
