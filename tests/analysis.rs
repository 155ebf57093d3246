//! CPU tests of the analysis on synthetic reports: every verdict a range
//! can get, the idle-gap split behind it, hardware and model MFU, the
//! findings and their ranking, and reports written by schema-1 code.

mod records;
use gpuscope::analysis::{analyze, Analysis, Finding, RangeAnalysis};
use gpuscope::report::{Declared, IdleSplit, Report};
use gpuscope::testing::{HostEvent, Replay};
use records::*;
use std::ffi::CStr;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// Builds a report range by range: host events go in as they happen, kernel
/// records are collected into one buffer, as CUPTI delivers them.
struct Zoo {
    rp: Replay,
    next_instance: u64,
    next_corr: u32,
    records: Vec<u8>,
}

impl Zoo {
    fn new(metrics: bool) -> Self {
        let rp = if metrics {
            Replay::with_metrics(vec![h200()], 0, gpuscope::MetricSet::default().with_tensor().names())
        } else {
            Replay::new(vec![h200()], 0)
        };
        Zoo { rp, next_instance: 1, next_corr: 1, records: Vec::new() }
    }

    /// Opens `name` at `start`, runs `body`, closes it at `end`.
    fn range(&mut self, name: &str, start: u64, end: u64, body: impl FnOnce(&mut Zoo, u64, u32)) {
        let path = self.rp.path(&[name]);
        let instance = self.next_instance;
        self.next_instance += 1;
        self.rp.host_event(HostEvent::Push { instance, parent: 0, path, tid: 1, ts: start });
        body(self, instance, path);
        self.rp.host_event(HostEvent::Pop { instance, ts: end });
    }

    /// A launch at `ts` inside `instance`, whose kernel runs over
    /// `[start, end)` with `grid` blocks; `values`: measured metrics.
    #[allow(clippy::too_many_arguments)]
    fn kernel(
        &mut self,
        (instance, path): (u64, u32),
        name: &'static CStr,
        ts: u64,
        start: u64,
        end: u64,
        grid: i32,
        values: Option<Vec<f64>>,
    ) {
        let corr = self.next_corr;
        self.next_corr += 1;
        let profiled = values.is_some();
        self.rp.host_event(HostEvent::Launch {
            correlation_id: corr,
            tid: 1,
            path,
            instance,
            graph: false,
            profiled,
            inherited: false,
            ts,
            cost_ns: 0,
            prev_call_ns: 0,
        });
        if let Some(v) = values {
            self.rp.host_event(HostEvent::KernelMetrics { correlation_id: corr, values: Some(v) });
        }
        self.records.extend(kernel_grid(name, corr, start, end, grid, 256));
    }

    fn finish(mut self, end: u64) -> (Report, Analysis) {
        self.rp.buffer(&self.records);
        let r = self.rp.finish(0, end);
        let a = analyze(&r);
        println!("{}", r.to_table(100));
        (r, a)
    }
}

fn range<'a>(a: &'a Analysis, path: &str) -> &'a RangeAnalysis {
    a.ranges.iter().find(|g| g.path == path).unwrap_or_else(|| panic!("no range {path}"))
}

/// Measured values in the order of the default set plus `tensor`:
/// occupancy, SM efficiency, duration, cycles, DRAM read and write, issue
/// active, tensor active, then tensor FLOPs (bf16, fp16, tf32, fp8, int8,
/// fp64).
fn measured(occ: f64, eff: f64, dur_ns: u64, dram: f64, issue: f64, tensor: f64, bf16_flops: f64) -> Vec<f64> {
    vec![
        occ,
        eff,
        dur_ns as f64,
        dur_ns as f64 * 1.98,
        dram / 2.0,
        dram / 2.0,
        issue,
        tensor,
        bf16_flops,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
    ]
}

#[test]
fn timeline_ranges_are_launch_host_sync_or_copy_bound_and_busy_ones_gpu_or_latency_bound() {
    let mut z = Zoo::new(false);
    // 100 kernels of 2 us launched every 10 us: 8 us launch gaps.
    z.range("launch", 0, 1_000 * US, |z, i, p| {
        for n in 0..100 {
            let t = n * 10 * US;
            z.kernel((i, p), c"tiny", t, t + 4 * US, t + 6 * US, 132, None);
        }
    });
    // Kernels of 50 us, one every 2 ms: the host works in between.
    z.range("host", 1_000 * US, 11_000 * US, |z, i, p| {
        for n in 0..5 {
            let t = 1_000 * US + n * 2 * MS;
            z.kernel((i, p), c"step_kernel", t, t + 5 * US, t + 55 * US, 132 * 8, None);
        }
    });
    // A 2 us kernel, the host waiting for it, the next launch 5 us after.
    z.range("sync", 11_000 * US, 12_000 * US, |z, i, p| {
        for n in 0..100 {
            let t = 11_000 * US + n * 10 * US;
            z.kernel((i, p), c"tiny", t, t + 3 * US, t + 5 * US, 132, None);
            z.records.extend(sync(t + US, t + 6 * US));
        }
    });
    // 4 ms pageable copies, each followed by a 10 us kernel.
    z.range("copies", 12_000 * US, 32_000 * US, |z, i, p| {
        for n in 0..4 {
            let t = 12_000 * US + n * 5 * MS;
            z.records.extend(memcpy(9_000 + n as u32, t + 10 * US, t + 4 * MS, 64 << 20));
            z.rp.host_event(HostEvent::HostCopy {
                start: t,
                end: t + 4 * MS + 20 * US,
                correlation_id: 9_000 + n as u32,
                instance: i,
            });
            z.kernel(
                (i, p),
                c"step_kernel",
                t + 4 * MS + 30 * US,
                t + 4 * MS + 35 * US,
                t + 4 * MS + 45 * US,
                132 * 8,
                None,
            );
        }
    });
    // One block for most of a millisecond.
    z.range("one block", 32_000 * US, 33_000 * US, |z, i, p| {
        z.kernel((i, p), c"one_block_spin", 32_000 * US, 32_005 * US, 32_995 * US, 1, None);
    });
    // A full grid for most of a millisecond.
    z.range("busy", 33_000 * US, 34_000 * US, |z, i, p| {
        z.kernel((i, p), c"big", 33_000 * US, 33_005 * US, 33_995 * US, 132 * 8, None);
    });
    let (r, a) = z.finish(34_000 * US);
    let bound = |p: &str| range(&a, p).verdict.bound.clone();
    assert_eq!(bound("launch"), "launch-bound", "{:?}", range(&a, "launch"));
    assert_eq!(bound("host"), "host-bound", "{:?}", range(&a, "host"));
    assert_eq!(bound("sync"), "sync-bound", "{:?}", range(&a, "sync"));
    assert_eq!(bound("copies"), "host-bound", "{:?}", range(&a, "copies"));
    assert_eq!(bound("one block"), "latency-bound", "{:?}", range(&a, "one block"));
    assert_eq!(bound("busy"), "gpu-bound", "{:?}", range(&a, "busy"));
    // The idle split behind them.
    let idle = |p: &str| range(&a, p).idle.unwrap();
    assert_eq!(idle("launch").launch_ns, 1_000 * US - 100 * 2 * US, "every gap is a launch gap");
    let host = idle("host");
    assert!(host.host_ns > 9 * MS && host.launch_ns < 100 * US, "{host:?}");
    let s = idle("sync");
    // 99 gaps of 8 us between kernels, and the 5 us from the last kernel to
    // the range's end, all begun in a sync.
    assert_eq!(s.sync_ns, 99 * 8 * US + 5 * US);
    let c = idle("copies");
    assert_eq!(c.copy_ns, 4 * (4 * MS + 20 * US), "host copy calls cover their gaps: {c:?}");
    assert!(range(&a, "one block").utilization_pct > 98.0);
    // Session idle adds up with busy time.
    let total = r.idle.unwrap().total();
    let busy: u64 = 100 * 2 * US + 5 * 50 * US + 100 * 2 * US + 4 * 10 * US + 990 * US + 990 * US;
    assert_eq!(total + busy, 34_000 * US);
    // Findings: each cause where it happened, with its advice, costliest
    // first; the kernel that fills one SM.
    let kinds: Vec<(&str, Option<&str>)> = a.findings.iter().map(|f| (f.kind.as_str(), f.range.as_deref())).collect();
    for want in
        [("copies", Some("copies")), ("host-idle", Some("host")), ("dispatch", Some("launch")), ("sync", Some("sync"))]
    {
        assert!(kinds.contains(&want), "{want:?} in {kinds:?}");
    }
    assert!(a.findings.windows(2).all(|w| w[0].cost_ns >= w[1].cost_ns), "ranked by cost");
    assert_eq!(a.findings[0].kind, "copies", "16 ms of copies cost the most");
    // Host advice names pageable copies only where copies happened.
    let host_advice = |r: &str| {
        a.findings.iter().find(|f| f.kind == "host-idle" && f.range.as_deref() == Some(r)).unwrap().advice.clone()
    };
    assert!(!host_advice("host").contains("pageable"), "{}", host_advice("host"));
    assert!(
        host_advice("copies").contains("4 of its copies per call are from pageable memory"),
        "{}",
        host_advice("copies")
    );
    assert!(
        a.findings[0].advice.contains("4 of its 4 copies per call use pageable host memory"),
        "{}",
        a.findings[0].advice
    );
    assert!(a.findings.iter().any(|f| f.kind == "few-sms" && f.kernel.as_deref() == Some("one_block_spin")));
    assert!(a.notes.iter().any(|n| n.starts_with("trace mode")), "{:?}", a.notes);
    let table = r.to_table(100);
    assert!(table.trim_end().lines().last().unwrap().starts_with("         "), "the table ends with the findings");
    assert!(table.lines().all(|l| l.chars().count() <= 100), "{table}");
}

