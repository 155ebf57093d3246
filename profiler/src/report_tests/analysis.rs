//! The analysis (`analysis`) of sessions folded by the aggregator:
//! untraced and sampled ranges, MFU over GPUs, ranges of the Python stack
//! and of framework hooks, the table's rows.

use crate::aggregate::Aggregator;
use crate::analysis::{analyze, Analysis, Bound, FindingKind};
use crate::model::event::HostEvent;
use crate::model::path::{paths, ROOT};
use crate::model::sampled::Sample;
use crate::report::Report;

#[test]
fn a_range_neither_traced_nor_sampled_is_unknown_not_an_idle_gpu() {
    let mut a = Aggregator::windows_of_zero();
    let sampled = paths().intern(ROOT, 0, "analysis-sampled");
    let unsampled = paths().intern(ROOT, 0, "analysis-unsampled");
    a.host_event(HostEvent::Push { instance: 1, parent: 0, path: sampled, tid: 1, ts: 100 });
    a.host_event(HostEvent::Pop { instance: 1, ts: 600 });
    let samples = Sample::flat_run(0, 0, 1000, 80.0, 50.0);
    a.samples(&samples);
    // Sampling stopped: the later range has no sample.
    for (i, ts) in [(2, 2000), (3, 3000)] {
        a.host_event(HostEvent::Push { instance: i, parent: 0, path: unsampled, tid: 1, ts });
        a.host_event(HostEvent::Pop { instance: i, ts: ts + 500 });
    }
    let r = Report::build(a.finish(4000), 0, 4000);
    let an = analyze(&r);
    let get = |p: &str| an.ranges.iter().find(|g| g.path == p).expect(p);
    let (s, u) = (get("analysis-sampled"), get("analysis-unsampled"));
    assert!(s.untraced && s.sampled, "{s:?}");
    assert_eq!(s.sm_efficiency_pct.map(|e| e.round()), Some(80.0));
    assert_ne!(s.verdict.bound, Bound::Unknown);
    assert!(u.untraced && !u.sampled, "{u:?}");
    assert_eq!((u.count, u.wall_ns, u.sm_efficiency_pct), (2, 1000, None));
    assert_eq!(u.verdict.bound, Bound::Unknown, "{:?}", u.verdict);
    assert!(u.verdict.evidence.contains("none of its 2 instances was traced"), "{}", u.verdict.evidence);
    let table = r.to_table(120);
    assert!(table.contains("unknown"), "{table}");
}

