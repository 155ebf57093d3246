//! The report's JSON Schema (`docs/reference/report.schema.json`) against
//! the reports this version writes: synthetic trace- and metrics-mode
//! sessions folded from CUPTI records, a report with every optional field
//! filled, and the reports of `tests/data`, each read and written again (as
//! `gpuscope report FILE --format json` does) and, when of this schema
//! version, also as written on the device (`schema3-*.json`: reports of
//! `examples/python/gpt_train.py` under `gpuscope run` in each mode and with
//! `--mode sampling --trace-windows 0/1000`, and of
//! `examples/python/train_loop.py` with `--torch-ranges`, on an H100, their
//! `trace` lists cut to 4 records and memory timelines to 8 points). A field the
//! code adds, renames or stops writing fails here until the schema (and
//! `docs/reference/report-json.md`) follow: the schema's objects are closed
//! (`additionalProperties: false`), fields always written are required,
//! and every field the schema names must appear in one of these reports.
//!
//! `GPUSCOPE_SCHEMA_DUMP=DIR cargo test -p gpuscope --test report_schema`
//! writes the reports checked into DIR.

use gpuscope::report::{Declared, Report};
use gpuscope::testing::{HostEvent, Replay};
use serde_json::{json, Value};
use std::collections::BTreeSet;

mod records;
use records::*;

const SCHEMA: &str = include_str!("../docs/reference/report.schema.json");
const MS: u64 = 1_000_000;

fn schema() -> Value {
    serde_json::from_str(SCHEMA).expect("report.schema.json is JSON")
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&schema()).expect("report.schema.json is a valid JSON Schema")
}

/// What the validator says about `report`, one line per error.
fn errors(v: &jsonschema::Validator, report: &Value) -> Vec<String> {
    v.iter_errors(report).map(|e| format!("{}: {e}", e.instance_path)).collect()
}

/// A launch whose callback took 700 ns, after a launch call of 2.5 us.
fn launch(correlation_id: u32, tid: u32, path: u32, instance: u64, ts: u64) -> HostEvent {
    let mut e = HostEvent::launch(correlation_id, tid, path, instance, ts);
    if let HostEvent::Launch { cost_ns, prev_call_ns, .. } = &mut e {
        (*cost_ns, *prev_call_ns) = (700, 2_500);
    }
    e
}