#[test]
fn counters_make_kernels_compute_memory_or_latency_bound_and_give_hardware_mfu() {
    let mut z = Zoo::new(true);
    let peak_bw = 4.8e12; // H200, bytes/s
    let bf16 = 989.4e12;
    // A GEMM at 50% of the bf16 peak, busy for the whole millisecond.
    z.range("gemm", 0, MS, |z, i, p| {
        let v = measured(15.0, 96.0, MS, 1e8, 20.0, 90.0, 0.5 * bf16 * 1e-3);
        z.kernel((i, p), c"gemm", 0, 0, MS, 132 * 4, Some(v));
    });
    // A copy at 80% of DRAM bandwidth.
    z.range("copy", MS, 2 * MS, |z, i, p| {
        let v = measured(97.0, 92.0, MS, 0.8 * peak_bw * 1e-3, 3.0, 0.0, 0.0);
        z.kernel((i, p), c"copy", MS, MS, 2 * MS, 132 * 32, Some(v));
    });
    // Neither: issue slots 30% busy, DRAM idle.
    z.range("latency", 2 * MS, 3 * MS, |z, i, p| {
        let v = measured(12.0, 95.0, MS, 1e6, 30.0, 0.0, 0.0);
        z.kernel((i, p), c"spin", 2 * MS, 2 * MS, 3 * MS, 132 * 8, Some(v));
    });
    // A measured launch: 1 ms of kernel inside 9 ms of gpuscope's own
    // measurement. Without it the range would look host-bound.
    z.range("measured", 3 * MS, 13 * MS, |z, i, p| {
        z.rp.host_event(HostEvent::Overhead { start: 3 * MS, end: 12 * MS });
        let v = measured(60.0, 98.0, MS, 1e6, 96.0, 0.0, 0.0);
        z.kernel((i, p), c"fma", 3 * MS, 8 * MS, 9 * MS, 132 * 16, Some(v));
    });
    let (mut r, _) = z.finish(13 * MS);
    r.declared.push(Declared {
        range: "gemm".into(),
        flops: Some(0.25 * bf16 * 1e-3),
        work: Some(512.0),
        unit: Some("tokens".into()),
    });
    let a = analyze(&r);
    let g = range(&a, "gemm");
    assert_eq!(g.verdict.bound, "compute-bound", "{:?}", g.verdict);
    assert!(g.verdict.evidence.contains("tensor cores"), "{}", g.verdict.evidence);
    assert!((g.hardware_mfu_pct.unwrap() - 50.0).abs() < 1e-6, "{:?}", g.hardware_mfu_pct);
    assert!((g.model_mfu_pct.unwrap() - 25.0).abs() < 1e-6, "{:?}", g.model_mfu_pct);
    assert!((g.throughput_per_s.unwrap() - 512_000.0).abs() < 1e-3);
    assert_eq!(range(&a, "copy").verdict.bound, "memory-bound");
    assert!((range(&a, "copy").dram_pct.unwrap() - 80.0).abs() < 1e-6);
    let l = range(&a, "latency");
    assert_eq!(l.verdict.bound, "latency-bound");
    assert_eq!((l.flops, l.arithmetic_intensity, l.ridge_point), (Some(0.0), None, None), "no FLOPs, no roofline");
    assert!((g.arithmetic_intensity.unwrap() - 0.5 * bf16 * 1e-3 / 1e8).abs() < 1e-6);
    assert!((g.ridge_point.unwrap() - bf16 / peak_bw).abs() < 1e-6);
    assert!(l.verdict.evidence.contains("neither near its limit"), "{}", l.verdict.evidence);
    let m = range(&a, "measured");
    assert_eq!(m.idle.unwrap().profiler_ns, 9 * MS - MS, "the overhead not covered by the kernel");
    assert_eq!(m.active_ns, 2 * MS);
    assert_eq!(m.verdict.bound, "compute-bound", "{:?}", m.verdict);
    // Findings: the memory-bound kernel, and the latency-bound one with low
    // occupancy.
    assert!(a.findings.iter().any(|f| f.kind == "memory-bound" && f.kernel.as_deref() == Some("copy")));
    assert!(a.findings.iter().any(|f| f.kind == "low-occupancy" && f.kernel.as_deref() == Some("spin")));
    // JSON carries the analysis and reads back to the same report.
    let json = r.to_json();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["schema_version"], 3);
    assert!(v["findings"].as_array().unwrap().len() >= 2);
    assert!(v["kernels"].as_array().unwrap().iter().any(|k| k["analysis"]["verdict"]["bound"] == "memory-bound"));
    assert_eq!(Report::from_json(&json).unwrap(), r);
}

