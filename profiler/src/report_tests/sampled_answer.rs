//! The answer of sampling mode without kernel records
//! (`analysis::answer::sampled`), from samples and counted launches folded
//! by the aggregator.

use crate::aggregate::Aggregator;
use crate::analysis::answer::{Answer, BUSY_SAMPLED, BUSY_UNKNOWN};
use crate::analysis::rules::MOVE_FEWER_BYTES;
use crate::analysis::Bound;
use crate::analysis::{analyze, rules::more_blocks};
use crate::model::device::DeviceInfo;
use crate::model::event::{HostEvent, COMM_LAUNCH};
use crate::model::occupancy::SmLimits;
use crate::model::path::{paths, ROOT};
use crate::model::sampled::Sample;
use crate::report::Report;

const MS: u64 = 1_000_000;

/// A 1 ms sample of device 0: SM efficiency, occupancy, DRAM bytes,
/// tensor and issue shares of active cycles and the engine's activity
/// (NaN: not in its configuration).
fn sample(t: u64, eff: f64, dram_bytes: f64, tensor: f64, issue: f64, busy: f64) -> Sample {
    let cycles = 1_800_000.0 * eff / 100.0;
    // The tensor pipe's peak is 4 per cycle (GH100), the issue slots' 1.
    let v = [eff, 50.0, cycles, dram_bytes / 2.0, dram_bytes / 2.0, tensor * cycles * 4.0 / 100.0];
    let mut all = v.to_vec();
    all.extend([issue * cycles / 100.0, busy * 18_000.0, 1_800_000.0, 4.0, 1.0]);
    Sample::from_values(0, t, t + MS, &all)
}

/// A window-0 report on an H100: 1 s of start-up with the GPU idle,
/// then `steady_ms` of `f(t)` samples, `launches` counted.
fn report(steady_ms: u64, launches: u64, f: impl Fn(u64) -> Sample) -> Report {
    finish(aggregator(steady_ms, launches, f), steady_ms)
}

fn aggregator(steady_ms: u64, launches: u64, f: impl Fn(u64) -> Sample) -> Aggregator {
    let mut a = Aggregator::windows_of_zero();
    let idle: Vec<Sample> = (0..1000).map(|i| sample(i * MS, 0.0, 0.0, 0.0, 0.0, 0.0)).collect();
    a.samples(&idle);
    let steady: Vec<Sample> = (1000..1000 + steady_ms).map(|i| f(i * MS)).collect();
    a.samples(&steady);
    // Counted once a second, as the decoder collects them, start-up's
    // 100 launches included.
    a.host_event(HostEvent::UntracedLaunches {
        path: ROOT,
        instance: 0,
        launches: 100,
        graphs: 0,
        start: 0,
        end: 1000 * MS,
    });
    let per_second = launches * 1000 / steady_ms.max(1);
    for k in 0..steady_ms.div_ceil(1000) {
        let (from, to) = ((1000 + k * 1000) * MS, ((1000 + (k + 1) * 1000).min(1000 + steady_ms)) * MS);
        let n = per_second * (to - from) / (1000 * MS);
        a.host_event(HostEvent::UntracedLaunches {
            path: ROOT,
            instance: 0,
            launches: n,
            graphs: 0,
            start: from,
            end: to,
        });
    }
    a
}

fn finish(a: Aggregator, steady_ms: u64) -> Report {
    let end = (1000 + steady_ms) * MS;
    let mut r = Report::build(a.finish(end), 0, end);
    r.devices = vec![DeviceInfo::new(0, "NVIDIA H100 80GB HBM3", 132, SmLimits::SM_90)];
    r
}

fn answer_of(r: &Report) -> Answer {
    analyze(r).answer.expect("an answer without kernel records")
}