/// A trace-mode training loop: six `step` calls with `data`, `forward`
/// and `backward` inside (backward's kernels launched by a worker thread
/// with no range of its own), a graph launch, pageable and pinned copies,
/// a memset, host waits, device memory allocations, framework memory and
/// counted FLOPs, a start/end range, a fork, and a kept trace.
fn trace_session() -> Report {
    let mut rp = Replay::new(vec![h200()], 1_000);
    let step = rp.path(&["step"]);
    let data = rp.path(&["step", "data"]);
    let fwd = rp.path(&["step", "forward"]);
    let bwd = rp.path(&["step", "backward"]);
    let request = rp.path(&["request"]);
    rp.host_event(HostEvent::Calibrated { record_ns: 900, plain_ns: 2_000, traced_ns: 2_900 });
    rp.host_event(HostEvent::ThreadName { tid: 1, name: "trainer".into() });
    let mut b = Vec::new();
    let mut corr = 0u32;
    let mut next = || {
        corr += 1;
        corr
    };
    for k in 0..6u64 {
        let t = k * 10 * MS;
        let inst = k * 10 + 1;
        rp.host_event(HostEvent::Push { instance: inst, parent: 0, path: step, tid: 1, ts: t });
        rp.host_event(HostEvent::FrameworkMemory {
            instance: inst,
            at_end: false,
            allocated: 1 << 30,
            reserved: 2 << 30,
            peak: 1 << 30,
        });
        // data: a pageable copy the host waits in.
        rp.host_event(HostEvent::Push { instance: inst + 1, parent: inst, path: data, tid: 1, ts: t + 10_000 });
        let c = next();
        rp.host_event(HostEvent::HostCopy {
            start: t + 20_000,
            end: t + 2 * MS,
            correlation_id: c,
            instance: inst + 1,
        });
        b.extend(memcpy(c, t + 30_000, t + 2 * MS, 64 << 20));
        rp.host_event(HostEvent::Pop { instance: inst + 1, ts: t + 2 * MS + 10_000 });
        // forward: two kernels, a pinned copy, an allocation.
        rp.host_event(HostEvent::Push { instance: inst + 2, parent: inst, path: fwd, tid: 1, ts: t + 2 * MS + 20_000 });
        let c = next();
        rp.host_event(launch(c, 1, fwd, inst + 2, t + 2 * MS + 30_000));
        b.extend(kernel(&K {
            name: c"_Z12matmul_tiledILi16EEvPKfS1_Pfi",
            corr: c,
            start: t + 2 * MS + 40_000,
            end: t + 4 * MS,
            block: 256,
            regs: 44,
            dyn_smem: 0,
            stream: 13,
        }));
        let c = next();
        rp.host_event(launch(c, 1, fwd, inst + 2, t + 2 * MS + 40_000));
        b.extend(kernel_grid(c"one_block", c, t + 4 * MS, t + 5 * MS, 1, 128));
        let c = next();
        rp.host_event(HostEvent::Alloc { correlation_id: c, path: fwd });
        b.extend(memory2(true, 0x9000_0000 + k * 0x1000_0000, 256 << 20, t + 4 * MS));
        b.extend(memcpy_pinned(next(), t + 4 * MS, t + 4 * MS + 100_000, 1 << 20));
        rp.host_event(HostEvent::Flops { instance: inst + 2, flops: 2.0e9 });
        rp.host_event(HostEvent::Pop { instance: inst + 2, ts: t + 5 * MS });
        // backward: launched by thread 2 under the loop thread's range, and
        // a graph launch (two kernels, one correlation id).
        rp.host_event(HostEvent::Push { instance: inst + 3, parent: inst, path: bwd, tid: 1, ts: t + 5 * MS + 10_000 });
        let c = next();
        rp.host_event(HostEvent::Launch {
            correlation_id: c,
            tid: 2,
            path: bwd,
            instance: inst + 3,
            graph: false,
            profiled: false,
            inherited: true,
            ts: t + 5 * MS + 20_000,
            cost_ns: 600,
            prev_call_ns: 2_400,
        });
        b.extend(kernel_grid(c"softmax_fused", c, t + 5 * MS + 30_000, t + 7 * MS, 1024, 256));
        let c = next();
        rp.host_event(HostEvent::Launch {
            correlation_id: c,
            tid: 1,
            path: bwd,
            instance: inst + 3,
            graph: true,
            profiled: false,
            inherited: false,
            ts: t + 7 * MS,
            cost_ns: 900,
            prev_call_ns: 3_000,
        });
        b.extend(kernel_grid(c"tail_wave", c, t + 7 * MS + 10_000, t + 8 * MS, 134, 1024));
        b.extend(kernel_grid(c"tail_wave", c, t + 8 * MS, t + 8 * MS + 500_000, 134, 1024));
        rp.host_event(HostEvent::HostWait { start: t + 8 * MS, end: t + 9 * MS, instance: inst + 3, main: true });
        b.extend(sync(t + 8 * MS, t + 9 * MS));
        b.extend(memory2(false, 0x9000_0000 + k * 0x1000_0000, 256 << 20, t + 9 * MS));
        rp.host_event(HostEvent::Pop { instance: inst + 3, ts: t + 9 * MS });
        rp.host_event(HostEvent::OwnCost { tid: 1, instance: inst, ns: 5_000, ts: t + 9 * MS });
        rp.host_event(HostEvent::FrameworkMemory {
            instance: inst,
            at_end: true,
            allocated: 1 << 30,
            reserved: 2 << 30,
            peak: 3 << 30,
        });
        rp.host_event(HostEvent::Pop { instance: inst, ts: t + 9 * MS + 500_000 });
    }
    // After the loop: a start/end range, a memset, a fork, a pop with
    // nothing open, and a kernel whose launch was never seen.
    rp.host_event(HostEvent::Start { id: 1, path: request, tid: 3, ts: 61 * MS });
    rp.host_event(HostEvent::End { id: 1, ts: 63 * MS });
    rp.host_event(HostEvent::Forked { ts: 61 * MS });
    rp.host_event(HostEvent::UnbalancedPop { tid: 3 });
    b.extend(memset(62 * MS, 62 * MS + 1_000));
    b.extend(kernel_grid(c"orphan", 9_999, 62 * MS, 62 * MS + 10_000, 132, 128));
    b.extend(memory2(true, 0x10_0000, 1 << 30, MS / 2));
    rp.buffer(&b);
    let mut r = rp.finish(0, 64 * MS);
    r.declared.push(Declared {
        range: "step".into(),
        flops: Some(4.0e12),
        work: Some(4096.0),
        unit: Some("tokens".into()),
    });
    r
}

/// Measured values in the order of the default metric set plus `tensor`:
/// occupancy, SM efficiency, duration, cycles, DRAM read and write, issue
/// active, tensor active, then tensor FLOPs (bf16, fp16, tf32, fp8, int8,
/// fp64).
fn measured(occ: f64, eff: f64, dur_ns: u64, dram: f64, tensor: f64, bf16_flops: f64) -> Vec<f64> {
    let d = dur_ns as f64;
    vec![occ, eff, d, d * 1.98, dram / 2.0, dram / 2.0, 40.0, tensor, bf16_flops, 0.0, 0.0, 0.0, 0.0, 0.0]
}