#[test]
fn an_untraced_range_shows_its_counted_launches_in_the_table_and_the_evidence() {
    let mut a = Aggregator::windows_of_zero();
    let step = paths().intern(ROOT, 0, "cstep");
    let fwd = paths().intern(step, 0, "forward");
    for k in 0..5u64 {
        let (t, outer, inner) = (k * 10_000_000, 10 * k + 1, 10 * k + 2);
        a.host_event(HostEvent::Push { instance: outer, parent: 0, path: step, tid: 1, ts: t + 100 });
        a.host_event(HostEvent::Push { instance: inner, parent: outer, path: fwd, tid: 1, ts: t + 200 });
        a.host_event(HostEvent::UntracedLaunches {
            path: fwd,
            instance: 0,
            launches: 100,
            graphs: 0,
            start: 0,
            end: 0,
        });
        a.host_event(HostEvent::Pop { instance: inner, ts: t + 4_000_200 });
        a.host_event(HostEvent::UntracedLaunches {
            path: step,
            instance: 0,
            launches: 150,
            graphs: 0,
            start: 0,
            end: 0,
        });
        a.host_event(HostEvent::Pop { instance: outer, ts: t + 9_000_100 });
    }
    a.samples(&Sample::flat_every(100_000, 0, 0, 50_000_000, 9.0, 40.0));
    let r = Report::build(a.finish(50_000_000), 0, 50_000_000);
    let get = |an: &Analysis, p: &str| an.ranges.iter().find(|g| g.path == p).cloned().expect(p);
    let an = analyze(&r);
    let (s, f) = (get(&an, "cstep"), get(&an, "cstep/forward"));
    assert_eq!((s.count, s.launches, f.launches), (5, Some(1250), Some(500)));
    assert!(s.verdict.evidence.contains("250 launches per call, one every 36.0 us"), "{}", s.verdict.evidence);
    assert!(f.verdict.evidence.contains("100 launches per call, one every 40.0 us"), "{}", f.verdict.evidence);
    let table = r.to_table(120);
    let row = table.lines().find(|l| l.starts_with("cstep (x5 untraced)")).expect("the step's tree row");
    assert_eq!(row.split_whitespace().skip(3).collect::<Vec<_>>(), ["1250", "-", "45.00", "ms", "-"], "{row}");
    assert!(
        table.starts_with("gpuscope sampling: 50.00 ms session, 1250 kernel launches counted without kernel records"),
        "{table}"
    );
    // The counts survive the JSON report; one of an older gpuscope (no
    // counts) says nothing of launches rather than "no kernel launch".
    let back = Report::from_json(&r.to_json()).expect("the report reads back");
    assert_eq!(get(&analyze(&back), "cstep").launches, Some(1250));
    let old = r.to_json().replace("\"untraced_launches\"", "\"untraced_launches_of_another_version\"");
    let old = Report::from_json(&old).expect("an older report reads");
    let o = get(&analyze(&old), "cstep");
    assert_eq!(o.launches, None);
    assert!(
        !o.verdict.evidence.contains("no kernel launch") && o.verdict.bound == Bound::Idle,
        "not counted is not none: {:?}",
        o.verdict
    );
    let row = old.to_table(120).lines().find(|l| l.starts_with("cstep (x5 untraced)")).map(str::to_string);
    assert!(row.is_some_and(|r| r.split_whitespace().nth(3) == Some("-")), "no count shown as 0");
}

/// Five untraced calls of `step` (10 ms each) and `step/fwd` (`fwd_ms`
/// each), `launches` in each fwd, SMs active `eff`% all the time.
fn untraced_steps(name: &str, fwd_ms: u64, launches: u64, eff: f32) -> Analysis {
    let mut a = Aggregator::windows_of_zero();
    let step = paths().intern(ROOT, 0, name);
    let fwd = paths().intern(step, 0, "fwd");
    for k in 0..5u64 {
        let t = k * 10_000_000;
        a.host_event(HostEvent::Push { instance: 10 * k + 1, parent: 0, path: step, tid: 1, ts: t });
        a.host_event(HostEvent::Push { instance: 10 * k + 2, parent: 10 * k + 1, path: fwd, tid: 1, ts: t });
        a.host_event(HostEvent::UntracedLaunches { path: fwd, instance: 0, launches, graphs: 0, start: 0, end: 0 });
        a.host_event(HostEvent::Pop { instance: 10 * k + 2, ts: t + fwd_ms * 1_000_000 });
        a.host_event(HostEvent::Pop { instance: 10 * k + 1, ts: t + 10_000_000 });
    }
    a.samples(&Sample::flat_every(100_000, 0, 0, 50_000_000, eff, 40.0));
    analyze(&Report::build(a.finish(50_000_000), 0, 50_000_000))
}

