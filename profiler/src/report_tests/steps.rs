//! Steps found in a program without ranges (`report::steps`), from
//! kernels folded by the aggregator.

use crate::aggregate::devices::DeviceTable;
use crate::aggregate::{AggregateOptions, Aggregator};
use crate::decode::KernelActivity;
use crate::model::event::HostEvent;
use crate::model::path::ROOT;
use std::ffi::{CStr, CString};

const MS: u64 = 1_000_000;

/// A trace-mode aggregator and the kernels launched into it, outside any
/// range, each launched 10 us before it starts.
struct Launcher {
    a: Aggregator,
    id: u32,
}

impl Launcher {
    fn new() -> Self {
        Launcher { a: Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![])), id: 0 }
    }

    fn kernel(&mut self, name: &CStr, t: u64, len: u64) {
        self.id += 1;
        self.a.host_event(HostEvent::launch(self.id, 1, ROOT, 0, t.saturating_sub(10_000)));
        let mut rec = KernelActivity::sample(self.id, t, t + len);
        rec.name = name.as_ptr();
        self.a.kernel(&rec);
    }
}

fn names(prefix: &str, n: usize) -> Vec<CString> {
    (0..n).map(|i| CString::new(format!("{prefix}{i}")).unwrap()).collect()
}

#[test]
fn a_program_without_ranges_gets_the_steps_its_kernels_repeat_with() {
    // 200 steps of 5 kernels (1 ms each, back to back) after a 3 ms
    // host gap: 8 ms a step, no NVTX range.
    const NAMES: [&CStr; 5] = [c"embed", c"gemm", c"gelu", c"gemm2", c"adam"];
    let mut l = Launcher::new();
    for k in 0..200u64 {
        for (i, name) in NAMES.iter().enumerate() {
            l.kernel(name, k * 8 * MS + 3 * MS + i as u64 * MS, MS);
        }
    }
    let r = crate::report::Report::build(l.a.finish(1_600 * MS), 0, 1_600 * MS);
    let steps = r.session_steady.and_then(|s| s.steps).expect("steps found");
    assert_eq!((steps.kernels_per_step, steps.median_ns), (5, 8 * MS), "{steps:?}");
}

#[test]
fn steps_whose_gemms_change_with_the_batch_s_shapes_are_found_by_kernel_family() {
    // 200 steps of 40 kernels, 0.1 ms each after a 4 ms host gap; at 4
    // places cuBLAS picks one of two GEMM tiles by the batch's size, which
    // changes every step (graphs of other sizes): about 2 kernels in 40
    // differ from the step before, more than the 2% the exact names may.
    const A: &CStr = c"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas";
    const B: &CStr = c"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas";
    let others = names("scatter", 36);
    let mut l = Launcher::new();
    let mut x = 12345u64;
    for k in 0..200u64 {
        let mut o = others.iter();
        for i in 0..40u64 {
            let name = if i % 10 == 3 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if x >> 63 == 0 {
                    A
                } else {
                    B
                }
            } else {
                o.next().unwrap().as_c_str()
            };
            l.kernel(name, k * 8 * MS + 4 * MS + i * MS / 10, MS / 10);
        }
    }
    let r = crate::report::Report::build(l.a.finish(1_600 * MS), 0, 1_600 * MS);
    let steps = r.session_steady.and_then(|s| s.steps).expect("steps found");
    assert!(steps.by_family, "the exact names repeat too often for the test: {steps:?}");
    assert_eq!((steps.kernels_per_step, steps.median_ns), (40, 8 * MS), "{steps:?}");
    let text = r.to_table(120).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("40 kernels repeat, the variants a library picks by size counted as one kernel"), "{text}");
}

