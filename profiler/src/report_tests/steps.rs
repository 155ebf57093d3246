//! Steps found in a program without ranges (`report::steps`), from
//! kernels folded by the aggregator.

#[test]
fn a_program_without_ranges_gets_the_steps_its_kernels_repeat_with() {
    // 200 steps of 5 kernels (1 ms each, back to back) after a 3 ms
    // host gap: 8 ms a step, no NVTX range.
    const NAMES: [&std::ffi::CStr; 5] = [c"embed", c"gemm", c"gelu", c"gemm2", c"adam"];
    use crate::aggregate::devices::DeviceTable;
    use crate::aggregate::{AggregateOptions, Aggregator};
    use crate::decode::KernelActivity;
    use crate::model::event::HostEvent;
    use crate::model::path::ROOT;
    let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
    let ms = 1_000_000u64;
    let mut id = 0u32;
    for k in 0..200u64 {
        let t0 = k * 8 * ms + 3 * ms;
        for (i, name) in NAMES.iter().enumerate() {
            id += 1;
            let t = t0 + i as u64 * ms;
            a.host_event(HostEvent::launch(id, 1, ROOT, 0, t - 10_000));
            let mut rec = KernelActivity::sample(id, t, t + ms);
            rec.name = name.as_ptr();
            a.kernel(&rec);
        }
    }
    let r = crate::report::Report::build(a.finish(1_600 * ms), 0, 1_600 * ms);
    let steps = r.session_steady.and_then(|s| s.steps).expect("steps found");
    assert_eq!((steps.kernels_per_step, steps.median_ns), (5, 8 * ms), "{steps:?}");
}

#[test]
fn the_steady_state_of_a_loop_after_other_steady_work_is_the_loops() {
    // 600 ms of kernels of no period, one a millisecond (as the loop
    // launches), then 150 steps of 5 kernels in 8 ms, no NVTX range.
    use crate::aggregate::devices::DeviceTable;
    use crate::aggregate::{AggregateOptions, Aggregator};
    use crate::decode::KernelActivity;
    use crate::model::event::HostEvent;
    use crate::model::path::ROOT;
    let names: Vec<std::ffi::CString> =
        (0..60).map(|i| std::ffi::CString::new(format!("autotune_{i}")).unwrap()).collect();
    let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
    let ms = 1_000_000u64;
    let (mut id, mut x) = (0u32, 5u64);
    let mut launch = |a: &mut Aggregator, name: &std::ffi::CStr, t: u64, len: u64| {
        id += 1;
        a.host_event(HostEvent::launch(id, 1, ROOT, 0, t - 10_000));
        let mut rec = KernelActivity::sample(id, t, t + len);
        rec.name = name.as_ptr();
        a.kernel(&rec);
    };
    // Start-up: a few kernels, then 400 ms of the host's set-up.
    for k in 0..5u64 {
        launch(&mut a, &names[0], ms + k * ms, ms / 2);
    }
    let at = 400 * ms;
    for k in 0..600u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        launch(&mut a, &names[(x >> 40) as usize % names.len()], at + k * ms + ms / 2, ms / 2);
    }
    let head = at + 600 * ms;
    let step: Vec<std::ffi::CString> =
        (0..5).map(|i| std::ffi::CString::new(format!("step_kernel_{i}")).unwrap()).collect();
    for k in 0..150u64 {
        for (i, name) in step.iter().enumerate() {
            launch(&mut a, name, head + k * 8 * ms + 3 * ms + i as u64 * ms, ms);
        }
    }
    let end = head + 150 * 8 * ms;
    let agg = a.finish(end);
    let whole = crate::report::steady::of_session(&agg.timeline, 0, end).expect("a steady state");
    assert!(whole.start_ns < head - 300 * ms, "the head looks steady by its bins: {}", whole.start_ns);
    let r = crate::report::Report::build(agg, 0, end);
    let s = r.session_steady.expect("a steady state");
    let f = s.steps.expect("steps found");
    assert_eq!((f.kernels_per_step, f.median_ns), (5, 8 * ms), "{f:?}");
    assert!(f.first_ns >= head && f.first_ns <= head + 8 * ms, "{} against {head}", f.first_ns);
    // From the first bin the loop fills whole (10 ms bins): the one it
    // began inside would dilute its figures with what came before.
    assert!(s.start_ns >= f.first_ns && s.start_ns <= f.first_ns + 10 * ms, "{} against {head}", s.start_ns);
}