#[test]
fn sampled_ranges_whose_sms_idle_are_findings_with_the_way_to_the_cause() {
    let kinds = |an: &Analysis| {
        an.findings.iter().map(|f| (f.kind.clone(), f.range.clone().unwrap_or_default())).collect::<Vec<_>>()
    };
    // fwd is 9 ms of each 10 ms step: it explains the step's idle SMs,
    // which are left to it. 400 launches in 9 ms: one every 22.5 us.
    let dense = untraced_steps("fstep-dense", 9, 400, 10.0);
    assert_eq!(kinds(&dense), [(FindingKind::SmsIdle, "fstep-dense/fwd".to_string())]);
    let f = &dense.findings[0];
    assert_eq!((&f.bound, f.cost_ns), (&Bound::Idle, 40_500_000), "45 ms at 10% SM activity");
    assert!(f.message.contains("SMs active 10% of its wall time") && f.message.contains("over 5 calls"), "{f:?}");
    assert!(f.message.contains("one every 22.5 us"), "{}", f.message);
    assert!(f.advice.contains("CUDA graph") && f.advice.contains("--trace-windows"), "{}", f.advice);
    // A short fwd leaves most of the step: both are findings, and
    // sparse launches get only the way to the cause.
    let sparse = untraced_steps("fstep-sparse", 2, 4, 10.0);
    assert_eq!(
        kinds(&sparse),
        [(FindingKind::SmsIdle, "fstep-sparse".to_string()), (FindingKind::SmsIdle, "fstep-sparse/fwd".to_string())]
    );
    assert!(!sparse.findings[1].advice.contains("CUDA graph"), "{}", sparse.findings[1].advice);
    // SMs busy: no finding (and the verdict is not gpu-idle).
    assert_eq!(kinds(&untraced_steps("fstep-busy", 9, 400, 80.0)), []);
}

#[test]
fn mfu_of_a_range_whose_calls_ran_on_two_gpus_is_per_gpu() {
    use crate::aggregate::{AggregateOptions, Aggregator};
    use crate::decode::KernelActivity;
    use crate::model::device::DeviceInfo;
    use crate::model::event::HostEvent;
    use crate::model::occupancy::SmLimits;
    // Ten 10 ms calls of `mfu-step` declaring 2e12 FLOPs each; the
    // kernels of the first call ran on `first` devices side by side,
    // those of the others on `gpus`.
    let mfu = |first: u32, gpus: u32, name: &str| {
        let mut a = Aggregator::new(AggregateOptions::default(), crate::aggregate::devices::DeviceTable::fixed(vec![]));
        let step = paths().intern(ROOT, 0, name);
        let mut c = 0;
        for i in 0..10u64 {
            let t = i * 10_000_000;
            a.host_event(HostEvent::Push { instance: i + 1, parent: 0, path: step, tid: 1, ts: t });
            for d in 0..if i == 0 { first } else { gpus } {
                c += 1;
                a.host_event(HostEvent::launch(c, 1, step, i + 1, t + 1_000));
                a.kernel(&KernelActivity { device: d, ..KernelActivity::sample(c, t + 2_000, t + 9_990_000) });
            }
            a.host_event(HostEvent::Pop { instance: i + 1, ts: t + 10_000_000 });
        }
        let mut r = Report::build(a.finish(100_000_000), 0, 100_000_000);
        r.devices = vec![DeviceInfo::new(0, "NVIDIA H100 80GB HBM3", 132, SmLimits::SM_90)];
        r.declared =
            vec![crate::model::declared::Declared { range: name.into(), flops: Some(2e12), work: None, unit: None }];
        let g = analyze(&r).ranges.into_iter().find(|g| g.path == name).expect(name);
        (g.model_mfu_pct.expect("an MFU"), r.ranges.iter().find(|g| g.path.to_string() == name).unwrap().gpus)
    };
    let (one, n1) = mfu(1, 1, "mfu-step-1");
    let (two, n2) = mfu(2, 2, "mfu-step-2");
    assert_eq!((n1, n2), (1, 2));
    // A first call that touched a second GPU does not halve the rest.
    assert_eq!(mfu(2, 1, "mfu-step-warm"), (one, 1));
    // 2e12 FLOPs in 10 ms on one H100 (989.4 TFLOP/s bf16): about 20%.
    assert!((one - 20.2).abs() < 0.5, "{one}");
    assert!((two - one / 2.0).abs() < 1e-9, "{one} {two}");
}