#[test]
fn a_launch_bound_session_without_kernel_records_is_answered_from_its_samples() {
    // Busy 25% for 2 s with 40,000 launches: one every 50 us.
    let r = report(2000, 40_000, |t| sample(t, 20.0, 1e6, 0.0, 10.0, 25.0));
    let a = answer_of(&r);
    assert_eq!((a.range.as_deref(), a.busy_source), (None, BUSY_SAMPLED));
    assert!((a.gpu_busy_pct - 25.0).abs() < 1.0, "{a:?}");
    assert_eq!(a.verdict.bound, Bound::Launch, "{:?}", a.verdict);
    assert!((a.warmup_ns as f64 - 1e9).abs() < 0.05e9, "the idle start-up left out: {}", a.warmup_ns);
    let first = a.actions.first().expect("an action");
    assert!(first.advice.contains("launch overhead") && (first.saves_pct - 75.0).abs() < 1.5, "{first:?}");
    assert_eq!(a.parts.iter().map(|p| p.what).collect::<Vec<_>>(), ["GPU idle", "GPU busy"]);
    // The steady state's own launches, not start-up's.
    assert!(a.verdict.evidence.contains("40000 launches, one every 50.0 us"), "{}", a.verdict.evidence);
    let table = r.to_table(120);
    assert!(table.contains("== Answer: no range of the program's own"), "{table}");
    assert!(table.contains("GPU busy 25%") && table.contains("no kernel records (trace windows of 0)"), "{table}");
    // A PyTorch program: whether it compiles is not seen, and said.
    let mut torch = r.clone();
    torch.frameworks = vec!["torch".into()];
    let first = &answer_of(&torch).actions[0].advice;
    assert!(first.contains("if it is not compiled yet"), "{first}");
}

#[test]
fn steps_are_found_from_the_launches_logged_without_kernel_records() {
    // The same session, its 40,000 launches logged: 100 steps, each 400
    // launches of 400 kernels one every 30 us, then host work; the host
    // runs ahead in bursts, so steps take 16 and 24 ms in turn (20 ms on
    // average); the first 250 launches of a step from one thread (forward),
    // the rest from another (backward, on autograd's thread).
    let mut a = aggregator(2000, 40_000, |t| sample(t, 20.0, 1e6, 0.0, 10.0, 25.0));
    let begin = |k: u64| 1000 * MS + (k / 2) * 40 * MS + (k % 2) * 16 * MS;
    let log = |lane: u32| -> Vec<(u64, u64)> {
        (0..40_000u64)
            .filter(|i| (i % 400 < 250) == (lane == 3))
            .map(|i| (begin(i / 400) + (i % 400) * 30_000, 0x7f00 + i % 400))
            .collect()
    };
    for lane in [3, 4] {
        for batch in log(lane).chunks(256) {
            a.host_event(HostEvent::LaunchLog { lane, entries: batch.to_vec() });
        }
    }
    let r = finish(a, 2000);
    let a = answer_of(&r);
    let f = a.found_steps.expect("steps found from the launches");
    assert!(f.from_launches && f.kernels_per_step == 400, "{f:?}");
    // The mean, not the median of a bimodal period.
    assert!(a.per_step_ns.abs_diff(20 * MS) < MS / 10 && a.p90_ns == Some(24 * MS), "{f:?}");
    assert!([16 * MS, 24 * MS].contains(&f.median_ns), "{f:?}");
    assert!((95..=100).contains(&a.calls), "{} steps", a.calls);
    assert!((a.gpu_busy_pct - 25.0).abs() < 1.0 && a.verdict.bound == Bound::Launch, "{a:?}");
    let table = r.to_table(120);
    assert!(table.contains("steps found from its launches (400 launches repeat): 19.96 ms per step (mean"), "{table}");
    // A JSON round trip keeps where the steps came from.
    let back = Report::from_json(&r.to_json()).expect("reads back");
    assert!(back.session_steady.and_then(|s| s.steps).is_some_and(|s| s.from_launches));
}