#[test]
fn layers_whose_convolutions_differ_only_in_variant_are_not_each_a_step() {
    // 200 steps of 4 layers (a convolution, a norm, an activation; each
    // layer's convolution another cuDNN variant), 0.1 ms a kernel, then a
    // 4 ms host gap: the exact kernels repeat every 12, their families
    // every 3, a layer.
    let convs: Vec<CString> = (0..4)
        .map(|i| CString::new(format!("sm80_xmma_fprop_implicit_gemm_tilesize{}x64x32_cudnn", 32 << i)).unwrap())
        .collect();
    let mut l = Launcher::new();
    for k in 0..200u64 {
        for layer in 0..4u64 {
            for (j, name) in [convs[layer as usize].as_c_str(), c"bn_fw_inf", c"relu"].into_iter().enumerate() {
                l.kernel(name, k * 5_200_000 + 4 * MS + (layer * 3 + j as u64) * MS / 10, MS / 10);
            }
        }
    }
    let r = crate::report::Report::build(l.a.finish(1_100 * MS), 0, 1_100 * MS);
    let steps = r.session_steady.and_then(|s| s.steps).expect("steps found");
    assert_eq!((steps.kernels_per_step, steps.median_ns, steps.by_family), (12, 5_200_000, false), "{steps:?}");
}

#[test]
fn the_steady_state_of_a_loop_after_other_steady_work_is_the_loops() {
    // 600 ms of kernels of no period, one a millisecond (as the loop
    // launches), then 150 steps of 5 kernels in 8 ms, no NVTX range.
    let autotune = names("autotune_", 60);
    let mut l = Launcher::new();
    let mut x = 5u64;
    // Start-up: a few kernels, then 400 ms of the host's set-up.
    for k in 0..5u64 {
        l.kernel(&autotune[0], MS + k * MS, MS / 2);
    }
    let at = 400 * MS;
    for k in 0..600u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        l.kernel(&autotune[(x >> 40) as usize % autotune.len()], at + k * MS + MS / 2, MS / 2);
    }
    let head = at + 600 * MS;
    let step = names("step_kernel_", 5);
    for k in 0..150u64 {
        for (i, name) in step.iter().enumerate() {
            l.kernel(name, head + k * 8 * MS + 3 * MS + i as u64 * MS, MS);
        }
    }
    let end = head + 150 * 8 * MS;
    let agg = l.a.finish(end);
    let whole = crate::report::steady::of_session(&agg.timeline, 0, end).expect("a steady state");
    assert!(whole.start_ns < head - 300 * MS, "the head looks steady by its bins: {}", whole.start_ns);
    let r = crate::report::Report::build(agg, 0, end);
    let s = r.session_steady.expect("a steady state");
    let f = s.steps.expect("steps found");
    assert_eq!((f.kernels_per_step, f.median_ns), (5, 8 * MS), "{f:?}");
    assert!(f.first_ns >= head && f.first_ns <= head + 8 * MS, "{} against {head}", f.first_ns);
    // From the bin holding the loop's first step: it began less than a
    // step into it (its host gap before the first kernel is the loop's).
    assert!(s.start_ns <= f.first_ns && s.start_ns + 40 * MS > head, "{} against {head}", s.start_ns);
}

#[test]
fn a_loop_that_leaves_bins_empty_between_its_bursts_is_found_whole() {
    // A loop waiting for its data: every 160 ms a burst of 30 kernels
    // (0.5 ms each, back to back), then the GPU idle; from 1 s to ~8.5 s
    // of a 10 s session (40 ms bins: one holds the burst, the next three
    // nothing). No NVTX range.
    let names = names("burst_", 30);
    let mut l = Launcher::new();
    // Start-up: one kernel.
    l.kernel(c"init", 100 * MS, MS);
    // Five steps in a row come 40 ms apart (the loader caught up): the
    // only bins that settle.
    let begin = |step: u64| match step {
        0..=20 => step * 160,
        21..=25 => 20 * 160 + (step - 20) * 40,
        _ => 20 * 160 + 5 * 40 + (step - 25) * 160,
    };
    for step in 0..50u64 {
        let t0 = 1_000 * MS + begin(step) * MS;
        for (i, name) in names.iter().enumerate() {
            l.kernel(name, t0 + i as u64 * MS / 2, MS / 2);
        }
    }
    let end = 10_000 * MS;
    let agg = l.a.finish(end);
    let bins = crate::report::steady::of_session(&agg.timeline, 0, end).expect("a steady state");
    assert!(bins.settled && bins.wall_ns() < 400 * MS, "its bins alone give a sliver: {bins:?}");
    let r = crate::report::Report::build(agg, 0, end);
    let s = r.session_steady.expect("a steady state");
    let f = s.steps.expect("steps found");
    assert_eq!((f.kernels_per_step, f.median_ns), (30, 160 * MS), "{f:?}");
    assert!(s.start_ns >= 960 * MS && s.start_ns <= 1_000 * MS, "{s:?}");
    let last = 1_000 * MS + begin(49) * MS;
    assert!(s.end_ns >= last && s.end_ns <= last + 200 * MS, "{s:?}");
}