/// A 10 ms `step` whose host waits 9 ms inside `step/data`, then runs one
/// kernel.
fn step_waiting_in_data() -> (Report, Analysis) {
    let mut z = Zoo::new(false);
    let step = z.rp.path(&["step"]);
    let data = z.rp.path(&["step", "data"]);
    z.rp.host_event(HostEvent::Push { instance: 1, parent: 0, path: step, tid: 1, ts: 0 });
    z.rp.host_event(HostEvent::Push { instance: 2, parent: 1, path: data, tid: 1, ts: 0 });
    z.rp.host_event(HostEvent::Pop { instance: 2, ts: 9 * MS });
    z.kernel((1, step), c"k", 9 * MS, 9 * MS + 10 * US, 10 * MS, 132 * 8, None);
    z.rp.host_event(HostEvent::Pop { instance: 1, ts: 10 * MS });
    z.finish(10 * MS)
}

#[test]
fn a_range_inside_another_takes_the_finding_when_it_explains_it() {
    let (_, a) = step_waiting_in_data();
    let host: Vec<&str> =
        a.findings.iter().filter(|f| f.kind == "host-idle").filter_map(|f| f.range.as_deref()).collect();
    assert_eq!(host, vec!["step/data"], "the inner range says where the host time went");
    assert_eq!(range(&a, "step").verdict.bound, "host-bound");
}

#[test]
fn reports_written_by_schema_1_are_read_and_analysed_with_what_they_have() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data");
    let read = |n: &str| Report::from_json(&std::fs::read_to_string(data.join(n)).unwrap()).unwrap();
    let t = read("schema1-trace.json");
    assert_eq!(t.schema_version, 1);
    assert!(t.idle.is_none() && t.ranges.iter().all(|g| g.idle.is_none()));
    let a = analyze(&t);
    assert!(a.notes.iter().any(|n| n.contains("schema-1 report")), "{:?}", a.notes);
    // Utilisation is the range's own kernels', as schema 1 recorded it.
    let fwd = range(&a, "train/forward");
    assert!((fwd.utilization_pct - 800.0 / 900.0 * 100.0).abs() < 1e-9);
    assert_eq!(fwd.verdict.bound, "gpu-bound");
    assert!(a.peaks.as_ref().is_some_and(|p| p.source.contains("H200 SXM")), "datasheet by name");
    // The metrics-mode one: its range's kernels ran 26% of its time, for
    // reasons schema 1 did not record; its kernel, at 8-10% SM efficiency,
    // is latency-bound.
    let m = analyze(&read("schema1-metrics.json"));
    let phase = range(&m, "phase");
    assert_eq!(phase.verdict.bound, "gpu-idle", "{:?}", phase.verdict);
    assert!(phase.verdict.evidence.contains("GPU idle 74%") && phase.verdict.evidence.contains("schema 1"));
    let k = m.kernels.iter().find(|k| k.name == "k").unwrap().verdict.clone().unwrap();
    assert_eq!(k.bound, "latency-bound");
    assert!(k.evidence.starts_with("SM efficiency 9.5%"), "{}", k.evidence);
    // And they render, in every format.
    for r in [&t, &read("schema1-metrics.json")] {
        for f in [gpuscope::Format::Table, gpuscope::Format::Json, gpuscope::Format::Csv, gpuscope::Format::ChromeTrace]
        {
            assert!(!r.render(f).is_empty());
        }
    }
}

#[test]
fn a_range_whose_window_runs_other_threads_kernels_is_not_judged_by_its_own() {
    let mut z = Zoo::new(false);
    let bwd = z.rp.path(&["backward"]);
    z.rp.host_event(HostEvent::Push { instance: 1, parent: 0, path: bwd, tid: 1, ts: 0 });
    // The range's own launch: one tiny one-block kernel.
    z.kernel((1, bwd), c"zero_grad", 0, US, 3 * US, 1, None);
    // Another thread's kernels (no range open there) fill the window.
    z.kernel((0, 0), c"autograd_gemm", 5 * US, 10 * US, 990 * US, 132 * 8, None);
    z.rp.host_event(HostEvent::Pop { instance: 1, ts: MS });
    let (_, a) = z.finish(MS);
    let g = range(&a, "backward");
    assert_eq!(g.verdict.bound, "gpu-bound", "{:?}", g.verdict);
    assert!(g.verdict.evidence.contains("launched before it or outside it"), "{}", g.verdict.evidence);
    assert!(g.utilization_pct > 98.0);
}

#[test]
fn a_finding_split_among_inner_ranges_is_left_to_them() {
    let mut z = Zoo::new(false);
    let (root, a, b) = (z.rp.path(&["run"]), z.rp.path(&["run", "a"]), z.rp.path(&["run", "b"]));
    z.rp.host_event(HostEvent::Push { instance: 1, parent: 0, path: root, tid: 1, ts: 0 });
    // Two inner ranges of 5 ms of host work each, each ending in a kernel.
    for (inst, path, t0) in [(2u64, a, 0u64), (3, b, 5 * MS)] {
        z.rp.host_event(HostEvent::Push { instance: inst, parent: 1, path, tid: 1, ts: t0 });
        z.kernel((inst, path), c"k", t0 + 4_900 * US, t0 + 4_905 * US, t0 + 5 * MS, 132 * 8, None);
        z.rp.host_event(HostEvent::Pop { instance: inst, ts: t0 + 5 * MS });
    }
    z.rp.host_event(HostEvent::Pop { instance: 1, ts: 10 * MS });
    let (_, an) = z.finish(10 * MS);
    let host: Vec<&str> =
        an.findings.iter().filter(|f| f.kind == "host-idle").filter_map(|f| f.range.as_deref()).collect();
    assert_eq!(host.len(), 2, "{host:?}");
    assert!(host.contains(&"run/a") && host.contains(&"run/b") && !host.contains(&"run"), "{host:?}");
}

/// A replay on an H200 whose calibration measured a plain launch call at
/// 4 us and records adding 1 us, and the path of a range `name`.
fn calibrated(name: &str) -> (Replay, u32) {
    let mut rp = Replay::new(vec![h200()], 0);
    let path = rp.path(&[name]);
    rp.host_event(HostEvent::Calibrated { record_ns: 1_000, plain_ns: 4_000, traced_ns: 5_000 });
    (rp, path)
}

/// A kernel launch on thread 1 at `ts` whose callback took 200 ns, the
/// thread's previous launch call having taken `prev_call_ns`.
fn timed_launch(correlation_id: u32, path: u32, instance: u64, ts: u64, prev_call_ns: u32) -> HostEvent {
    let mut e = HostEvent::launch(correlation_id, 1, path, instance, ts);
    if let HostEvent::Launch { cost_ns, prev_call_ns: prev, .. } = &mut e {
        (*cost_ns, *prev) = (200, prev_call_ns);
    }
    e
}

/// A launch-bound step of 10 launches 20 us apart whose 5 us kernels leave
/// the GPU idle the rest of the time, each launch call timed at
/// `call_ns`, in a session whose calibration measured a plain launch call
/// at 4 us and records adding 1 us.
fn launch_bound_steps(call_ns: u32) -> Analysis {
    let (mut rp, step) = calibrated("cost-step");
    let mut records = Vec::new();
    let mut corr = 1;
    for s in 0..20u64 {
        let t0 = s * 200 * US;
        rp.host_event(HostEvent::Push { instance: s + 1, parent: 0, path: step, tid: 1, ts: t0 });
        for l in 0..10u64 {
            let ts = t0 + l * 20 * US;
            rp.host_event(timed_launch(corr, step, s + 1, ts, call_ns));
            records.extend(kernel_grid(c"small", corr, ts + 2 * US, ts + 7 * US, 132, 256));
            corr += 1;
        }
        rp.host_event(HostEvent::Pop { instance: s + 1, ts: t0 + 200 * US });
    }
    rp.buffer(&records);
    analyze(&rp.finish(0, 20 * 200 * US))
}