#[test]
fn launches_whose_kernels_change_with_the_shapes_are_stepped_by_family() {
    // 100 steps of 135 launches, one every 30 us, then host work (20 ms a
    // step); at 8 places of a step PyTorch launches an elementwise functor
    // vectorized or unrolled, as each tensor's alignment allows, which
    // changes from step to step: the exact kernels differ a step apart at
    // ~4 of 135 places, more than the 2% allowed.
    let eq = "at::native::BinaryFunctor<long, long, bool, at::native::CompareEqFunctor<long> >";
    let names = [
        (0xa0, format!("void at::native::vectorized_elementwise_kernel<4, {eq}, std::array<char*, 3ul> >(int, {eq}, std::array<char*, 3ul>)")),
        (0xa1, format!("void at::native::unrolled_elementwise_kernel<{eq}, std::array<char*, 3ul>, 4>(int, {eq}, std::array<char*, 3ul>)")),
    ];
    let names: Vec<(u64, String)> =
        names.into_iter().chain((0..127u64).map(|i| (0x7f00 + i, format!("kernel_{i}")))).collect();
    let log = |variant: &mut dyn FnMut(u64) -> u64| {
        let mut log = Vec::new();
        for step in 0..100u64 {
            let mut other = 0x7f00;
            for i in 0..135u64 {
                let f = if i % 17 == 5 {
                    0xa0 + variant(step)
                } else {
                    other += 1;
                    other - 1
                };
                log.push((1000 * MS + step * 20 * MS + i * 30_000, f));
            }
        }
        log
    };
    let steps = |log: Vec<(u64, u64)>| {
        let mut a = aggregator(2000, 13_500, |t| sample(t, 20.0, 1e6, 0.0, 10.0, 20.0));
        for (kernel, name) in &names {
            a.host_event(HostEvent::KernelName { kernel: *kernel, name: name.clone() });
        }
        for batch in log.chunks(256) {
            a.host_event(HostEvent::LaunchLog { lane: 1, entries: batch.to_vec() });
        }
        answer_of(&finish(a, 2000)).found_steps.expect("steps found from the launches")
    };
    let mut x = 7u64;
    let f = steps(log(&mut |_| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        x >> 63
    }));
    assert!(f.from_launches && f.by_family, "{f:?}");
    assert_eq!((f.kernels_per_step, f.mean_ns), (135, 20 * MS), "{f:?}");
    // Batches of two shapes in turn: the exact launches repeat every two
    // steps, the families every step.
    let f = steps(log(&mut |step| step % 2));
    assert!(f.by_family, "{f:?}");
    assert_eq!((f.kernels_per_step, f.mean_ns), (135, 20 * MS), "{f:?}");
}

#[test]
fn a_rank_s_communication_launches_do_not_hide_its_steps() {
    // A DDP rank: 100 steps of 300 compute launches, one every 60 us; its
    // all-reduces (marked communication) launch as buckets fill, 1 to 4 a
    // step at times that move from step to step.
    let mut a = aggregator(2000, 30_000, |t| sample(t, 40.0, 1e6, 0.0, 20.0, 60.0));
    let mut log = Vec::new();
    for step in 0..100u64 {
        let begin = 1000 * MS + step * 20 * MS;
        for i in 0..300u64 {
            log.push((begin + i * 60_000, 0x7f00 + i));
            if i % (50 + step % 7 * 20) == 17 {
                log.push((begin + i * 60_000 + 1_000, COMM_LAUNCH | (0xcc00 + step % 3)));
            }
        }
    }
    for batch in log.chunks(256) {
        a.host_event(HostEvent::LaunchLog { lane: 1, entries: batch.to_vec() });
    }
    let r = finish(a, 2000);
    let f = answer_of(&r).found_steps.expect("steps found from the compute launches");
    assert!(f.from_launches && f.kernels_per_step == 300, "{f:?}");
    assert!(f.mean_ns.abs_diff(20 * MS) < MS / 10, "{f:?}");
}

#[test]
fn busy_gpus_are_judged_on_their_sm_figures_over_the_busy_time() {
    // An elementwise chain: busy 99%, 3.05 GB per 1 ms: 91% of 3.35 TB/s.
    let a = answer_of(&report(1000, 2_000, |t| sample(t, 95.0, 3.05e9, 0.0, 5.0, 99.0)));
    assert_eq!(a.verdict.bound, Bound::Memory, "{:?}", a.verdict);
    assert!(a.verdict.evidence.contains("DRAM 92%"), "{}", a.verdict.evidence);
    assert_eq!(a.actions[0].advice, MOVE_FEWER_BYTES);
    // A kernel on 2 of 132 SMs, always running.
    let a = answer_of(&report(1000, 2_000, |t| sample(t, 1.5, 1e5, 0.0, 50.0, 97.0)));
    assert_eq!(a.verdict.bound, Bound::Latency, "{:?}", a.verdict);
    assert!(a.verdict.evidence.contains("SM efficiency 1.5%"), "{}", a.verdict.evidence);
    assert_eq!(a.actions[0].advice, more_blocks(132));
}