#[test]
fn a_short_loop_is_answered_over_the_bins_it_fills_whole() {
    // After 8.7 s of start-up (a kernel now and then), 300 steps of 5
    // kernels back to back, 1.2 ms a step, beginning 17 ms into a 40 ms
    // bin and ending inside another: the GPU busy throughout.
    let names = names("k", 5);
    let mut l = Launcher::new();
    for k in 0..8u64 {
        l.kernel(&names[0], 500 * MS + k * 1000 * MS, MS);
    }
    let head = 8_737 * MS;
    for step in 0..300u64 {
        for (i, name) in names.iter().enumerate() {
            l.kernel(name, head + step * 1_200_000 + i as u64 * 240_000, 240_000);
        }
    }
    let end = 9_300 * MS;
    let r = crate::report::Report::build(l.a.finish(end), 0, end);
    let s = r.session_steady.expect("a steady state");
    assert!(s.steps.is_some_and(|f| f.median_ns == 1_200_000), "{s:?}");
    // Whole bins of the loop: busy all of it (the partial ones would put
    // it at 95%).
    let busy = s.kernel_ns as f64 / s.wall_ns() as f64;
    assert!(busy > 0.99 && s.wall_ns() >= 280 * MS, "{busy} over {} ms", s.wall_ns() / MS);
}

#[test]
fn a_dense_start_before_a_waiting_loop_is_not_its_steady_state() {
    // 120 ms of dense start-up kernels (three 40 ms bins that settle), then
    // a loop of 30-kernel bursts every 160 ms from 1 s to 9 s, its bins
    // full and empty in turn. No NVTX range.
    let (warm, burst) = (names("warm_", 7), names("burst_", 30));
    let mut l = Launcher::new();
    for k in 0..240u64 {
        l.kernel(&warm[k as usize % warm.len()], 400 * MS + k * MS / 2, MS / 4);
    }
    for step in 0..50u64 {
        for (i, name) in burst.iter().enumerate() {
            l.kernel(name, 1_000 * MS + step * 160 * MS + i as u64 * MS / 2, MS / 2);
        }
    }
    let end = 10_000 * MS;
    let agg = l.a.finish(end);
    let bins = crate::report::steady::of_session(&agg.timeline, 0, end).expect("a steady state");
    assert!(bins.settled && bins.end_ns <= 600 * MS, "its bins settle on the start: {bins:?}");
    let r = crate::report::Report::build(agg, 0, end);
    let s = r.session_steady.expect("a steady state");
    let f = s.steps.expect("steps found");
    assert_eq!((f.kernels_per_step, f.median_ns), (30, 160 * MS), "{f:?}");
    assert!(s.start_ns >= 960 * MS && s.end_ns >= 8_840 * MS, "{s:?}");
}

#[test]
fn a_steady_state_of_its_own_stays_before_a_longer_loop_of_other_kernels() {
    // 2 s of a dense loop (5 kernels in 8 ms), then 6 s of bursts of other
    // kernels every 160 ms: the steady state its bins give is the first,
    // and the second loop (the kernels kept last) does not replace it.
    let (train, eval) = (names("train_", 5), names("eval_", 30));
    let mut l = Launcher::new();
    for step in 0..250u64 {
        for (i, name) in train.iter().enumerate() {
            l.kernel(name, 1_000 * MS + step * 8 * MS + 3 * MS + i as u64 * MS, MS);
        }
    }
    for step in 0..38u64 {
        for (i, name) in eval.iter().enumerate() {
            l.kernel(name, 3_000 * MS + step * 160 * MS + i as u64 * MS / 2, MS / 2);
        }
    }
    let end = 9_200 * MS;
    let r = crate::report::Report::build(l.a.finish(end), 0, end);
    let s = r.session_steady.expect("a steady state");
    assert!(s.start_ns <= 1_040 * MS && s.end_ns <= 3_100 * MS, "{s:?}");
}