#[test]
fn ranges_from_the_python_stack_are_shown_but_never_the_step() {
    use crate::aggregate::{AggregateOptions, Aggregator};
    use crate::decode::KernelActivity;
    use crate::model::event::HostEvent;
    // A loop with no range of its own: each 10 ms step runs a model
    // (a stack range at the root, 6 ms of kernels) and an optimizer
    // step outside it (2 ms).
    let stack = gpuscope_nvtx::tool::domain(crate::model::path::STACK_DOMAIN);
    let model = paths().intern(ROOT, stack, "StackTestModel");
    let mut a = Aggregator::new(AggregateOptions::default(), crate::aggregate::devices::DeviceTable::fixed(vec![]));
    for i in 0..20u64 {
        let t = i * 10_000_000;
        a.host_event(HostEvent::Push { instance: i + 1, parent: 0, path: model, tid: 1, ts: t });
        let c = 2 * i as u32 + 1;
        a.host_event(HostEvent::launch(c, 1, model, i + 1, t + 1_000));
        a.kernel(&KernelActivity::sample(c, t + 2_000, t + 6_002_000));
        a.host_event(HostEvent::Pop { instance: i + 1, ts: t + 6_000_000 });
        a.host_event(HostEvent::launch(c + 1, 1, ROOT, 0, t + 6_100_000));
        a.kernel(&KernelActivity::sample(c + 1, t + 6_200_000, t + 8_200_000));
    }
    let r = Report::build(a.finish(200_000_000), 0, 200_000_000);
    let an = analyze(&r);
    let g = an.ranges.iter().find(|g| g.path == "StackTestModel").expect("the model's range is shown by name");
    assert!(g.from_stack && g.count == 20, "{g:?}");
    let answer = an.answer.expect("an answer");
    assert_eq!(answer.range, None, "the model's forward is not the step");
    assert!(answer.others.iter().all(|o| o.range != "StackTestModel"));
}

#[test]
fn the_programs_step_leads_over_the_hooks_step_where_it_holds_most_of_it() {
    use crate::aggregate::{AggregateOptions, Aggregator};
    use crate::decode::KernelActivity;
    use crate::model::event::HostEvent;
    // The hooks' `step` (10 ms) around the program's range of `inner_ms`.
    let answer = |inner: &str, inner_ms: u64| {
        let hooks = gpuscope_nvtx::tool::domain(crate::model::path::HOOKS_DOMAIN);
        let step = paths().intern(ROOT, hooks, "step");
        let program = paths().intern(step, 0, inner);
        let mut a = Aggregator::new(AggregateOptions::default(), crate::aggregate::devices::DeviceTable::fixed(vec![]));
        for i in 0..20u64 {
            let (t, s, p) = (i * 10_000_000, 2 * i + 1, 2 * i + 2);
            a.host_event(HostEvent::Push { instance: s, parent: 0, path: step, tid: 1, ts: t });
            a.host_event(HostEvent::Push { instance: p, parent: s, path: program, tid: 1, ts: t + 100_000 });
            a.host_event(HostEvent::launch(i as u32 + 1, 1, program, p, t + 200_000));
            a.kernel(&KernelActivity::sample(i as u32 + 1, t + 300_000, t + 300_000 + inner_ms * 900_000));
            a.host_event(HostEvent::Pop { instance: p, ts: t + 100_000 + inner_ms * 1_000_000 });
            a.host_event(HostEvent::Pop { instance: s, ts: t + 9_900_000 });
        }
        let r = Report::build(a.finish(200_000_000), 0, 200_000_000);
        analyze(&r).answer.expect("an answer")
    };
    let led = answer("train_step_i46", 8);
    assert_eq!(led.range.as_deref(), Some("step/train_step_i46"));
    assert!(led.notes.iter().any(|n| n.contains("program's own range step/train_step_i46")), "{:?}", led.notes);
    // A small range of the program is not the step.
    let kept = answer("attn_i46", 2);
    assert_eq!(kept.range.as_deref(), Some("step"));
    assert!(kept.notes.is_empty(), "{:?}", kept.notes);
}