#[test]
fn gpuscope_s_own_launch_cost_is_taken_out_of_the_host_s_idle_time_before_judging() {
    // Measured: 5 us of kernel per 20 us: 25% busy.
    let a = launch_bound_steps(9_000);
    let g = range(&a, "cost-step");
    assert_eq!(g.count, 20);
    // Launch calls took 9 us against a plain 4 us: 5 us each, 50 us a step
    // (more than records' 1 us + the callbacks' 0.2 us).
    // The GPU waited for every launch: each one's cost is idle time of
    // gpuscope's, decided gap by gap.
    assert_eq!(g.profiler_ns, Some(20 * 10 * 5_000));
    assert_eq!(g.idle.unwrap().profiler_ns, 20 * 10 * 5_000);
    assert_eq!(g.idle_measured.unwrap().profiler_ns, 20 * 10 * 5_000, "in the idle time as measured");
    // 50 us of kernels in 150 us without gpuscope: a third busy.
    assert!((g.utilization_pct - 100.0 / 3.0).abs() < 0.5, "{}", g.utilization_pct);
    assert_eq!(g.verdict.bound, "launch-bound");
    assert!(
        g.verdict.evidence.contains("10 launches per call, one every 20.0 us; kernels average 5.0 us"),
        "{}",
        g.verdict.evidence
    );
    let ans = a.answer.as_ref().expect("an answer");
    assert_eq!(ans.range.as_deref(), Some("cost-step"));
    assert_eq!(ans.profiler_ns, Some(50_000), "per step");
    // Untimed launch calls: the calibration's record cost and the callbacks.
    let b = launch_bound_steps(0);
    assert_eq!(range(&b, "cost-step").profiler_ns, Some(20 * 10 * (1_000 + 200)));
}

/// Steps whose host queues 10 launches and waits for their kernels, in a
/// synchronisation (`sync`) or, without one, in its next launch call,
/// which blocks (a full launch queue); `hook_ns` of gpuscope's hooks 100 us
/// before each step; the `wait-step` range's analysis.
fn queue_and_wait_steps(sync: bool, hook_ns: u64) -> RangeAnalysis {
    queue_and_wait_steps_in(calibrated("wait-step"), sync, hook_ns)
}

/// [`queue_and_wait_steps`] replayed into `rp` (calibrated, its path).
fn queue_and_wait_steps_in((mut rp, step): (Replay, u32), sync: bool, hook_ns: u64) -> RangeAnalysis {
    // Each 400 us step: 10 launches 1 us apart (each 5 us slower traced)
    // queue 15 us kernels back to back; the host waits for them in a
    // synchronisation, then works 248 us before the next step (XLA's
    // runtime). The GPU idles ~250 us a step, as it would without
    // gpuscope but for the 5 us by which the next step's first launch
    // came later: 150 us of kernels in a 395 us step.
    let mut records = Vec::new();
    let mut corr = 1;
    for s in 0..20u64 {
        let t0 = s * 400 * US;
        if s > 0 && hook_ns > 0 {
            rp.host_event(HostEvent::OwnCost { tid: 1, instance: s, ns: hook_ns, ts: t0 - 100 * US });
        }
        rp.host_event(HostEvent::Push { instance: s + 1, parent: 0, path: step, tid: 1, ts: t0 });
        for l in 0..10u64 {
            let ts = t0 + l * US;
            // Without a synchronisation, the step's first launch call comes
            // after the previous one blocked.
            let prev_call_ns = if !sync && l == 0 && s > 0 { 92_000 } else { 9_000 };
            rp.host_event(timed_launch(corr, step, s + 1, ts, prev_call_ns));
            let start = t0 + 2 * US + l * 15 * US;
            records.extend(kernel_grid(c"queued", corr, start, start + 15 * US, 132 * 8, 256));
            corr += 1;
        }
        if sync {
            rp.host_event(HostEvent::HostWait { start: t0 + 60 * US, end: t0 + 152 * US, instance: s + 1, main: true });
        }
        rp.host_event(HostEvent::Pop { instance: s + 1, ts: t0 + 400 * US });
    }
    rp.buffer(&records);
    let a = analyze(&rp.finish(0, 20 * 400 * US));
    range(&a, "wait-step").clone()
}

#[test]
fn gpuscope_s_cost_before_the_host_waits_for_the_gpu_is_no_idle_time_of_its_own() {
    for sync in [true, false] {
        let g = queue_and_wait_steps(sync, 0);
        let idle = g.idle.expect("idle figures");
        // One launch's cost a step, not the ten launches' 50 us: 5 us
        // after a synchronisation; after a blocked launch call, its records
        // and callback (1.2 us), its own call time being the wait.
        let per_step = idle.profiler_ns / g.count;
        let one = if sync { 4_000..=6_000 } else { 1_000..=1_400 };
        assert!(one.contains(&per_step), "sync {sync}: {per_step} ns a step: {idle:?}");
        assert!((g.utilization_pct - 150.0 / 395.0 * 100.0).abs() < 2.0, "sync {sync}: {}", g.utilization_pct);
    }
}

#[test]
fn without_the_host_s_waits_gpuscope_s_whole_cost_comes_out_of_the_host_s_idle_time() {
    // Sync records off: nothing says when the host waited, so each step is
    // charged its ten launches' 5 us (the launch calls' 9 us over the
    // plain 4), as before the cost was charged gap by gap.
    let mut rp = Replay::without_host_waits(vec![h200()], 0);
    let step = rp.path(&["wait-step"]);
    rp.host_event(HostEvent::Calibrated { record_ns: 1_000, plain_ns: 4_000, traced_ns: 5_000 });
    let g = queue_and_wait_steps_in((rp, step), false, 0);
    let idle = g.idle.expect("idle figures");
    let per_step = idle.profiler_ns / g.count;
    assert!(per_step.abs_diff(50_000) < 5_000, "{per_step} ns a step: {idle:?}");
}

#[test]
fn gpuscope_s_cost_after_a_launch_call_that_blocked_still_delays_the_next_launch() {
    // The previous step's last launch call blocked until ~100 us into its
    // step; the hooks' 30 us came after that, 100 us before this step's
    // first launch, which the idle GPU waited for: the wait does not wipe
    // them.
    let g = queue_and_wait_steps(false, 30_000);
    let per_step = g.idle.expect("idle figures").profiler_ns / g.count;
    // 19 of the 20 steps follow hooks: theirs and a launch's 1.2 us each.
    let expected = (19 * (30_000 + 1_200) + 1_200) / 20;
    assert!(per_step.abs_diff(expected) < 500, "{per_step} ns a step, {expected} expected");
}