/// A metrics-mode session: a GEMM near the tensor cores' peak, a streaming
/// kernel near DRAM's and a one-block kernel, measured and not, with
/// gpuscope's measurement time.
fn metrics_session() -> Report {
    let set = gpuscope::MetricSet::default().with_tensor();
    let mut rp = Replay::with_metrics(vec![h200()], 100, set.names());
    let p = rp.path(&["train", "step"]);
    let train = rp.path(&["train"]);
    rp.host_event(HostEvent::Push { instance: 1, parent: 0, path: train, tid: 1, ts: 0 });
    let mut b = Vec::new();
    for k in 0..8u64 {
        let (t, inst) = (k * 4 * MS, 10 + k);
        rp.host_event(HostEvent::Push { instance: inst, parent: 1, path: p, tid: 1, ts: t });
        for (i, (name, grid, v)) in [
            (c"gemm_bf16", 1320, measured(15.0, 96.0, 1_000_000, 2.0e9, 93.0, 0.8e12)),
            (c"stream_copy", 2640, measured(57.0, 98.0, 1_000_000, 3.6e9, 0.0, 0.0)),
            (c"one_block", 1, measured(6.0, 0.75, 1_000_000, 1.0e6, 0.0, 0.0)),
        ]
        .into_iter()
        .enumerate()
        {
            let c = (k * 3 + i as u64 + 1) as u32;
            let start = t + i as u64 * MS + 100_000;
            let profiled = k < 3;
            rp.host_event(HostEvent::Launch {
                correlation_id: c,
                tid: 1,
                path: p,
                instance: inst,
                graph: false,
                profiled,
                inherited: false,
                ts: start - 50_000,
                cost_ns: 800,
                prev_call_ns: 3_000,
            });
            if profiled {
                rp.host_event(HostEvent::Overhead { start: start - 50_000, end: start });
                rp.host_event(HostEvent::KernelMetrics { correlation_id: c, values: Some(v) });
            }
            b.extend(kernel_grid(name, c, start, start + MS, grid, 256));
        }
        rp.host_event(HostEvent::Pop { instance: inst, ts: t + 4 * MS });
    }
    rp.host_event(HostEvent::Pop { instance: 1, ts: 33 * MS });
    rp.buffer(&b);
    let mut r = rp.finish(0, 34 * MS);
    r.declared.push(Declared { range: "train/step".into(), flops: Some(2.0e12), work: None, unit: None });
    r
}