#[test]
fn a_python_stack_range_left_open_ends_with_its_last_launch() {
    use crate::aggregate::{AggregateOptions, Aggregator};
    use crate::model::event::HostEvent;
    let stack = gpuscope_nvtx::tool::domain(crate::model::path::STACK_DOMAIN);
    let opt = paths().intern(ROOT, stack, "StackTestOptimizerOpen");
    let program = paths().intern(ROOT, 0, "stack-test-open-program");
    let mut a = Aggregator::new(AggregateOptions::default(), crate::aggregate::devices::DeviceTable::fixed(vec![]));
    a.host_event(HostEvent::Push { instance: 1, parent: 0, path: opt, tid: 1, ts: 1_000 });
    let mut e = HostEvent::launch(1, 1, opt, 1, 2_000);
    if let HostEvent::Launch { prev_call_ns, .. } = &mut e {
        *prev_call_ns = 0;
    }
    a.host_event(e);
    // The program's own range left open too: it ends with the session.
    a.host_event(HostEvent::Push { instance: 2, parent: 0, path: program, tid: 1, ts: 1_000 });
    let r = Report::build(a.finish(1_000_000_000), 0, 1_000_000_000);
    let wall = |name: &str| r.ranges.iter().find(|g| g.path.to_string() == name).map(|g| g.wall_ns);
    let w = wall("StackTestOptimizerOpen").expect("the range");
    assert!(w < 10_000, "ended with its launch, not the session: {w}");
    assert!(wall("stack-test-open-program").expect("the program's") > 900_000_000);
}

#[test]
fn a_table_row_whose_parent_has_none_is_named_by_its_whole_path() {
    use crate::aggregate::{AggregateOptions, Aggregator};
    use crate::decode::KernelActivity;
    use crate::model::event::HostEvent;
    let outer = paths().intern(ROOT, 0, "quirk-outer");
    let inner = paths().intern(outer, 0, "quirk-inner");
    let next = paths().intern(ROOT, 0, "quirk-next");
    let report = || {
        let mut a = Aggregator::new(AggregateOptions::default(), crate::aggregate::devices::DeviceTable::fixed(vec![]));
        let mut id = 0;
        for (k, (path, parent)) in [(outer, 0), (inner, 1), (next, 0)].into_iter().enumerate() {
            let (t, instance) = (k as u64 * 10_000_000, k as u64 + 1);
            a.host_event(HostEvent::Push { instance, parent, path, tid: 1, ts: t });
            id += 1;
            a.host_event(HostEvent::launch(id, 1, path, instance, t + 1_000));
            a.kernel(&KernelActivity::sample(id, t + 2_000, t + 3_000_000));
            if path != outer {
                a.host_event(HostEvent::Pop { instance, ts: t + 5_000_000 });
            }
        }
        a.host_event(HostEvent::Pop { instance: 1, ts: 15_000_000 });
        Report::build(a.finish(40_000_000), 0, 40_000_000)
    };
    let nested = report().to_table(120);
    assert!(nested.lines().any(|l| l.starts_with("  quirk-inner")), "{nested}");
    // The parent's row gone (as a range the table leaves out): the
    // child is named by its path, at the top.
    let mut r = report();
    r.ranges.retain(|g| g.path.to_string() != "quirk-outer");
    let table = r.to_table(120);
    assert!(table.lines().any(|l| l.starts_with("quirk-outer/quirk-inner")), "{table}");
    assert!(!table.lines().any(|l| l.starts_with("  quirk-inner")), "{table}");
    assert!(table.lines().any(|l| l.starts_with("quirk-outer/quirk-inner   ")), "the verdict table too: {table}");
}