#[test]
fn after_launches_between_trace_windows_a_blocked_call_s_wait_is_placed_at_the_next_launch() {
    // A traced launch, launches between trace windows (counted, not
    // recorded: the thread's last timed call is one of them), hooks, then a
    // traced launch whose previous call blocked. Where that call began is
    // unknown: the wait is put at this launch, not 92 us after the last
    // traced one (which would charge the hooks after it as gpuscope's).
    let (mut rp, step) = calibrated("window-step");
    rp.host_event(HostEvent::Push { instance: 1, parent: 0, path: step, tid: 1, ts: 0 });
    rp.host_event(timed_launch(1, step, 1, 0, 9_000));
    let mut records = kernel_grid(c"first", 1, 2 * US, 20 * US, 132 * 8, 256);
    rp.host_event(HostEvent::UntracedLaunches {
        path: step,
        instance: 1,
        launches: 5,
        graphs: 0,
        start: 100 * US,
        end: 400 * US,
    });
    rp.host_event(HostEvent::OwnCost { tid: 1, instance: 1, ns: 30_000, ts: 500 * US });
    rp.host_event(timed_launch(2, step, 1, 1_000 * US, 92_000));
    records.extend(kernel_grid(c"second", 2, 1_002 * US, 1_020 * US, 132 * 8, 256));
    rp.host_event(HostEvent::Pop { instance: 1, ts: 1_100 * US });
    rp.buffer(&records);
    let a = analyze(&rp.finish(0, 1_100 * US));
    let idle = range(&a, "window-step").idle.expect("idle figures");
    assert!(idle.profiler_ns < 5_000, "{} ns charged: the hooks' 30 us before the wait", idle.profiler_ns);
}

/// A kernel launch on thread 1 at `ts`, in range instance `instance` of
/// `path`, not measured.
fn plain_launch(correlation_id: u32, path: u32, instance: u64, ts: u64) -> HostEvent {
    HostEvent::launch(correlation_id, 1, path, instance, ts)
}

/// Five 10 ms steps of `name`: 6 ms of host work (inside `name/data` when
/// `data`), then, when `copy` is `Some(pinned)`, a 4 MiB host-to-device
/// copy, then 3.5 ms of kernels; `forks` child processes forked first.
fn host_steps(name: &str, data: bool, copy: Option<bool>, forks: u32) -> Analysis {
    analyze(&host_steps_before(name, data, copy, forks, c"step_kernel"))
}

/// [`host_steps`]' report, each step's kernel named `kernel`.
fn host_steps_before(name: &str, data: bool, copy: Option<bool>, forks: u32, kernel: &'static CStr) -> Report {
    let mut rp = Replay::new(vec![h200()], 0);
    let step = rp.path(&[name]);
    let data_path = rp.path(&[name, "data"]);
    for f in 0..forks {
        rp.host_event(HostEvent::Forked { ts: f as u64 });
    }
    let mut records = Vec::new();
    for s in 0..5u64 {
        let (t, inst, corr) = (s * 10 * MS, 10 * s + 1, 10 * s as u32 + 1);
        rp.host_event(HostEvent::Push { instance: inst, parent: 0, path: step, tid: 1, ts: t });
        let inner = if data { inst + 1 } else { inst };
        if data {
            rp.host_event(HostEvent::Push { instance: inner, parent: inst, path: data_path, tid: 1, ts: t });
        }
        if let Some(pinned) = copy {
            let (a, b) = (t + 5_900 * US, t + 5_990 * US);
            records.extend(if pinned {
                memcpy_pinned(corr + 5, a, b, 4 << 20)
            } else {
                memcpy(corr + 5, a, b, 4 << 20)
            });
            rp.host_event(HostEvent::HostCopy { start: a, end: b, correlation_id: corr + 5, instance: inner });
        }
        if data {
            rp.host_event(HostEvent::Pop { instance: inner, ts: t + 6 * MS });
        }
        rp.host_event(plain_launch(corr, step, inst, t + 6 * MS));
        records.extend(kernel_grid(kernel, corr, t + 6 * MS + 5 * US, t + 9_500 * US, 132 * 8, 256));
        rp.host_event(HostEvent::Pop { instance: inst, ts: t + 10 * MS });
    }
    rp.buffer(&records);
    rp.finish(0, 50 * MS)
}

fn host_advice(a: &Analysis) -> String {
    a.findings
        .iter()
        .find(|f| f.kind == "host-idle")
        .map(|f| f.advice.clone())
        .unwrap_or_else(|| panic!("{:#?}", a.findings))
}

#[test]
fn data_loader_advice_needs_evidence_of_data_loading_and_is_not_given_twice() {
    // A data range, pageable batch copies, no workers: load off the thread, pin.
    let a = host_steps("adv-data", true, Some(false), 0);
    assert_eq!(range(&a, "adv-data").verdict.bound, "host-bound");
    let h = host_advice(&a);
    assert!(h.contains("adv-data/data") && h.contains("DataLoader(num_workers>0)") && h.contains("pin it"), "{h}");
    // Its kernel is no framework's: pinning in CUDA's calls.
    assert!(h.contains("cudaMallocHost") && !h.contains("pin_memory"), "{h}");
    // Workers forked and pinned copies: neither is advised again.
    let a = host_steps("adv-workers", true, Some(true), 8);
    let h = host_advice(&a);
    assert!(h.contains("already runs in other processes (8 forked") && !h.contains("num_workers>0"), "{h}");
    assert!(!h.contains("pin it"), "{h}");
    // Batch-sized copies alone are evidence of data loading.
    let h = host_advice(&host_steps("adv-copies", false, Some(true), 0));
    assert!(h.contains("copies 4.0 MiB per call") && h.contains("num_workers>0"), "{h}");
    // No data range, no copies: no data-loader advice, where the host was.
    let h = host_advice(&host_steps("adv-none", false, None, 0));
    assert!(h.contains("nothing there looks like data loading") && !h.contains("DataLoader"), "{h}");
    // The answer leads with the step and its host work.
    let ans = host_steps("adv-answer", true, Some(false), 0).answer.unwrap();
    assert_eq!((ans.range.as_deref(), ans.calls, ans.verdict.bound.as_str()), (Some("adv-answer"), 5, "host-bound"));
    assert_eq!(
        ans.parts.iter().find(|p| p.what == "host work").map(|p| p.detail.as_str()),
        Some("mostly in adv-answer/data")
    );
}

#[test]
fn each_kernel_carries_the_host_work_that_its_launches_ended() {
    // The host works 6 ms before each step's launch: the kernel carries
    // it (where in the step the host worked), in the JSON too.
    let r = host_steps_before("adv-before", false, None, 0, c"step_kernel");
    let k = &r.kernels[0];
    assert!(k.stats.host_before_ns >= 5 * 5 * MS, "host work before its launches: {}", k.stats.host_before_ns);
    assert!(k.stats.host_before_ns <= 50 * MS);
    assert!(r.to_json().contains("\"host_before_ns\""));
}

/// A program without ranges: 200 rounds of 6 ms of host work, then one
/// 3.5 ms kernel named `kernel`; `library`: an idle range of that NVTX
/// domain too (XLA's TSL, say).
fn rangeless_host_work(kernel: &'static CStr, library: Option<&str>) -> Report {
    let mut rp = Replay::new(vec![h200()], 0);
    let root = rp.path(&[]);
    let lib = rp.path(&["library range"]);
    rp.host_event(HostEvent::Push { instance: 1, parent: 0, path: lib, tid: 2, ts: 0 });
    rp.host_event(HostEvent::Pop { instance: 1, ts: MS });
    let mut records = Vec::new();
    for s in 0..200u64 {
        let (t, corr) = (s * 10 * MS, s as u32 + 1);
        rp.host_event(plain_launch(corr, root, 0, t + 6 * MS));
        records.extend(kernel_grid(kernel, corr, t + 6 * MS + 5 * US, t + 9_500 * US, 132 * 8, 256));
    }
    rp.buffer(&records);
    let mut r = rp.finish(0, 2_000 * MS);
    let g = r.ranges.iter_mut().find(|g| g.path.to_string() == "library range").expect("the range");
    // Made a library's (a framework's NVTX domain), or dropped.
    match library {
        Some(domain) => {
            g.path.frames = vec![gpuscope::RangeFrame { domain: Some(domain.into()), name: "XlaCompile".into() }];
            g.library = Some(domain.into());
        }
        None => r.ranges.retain(|g| g.path.to_string() != "library range"),
    }
    r
}