#[test]
fn a_loop_that_leaves_bins_empty_between_its_bursts_is_found_whole() {
    // A loop waiting for its data: every 160 ms a burst of 30 kernels
    // (0.5 ms each, back to back), then the GPU idle; from 1 s to ~8.5 s
    // of a 10 s session (40 ms bins: one holds the burst, the next three
    // nothing). No NVTX range.
    use crate::aggregate::devices::DeviceTable;
    use crate::aggregate::{AggregateOptions, Aggregator};
    use crate::decode::KernelActivity;
    use crate::model::event::HostEvent;
    use crate::model::path::ROOT;
    let names: Vec<std::ffi::CString> =
        (0..30).map(|i| std::ffi::CString::new(format!("burst_{i}")).unwrap()).collect();
    let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
    let ms = 1_000_000u64;
    let mut id = 0u32;
    // Start-up: one kernel.
    a.host_event(HostEvent::launch(1, 1, ROOT, 0, 100 * ms));
    a.kernel(&KernelActivity::sample(1, 100 * ms, 101 * ms));
    id += 1;
    // Five steps in a row come 40 ms apart (the loader caught up): the
    // only bins that settle.
    let begin = |step: u64| match step {
        0..=20 => step * 160,
        21..=25 => 20 * 160 + (step - 20) * 40,
        _ => 20 * 160 + 5 * 40 + (step - 25) * 160,
    };
    for step in 0..50u64 {
        let t0 = 1_000 * ms + begin(step) * ms;
        for (i, name) in names.iter().enumerate() {
            id += 1;
            let t = t0 + i as u64 * ms / 2;
            a.host_event(HostEvent::launch(id, 1, ROOT, 0, t.saturating_sub(10_000)));
            let mut rec = KernelActivity::sample(id, t, t + ms / 2);
            rec.name = name.as_ptr();
            a.kernel(&rec);
        }
    }
    let end = 10_000 * ms;
    let agg = a.finish(end);
    let bins = crate::report::steady::of_session(&agg.timeline, 0, end).expect("a steady state");
    assert!(bins.settled && bins.wall_ns() < 400 * ms, "its bins alone give a sliver: {bins:?}");
    let r = crate::report::Report::build(agg, 0, end);
    let s = r.session_steady.expect("a steady state");
    let f = s.steps.expect("steps found");
    assert_eq!((f.kernels_per_step, f.median_ns), (30, 160 * ms), "{f:?}");
    assert!(s.start_ns >= 960 * ms && s.start_ns <= 1_000 * ms, "{s:?}");
    let last = 1_000 * ms + begin(49) * ms;
    assert!(s.end_ns >= last && s.end_ns <= last + 200 * ms, "{s:?}");
}

#[test]
fn a_short_loop_is_answered_over_the_bins_it_fills_whole() {
    // After 8.7 s of start-up (a kernel now and then), 300 steps of 5
    // kernels back to back, 1.2 ms a step, beginning 17 ms into a 40 ms
    // bin and ending inside another: the GPU busy throughout.
    use crate::aggregate::devices::DeviceTable;
    use crate::aggregate::{AggregateOptions, Aggregator};
    use crate::decode::KernelActivity;
    use crate::model::event::HostEvent;
    use crate::model::path::ROOT;
    let names: Vec<std::ffi::CString> = (0..5).map(|i| std::ffi::CString::new(format!("k{i}")).unwrap()).collect();
    let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
    let ms = 1_000_000u64;
    let mut id = 0u32;
    let mut launch = |a: &mut Aggregator, name: &std::ffi::CStr, t: u64, len: u64| {
        id += 1;
        a.host_event(HostEvent::launch(id, 1, ROOT, 0, t.saturating_sub(10_000)));
        let mut rec = KernelActivity::sample(id, t, t + len);
        rec.name = name.as_ptr();
        a.kernel(&rec);
    };
    for k in 0..8u64 {
        launch(&mut a, &names[0], 500 * ms + k * 1000 * ms, ms);
    }
    let head = 8_737 * ms;
    for step in 0..300u64 {
        for (i, name) in names.iter().enumerate() {
            launch(&mut a, name, head + step * 1_200_000 + i as u64 * 240_000, 240_000);
        }
    }
    let end = 9_300 * ms;
    let r = crate::report::Report::build(a.finish(end), 0, end);
    let s = r.session_steady.expect("a steady state");
    assert!(s.steps.is_some_and(|f| f.median_ns == 1_200_000), "{s:?}");
    // Whole bins of the loop: busy all of it (the partial ones would put
    // it near 90%).
    let busy = s.kernel_ns as f64 / s.wall_ns() as f64;
    assert!(busy > 0.99 && s.wall_ns() >= 280 * ms, "{busy} over {} ms", s.wall_ns() / ms);
}