/// Every field a report may leave out, filled: on top of the trace
/// session's JSON, what metrics mode, sampling mode (trace windows
/// included), library ranges, PyTorch's automatic ranges and the
/// session's steady state add. Read back and written by the code, so the
/// fields are the code's: one it does not know is not written again.
fn every_field() -> Report {
    let mut v: Value = serde_json::from_str(&trace_session().to_json()).expect("JSON");
    let sampled = json!({
        "sm_efficiency_pct": 71.5, "achieved_occupancy_pct": 33.0, "tensor_active_pct": 12.0,
        "issue_active_pct": 40.0, "dram_gb_per_s": 1200.0, "gpu_busy_pct": 88.0, "covered_ns": 4000000u64,
        "samples": 40
    });
    v["mode"] = json!("sampling");
    v["metrics"] = json!({
        "metrics": ["sm__warps_active.avg.pct_of_peak_sustained_active"], "passes": 1, "profiled_launches": 3,
        "mismatches": 1, "skipped_busy": 1, "skipped_graph_launches": 1, "skipped_capturing": 1,
        "skipped_unsupported_api": 1, "lingered_launches": 2, "profiler_starts": 2, "passes_on_demand": 1,
        "disabled": "an example reason",
        "time_ns": { "setup": 1, "setup_host": 2, "launch": 3, "start": 4, "stop": 5, "decode": 6,
                     "evaluate": 7, "rearm": 8, "launch_waits": 9 }
    });
    v["sampling"] = json!({
        "interval_ns": 1000000u64, "metrics": ["smsp__cycles_active.avg", "sm__pipe_tensor_cycles_active.avg"],
        "configs": [{ "metrics": ["smsp__cycles_active.avg"], "samples": 40 },
                    { "metrics": ["sm__pipe_tensor_cycles_active.avg"], "samples": 24 }],
        "figures_missing": ["issue-slot activity"], "switches": 3, "switch_ns": 600000000u64,
        "failed_switches": 1, "paused_ns": 2000000000u64,
        "devices": [0], "samples": 64,
        "overflows": 1, "samples_expired": 1, "kernels_unsampled": 2, "min_kernel_samples": 4,
        "disabled": "an example reason", "tail_lost": true, "exit_samples": 12, "exit_decode_ns": 4000000u64,
        "decode_ns": 10, "decode_data_ns": 5, "evaluate_ns": 3,
        "trace_windows": { "window_ns": 100000000u64, "period_ns": 1000000000u64, "windows": 1,
                           "traced_ns": 100000000u64, "untraced_ns": 900000000u64, "unclassified_gaps_ns": 7,
                           "untraced_launches": 12, "on_demand": 1 },
        "trace_windows_off": "an example reason"
    });
    v["session_steady"] = json!({
        "start_ns": 10000000u64, "end_ns": 60000000u64, "startup_ns": 10000000u64, "shutdown_ns": 4000000u64,
        "settled": true, "launches": 20, "kernel_ns": 30000000u64,
        "idle": { "host_ns": 1, "sync_ns": 2, "copy_ns": 3, "launch_ns": 4, "dispatch_ns": 5, "other_ns": 6,
                  "profiler_ns": 7 },
        "callback_ns": 1000, "hook_ns": 100, "allocations": 5, "releases": 5, "call_ns": 20000, "calls_timed": 8,
        "sampled": sampled.clone(), "comm_ns": 4000000u64, "exposed_comm_ns": 1000000u64,
        "steps": { "kernels_per_step": 2, "steps_seen": 9, "median_ns": 5000000u64, "p90_ns": 5100000u64,
                   "match_pct": 100.0, "mean_ns": 5000000u64, "from_launches": true, "by_family": true },
        "launching_cpu_ns": 40000000u64, "cuda_blocked_ns": 2000000u64,
        "windows": { "traced_ns": 200000000u64, "kernel_ns": 180000000u64, "engine_pct": 97.5 }
    });
    v["memory"]["main_thread_synchronizations"] = json!(1);
    v["memory"]["main_thread_synchronization_ns"] = json!(1000);
    v["trace"]["kernels"][0]["message_bytes"] = json!(1u64 << 20);
    v["profiler_cost"]["not_calibrated"] = json!("an example reason");
    v["frameworks"] = json!(["torch"]);
    v["host"] = json!("node-1");
    for key in [
        "graph_nodes_over_cap",
        "live_allocations_over_cap",
        "range_memory_partial",
        "devices_over_cap",
        "comm_messages_unmatched",
        "window_cut_graph_kernels",
    ] {
        v["drops"][key] = json!(1);
    }
    let k0 = &mut v["kernels"][0];
    k0["sampled"] = sampled.clone();
    k0["metrics_sampled"] = json!(true);
    k0["counters"] = json!({ "dram__bytes_read.sum": 1.0e6 });
    let pk = &mut v["path_kernels"][0];
    pk["sampled"] = sampled.clone();
    pk["metrics_sampled"] = json!(true);
    pk["counters"] = json!({ "dram__bytes_read.sum": 1.0e6 });
    pk["host_before_ns"] = json!(5000);
    // A range of a library's NVTX domain, in every kind of path.
    let frames = json!([{ "name": "step" }, { "domain": "cuBLAS", "name": "gemm" }]);
    pk["path"]["frames"] = frames.clone();
    v["trace"]["kernels"][0]["path"]["frames"] = frames.clone();
    v["trace"]["ranges"][0]["path"]["frames"] = frames;
    // Push/pop ranges and start/end ranges share their fields.
    let memory = v["ranges"][0]["memory"].clone();
    let steady = v["ranges"][0]["steady"].clone();
    let idle = v["ranges"][0]["idle"].clone();
    for list in ["ranges", "start_end_ranges"] {
        let g = &mut v[list][0];
        g["sampled"] = sampled.clone();
        g["sampled_wall"] = sampled.clone();
        g["metrics_sampled"] = json!(true);
        g["untraced_count"] = json!(2);
        g["untraced_wall_ns"] = json!(20000000u64);
        g["untraced_launches"] = json!(10);
        g["library"] = json!("cuBLAS");
        g["path"]["frames"][0]["domain"] = json!("cuBLAS");
        g["memory"] = memory.clone();
        g["memory"]["framework"]["peak_inside_bytes"] = json!(3u64 << 30);
        g["steady"] = steady.clone();
        g["sampled_wall_steady"] = sampled.clone();
        g["idle"] = idle.clone();
        g["first_calls_ns"] = json!([1000, 2000]);
        g["counted_flops"] = json!(2.0e9);
        // Every total, each a number of its own.
        for (i, (name, _)) in gpuscope::report::Totals::FIGURES.iter().enumerate() {
            g[*name] = json!(3000000u64 + i as u64);
            g["steady"][*name] = json!(2000000u64 + i as u64);
        }
        g["untraced_steady"] = g["steady"].clone();
        g["gpus"] = json!(2);
    }
    v["device_time"] = json!([
        { "device": 0, "busy_ns": 9000000u64, "idle": idle.clone(), "steady_idle": idle.clone() },
        { "device": 1, "busy_ns": 3000000u64, "idle": idle.clone() }
    ]);
    v["trace"]["samples"] = json!([{ "device": 0, "start_ns": 0, "end_ns": 1000000u64, "sm_efficiency_pct": 50.0,
                                     "achieved_occupancy_pct": 20.0, "tensor_active_pct": 1.0,
                                     "dram_gb_per_s": 100.0, "gpu_busy_pct": 60.0 }]);
    v["trace"]["kernels"][0]["metrics"] = json!({
        "achieved_occupancy_pct": 40.0, "sm_efficiency_pct": 80.0, "duration_ns": 1000.0,
        "sm_cycles_elapsed": 1980.0, "values": { "gpu__time_duration.sum": 1000.0 }
    });
    let text = serde_json::to_string(&v).expect("JSON");
    Report::from_json(&text).expect("the filled report reads back")
}