#[test]
fn configurations_taken_in_turn_give_the_tensor_pipe_to_the_verdict() {
    // A bf16 GEMM loop sampled with two configurations in turn: SM
    // figures and DRAM in one, the tensor pipe and issue slots in the
    // other; the engine in both.
    let nan = f64::NAN;
    let r = report(2000, 500, |t| {
        if (t / (100 * MS)) % 2 == 0 {
            sample(t, 96.0, 1.3e9, nan, nan, 100.0)
        } else {
            let mut s = sample(t, 96.0, 0.0, 95.0, 20.0, 100.0);
            (s.sm_efficiency_pct, s.occupancy_pct, s.dram_bytes) = (f32::NAN, f32::NAN, f32::NAN);
            s
        }
    });
    let f = r.session_steady.and_then(|s| s.sampled).expect("sampled figures");
    assert!(
        (f.tensor_active_pct.unwrap_or(-1.0) - 95.0).abs() < 0.5 && (f.sm_efficiency_pct.unwrap() - 96.0).abs() < 0.5,
        "{f:?}"
    );
    let a = answer_of(&r);
    assert_eq!(a.verdict.bound, Bound::Compute, "{:?}", a.verdict);
    assert!(a.verdict.evidence.contains("(tensor cores)"), "{}", a.verdict.evidence);
    assert!(a.actions.is_empty(), "nothing to change on a compute-bound GEMM: {:?}", a.actions);
}

#[test]
fn without_the_engine_counter_gpu_busy_is_unknown_not_zero() {
    let r = report(1000, 2_000, |t| {
        let mut s = sample(t, 40.0, 1e8, 10.0, 20.0, 0.0);
        s.gr_active_pct = f32::NAN;
        s
    });
    // The start-up samples had no engine counter either.
    let mut r = r;
    if let Some(s) = r.session_steady.as_mut().and_then(|s| s.sampled.as_mut()) {
        s.gpu_busy_pct = None;
    }
    let a = answer_of(&r);
    assert_eq!(a.busy_source, BUSY_UNKNOWN);
    assert!(a.parts.is_empty() && a.actions.is_empty(), "{a:?}");
    let table = r.to_table(120);
    assert!(table.contains("GPU busy - ["), "{table}");
    assert!(table.contains("GPU busy not measured"), "{table}");
}

#[test]
fn a_window_asked_for_leaves_the_always_on_answer_as_it_was() {
    use crate::decode::KernelActivity;
    // Ten 52 ms steps with a 10 ms `fwd` each; a window asked for
    // traces the third step's `fwd` (and no whole step).
    let answer_with = |window: bool| {
        let mut a = Aggregator::windows_of_zero();
        let step = paths().intern(ROOT, 0, "ow-step");
        let fwd = paths().intern(step, 0, "fwd");
        let mut samples = Vec::new();
        let mut id = 0;
        for k in 0..10u64 {
            let t = k * 52;
            let (s, f) = (id + 1, id + 2);
            id += 2;
            a.host_event(HostEvent::Push { instance: s, parent: 0, path: step, tid: 1, ts: t * MS });
            if window && k == 2 {
                a.window_on_demand();
                a.tracing(true, (t + 1) * MS);
            }
            a.host_event(HostEvent::Push { instance: f, parent: s, path: fwd, tid: 1, ts: (t + 2) * MS });
            if window && k == 2 {
                a.host_event(HostEvent::launch(k as u32 + 1, 1, fwd, f, (t + 3) * MS));
                a.kernel(&KernelActivity::sample(k as u32 + 1, (t + 3) * MS, (t + 11) * MS));
            } else {
                let (start, end) = ((t + 2) * MS, (t + 12) * MS);
                let counted =
                    HostEvent::UntracedLaunches { path: fwd, instance: f, launches: 1455, graphs: 0, start, end };
                a.host_event(counted);
            }
            a.host_event(HostEvent::Pop { instance: f, ts: (t + 12) * MS });
            if window && k == 2 {
                a.tracing(false, (t + 13) * MS);
            }
            a.host_event(HostEvent::Pop { instance: s, ts: (t + 52) * MS });
            samples.extend((t..t + 52).map(|i| sample(i * MS, 80.0, 1e8, 5.0, 20.0, 22.0)));
        }
        a.samples(&samples);
        let mut r = Report::build(a.finish(520 * MS), 0, 520 * MS);
        r.devices = vec![DeviceInfo::new(0, "NVIDIA H100 80GB HBM3", 132, SmLimits::SM_90)];
        answer_of(&r)
    };
    let (before, after) = (answer_with(false), answer_with(true));
    assert_eq!(before.range.as_deref(), Some("ow-step"));
    assert_eq!((after.range.as_deref(), after.busy_source), (Some("ow-step"), BUSY_SAMPLED), "{after:?}");
    assert_eq!(after.verdict.bound, before.verdict.bound);
    assert!((after.gpu_busy_pct - before.gpu_busy_pct).abs() < 0.5, "{before:?} {after:?}");
}