#[test]
fn host_work_advice_says_whether_the_launching_threads_computed_or_waited() {
    let aten = c"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)";
    let advice = |r: &Report| {
        let a = analyze(r);
        let f = a.findings.iter().find(|f| f.kind == "host-idle" && f.range.is_none());
        f.unwrap_or_else(|| panic!("a host-idle finding: {:#?}", a.findings)).advice.clone()
    };
    let mut r = rangeless_host_work(aten, None);
    r.forks = 8;
    // Not read (no launching thread's clock read: a replay, or a report of
    // an older gpuscope): ranges are the way to tell.
    assert_eq!(r.session_steady.as_ref().expect("a steady state").launching_cpu_ns, None);
    let t = advice(&r);
    assert!(t.contains("to see whether it waits for data"), "{t}");
    let s = r.session_steady.as_mut().expect("a steady state");
    let (wall, host, idle) = (s.wall_ns(), s.idle.host_ns, s.idle.total());
    assert!(host > wall / 2, "the host bounds this loop: {host} of {wall} ns");
    // On a CPU all along: their own code, not data, whatever was forked.
    s.launching_cpu_ns = Some(wall);
    let t = advice(&r);
    assert!(t.contains("on a CPU 100%") && t.contains("torch.compile") && !t.contains("add workers"), "{t}");
    // Off a CPU while the GPU idled, loader workers forked: data.
    r.session_steady.as_mut().unwrap().launching_cpu_ns = Some(idle - host);
    let t = advice(&r);
    assert!(t.contains("off a CPU") && t.contains("add workers") && t.contains("prefetch_factor"), "{t}");
    // Blocked in CUDA calls as long as the GPU worked: no less waiting.
    let busy = wall - idle;
    r.session_steady.as_mut().unwrap().cuda_blocked_ns = busy;
    assert!(advice(&r).contains("add workers"));
    // Blocked through the GPU's idle time too: no wait for data, and no
    // code of theirs either: the clocks say nothing, ranges would.
    r.session_steady.as_mut().unwrap().cuda_blocked_ns = busy + host;
    let t = advice(&r);
    assert!(t.contains("to see whether it waits for data") && !t.contains("add workers"), "{t}");
    // Metrics mode replays kernels inside the launch calls: not read.
    r.session_steady.as_mut().unwrap().cuda_blocked_ns = 0;
    r.mode = "metrics".into();
    assert!(advice(&r).contains("to see whether it waits for data"));
    r.mode = "trace".into();
    // Waiting with nothing forked: something else, to be found with ranges.
    r.session_steady.as_mut().unwrap().cuda_blocked_ns = 0;
    r.forks = 0;
    let t = advice(&r);
    assert!(t.contains("waited for something else") && t.contains("torch.cuda.nvtx.range_push"), "{t}");
    // On a CPU, nothing forked, batches copied in the loop: loading on
    // that thread is likely.
    let s = r.session_steady.as_mut().unwrap();
    (s.launching_cpu_ns, s.batch_copies) = (Some(wall), Some(100));
    let t = advice(&r);
    assert!(t.contains("on a CPU 100%") && t.contains("DataLoader(num_workers>0)"), "{t}");
    r.session_steady.as_mut().unwrap().batch_copies = Some(0);
    // Off a CPU for less than half the host idle time: their code.
    r.session_steady.as_mut().unwrap().launching_cpu_ns = Some(idle - host / 3);
    assert!(advice(&r).contains("on a CPU"));
    // A GPU busy 7/8 of the time, the threads on a CPU 37% of it: none of
    // their time off it need have been while the GPU idled.
    let s = r.session_steady.as_mut().unwrap();
    let saved = s.idle;
    (s.idle, s.launching_cpu_ns) = (IdleSplit::from_array([wall / 8, 0, 0, 0, 0, 0, 0]), Some(wall * 37 / 100));
    r.forks = 8;
    let t = advice(&r);
    assert!(t.contains("on a CPU 37%") && !t.contains("add workers"), "{t}");
    // XLA: its runtime's threads launch, and wait for the program's
    // dispatch off a CPU: the clocks say nothing there.
    let mut x = rangeless_host_work(c"loop_add_fusion", Some("TSL"));
    x.forks = 8;
    let s = x.session_steady.as_mut().unwrap();
    s.launching_cpu_ns = Some(0);
    let t = advice(&x);
    assert!(!t.contains("off a CPU") && !t.contains("on a CPU"), "{t}");
    // The figure survives the JSON.
    r.session_steady.as_mut().unwrap().idle = saved;
    let back = Report::from_json(&r.to_json()).expect("the report back");
    assert_eq!(back.session_steady.as_ref().unwrap().launching_cpu_ns, Some(wall * 37 / 100));
}

#[test]
fn advice_names_the_program_s_framework_and_never_another_s() {
    let text = |r: &Report| {
        let a = analyze(r);
        let ans = a.answer.as_ref().expect("an answer");
        assert_eq!(ans.verdict.bound, "host-bound", "{ans:#?}");
        format!("{} {}", ans.actions.iter().map(|x| x.advice.as_str()).collect::<Vec<_>>().join(" "), r.to_table(120))
    };
    let aten = c"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)";
    let t = text(&rangeless_host_work(aten, None));
    assert!(t.contains("torch.cuda.nvtx.range_push") && t.contains("py-spy"), "{t}");
    // No batch copied to the GPU: no data loader to advise on.
    assert!(!t.contains("DataLoader"), "{t}");
    let mut loads = rangeless_host_work(aten, None);
    let copies = serde_json::json!({"kind": "HtoD", "count": 200, "bytes": 200u64 << 20, "total_ns": 20_000_000u64, "pageable": 0});
    loads.memory.memcpy.push(serde_json::from_value(copies).expect("a copy summary"));
    // Copies of that size at start-up only (a model moved to the GPU):
    // the loop waits on no copy.
    let t = text(&loads);
    assert!(!t.contains("DataLoader"), "copies outside the loop: {t}");
    // The loop waits on a small copy of its own (a scalar a step): still
    // no batches, the large copies were start-up's.
    let steady = loads.session_steady.as_mut().expect("a steady state");
    (steady.idle.copy_ns, steady.copies) = (20_000_000, Some(100));
    assert_eq!(steady.batch_copies, Some(0), "counted by the aggregator");
    let t = text(&loads);
    assert!(!t.contains("DataLoader"), "a small copy in the loop, the model's move at start-up: {t}");
    loads.session_steady.as_mut().expect("a steady state").batch_copies = Some(100);
    let t = text(&loads);
    assert!(t.contains("DataLoader(num_workers>0)"), "a batch a step copied in the loop: {t}");
    // A report that did not count the steady state's batch copies: the
    // session's summary, when the loop waited on copies.
    loads.session_steady.as_mut().expect("a steady state").batch_copies = None;
    let t = text(&loads);
    assert!(t.contains("DataLoader(num_workers>0)"), "an older report: {t}");
    // XLA's ranges: JAX's words, no PyTorch.
    let t = text(&rangeless_host_work(c"loop_add_fusion", Some("TSL")));
    assert!(t.contains("nvtx.annotate(\"step\")"), "{t}");
    assert!(!t.contains("torch") && !t.contains("DataLoader"), "{t}");
    // Neither: CUDA's own terms.
    let t = text(&rangeless_host_work(c"step_kernel", None));
    assert!(t.contains("nvtxRangePushA"), "{t}");
    assert!(!t.contains("torch") && !t.contains("DataLoader") && !t.contains("jax"), "{t}");
}