/// A report with no range of the program's own whose steady state's
/// kernels repeat: its answer is per step of the steps found.
fn steps_found() -> Report {
    let mut v: Value = serde_json::from_str(&every_field().to_json()).expect("JSON");
    v["ranges"] = json!([]);
    v["start_end_ranges"] = json!([]);
    // Found from kernel records, then from the launches logged without
    // them.
    v["session_steady"]["steps"]["from_launches"] = json!(false);
    v["session_steady"]["steps"]["by_family"] = json!(false);
    let text = serde_json::to_string(&v).expect("JSON");
    let r = Report::from_json(&text).expect("the report reads back");
    assert!(gpuscope::analysis::analyze(&r).answer.is_some_and(|a| a.found_steps.is_some()), "steps found");
    let table = r.to_table(100);
    assert!(table.contains("steps found from its kernels (2 kernels repeat): 5.00 ms"), "{table}");
    v["session_steady"]["steps"]["from_launches"] = json!(true);
    let text = serde_json::to_string(&v).expect("JSON");
    let r = Report::from_json(&text).expect("the report reads back");
    let table = r.to_table(100);
    assert!(table.contains("steps found from its launches (2 launches repeat): 5.00 ms"), "{table}");
    // Taken by family: said.
    v["session_steady"]["steps"]["by_family"] = json!(true);
    let r = Report::from_json(&serde_json::to_string(&v).expect("JSON")).expect("the report reads back");
    let table = r.to_table(100).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        table.contains("(2 launches repeat, the variants a library picks by size counted as one kernel): 5.00 ms"),
        "{table}"
    );
    r
}

/// The reports of `tests/data`: as this version writes them again, and as
/// written when of this schema version.
fn data_reports() -> Vec<(String, Value)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/data")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no reports in {}", dir.display());
    let mut out = Vec::new();
    for p in &files {
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(p).expect("readable");
        let r = Report::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        if r.schema_version == gpuscope::report::SCHEMA_VERSION {
            out.push((format!("{name}-as-written"), serde_json::from_str(&text).expect("JSON")));
        }
        out.push((format!("{name}-rewritten"), as_value(&r)));
    }
    out
}

fn as_value(r: &Report) -> Value {
    serde_json::from_str(&r.to_json()).expect("the report's JSON parses")
}

/// Every report this test checks, by name.
fn reports() -> Vec<(String, Value)> {
    let mut out = vec![
        ("trace-session".to_string(), as_value(&trace_session())),
        ("metrics-session".to_string(), as_value(&metrics_session())),
        ("every-field".to_string(), as_value(&every_field())),
        ("steps-found".to_string(), as_value(&steps_found())),
        ("empty-session".to_string(), as_value(&Replay::new(vec![h200()], 0).finish(0, 1_000))),
    ];
    out.extend(data_reports());
    if let Some(dir) = std::env::var_os("GPUSCOPE_SCHEMA_DUMP") {
        std::fs::create_dir_all(&dir).expect("dump folder");
        for (name, v) in &out {
            let path = std::path::Path::new(&dir).join(format!("{name}.json"));
            std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).expect("written");
        }
    }
    out
}

#[test]
fn every_report_this_version_writes_matches_the_schema() {
    let v = validator();
    let mut failed = Vec::new();
    for (name, report) in reports() {
        for e in errors(&v, &report).into_iter().take(20) {
            failed.push(format!("{name}: {e}"));
        }
    }
    assert!(
        failed.is_empty(),
        "reports differ from docs/reference/report.schema.json (update the schema and \
         docs/reference/report-json.md with the code):\n{}",
        failed.join("\n")
    );
}

/// Property paths (`ranges[].idle.host_ns`) of every field `schema` names,
/// following local `$ref`s, `anyOf`/`oneOf` branches and array items.
fn schema_paths(root: &Value, s: &Value, at: &str, out: &mut BTreeSet<String>, depth: usize) {
    assert!(depth < 64, "the schema nests too deep at {at} (a cycle of $refs?)");
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let target = r
            .strip_prefix('#')
            .and_then(|p| root.pointer(p))
            .unwrap_or_else(|| panic!("{at}: $ref {r} does not resolve in the schema"));
        schema_paths(root, target, at, out, depth + 1);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for branch in s.get(key).and_then(Value::as_array).into_iter().flatten() {
            schema_paths(root, branch, at, out, depth + 1);
        }
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (k, sub) in props {
            let p = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
            out.insert(p.clone());
            schema_paths(root, sub, &p, out, depth + 1);
        }
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        schema_paths(root, items, &format!("{at}[]"), out, depth + 1);
    }
    for (i, item) in s.get("prefixItems").and_then(Value::as_array).into_iter().flatten().enumerate() {
        schema_paths(root, item, &format!("{at}[{i}]"), out, depth + 1);
    }
}