#[test]
fn a_window_asked_for_splits_the_sampled_idle_time_by_its_traced_causes() {
    use crate::decode::KernelActivity;
    // Ten 52 ms steps, the GPU busy 22% of each by its samples; a
    // window asked for traces the whole third step: four sparse
    // launches of 6.5 ms (50% busy: not the share the answer takes),
    // its idle time the host's.
    let mut a = Aggregator::windows_of_zero();
    let step = paths().intern(ROOT, 0, "sw-step");
    let mut samples = Vec::new();
    for k in 0..10u64 {
        let t = k * 52;
        let traced = k == 2;
        a.host_event(HostEvent::Push { instance: k + 1, parent: 0, path: step, tid: 1, ts: t * MS });
        if traced {
            a.window_on_demand();
            a.tracing(true, t * MS);
            for (i, at) in [10, 20, 30, 40].into_iter().enumerate() {
                let id = 7 + i as u32;
                a.host_event(HostEvent::launch(id, 1, step, k + 1, (t + at) * MS));
                a.kernel(&KernelActivity::sample(id, (t + at) * MS, (t + at) * MS + 6_500_000));
            }
        } else {
            let (start, end) = (t * MS, (t + 52) * MS);
            let counted =
                HostEvent::UntracedLaunches { path: step, instance: k + 1, launches: 4, graphs: 0, start, end };
            a.host_event(counted);
        }
        a.host_event(HostEvent::Pop { instance: k + 1, ts: (t + 52) * MS });
        if traced {
            a.tracing(false, (t + 52) * MS);
        }
        samples.extend((t..t + 52).map(|i| sample(i * MS, 80.0, 1e8, 5.0, 20.0, 22.0)));
    }
    a.samples(&samples);
    let mut r = Report::build(a.finish(520 * MS), 0, 520 * MS);
    r.devices = vec![DeviceInfo::new(0, "NVIDIA H100 80GB HBM3", 132, SmLimits::SM_90)];
    let answer = answer_of(&r);
    assert_eq!((answer.range.as_deref(), answer.busy_source), (Some("sw-step"), BUSY_SAMPLED), "{answer:?}");
    let host =
        answer.parts.iter().find(|p| p.what == "host work").unwrap_or_else(|| panic!("{answer:#?}\n{:#?}", r.ranges));
    assert!((host.pct - 78.0).abs() < 2.0, "the sampled idle share, not the traced step's: {answer:?}");
    assert!(host.detail.contains("as traced in the windows"), "{host:?}");
    assert!(answer.parts.iter().all(|p| p.what != "GPU idle"), "{answer:?}");
    assert!(answer.notes[0].contains("split by cause as in its 1 traced call"), "{:?}", answer.notes);
}