#[test]
fn library_ranges_fold_into_the_range_around_them_without_a_verdict_or_finding() {
    let mut rp = Replay::new(vec![h200()], 0);
    let step = rp.path(&["fold-step"]);
    rp.host_event(HostEvent::Push { instance: 1, parent: 0, path: step, tid: 1, ts: 0 });
    rp.host_event(HostEvent::Pop { instance: 1, ts: 10 * MS });
    let mut r = rp.finish(0, 10 * MS);
    // A cuBLAS range inside the step, idle all its time: a library's.
    let mut lib = r.ranges[0].clone();
    lib.path.frames.push(gpuscope::RangeFrame { domain: Some("cuBLAS".into()), name: "gemm".into() });
    lib.library = Some("cuBLAS".into());
    r.ranges.push(lib);
    let a = analyze(&r);
    let g = a.ranges.iter().find(|g| g.path == "fold-step/cuBLAS::gemm").expect("kept in the analysis");
    assert_eq!((g.verdict.bound.as_str(), g.library.as_deref()), ("folded", Some("cuBLAS")));
    assert!(a.findings.iter().all(|f| f.range.as_deref() != Some("fold-step/cuBLAS::gemm")), "{:#?}", a.findings);
    let t = r.to_table(120);
    assert!(t.contains("1 ranges of libraries' and frameworks' NVTX domains"), "{t}");
    assert!(!t.contains("cuBLAS::gemm"), "folded, not shown: {t}");
    assert!(r.to_json().contains("\"library\": \"cuBLAS\""), "the JSON keeps it");
}

#[test]
fn many_ranges_keep_the_costliest_findings_of_each_kind_and_one_analysis_per_report() {
    // One step with host work inside `step/data`, copied under 300 phases:
    // 300 host-idle findings, of which the 100 costliest are listed.
    let (base, _) = step_waiting_in_data();
    let mut r = base.clone();
    r.ranges.clear();
    r.path_kernels.clear();
    for i in 0..300u64 {
        let phase = gpuscope::RangeFrame { domain: None, name: format!("phase {i}") };
        for g in &base.ranges {
            let mut g = g.clone();
            g.path.frames.insert(0, phase.clone());
            // Later phases wait longer: costs differ, so the cut is by cost.
            if let Some(idle) = g.idle.as_mut() {
                idle.host_ns += i * US;
            }
            g.wall_ns += i * US;
            r.ranges.push(g);
        }
    }
    let a = r.analysis();
    assert!(std::ptr::eq(a, r.analysis()), "one analysis per report, kept");
    let host: Vec<&Finding> = a.findings.iter().filter(|f| f.kind == "host-idle").collect();
    assert_eq!(host.len(), gpuscope::analysis::MAX_FINDINGS_PER_KIND);
    assert!(host.iter().all(|f| f.range.as_deref().is_some_and(|p| p.ends_with("/step/data"))), "inner ranges explain");
    assert_eq!(host[0].range.as_deref(), Some("phase 299/step/data"), "the costliest first");
    assert!(a.notes.iter().any(|n| n.starts_with("200 smaller findings left out")), "{:?}", a.notes);
    // A clone may be edited: it analyses afresh.
    let mut edited = r.clone();
    edited.ranges.truncate(2);
    assert_eq!(edited.analysis().findings.iter().filter(|f| f.kind == "host-idle").count(), 1);
    assert_eq!(analyze(&r), *r.analysis(), "the kept analysis is the analysis");
}

#[test]
fn allocation_records_give_each_devices_peak_and_churn_in_the_steady_state_a_finding() {
    let mut rp = Replay::new(vec![h200()], 0);
    // 1 GiB at start-up, then a step that frees and allocates 256 MiB.
    let mut bytes = memory2(true, 0x10_0000, 1 << 30, MS);
    for i in 0..30u64 {
        bytes.extend(memory2(true, 0x8000_0000, 256 << 20, (10 + 2 * i) * MS));
        bytes.extend(memory2(false, 0x8000_0000, 256 << 20, (11 + 2 * i) * MS));
    }
    rp.buffer(&bytes);
    let mut r = rp.finish(0, 100 * MS);
    let d = &r.memory.devices[0];
    assert_eq!((d.allocations, d.releases), (31, 30));
    assert_eq!(d.peak_live_bytes, (1 << 30) + (256 << 20));
    assert_eq!(d.live_at_end_bytes, 1 << 30);
    let t = r.to_table(120);
    assert!(t.contains("GPU 0 memory: peak 1.25 GiB of 140.40 GiB"), "{t}");
    // Churn in the steady state makes a finding; none without releases.
    let steady = |allocations, releases| {
        let mut s = gpuscope::report::SessionSteady::default();
        (s.start_ns, s.end_ns, s.settled, s.allocations, s.releases) = (10 * MS, 70 * MS, true, allocations, releases);
        s
    };
    r.session_steady = Some(steady(30, 30));
    let a = analyze(&r);
    let f = a.findings.iter().find(|f| f.kind == "allocator-churn").expect("a churn finding");
    assert!(f.message.contains("released device memory 30 times"), "{}", f.message);
    assert!(f.advice.contains("empty_cache"), "{}", f.advice);
    r.session_steady = Some(steady(30, 0));
    assert!(analyze(&r).findings.iter().all(|f| f.kind != "allocator-churn"));
}

/// A report of three `step` calls whose framework allocator starts each at
/// 1 GiB in use and peaks at `step_peak_gib` inside (held: `held_gib`), on
/// a device (140.4 GiB) whose allocations peak at `device_peak_gib`.
fn memory_steps(step_peak_gib: u64, held_gib: u64, device_peak_gib: u64) -> Report {
    const GIB: u64 = 1 << 30;
    let mut rp = Replay::new(vec![h200()], 0);
    let path = rp.path(&["step"]);
    for k in 0..3u64 {
        let (instance, ts) = (k + 1, k * 10 * MS);
        let sample = |at_end, peak| HostEvent::FrameworkMemory {
            instance,
            at_end,
            allocated: GIB,
            reserved: held_gib * GIB,
            peak: peak * GIB,
        };
        rp.host_event(HostEvent::Push { instance, parent: 0, path, tid: 1, ts });
        rp.host_event(sample(false, if k == 0 { 1 } else { step_peak_gib }));
        rp.host_event(sample(true, step_peak_gib));
        rp.host_event(HostEvent::Pop { instance, ts: ts + 5 * MS });
    }
    rp.buffer(&memory2(true, 0x10_0000, device_peak_gib * GIB, MS));
    rp.finish(0, 100 * MS)
}