/// Property paths present in `v`, in the notation of [`schema_paths`]
/// (the keys of maps, such as `counters`, too: they are not compared).
fn instance_paths(v: &Value, at: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, sub) in m {
                let p = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
                out.insert(p.clone());
                instance_paths(sub, &p, out);
            }
        }
        Value::Array(items) => {
            for sub in items {
                instance_paths(sub, &format!("{at}[]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_field_the_schema_names_is_one_the_code_writes() {
    let root = schema();
    let mut named = BTreeSet::new();
    schema_paths(&root, &root, "", &mut named, 0);
    let mut seen = BTreeSet::new();
    for (_, report) in reports() {
        instance_paths(&report, "", &mut seen);
    }
    let stale: Vec<&String> = named.iter().filter(|p| !seen.contains(*p)).collect();
    assert!(
        stale.is_empty(),
        "docs/reference/report.schema.json names fields no report here has (removed or renamed in the code, or \
         missing from this test's reports):\n{}",
        stale.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
}

/// Every object schema in `s` says what else it allows: nothing
/// (`additionalProperties: false`), or values of one schema (a map).
fn open_objects(s: &Value, at: &str, out: &mut Vec<String>) {
    match s {
        Value::Object(m) => {
            let is_object = match m.get("type") {
                Some(Value::String(t)) => t == "object",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
                _ => m.contains_key("properties"),
            };
            if is_object && !m.contains_key("additionalProperties") {
                out.push(at.to_string());
            }
            for (k, sub) in m {
                open_objects(sub, &format!("{at}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, sub) in items.iter().enumerate() {
                open_objects(sub, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_schema_is_closed_and_of_this_schema_version() {
    let root = schema();
    let mut open = Vec::new();
    open_objects(&root, "#", &mut open);
    assert!(open.is_empty(), "object schemas without additionalProperties: {open:?}");
    // Reports of older layouts, read and written again, keep their number.
    let versions: Vec<u64> = root
        .pointer("/properties/schema_version/enum")
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let expected: Vec<u64> = (1..=gpuscope::report::SCHEMA_VERSION as u64).collect();
    assert_eq!(versions, expected, "the schema describes another schema_version than the code writes");
}

#[test]
fn the_schema_rejects_a_report_that_drifted() {
    let v = validator();
    let good = as_value(&trace_session());
    assert!(errors(&v, &good).is_empty(), "{:?}", errors(&v, &good));
    // A field the schema does not know, at the top and deep inside.
    let mut added = good.clone();
    added["new_field"] = json!(1);
    assert!(!errors(&v, &added).is_empty(), "an unknown top-level field passed");
    let mut deep = good.clone();
    deep["ranges"][0]["idle"]["new_cause_ns"] = json!(1);
    assert!(!errors(&v, &deep).is_empty(), "an unknown idle cause passed");
    // A field always written, missing.
    let mut missing = good.clone();
    missing["drops"].as_object_mut().unwrap().remove("cupti_records");
    assert!(!errors(&v, &missing).is_empty(), "a missing drop counter passed");
    // A value of the wrong type, and a verdict no version writes.
    let mut wrong = good.clone();
    wrong["kernels"][0]["launches"] = json!("3");
    assert!(!errors(&v, &wrong).is_empty(), "a string launch count passed");
    let mut bound = good;
    bound["ranges"][0]["analysis"]["verdict"]["bound"] = json!("fast");
    assert!(!errors(&v, &bound).is_empty(), "an unknown verdict passed");
}

/// The finding kinds the schema allows are the kinds the concepts page's
/// Findings table describes: a new kind needs both.
#[test]
fn every_finding_kind_of_the_schema_has_a_row_in_the_concepts_page() {
    const PAGE: &str = include_str!("../docs/concepts/verdicts-and-findings.md");
    let schema = schema();
    let allowed: BTreeSet<String> = schema["$defs"]["finding"]["properties"]["kind"]["enum"]
        .as_array()
        .expect("an enum of finding kinds")
        .iter()
        .map(|k| k.as_str().expect("a kind is a string").to_string())
        .collect();
    let table = PAGE.split("## Findings").nth(1).expect("a Findings section");
    let table = table.split("\n#").next().unwrap_or(table);
    let documented: BTreeSet<String> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect();
    assert_eq!(allowed, documented, "schema's finding kinds against docs/concepts/verdicts-and-findings.md");
}

/// The cells of each row of the concepts page's table under `heading`,
/// by the row's first cell (without its backticks).
fn page_rows(heading: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    const PAGE: &str = include_str!("../docs/concepts/verdicts-and-findings.md");
    let section = PAGE.split(heading).nth(1).unwrap_or_else(|| panic!("a {heading} section"));
    let section = section.split("\n#").next().unwrap_or(section);
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<String> = l.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect();
            (cells[0].trim_matches('`').to_string(), cells)
        })
        .collect()
}

/// Every enum of the schema holding `member`, as sets.
fn schema_enums_with(member: &str) -> Vec<BTreeSet<String>> {
    fn walk(v: &Value, member: &str, out: &mut Vec<BTreeSet<String>>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::Array(values)) = m.get("enum") {
                    if values.iter().any(|x| x == member) {
                        out.push(values.iter().filter_map(|x| x.as_str().map(str::to_string)).collect());
                    }
                }
                m.values().for_each(|x| walk(x, member, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, member, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&schema(), member, &mut out);
    out
}

/// The finding rules' registry is what the concepts page and the schema
/// describe: each rule has its row (kind, verdict, when, cost as the rule
/// declares them), the schema's finding kinds are the registry's, and
/// every verdict has a row in the page's Verdicts table and is in each of
/// the schema's verdict enums. `GPUSCOPE_BLESS=1` writes the registry's
/// kinds into the schema's finding kind enum.
#[test]
fn the_concepts_page_and_the_schema_describe_the_rules_registry() {
    use gpuscope::analysis::rules::RULES;
    use gpuscope::analysis::{Bound, FindingKind};
    let registry: Vec<&str> = RULES.iter().map(|r| r.kind.as_str()).collect();
    let kinds: BTreeSet<String> = registry.iter().map(|k| k.to_string()).collect();
    assert_eq!(kinds.len(), RULES.len(), "a kind with two rules: {registry:?}");
    let declared: BTreeSet<String> = FindingKind::ALL.iter().map(|k| k.to_string()).collect();
    assert_eq!(kinds, declared, "FindingKind's variants against the rules of RULES");
    // The page: one row per rule, as the rule declares it.
    let rows = page_rows("## Findings");
    for rule in RULES {
        let kind = rule.kind.as_str();
        let row = rows.get(kind).unwrap_or_else(|| panic!("no row for `{kind}` in the concepts page's Findings table"));
        assert_eq!(row.len(), 4, "{row:?}");
        if let Some(b) = &rule.bound {
            assert_eq!(row[1], b.as_str(), "`{kind}`'s verdict in the concepts page");
        }
        assert_eq!(row[2], rule.when, "`{kind}`'s \"when\" in the concepts page against its rule's `when`");
        assert_eq!(row[3], rule.cost, "`{kind}`'s \"cost\" in the concepts page against its rule's `cost`");
        assert!(!rule.reads.is_empty(), "`{kind}` says what it reads");
    }
    assert_eq!(rows.keys().cloned().collect::<BTreeSet<_>>(), kinds, "rows of the page without a rule");
    // The schema's finding kinds.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reference/report.schema.json");
    let listed: Vec<String> = schema()["$defs"]["finding"]["properties"]["kind"]["enum"]
        .as_array()
        .expect("an enum of finding kinds")
        .iter()
        .map(|k| k.as_str().expect("a kind is a string").to_string())
        .collect();
    let allowed: BTreeSet<String> = listed.iter().cloned().collect();
    if allowed != kinds && std::env::var_os("GPUSCOPE_BLESS").is_some() {
        // The schema's order kept, new kinds after it.
        let mut blessed: Vec<&str> = listed.iter().map(String::as_str).filter(|k| kinds.contains(*k)).collect();
        blessed.extend(registry.iter().filter(|k| !allowed.contains(**k)));
        std::fs::write(path, with_finding_kinds(SCHEMA, &blessed)).expect("writing the schema");
    } else {
        assert_eq!(
            allowed, kinds,
            "the schema's finding kinds against RULES (GPUSCOPE_BLESS=1 cargo test -p gpuscope --test \
             report_schema writes them)"
        );
    }
    // Verdicts.
    let verdicts: BTreeSet<String> = Bound::ALL.iter().map(|b| b.to_string()).collect();
    let documented: BTreeSet<String> = page_rows("## Verdicts").into_keys().collect();
    assert_eq!(documented, verdicts, "the concepts page's Verdicts table against Bound");
    let enums = schema_enums_with("compute-bound");
    assert!(enums.len() >= 2, "the schema's verdict enums: {enums:?}");
    for e in enums {
        assert_eq!(e, verdicts, "a verdict enum of the schema against Bound");
    }
}

/// `schema` with the finding kind enum (the first enum after the Finding
/// definition's title) listing `kinds`.
fn with_finding_kinds(schema: &str, kinds: &[&str]) -> String {
    let at = schema.find("\"title\": \"Finding\"").expect("the Finding definition");
    let open = at + schema[at..].find("\"enum\": [").expect("its kind enum") + "\"enum\": [".len();
    let close = open + schema[open..].find(']').expect("the enum's end");
    let indent = " ".repeat(12);
    let list = kinds.iter().map(|k| format!("{indent}\"{k}\"")).collect::<Vec<_>>().join(",\n");
    format!("{}\n{list}\n{}{}", &schema[..open], " ".repeat(10), &schema[close..])
}

/// Where each of a range's totals is described, in the schema's `$defs`:
/// the range rows (both kinds) and their steady calls.
const TOTALS_DEFS: [&str; 3] = ["range", "range_analysed", "steady"];

/// The schema's description of a total described by `doc` (its doc
/// comment) in `$defs/{def}`.
fn total_description(def: &str, doc: &str) -> String {
    let text = doc.split_whitespace().collect::<Vec<_>>().join(" ").replace('`', "");
    let text = match def {
        // Lower case after the colon, unless the word is an acronym.
        "steady" => {
            let mut chars = text.chars();
            let first = chars.next().expect("a described total");
            let acronym = chars.next().is_some_and(char::is_uppercase);
            let rest = &text[first.len_utf8()..];
            format!("Over the steady calls: {}{rest}", if acronym { first } else { first.to_ascii_lowercase() })
        }
        _ => text,
    };
    format!("{text} Absent when zero.")
}

/// The byte just past the JSON value that starts at `at` in `text`.
fn value_end(text: &str, at: usize) -> usize {
    let b = text.as_bytes();
    let string_end = |mut i: usize| {
        i += 1;
        while b[i] != b'"' {
            i += if b[i] == b'\\' { 2 } else { 1 };
        }
        i + 1
    };
    match b[at] {
        b'"' => string_end(at),
        b'{' | b'[' => {
            let (mut depth, mut i) = (0usize, at);
            loop {
                match b[i] {
                    b'"' => {
                        i = string_end(i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => at + text[at..].find(|c: char| c == ',' || c == '}' || c == ']' || c.is_whitespace()).unwrap_or(0),
    }
}

/// The span of member `key`'s value in the object starting at `obj`.
fn member(text: &str, obj: usize, key: &str) -> Option<(usize, usize)> {
    let end = value_end(text, obj);
    let (b, mut i) = (text.as_bytes(), obj + 1);
    while i < end {
        match b[i] {
            b'"' => {
                let k_end = value_end(text, i);
                let colon = k_end + text[k_end..].find(':')?;
                let v = colon + 1 + text[colon + 1..].find(|c: char| !c.is_whitespace())?;
                let v_end = value_end(text, v);
                if &text[i + 1..k_end - 1] == key {
                    return Some((v, v_end));
                }
                i = v_end;
            }
            _ => i += 1,
        }
    }
    None
}

/// `schema` with each total of [`Totals::FIGURES`] described in each of
/// [`TOTALS_DEFS`] (replaced where present, added where not).
fn with_totals(schema: &str) -> String {
    use gpuscope::report::Totals;
    let mut text = schema.to_string();
    for def in TOTALS_DEFS {
        for (name, doc) in Totals::FIGURES {
            let defs = member(&text, 0, "$defs").expect("$defs").0;
            let d = member(&text, defs, def).unwrap_or_else(|| panic!("$defs/{def}")).0;
            let props = member(&text, d, "properties").expect("properties").0;
            assert!(text[props..].starts_with('{'), "$defs/{def}/properties is an object");
            // As the schema's other members are laid out: their indent.
            let first = props + 1 + text[props + 1..].find('"').expect("a first member");
            let ind = &text[text[..first].rfind('\n').expect("a line") + 1..first];
            assert!(
                first < value_end(&text, props) && ind.chars().all(|c| c == ' '),
                "$defs/{def}/properties has members, one a line (as the schema is laid out)"
            );
            let description = serde_json::to_string(&total_description(def, doc)).unwrap();
            let entry = format!(
                "{{\n{ind}  \"type\": \"integer\",\n{ind}  \"minimum\": 0,\n{ind}  \"description\": {description}\n{ind}}}"
            );
            text = match member(&text, props, name) {
                Some((a, b)) => format!("{}{entry}{}", &text[..a], &text[b..]),
                None => {
                    let close = value_end(&text, props) - 1;
                    let last = text[..close].trim_end().len();
                    format!("{},\n{ind}\"{name}\": {entry}{}", &text[..last], &text[last..])
                }
            };
        }
    }
    text
}

/// The JSON reference's list of a range's totals, between its markers.
fn with_totals_listed(page: &str) -> String {
    use gpuscope::report::Totals;
    let (open, close) = ("<!-- totals: ", "<!-- end of totals -->");
    let a = page.find(open).expect("the reference's totals marker");
    let a = a + page[a..].find("-->").expect("its end") + 3;
    let b = page.find(close).expect("the end-of-totals marker");
    assert!(a <= b, "the totals' markers in order");
    let list: String = Totals::FIGURES
        .iter()
        .map(|(name, doc)| format!("- `{name}`: {}\n", doc.split_whitespace().collect::<Vec<_>>().join(" ")))
        .collect();
    format!("{}\n{list}{}", &page[..a], &page[b..])
}

/// A range's totals (`Totals`, in the report crate's model) are described
/// in the schema's range rows and steady calls, and listed in the JSON
/// reference, as their doc comments say. `GPUSCOPE_BLESS=1` writes both.
#[test]
fn the_schema_and_the_reference_describe_every_total() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reference/report.schema.json");
    let page_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reference/report-json.md");
    let page = std::fs::read_to_string(page_path).expect("the JSON reference");
    let (schema_now, page_now) = (with_totals(SCHEMA), with_totals_listed(&page));
    if std::env::var_os("GPUSCOPE_BLESS").is_some() {
        std::fs::write(path, &schema_now).expect("writing the schema");
        std::fs::write(page_path, &page_now).expect("writing the reference");
        return;
    }
    let parsed: Value = serde_json::from_str(&schema_now).expect("the schema with the totals is JSON");
    assert_eq!(
        parsed,
        schema(),
        "the schema's totals against Totals (GPUSCOPE_BLESS=1 cargo test -p gpuscope --test report_schema writes them)"
    );
    assert!(
        page_now == page,
        "docs/reference/report-json.md's list of totals against Totals (GPUSCOPE_BLESS=1 ... writes it)"
    );
}