/// `n` calls of `name` without kernel records: the first a 2 s warm-up
/// (compilation: the engine idle, 200,000 launches), then 52 ms steps of
/// 1455 launches with the engine active 22%.
fn untraced_calls(name: &str, n: u64) -> Report {
    let mut a = Aggregator::windows_of_zero();
    let step = paths().intern(ROOT, 0, name);
    let mut t = 0;
    let mut samples = Vec::new();
    for k in 0..n {
        // Compilation launches many small kernels of its own.
        let (len, busy, launches) = if k == 0 { (2000, 0.0, 200_000) } else { (52, 22.0, 1455) };
        a.host_event(HostEvent::Push { instance: k + 1, parent: 0, path: step, tid: 1, ts: t * MS });
        a.host_event(HostEvent::UntracedLaunches {
            path: step,
            instance: k + 1,
            launches,
            graphs: 0,
            start: 0,
            end: 0,
        });
        a.host_event(HostEvent::Pop { instance: k + 1, ts: (t + len) * MS });
        samples.extend((t..t + len).map(|i| sample(i * MS, 80.0, 1e8, 5.0, 20.0, busy)));
        t += len;
    }
    a.samples(&samples);
    let mut r = Report::build(a.finish(t * MS), 0, t * MS);
    r.devices = vec![DeviceInfo::new(0, "NVIDIA H100 80GB HBM3", 132, SmLimits::SM_90)];
    r
}

#[test]
fn the_main_range_without_kernel_records_answers_per_step_after_warm_up() {
    let r = untraced_calls("sampled-answer-step", 11);
    let ans = answer_of(&r);
    assert_eq!(ans.range.as_deref(), Some("sampled-answer-step"));
    assert_eq!((ans.calls, ans.warmup_calls, ans.per_step_mean), (10, 1, false));
    assert!((ans.per_step_ns as f64 / 52e6 - 1.0).abs() < 0.02, "the median step: {}", ans.per_step_ns);
    assert_eq!(ans.warmup_ns, 2000 * MS);
    // The warm-up's idle 2 s are not in the figures.
    assert!((ans.gpu_busy_pct - 22.0).abs() < 0.5, "{ans:?}");
    assert_eq!(ans.verdict.bound, Bound::Launch, "{:?}", ans.verdict);
    assert!(ans.verdict.evidence.contains("1455 launches per call"), "{}", ans.verdict.evidence);
    let table = r.to_table(120);
    assert!(table.contains("sampled-answer-step: 52.") && table.contains("(median of 10 steps"), "{table}");
    // A PyTorch process: whether it compiles is not seen without kernel
    // records (a loaded Triton is no sign), and the advice says so.
    let mut torch = r.clone();
    torch.frameworks = vec!["torch".into(), "triton".into()];
    let first = &answer_of(&torch).actions[0].advice;
    assert!(first.contains("if it is not compiled yet") && first.contains("CUDAGraph"), "{first}");
    assert!(table.contains("warm-up left out: the first 1 step"), "{table}");
    // Too few calls to tell warm-up apart: the mean of all, said so.
    // Steps that replay CUDA graphs already are not told to capture them.
    let mut a = Aggregator::windows_of_zero();
    let step = paths().intern(ROOT, 0, "sampled-answer-graphs");
    let mut samples = Vec::new();
    for k in 0..10u64 {
        let t = k * 52;
        a.host_event(HostEvent::Push { instance: k + 1, parent: 0, path: step, tid: 1, ts: t * MS });
        let (start, end) = (t * MS, (t + 52) * MS);
        let counted =
            HostEvent::UntracedLaunches { path: step, instance: k + 1, launches: 1455, graphs: 2, start, end };
        a.host_event(counted);
        a.host_event(HostEvent::Pop { instance: k + 1, ts: end });
        samples.extend((t..t + 52).map(|i| sample(i * MS, 80.0, 1e8, 5.0, 20.0, 22.0)));
    }
    a.samples(&samples);
    let graphs = answer_of(&Report::build(a.finish(520 * MS), 0, 520 * MS));
    let first = &graphs.actions[0].advice;
    assert!(first.starts_with("It already replays CUDA graphs (2 per call)"), "{first}");
    let few = answer_of(&untraced_calls("sampled-answer-few", 3));
    assert!(few.per_step_mean && few.calls == 3, "{few:?}");
    assert!(few.notes.iter().any(|n| n.contains("warm-up included")), "{:?}", few.notes);
}