#[test]
fn what_a_step_adds_sizes_a_larger_batch_against_the_devices_memory() {
    let finding = |a: &Analysis, kind: &str| a.findings.iter().find(|f| f.kind == kind).map(|f| f.message.clone());
    // 8 GiB added per step, held 10 per 9 in use: 8.89 GiB a batch.
    let report = memory_steps(9, 10, 40);
    let fits = analyze(&report);
    let m = finding(&fits, "memory-headroom").expect("room for a larger batch");
    // Shown whatever the findings of lost time are: it costs none.
    assert!(report.to_table(120).contains("Memory [memory-headroom]: GPU 0's device memory peaked"));
    assert!(m.contains("peaked at 40.00 GiB of 140.40 GiB (28%)"), "{m}");
    assert!(m.contains("takes on top of what it starts with (activations, gradients, temporaries) 8.89 GiB"), "{m}");
    assert!(m.contains("twice the batch peaks near 48.89 GiB and fits"), "{m}");
    // 59 GiB added, held 66 per 60: 64.9 GiB; 100 + 64.9 is over 140.4.
    let over = analyze(&memory_steps(60, 66, 100));
    let m = finding(&over, "memory-headroom").expect("the prediction either way");
    assert!(m.contains("twice the batch would need about 164.90 GiB, more than the device has"), "{m}");
    // Close to the device's memory: near capacity, and no headroom.
    let near = analyze(&memory_steps(9, 10, 130));
    assert!(finding(&near, "near-capacity").expect("near capacity").contains("(93%)"));
    for f in near.findings.iter().chain(&fits.findings).chain(&over.findings) {
        assert!(!f.advice.contains("  ") && !f.message.contains("  "), "{f:?}");
    }
    assert!(finding(&near, "memory-headroom").is_none());
    // PyTorch held more than the session saw allocated: memory from before
    // it is not in the peak, so the free memory is not known.
    assert!(finding(&analyze(&memory_steps(9, 50, 40)), "memory-headroom").is_none());
    // Fits but over the headroom share: nothing to say.
    assert!(finding(&analyze(&memory_steps(9, 10, 100)), "memory-headroom").is_none());
}

/// Ten 10 ms `step`s, each a compute kernel over `compute` and an NCCL
/// all-reduce over `comm` (ms from the step's start; the all-reduce on a
/// grid of 2 blocks, as NCCL launches one block per channel).
fn nccl_steps(compute: (u64, u64), comm: (u64, u64)) -> (Report, Analysis) {
    let mut z = Zoo::new(false);
    for i in 0..10u64 {
        let s = i * 10 * MS;
        z.range("step", s, s + 10 * MS, |z, inst, path| {
            z.kernel((inst, path), c"gemm_kernel", s + 10 * US, s + compute.0 * MS, s + compute.1 * MS, 1024, None);
            let nccl = c"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm *, unsigned long, ncclWork *)";
            z.kernel((inst, path), nccl, s + 20 * US, s + comm.0 * MS, s + comm.1 * MS, 2, None);
        });
    }
    z.finish(100 * MS)
}

#[test]
fn exposed_communication_makes_a_step_communication_bound_and_hidden_communication_does_not() {
    // The all-reduce runs after the compute: 5 ms of 10 exposed.
    let (r, a) = nccl_steps((0, 3), (3, 8));
    let g = &r.ranges.iter().find(|g| g.path.to_string() == "step").expect("a step range").clone();
    assert_eq!((g.totals.comm_ns, g.totals.exposed_comm_ns), (50 * MS, 50 * MS));
    let step = range(&a, "step");
    assert_eq!(step.verdict.bound, "communication-bound", "{}", step.verdict.evidence);
    assert!(step.verdict.evidence.contains("0% of their"), "{}", step.verdict.evidence);
    let f = a.findings.iter().find(|f| f.kind == "exposed-communication").expect("an exposed-communication finding");
    assert_eq!(f.range.as_deref(), Some("step"));
    assert!(f.advice.contains("Overlap communication with compute"), "{}", f.advice);
    let answer = a.answer.as_ref().expect("an answer");
    assert!(answer.parts.iter().any(|p| p.what == "communication" && p.pct > 40.0), "{:?}", answer.parts);
    assert!(answer.actions.iter().any(|x| x.advice == f.advice), "{:?}", answer.actions);
    // Two blocks on 132 SMs: a compute kernel's few-SMs finding, never a
    // communication kernel's.
    assert!(a.findings.iter().all(|f| !f.kernel.as_deref().is_some_and(|k| k.contains("nccl"))), "{:#?}", a.findings);
    let k = a.kernels.iter().find(|k| k.name.contains("ncclDevKernel")).expect("the all-reduce is a heavy kernel");
    assert_eq!(k.verdict.as_ref().map(|v| v.bound.as_str()), Some("communication"));

    // The same all-reduce under the compute: hidden, not the bound.
    let (r, a) = nccl_steps((0, 8), (2, 7));
    let g = r.ranges.iter().find(|g| g.path.to_string() == "step").expect("a step range");
    assert_eq!((g.totals.comm_ns, g.totals.exposed_comm_ns), (50 * MS, 0));
    assert_ne!(range(&a, "step").verdict.bound, "communication-bound");
    assert!(a.findings.iter().all(|f| f.kind != "exposed-communication"), "{:#?}", a.findings);

    // Partly hidden: 2 of its 5 ms exposed, 20% of the step: a finding,
    // not the bound (under a quarter of the step).
    let (r, a) = nccl_steps((0, 6), (3, 8));
    let g = r.ranges.iter().find(|g| g.path.to_string() == "step").expect("a step range");
    assert_eq!((g.totals.comm_ns, g.totals.exposed_comm_ns), (50 * MS, 20 * MS));
    assert_ne!(range(&a, "step").verdict.bound, "communication-bound");
    assert!(a.findings.iter().any(|f| f.kind == "exposed-communication"), "{:#?}", a.findings);
}

/// In trace mode (no counters), a kernel whose name says an FP32 product
/// on the FMA pipes gets `fp32-matmul-named`, costed at most what TF32
/// would save; TF32 and BF16 products do not (the program took the
/// advice). A measured one: `tests/checklist.rs`.
#[test]
fn fp32_products_named_so_are_found_in_trace_mode_and_not_where_the_program_took_the_advice() {
    let named = |kernel: &'static CStr| {
        let a = analyze(&host_steps_before("step", false, None, 0, kernel));
        let f: Vec<_> = a.findings.iter().filter(|f| f.kind.as_str().starts_with("fp32-matmul")).cloned().collect();
        (a, f)
    };
    let (a, f) = named(c"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas");
    assert_eq!(f.len(), 1, "{:#?}", a.findings);
    assert_eq!(f[0].kind, "fp32-matmul-named");
    assert!(f[0].message.contains("`ffma`") && f[0].advice.contains("TF32"), "{:?}", f[0]);
    // Five 3.5 ms kernels: up to all but 1/7.4 of them on an H200 (its
    // TF32 tensor peak over its FP32 FMA peak).
    let gpu_ns = 5.0 * 3.5e6;
    assert!(f[0].cost_ns as f64 > 0.8 * gpu_ns && (f[0].cost_ns as f64) < 0.9 * gpu_ns, "{}", f[0].cost_ns);
    for kernel in [
        c"sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_execute_kernel__5x_cublas",
        c"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn",
        c"step_kernel",
    ] {
        let (a, f) = named(kernel);
        assert!(f.is_empty(), "{kernel:?}: {:#?}", a.findings);
    }
}
