//! CPU tests: synthetic CUPTI 13 activity buffers and host events folded into
//! a report, then the report's JSON, Chrome trace and table.

use cupti_sys as sys;
use gpuscope::occupancy::Limiter;
use gpuscope::report::Report;
use gpuscope::testing::{HostEvent, Replay};
use gpuscope::Format;

mod records;
use records::*;

/// Two phases ("train/forward", "train/backward"), kernels on two threads'
/// ranges, records delivered out of order in two buffers.
fn workload(trace_cap: usize) -> Report {
    let mut rp = Replay::new(vec![h200()], trace_cap);
    let train = rp.path(&["train"]);
    let fwd = rp.path(&["train", "forward"]);
    let bwd = rp.path(&["train", "backward"]);
    let ev = [
        HostEvent::Push { instance: 1, parent: 0, path: train, tid: 7, ts: 1_000 },
        HostEvent::Push { instance: 2, parent: 1, path: fwd, tid: 7, ts: 1_100 },
        HostEvent::Launch {
            correlation_id: 10,
            tid: 7,
            path: fwd,
            instance: 2,
            graph: false,
            profiled: false,
            inherited: false,
            ts: 1_150,
            cost_ns: 0,
            prev_call_ns: 0,
        },
        HostEvent::Launch {
            correlation_id: 11,
            tid: 7,
            path: fwd,
            instance: 2,
            graph: false,
            profiled: false,
            inherited: false,
            ts: 1_160,
            cost_ns: 0,
            prev_call_ns: 0,
        },
        HostEvent::Pop { instance: 2, ts: 2_000 },
        HostEvent::Push { instance: 3, parent: 1, path: bwd, tid: 7, ts: 2_100 },
        // Launched by a worker thread with no range of its own (autograd's),
        // under the loop thread's "backward".
        HostEvent::Launch {
            correlation_id: 12,
            tid: 8,
            path: bwd,
            instance: 3,
            graph: true,
            profiled: false,
            inherited: true,
            ts: 2_150,
            cost_ns: 0,
            prev_call_ns: 0,
        },
        HostEvent::Pop { instance: 3, ts: 5_000 },
        HostEvent::Pop { instance: 1, ts: 6_000 },
        HostEvent::Launch {
            correlation_id: 13,
            tid: 9,
            path: 0,
            instance: 0,
            graph: false,
            profiled: false,
            inherited: false,
            ts: 6_900,
            cost_ns: 0,
            prev_call_ns: 0,
        },
        HostEvent::ThreadName { tid: 7, name: "trainer".into() },
        HostEvent::UnbalancedPop { tid: 9 },
    ];
    for e in ev {
        rp.host_event(e);
    }
    let add = |v: Vec<u8>, buf: &mut Vec<u8>| buf.extend(v);
    let mut b1 = Vec::new();
    // Second kernel of "forward" arrives first; they overlap (two streams).
    add(
        kernel(&K {
            name: c"_Z12matmul_tiledILi16EEvPKfS1_Pfi",
            corr: 11,
            start: 1_500,
            end: 2_500,
            block: 256,
            regs: 44,
            dyn_smem: 0,
            stream: 14,
        }),
        &mut b1,
    );
    add(
        kernel(&K {
            name: c"vector_add",
            corr: 10,
            start: 1_200,
            end: 1_800,
            block: 256,
            regs: 16,
            dyn_smem: 0,
            stream: 13,
        }),
        &mut b1,
    );
    add(memcpy(9, 900, 1_000, 1 << 20), &mut b1);
    add(memset(950, 960), &mut b1);
    add(sync(2_600, 2_700), &mut b1);
    rp.buffer(&b1);
    let mut b2 = Vec::new();
    // A graph launch: two kernels share correlation id 12.
    add(
        kernel(&K {
            name: c"softmax_fused",
            corr: 12,
            start: 2_200,
            end: 3_200,
            block: 256,
            regs: 32,
            dyn_smem: 64 * 1024,
            stream: 13,
        }),
        &mut b2,
    );
    add(
        kernel(&K {
            name: c"softmax_fused",
            corr: 12,
            start: 3_400,
            end: 4_400,
            block: 256,
            regs: 32,
            dyn_smem: 64 * 1024,
            stream: 13,
        }),
        &mut b2,
    );
    // No range open on thread 9; and a kernel whose launch was never seen.
    add(
        kernel(&K { name: c"tiny", corr: 13, start: 7_000, end: 7_010, block: 32, regs: 8, dyn_smem: 0, stream: 13 }),
        &mut b2,
    );
    add(
        kernel(&K { name: c"tiny", corr: 99, start: 7_100, end: 7_110, block: 32, regs: 8, dyn_smem: 0, stream: 13 }),
        &mut b2,
    );
    rp.buffer(&b2);
    rp.finish(0, 10_000)
}

#[test]
fn kernels_are_counted_per_name_and_attributed_to_their_nvtx_path() {
    let r = workload(0);
    let k = |n: &str| r.kernels.iter().find(|k| k.name == n).unwrap_or_else(|| panic!("no kernel {n}"));
    assert_eq!(k("softmax_fused").stats.launches, 2);
    assert_eq!(k("softmax_fused").stats.total_ns, 2_000);
    assert_eq!(k("tiny").stats.launches, 2);
    assert_eq!(k("tiny").stats.min_ns, 10);
    // Demangled, not the raw symbol.
    assert!(r.kernels.iter().any(|k| k.name == "void matmul_tiled<16>(float const*, float const*, float*, int)"));
    // Most GPU time first.
    assert_eq!(r.kernels[0].name, "softmax_fused");

    let at = |path: &str, name: &str| {
        r.path_kernels.iter().find(|p| p.path.to_string() == path && p.name.starts_with(name)).map(|p| p.stats.launches)
    };
    assert_eq!(at("train/forward", "vector_add"), Some(1));
    assert_eq!(at("train/forward", "void matmul_tiled"), Some(1));
    assert_eq!(at("train/backward", "softmax_fused"), Some(2), "graph kernels get the graph launch's path");
    assert_eq!(at("(no range)", "tiny"), Some(2));
    assert_eq!(r.drops.unattributed_kernels, 1);
    assert_eq!(r.drops.unbalanced_pops, 1);
}

#[test]
fn ranges_get_wall_time_gpu_busy_union_and_utilisation() {
    let r = workload(0);
    let g = |p: &str| r.ranges.iter().find(|g| g.path.to_string() == p).unwrap();
    let fwd = g("train/forward");
    assert_eq!(fwd.wall_ns, 900);
    // [1200,1800] U [1500,2500] = 1300 ns busy; inside [1100,2000]: 800.
    assert_eq!(fwd.gpu_busy_ns, 1_300);
    assert!((fwd.gpu_utilization_pct - 800.0 / 900.0 * 100.0).abs() < 1e-9);
    let train = g("train");
    assert_eq!(train.wall_ns, 5_000);
    // [1200,2500] U [2200,3200] U [3400,4400]: forward and backward overlap.
    assert_eq!(train.gpu_busy_ns, 2_000 + 1_000);
    assert_eq!(train.kernel_launches, 3, "launch API calls inside, nested included");
    assert_eq!(g("train/backward").count, 1);
}

#[test]
fn theoretical_occupancy_is_computed_per_launch() {
    let r = workload(1000);
    let t = r.trace.as_ref().unwrap();
    let mm = t.kernels.iter().find(|k| k.name.contains("matmul")).unwrap();
    let o = mm.occupancy.unwrap();
    assert_eq!(o.theoretical_pct, 62.5);
    assert_eq!(o.limiter, Limiter::Registers);
    let sm = t.kernels.iter().find(|k| k.name == "softmax_fused").unwrap().occupancy.unwrap();
    assert_eq!(sm.limiter, Limiter::SharedMemory);
    assert_eq!(sm.blocks_per_sm, 3);
    assert_eq!(mm.path.to_string(), "train/forward");
    assert_eq!(mm.thread, 7);
}

#[test]
fn memory_records_are_summarised() {
    let r = workload(0);
    assert_eq!(r.memory.memcpy.len(), 1);
    let c = &r.memory.memcpy[0];
    assert_eq!((c.kind.as_str(), c.count, c.bytes, c.total_ns, c.pageable), ("HtoD", 1, 1 << 20, 100, 1));
    assert_eq!(r.memory.memset.count, 1);
    assert_eq!(r.memory.synchronizations, 1);
}

#[test]
fn replay_follows_no_memory_source_pointer_it_was_not_given() {
    // An allocation record whose source-library pointer is garbage (the
    // activity_records fuzzer made one): counted, from no known library,
    // and the pointer never read.
    let mut b = memory2(true, 0x1000, 4096, 10);
    let at = std::mem::offset_of!(sys::CUpti_ActivityMemory4, source);
    b[at..at + 8].copy_from_slice(&0x10usize.to_ne_bytes());
    let mut rp = Replay::new(vec![h200()], 0);
    rp.buffer(&b);
    let r = rp.finish(0, 1_000);
    let d = &r.memory.devices[0];
    assert_eq!(d.peak_live_bytes, 4096);
    let libraries: Vec<(&str, u64)> = d.held_at_peak_by_library.iter().map(|l| (l.library.as_str(), l.bytes)).collect();
    assert_eq!(libraries, [("(unknown)", 4096)]);
}

/// The report's JSON is its data as serde writes it, each range and
/// heavy kernel with its analysis and the analysis's own fields at the top
/// (checked against that made by hand from values; 32-bit floats written
/// at their own precision), `schema_version` first, each analysis once;
/// a report written to a file is the same text, and replaces an earlier
/// one whole.
#[test]
fn json_is_the_data_with_the_analysis_woven_in() {
    use serde_json::{to_value, Value};
    /// `got` is `want` but for floats written as `f32` (`want` widened
    /// them to `f64`).
    fn same(got: &Value, want: &Value, at: &str) {
        match (got, want) {
            (Value::Object(g), Value::Object(w)) => {
                let (gk, wk): (Vec<_>, Vec<_>) = (g.keys().collect(), w.keys().collect());
                assert_eq!(gk, wk, "keys at {at}");
                for (k, v) in w {
                    same(&g[k], v, &format!("{at}.{k}"));
                }
            }
            (Value::Array(g), Value::Array(w)) => {
                assert_eq!(g.len(), w.len(), "length at {at}");
                for (i, (g, w)) in g.iter().zip(w).enumerate() {
                    same(g, w, &format!("{at}[{i}]"));
                }
            }
            (Value::Number(g), Value::Number(w)) if g != w => {
                let (g, w) = (g.as_f64().unwrap(), w.as_f64().unwrap());
                assert!(g == w as f32 as f64 || (g - w).abs() <= 1e-6 * w.abs(), "{at}: {g} against {w}");
            }
            _ => assert_eq!(got, want, "at {at}"),
        }
    }
    let mut reports = vec![workload(100), measured_report()];
    for old in [
        "schema3-trace.json",
        "schema3-metrics.json",
        "schema3-torch-ranges.json",
        "schema3-sampling.json",
        "schema3-trace-windows-0.json",
    ] {
        let path = format!("{}/../tests/data/{old}", env!("CARGO_MANIFEST_DIR"));
        reports.push(Report::from_json(&std::fs::read_to_string(path).unwrap()).unwrap());
    }
    let dir = std::env::temp_dir().join(format!("gpuscope-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut woven = 0;
    for (n, r) in reports.iter().enumerate() {
        let a = gpuscope::analysis::analyze(r);
        let mut want = to_value(r).unwrap();
        for (g, ga) in want["ranges"].as_array_mut().unwrap().iter_mut().zip(&a.ranges) {
            g["analysis"] = to_value(ga).unwrap();
        }
        let mut heavy = 0;
        for k in want["kernels"].as_array_mut().unwrap() {
            if let Some(ka) = a.kernels.iter().find(|ka| ka.name == k["name"]) {
                k["analysis"] = to_value(ka).unwrap();
                heavy += 1;
            }
        }
        want["answer"] = to_value(&a.answer).unwrap();
        want["findings"] = to_value(&a.findings).unwrap();
        want["peaks"] = to_value(&a.peaks).unwrap();
        want["analysis_notes"] = to_value(&a.notes).unwrap();
        let text = r.to_json();
        same(&serde_json::from_str(&text).unwrap(), &want, &format!("report {n}"));
        woven += (!a.ranges.is_empty()) as usize + (heavy > 0) as usize;
        assert!(text.starts_with("{\n  \"schema_version\": "), "report {n}: {}", &text[..40]);
        assert_eq!(text.matches("\"analysis\": ").count(), a.ranges.len() + heavy, "report {n}: each analysis once");
        // A new file (through a temporary one), then over an existing,
        // longer one, in place: its mode kept.
        let path = dir.join("report.json");
        let _ = std::fs::remove_file(&path);
        r.write(&path, Format::Json).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "report {n} written to a new file");
        std::fs::write(&path, "an earlier, longer file ".repeat(100_000)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        r.write(&path, Format::Json).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "report {n} written over a file");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600, "its mode kept");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 1, "no temporary file left: {left:?}");
    }
    // A folder that is not there: the error names the path, nothing left.
    let e = reports[0].write(dir.join("no-such-folder/r.json"), Format::Json).unwrap_err().to_string();
    assert!(e.contains("cannot write report to") && e.contains("no-such-folder/r.json"), "{e}");
    assert!(woven >= 10, "most reports have ranges and heavy kernels to weave: {woven}");
    // Not a regular file: written through.
    reports[0].write("/dev/null", Format::Json).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn json_round_trips_with_a_schema_version() {
    let r = workload(100);
    let s = r.to_json();
    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
    assert_eq!(v["schema_version"], 3);
    // The analysis travels with the data and is ignored when read back.
    assert!(v["findings"].is_array() && v["peaks"]["source"].as_str().unwrap().contains("H200"));
    assert!(v["ranges"][0]["analysis"]["verdict"]["bound"].is_string());
    assert!(v["ranges"][0]["idle"].is_object());
    assert_eq!(Report::from_json(&s).unwrap(), r);
    assert!(Report::from_json("{\"nope\": 1}").is_err());
    // A newer schema is refused with the versions this one reads, even
    // when every field parses.
    let mut newer = v.clone();
    newer["schema_version"] = 99.into();
    let e = Report::from_json(&newer.to_string()).expect_err("schema 99 refused").to_string();
    assert!(
        e.contains("schema_version 99") && e.contains(&format!("1 to {}", gpuscope::report::SCHEMA_VERSION)),
        "{e}"
    );
}

#[test]
fn chrome_trace_parses_and_has_gpu_stream_and_host_thread_tracks() {
    let r = workload(100);
    let v: serde_json::Value = serde_json::from_str(&r.to_chrome_trace()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let kernels: Vec<_> = ev.iter().filter(|e| e["cat"] == "kernel").collect();
    assert_eq!(kernels.len(), 6);
    assert!(kernels.iter().all(|k| k["ph"] == "X" && k["pid"] == 100));
    let streams: std::collections::BTreeSet<_> = kernels.iter().map(|k| k["tid"].as_u64().unwrap()).collect();
    assert_eq!(streams.into_iter().collect::<Vec<_>>(), vec![13, 14]);
    let ranges: Vec<_> = ev.iter().filter(|e| e["cat"] == "nvtx").collect();
    assert_eq!(ranges.len(), 3);
    assert!(ranges.iter().all(|e| e["pid"] == 1 && e["tid"] == 7));
    assert!(ev.iter().any(|e| e["cat"] == "memory" && e["name"] == "HtoD"));
    assert!(ev.iter().any(|e| e["ph"] == "M" && e["args"]["name"] == "trainer"));
    assert!(ev.iter().any(|e| e["ph"] == "M" && e["args"]["name"] == "stream 13"));
    // Counter tracks: utilisation over time on the GPU's process, and the
    // ranges carry their verdict.
    let util: Vec<_> = ev.iter().filter(|e| e["ph"] == "C" && e["name"] == "GPU utilisation %").collect();
    assert!(!util.is_empty() && util.iter().all(|e| e["pid"] == 100));
    assert!(util.iter().any(|e| e["args"]["util"].as_f64().unwrap() > 0.0));
    assert!(ranges.iter().all(|e| e["args"]["bound"].is_string()), "{ranges:?}");
    // Times are us from the session start.
    let va = kernels.iter().find(|k| k["name"] == "vector_add").unwrap();
    assert_eq!(va["ts"].as_f64().unwrap(), 1.2);
    assert_eq!(va["dur"].as_f64().unwrap(), 0.6);
}

#[test]
fn the_table_shows_the_tree_within_100_columns() {
    let r = workload(0);
    let t = r.render(Format::Table);
    println!("{t}");
    for line in t.lines() {
        assert!(line.chars().count() <= 100, "too wide: {line:?}");
    }
    let pos = |s: &str| t.find(s).unwrap_or_else(|| panic!("{s:?} missing from\n{t}"));
    assert!(pos("train") < pos("  forward"));
    assert!(pos("  forward") < pos("    · vector_add"));
    assert!(pos("  backward") < pos("    · softmax_fused"), "{t}");
    assert!(t.contains("(no range)"));
    assert!(t.contains("1 kernels with no launch seen"));
    assert!(t.contains("matmul_tiled<16>"));
    assert!(t.contains("threads: 2 kernels"), "the graph's two kernels came from a worker thread");
    assert_eq!((r.cross_thread.kernels, r.cross_thread.inherit), (2, false));
}

/// A range per training step gives a report thousands of paths wide; the
/// table looks paths up rather than searching them (it took 0.2 s for 3600
/// paths on the device, quadratic in the paths, before), and shows the
/// longest of them, not all: it stays under 300 lines whatever the program.
#[test]
fn the_table_of_a_report_with_many_range_paths_renders_in_linear_time_and_bounded() {
    let mut r = workload(0);
    let (range, pk) = (r.ranges[0].clone(), r.path_kernels.iter().find(|k| !k.path.is_empty()).unwrap().clone());
    let steps = 20_000;
    for i in 0..steps {
        let mut g = range.clone();
        g.path.frames.push(gpuscope::RangeFrame { domain: None, name: format!("step {i}") });
        let mut k = pk.clone();
        k.path = g.path.clone();
        r.ranges.push(g);
        r.path_kernels.push(k);
    }
    let t = std::time::Instant::now();
    let table = r.render(Format::Table);
    let took = t.elapsed();
    assert!(table.contains("20000 shorter ranges not shown") || table.contains("shorter ranges not shown"), "{table}");
    assert!(table.lines().count() < 300, "{} lines:\n{table}", table.lines().count());
    // Searching would take 20000^2 path comparisons: tens of seconds.
    assert!(took < std::time::Duration::from_secs(5), "{took:?} for {steps} paths");
}

#[test]
fn the_trace_cap_bounds_records_and_counts_the_rest() {
    let r = workload(2);
    let t = r.trace.unwrap();
    assert_eq!(t.kernels.len(), 2);
    assert_eq!(r.drops.trace_kernels_over_cap, 4);
    assert_eq!(r.kernels.iter().map(|k| k.stats.launches).sum::<u64>(), 6, "statistics keep everything");
}

#[test]
fn truncated_and_unknown_buffers_count_undecodable_records() {
    let mut rp = Replay::new(vec![h200()], 0);
    let mut b = kernel(&K { name: c"k", corr: 1, start: 0, end: 10, block: 32, regs: 8, dyn_smem: 0, stream: 1 });
    let full = b.len();
    b.extend(kernel(&K { name: c"k", corr: 2, start: 20, end: 30, block: 32, regs: 8, dyn_smem: 0, stream: 1 }));
    b.truncate(full + 100); // the second record is cut short
    rp.buffer(&b);
    // A kind this decoder does not size (e.g. a marker record) stops the walk.
    let mut unknown = vec![0u8; 64];
    unknown[..4].copy_from_slice(&sys::CUPTI_ACTIVITY_KIND_MARKER.to_ne_bytes());
    rp.buffer(&unknown);
    let r = rp.finish(0, 100);
    assert_eq!(r.kernels[0].stats.launches, 1);
    assert_eq!(r.drops.undecodable_records, 2);
}

#[test]
fn metrics_join_profiled_launches_by_correlation_id_in_either_order() {
    let set = gpuscope::MetricSet::default();
    let mut rp = Replay::with_metrics(vec![h200()], 100, set.names());
    let p = rp.path(&["phase"]);
    let launch = |c: u32, profiled: bool| HostEvent::Launch {
        correlation_id: c,
        tid: 1,
        path: p,
        instance: 0,
        graph: false,
        profiled,
        inherited: false,
        ts: 0,
        cost_ns: 0,
        prev_call_ns: 0,
    };
    for c in 1..=5 {
        rp.host_event(launch(c, c != 5));
    }
    // Metrics before the record (1), after it (2), discarded (3), never (4).
    rp.host_event(HostEvent::KernelMetrics { correlation_id: 1, values: Some(vec![40.0, 80.0, 1000.0, 1900.0]) });
    rp.host_event(HostEvent::KernelMetrics { correlation_id: 3, values: None });
    let k = |corr, start| K { name: c"k", corr, start, end: start, block: 256, regs: 32, dyn_smem: 0, stream: 1 };
    let mut b = Vec::new();
    for (c, t) in [(1, 0), (2, 10_000), (3, 20_000), (4, 30_000)] {
        b.extend(kernel(&k(c, t)));
    }
    b.extend(kernel(&K {
        name: c"k",
        corr: 5,
        start: 40_000,
        end: 41_000,
        block: 256,
        regs: 32,
        dyn_smem: 0,
        stream: 1,
    }));
    // CUPTI's own per-range kernel: no launch of the program behind it.
    b.extend(kernel(&K {
        name: c"WaitNs",
        corr: 77,
        start: 50_000,
        end: 130_000,
        block: 1,
        regs: 8,
        dyn_smem: 0,
        stream: 6,
    }));
    rp.buffer(&b);
    rp.host_event(HostEvent::KernelMetrics { correlation_id: 2, values: Some(vec![60.0, 100.0, 3000.0, 5700.0]) });
    let r = rp.finish(0, 100_000);
    let s = &r.kernels[0].stats;
    assert_eq!(s.launches, 5);
    assert_eq!(s.profiled_launches, 2);
    // Weighted by measured duration: (40*1000 + 60*3000) / 4000.
    assert_eq!(s.achieved_occupancy_pct, Some(55.0));
    assert_eq!(s.sm_efficiency_pct, Some(95.0));
    // Replayed kernels (zero-length records) get their measured durations.
    // Measured 1000 + 3000; 3 and 4 zero-length records; 5 unprofiled 1000.
    assert_eq!(s.total_ns, 5000);
    assert_eq!(r.drops.kernels_missing_metrics, 1);
    let t = r.trace.unwrap();
    let by = |c: u32| t.kernels.iter().find(|k| k.correlation_id == c).unwrap();
    assert!(by(2).replayed && by(2).metrics.as_ref().unwrap().duration_ns == 3000.0);
    assert_eq!(by(2).end_ns, 13_000);
    assert!(by(3).metrics.is_none() && by(4).metrics.is_none() && !by(5).replayed);
    assert_eq!(r.mode, "metrics");
    assert_eq!((r.profiler_kernels, r.profiler_kernel_ns), (1, 80_000));
    assert_eq!(r.kernels.len(), 1, "WaitNs is not reported as the program's kernel");
    assert_eq!(r.drops.unattributed_kernels, 0);
}

#[test]
fn a_busy_range_with_idle_sms_is_flagged() {
    let set = gpuscope::MetricSet::default();
    let mut rp = Replay::with_metrics(vec![h200()], 0, set.names());
    let (busy, fine) = (rp.path(&["busy"]), rp.path(&["fine"]));
    // Each range is 1000 ns of wall time filled by one measured kernel.
    for (inst, path, corr, t0, eff) in [(1u64, busy, 1u32, 0u64, 5.0), (2, fine, 2, 2_000, 95.0)] {
        rp.host_event(HostEvent::Push { instance: inst, parent: 0, path, tid: 1, ts: t0 });
        rp.host_event(HostEvent::Launch {
            correlation_id: corr,
            tid: 1,
            path,
            instance: inst,
            graph: false,
            profiled: true,
            inherited: false,
            ts: 0,
            cost_ns: 0,
            prev_call_ns: 0,
        });
        rp.host_event(HostEvent::Pop { instance: inst, ts: t0 + 1_000 });
        rp.host_event(HostEvent::KernelMetrics { correlation_id: corr, values: Some(vec![60.0, eff, 1000.0, 1.0]) });
        let k = K { name: c"k", corr, start: t0, end: t0, block: 256, regs: 32, dyn_smem: 0, stream: 1 };
        rp.buffer(&kernel(&k));
    }
    let r = rp.finish(0, 10_000);
    let g = |p: &str| r.ranges.iter().find(|g| g.path.to_string() == p).unwrap();
    assert_eq!(g("busy").gpu_utilization_pct, 100.0);
    assert_eq!(g("busy").sm_efficiency_pct, Some(5.0));
    assert!(g("busy").busy_but_underused);
    assert!(!g("fine").busy_but_underused);
    let t = r.to_table(100);
    assert!(
        t.contains("[latency-bound]") && t.contains("busy: busy 100% of the time as nvidia-smi counts it, but SM"),
        "{t}"
    );
}

#[test]
fn csv_has_a_row_per_path_and_kernel_with_quoting() {
    let r = workload(0);
    let csv = r.render(Format::Csv);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("nvtx_path,kernel,launches,total_ns"));
    assert_eq!(lines.len(), 1 + r.path_kernels.len());
    // The demangled matmul name has commas: quoted.
    assert!(
        csv.contains("train/forward,\"void matmul_tiled<16>(float const*, float const*, float*, int)\",1,1000,"),
        "{csv}"
    );
    assert!("csv".parse::<Format>().is_ok());
    assert!("xml".parse::<Format>().unwrap_err().message().contains("allowed: table, json, csv, chrome"));
}

/// PyTorch's kernels: names of a few hundred characters that differ deep
/// in their template arguments. At 80 and 100 columns, and in JSON, each
/// keeps a name of its own.
#[test]
fn kernels_with_long_template_names_get_distinct_readable_rows() {
    let names = [
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul>)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)",
        "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 8, false, false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)",
    ];
    let mut r = workload(0);
    for (i, k) in r.kernels.iter_mut().enumerate() {
        let old = std::mem::replace(&mut k.name, names[i % names.len()].to_string());
        for p in r.path_kernels.iter_mut().filter(|p| p.name == old) {
            p.name = k.name.clone();
        }
    }
    let r = Report::from_json(&r.to_json()).unwrap();
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    let k0 = &json["kernels"][0];
    assert!(k0["name"].as_str().unwrap().len() > k0["display_name"].as_str().unwrap().len(), "{k0}");
    let shown: std::collections::HashSet<&str> = r.kernels.iter().map(|k| k.display_name.as_str()).collect();
    assert_eq!(shown.len(), r.kernels.len(), "{shown:?}");
    assert!(shown.contains("vectorized_elementwise_kernel<GeluCUDAKernelImpl>"), "{shown:?}");
    assert!(shown.contains("vectorized_elementwise_kernel<BinaryFunctor<MulFunctor>>"), "{shown:?}");
    for width in [80, 100, 160] {
        let t = r.to_table(width);
        // Every kernel's display name is in the table whole.
        for k in &r.kernels {
            assert!(t.contains(&k.display_name), "{} cut at {width} columns:\n{t}", k.display_name);
        }
        assert!(t.lines().all(|l| l.chars().count() <= width), "wider than {width}:\n{t}");
    }
}

#[test]
fn a_report_with_huge_values_renders_and_analyses_without_overflow() {
    // Values a report file may carry (corrupt, hand-edited, summed across
    // ranks): every u64 figure at its maximum.
    fn max_out(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    let wide =
                        k.ends_with("_ns") || ["launches", "kernel_launches", "bytes", "count"].contains(&k.as_str());
                    if wide && x.is_u64() {
                        *x = u64::MAX.into();
                    } else {
                        max_out(x);
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(max_out),
            _ => {}
        }
    }
    let mut v: serde_json::Value = serde_json::from_str(&workload(100).to_json()).unwrap();
    // Two GPUs, so that per-device figures are analysed too.
    let mut second = v["device_time"][0].clone();
    second["device"] = 1.into();
    v["device_time"].as_array_mut().expect("one GPU's figures").push(second);
    max_out(&mut v);
    let r = Report::from_json(&v.to_string()).expect("still a report");
    assert_eq!(r.total_kernel_ns(), u64::MAX, "sums saturate");
    assert_eq!(gpuscope::analysis::analyze(&r).devices.len(), 2);
    assert!(!r.to_openmetrics().is_empty());
    let small = workload(100);
    for out in
        [r.to_table(100), r.to_json(), r.to_csv(), r.to_chrome_trace(), r.compare(&small, 100), small.compare(&r, 100)]
    {
        assert!(!out.is_empty());
    }
}

#[test]
fn a_job_of_many_ranks_gives_fastest_median_and_slowest_and_names_the_straggler() {
    use gpuscope::report::JobReport;
    let base = workload(0);
    let mut ranks: Vec<(String, Report)> = (0..6).map(|i| (format!("rank{i}"), base.clone())).collect();
    // rank4 is slow in "train"; rank5 never entered "train/backward".
    for g in &mut ranks[4].1.ranges {
        if g.path.to_string() == "train" {
            g.wall_ns *= 3;
        }
    }
    ranks[5].1.ranges.retain(|g| g.path.to_string() != "train/backward");
    let j = JobReport::merge(&ranks);
    let train = j.ranges.iter().find(|g| g.path.to_string() == "train").unwrap();
    assert_eq!(train.slowest, Some(4));
    assert!((train.slowest_over_median_pct - 200.0).abs() < 1e-9, "{}", train.slowest_over_median_pct);
    let backward = j.ranges.iter().find(|g| g.path.to_string() == "train/backward").unwrap();
    assert!(backward.per_rank[5].is_none() && backward.per_rank[0].is_some());
    let t = j.to_table(100);
    assert!(t.contains("job: 6 ranks") && t.contains("fastest") && t.contains("rank4 (+200.0%)"), "{t}");
    assert!(t.lines().all(|l| l.chars().count() <= 100), "{t}");
    let v: serde_json::Value = serde_json::from_str(&j.to_json()).unwrap();
    assert_eq!(v["ranks"].as_array().unwrap().len(), 6);
}

#[test]
fn openmetrics_has_the_kernel_and_range_series_and_ends_in_eof() {
    let r = workload(0);
    let text = r.to_openmetrics();
    assert!(text.ends_with("# EOF\n"), "{text}");
    let k = &r.kernels[0];
    let line = format!("gpuscope_kernel_launches_total{{kernel=\"{}\"}} {}", k.display_name, k.stats.launches);
    assert!(text.contains(&line), "{line} not in\n{text}");
    let g = &r.ranges[0];
    let line = format!("gpuscope_range_calls_total{{path=\"{}\"}} {}", g.path, g.count);
    assert!(text.contains(&line), "{line} not in\n{text}");
    assert!(text.contains("gpuscope_dropped_total{reason=\"cupti_records\"} 0"), "{text}");
    assert_eq!("openmetrics".parse::<Format>().unwrap(), Format::OpenMetrics);
    assert_eq!(r.render(Format::OpenMetrics), text);
}

/// A range instance recorded as its own parent (a corrupt event stream;
/// found by the `aggregate` fuzz target, which hung here) still folds.
#[test]
fn a_range_that_is_its_own_parent_does_not_hang_the_aggregator() {
    let mut rp = Replay::new(vec![h200()], 0);
    let step = rp.path(&["step"]);
    rp.host_event(HostEvent::Push { instance: 5, parent: 5, path: step, tid: 1, ts: 1_000 });
    rp.host_event(HostEvent::Launch {
        correlation_id: 9,
        tid: 1,
        path: step,
        instance: 5,
        graph: false,
        profiled: false,
        inherited: false,
        ts: 1_100,
        cost_ns: 0,
        prev_call_ns: 0,
    });
    let k = K { name: c"k", corr: 9, start: 2_000, end: 3_000, block: 128, regs: 32, dyn_smem: 0, stream: 7 };
    rp.buffer(&kernel(&k));
    rp.host_event(HostEvent::Pop { instance: 5, ts: 4_000 });
    let r = rp.finish(0, 5_000);
    let g = r.ranges.iter().find(|g| g.path.to_string() == "step").expect("the range");
    assert_eq!((g.count, g.kernel_launches), (1, 1));
}

/// Any width a caller passes gives a table (none panics), kept within
/// `TABLE_WIDTHS`.
#[test]
fn tables_of_any_width_render_within_the_allowed_widths() {
    let r = workload(0);
    for width in [0, 3, 39, 100, 70_000, usize::MAX] {
        let t = r.to_table(width);
        let widest = t.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(widest <= *gpuscope::TABLE_WIDTHS.end(), "width {width}: a line of {widest}");
        assert!(t.contains("NVTX range / kernel"), "width {width}");
        r.compare(&r, width);
    }
}

#[test]
fn the_chrome_trace_gives_the_last_device_ordinal_a_process_of_its_own() {
    let mut last = h200();
    last.id = u32::MAX;
    let mut rp = Replay::new(vec![last], 10);
    let k = K { name: c"k", corr: 9, start: 2_000, end: 3_000, block: 128, regs: 32, dyn_smem: 0, stream: 7 };
    let mut bytes = kernel(&k);
    let at = std::mem::offset_of!(sys::CUpti_ActivityKernel10, deviceId);
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
    rp.buffer(&bytes);
    let v: serde_json::Value = serde_json::from_str(&rp.finish(0, 5_000).to_chrome_trace()).unwrap();
    let pid = 100 + u32::MAX as u64;
    let ev = v["traceEvents"].as_array().unwrap();
    assert!(ev.iter().any(|e| e["cat"] == "kernel" && e["pid"] == pid), "{v}");
    assert!(ev.iter().any(|e| e["name"] == "process_name" && e["pid"] == pid), "{v}");
    assert!(ev.iter().all(|e| e["pid"] != 99), "no wrapped id");
}

#[test]
fn trace_windows_at_the_top_of_the_clock_render_saturated() {
    use gpuscope::sampling::{SamplingStatus, TraceWindows};
    let mut r = workload(0);
    let w = TraceWindows { window_ns: 1, period_ns: 2, traced_ns: u64::MAX, untraced_ns: 1, ..Default::default() };
    r.sampling = Some(SamplingStatus { trace_windows: Some(w), ..Default::default() });
    let t = r.to_table(1000);
    assert!(t.contains("18446744073.710 s of 18446744073.710 s traced"), "{t}");
}

#[test]
fn openmetrics_counters_of_a_series_listed_twice_saturate() {
    // A hand-edited or corrupt report file may list a kernel or a range
    // twice: their counts add up in one series.
    let mut r = workload(0);
    let mut k = r.kernels[0].clone();
    k.stats.launches = u64::MAX;
    r.kernels.push(k);
    let mut g = r.ranges[0].clone();
    g.count = u64::MAX;
    r.ranges.push(g.clone());
    let text = r.to_openmetrics();
    let calls = format!("gpuscope_range_calls_total{{path=\"{}\"}} {}", g.path, u64::MAX);
    assert!(text.lines().any(|l| l == calls), "{text}");
    let launches = format!("gpuscope_kernel_launches_total{{kernel=\"{}\"}} {}", r.kernels[0].display_name, u64::MAX);
    assert!(text.lines().any(|l| l == launches), "{text}");
}

/// The fuzz targets' seed corpora, `fuzz/corpus/TARGET/seed-*`: reports
/// for `report_json` (this version's, a measured one, and the schema-1
/// reports of `tests/data`) and CUPTI 13 activity buffers for
/// `activity_records` (kernel name pointers null, so the bytes do not
/// depend on the process that wrote them). Each must still be read by this
/// version; `GPUSCOPE_WRITE_SEEDS=1` writes them anew from the code here.
#[test]
fn the_fuzz_seeds_are_reports_and_buffers_this_version_reads() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    if std::env::var("GPUSCOPE_WRITE_SEEDS").is_ok_and(|v| v == "1") {
        write_fuzz_seeds(&root);
    }
    let seeds = |target: &str| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(root.join(target))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("seed-"))
            .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
            .collect();
        v.sort();
        v
    };
    let reports = seeds("report_json");
    assert!(reports.len() >= 4, "{reports:?}");
    for (path, bytes) in &reports {
        let r = Report::from_json(std::str::from_utf8(bytes).unwrap()).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(!r.kernels.is_empty(), "{path}");
    }
    let buffers = seeds("activity_records");
    assert!(buffers.len() >= 2);
    for (path, bytes) in &buffers {
        let mut cursor = gpuscope::activity::LayoutCursor::new(bytes);
        let mut records = 0;
        while let Some(record) = gpuscope::activity::RecordCursor::next_record(&mut cursor).unwrap() {
            gpuscope::activity::decode(record).unwrap_or_else(|e| panic!("{path}: {e:?}"));
            records += 1;
        }
        let mut rp = Replay::new(vec![h200()], 0);
        rp.buffer(bytes);
        let r = rp.finish(0, 1_000_000);
        assert!(records > 1 && !r.kernels.is_empty() && r.drops.undecodable_records == 0, "{path}");
    }
    let total: usize = reports.iter().chain(&buffers).map(|(_, b)| b.len()).sum();
    assert!(total < 1 << 20, "seed corpora stay small: {total} bytes");
}

fn write_fuzz_seeds(root: &std::path::Path) {
    let write = |target: &str, name: &str, bytes: &[u8]| {
        std::fs::create_dir_all(root.join(target)).unwrap();
        std::fs::write(root.join(target).join(format!("seed-{name}")), bytes).unwrap();
    };
    write("report_json", "trace.json", workload(100).to_json().as_bytes());
    write("report_json", "metrics.json", measured_report().to_json().as_bytes());
    for old in ["schema1-trace.json", "schema1-metrics.json"] {
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data").join(old);
        write("report_json", old, &std::fs::read(data).unwrap());
    }
    // Kernels of several shapes, copies pageable and pinned, a set, a
    // synchronisation: every kind the decoder reads.
    let unnamed = |mut b: Vec<u8>| {
        let at = std::mem::offset_of!(sys::CUpti_ActivityKernel10, name);
        b[at..at + 8].fill(0);
        b
    };
    let mut mixed = Vec::new();
    let k = |corr, start, block, regs, dyn_smem| K {
        name: c"k",
        corr,
        start,
        end: start + 900,
        block,
        regs,
        dyn_smem,
        stream: 7,
    };
    mixed.extend(unnamed(kernel(&k(1, 1_000, 256, 44, 0))));
    mixed.extend(memcpy(2, 2_000, 2_500, 1 << 20));
    mixed.extend(unnamed(kernel(&k(3, 3_000, 1024, 32, 64 * 1024))));
    mixed.extend(memcpy_pinned(4, 4_000, 4_200, 4096));
    mixed.extend(memset(4_300, 4_400));
    mixed.extend(sync(4_500, 6_000));
    mixed.extend(unnamed(kernel_grid(c"k", 5, 6_100, 9_000, 4096, 128)));
    write("activity_records", "mixed", &mixed);
    let mut kernels = Vec::new();
    for (i, (grid, block)) in [(1, 32), (132, 256), (1 << 20, 1024), (7, 96)].into_iter().enumerate() {
        let t = 10_000 * i as u64;
        kernels.extend(unnamed(kernel_grid(c"k", 10 + i as u32, t, t + 5_000, grid, block)));
    }
    write("activity_records", "kernels", &kernels);
}

/// A metrics-mode report: measured and unmeasured launches of two kernels
/// in a range, with the default metric set's values.
fn measured_report() -> Report {
    let set = gpuscope::MetricSet::default();
    let mut rp = Replay::with_metrics(vec![h200()], 100, set.names());
    let p = rp.path(&["phase"]);
    rp.host_event(HostEvent::Push { instance: 1, parent: 0, path: p, tid: 1, ts: 0 });
    let mut b = Vec::new();
    for c in 1..=4u32 {
        rp.host_event(HostEvent::Launch {
            correlation_id: c,
            tid: 1,
            path: p,
            instance: 1,
            graph: false,
            profiled: c % 2 == 1,
            inherited: false,
            ts: c as u64 * 10_000,
            cost_ns: 800,
            prev_call_ns: 3_000,
        });
        let values = vec![30.0 + c as f64, 70.0 + c as f64, 1000.0 * c as f64, 1900.0 * c as f64];
        if c % 2 == 1 {
            rp.host_event(HostEvent::KernelMetrics { correlation_id: c, values: Some(values) });
        }
        let name = if c <= 2 { c"gemm" } else { c"_Z4tinyPi" };
        let start = c as u64 * 10_000 + 2_000;
        b.extend(kernel(&K { name, corr: c, start, end: start + 5_000, block: 256, regs: 64, dyn_smem: 0, stream: 1 }));
    }
    rp.buffer(&b);
    rp.host_event(HostEvent::Pop { instance: 1, ts: 60_000 });
    rp.finish(0, 60_000)
}

#[test]
fn the_rank_that_waits_least_in_collectives_is_the_one_the_others_wait_for() {
    use gpuscope::report::JobReport;
    let base = workload(0);
    let train = base.ranges.iter().find(|g| g.path.to_string() == "train").unwrap();
    let (count, wall) = (train.count.max(1), train.wall_ns / train.count.max(1));
    // Exposed communication per call, as a share of the call: rank1
    // arrives last and waits least; the others wait 30% and 40% longer.
    let shares = [0.35, 0.05, 0.45];
    let mut ranks: Vec<(String, Report)> = (0..3).map(|i| (format!("rank{i}"), base.clone())).collect();
    for ((_, r), share) in ranks.iter_mut().zip(shares) {
        for g in r.ranges.iter_mut().filter(|g| g.path.to_string() == "train") {
            g.totals.exposed_comm_ns = (wall as f64 * share) as u64 * count;
            g.totals.comm_ns = g.totals.exposed_comm_ns;
        }
    }
    let j = JobReport::merge(&ranks);
    let g = j.ranges.iter().find(|g| g.path.to_string() == "train").unwrap();
    assert_eq!(g.last_to_arrive, Some(1));
    let own = (wall as f64 * 0.05) as u64;
    let expected = ((wall as f64 * 0.35) as u64 - own + (wall as f64 * 0.45) as u64 - own) / 2;
    assert_eq!(g.wait_per_call_ns, expected);
    assert_eq!(g.per_rank[2].as_ref().map(|r| r.exposed_comm_per_call_ns), Some((wall as f64 * 0.45) as u64));
    let t = j.to_table(100);
    assert!(t.contains("stragglers:") && t.contains("train: rank1 arrives last"), "{t}");
    assert!(t.lines().all(|l| l.chars().count() <= 100), "{t}");
    // Wrapped, never cut: the wait is all there.
    let flat = t.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("train: rank1 arrives last at the collectives: the others wait")
            && flat.contains("per call for it"),
        "{t}"
    );
    // Data-parallel ranks: the collectives of the rank that arrived early
    // spin under its compute (hidden, so little exposed) and slow it; its
    // extra GPU-busy time is the wait.
    let mut dp = ranks.clone();
    for (i, (_, r)) in dp.iter_mut().enumerate() {
        for g in r.ranges.iter_mut().filter(|g| g.path.to_string() == "train") {
            g.totals.exposed_comm_ns = (wall as f64 * [0.06, 0.01][i.min(1)]) as u64 * count;
            g.gpu_busy_ns = (wall as f64 * [0.95, 0.70][i.min(1)]) as u64 * count;
        }
    }
    let d = JobReport::merge(&dp[..2]);
    let g = d.ranges.iter().find(|g| g.path.to_string() == "train").unwrap();
    assert_eq!(g.last_to_arrive, Some(1));
    let busy = |share: f64| (wall as f64 * share) as u64 * count / count;
    assert_eq!(g.wait_per_call_ns, busy(0.95) - busy(0.70), "the busy time, more than the exposed difference");
    // Ranges without communication, and ranks within noise of each other,
    // name nobody.
    let other = j.ranges.iter().find(|g| g.path.to_string() != "train").unwrap();
    assert_eq!((other.last_to_arrive, other.wait_per_call_ns), (None, 0));
    for ((_, r), share) in ranks.iter_mut().zip([0.30, 0.29, 0.31]) {
        for g in r.ranges.iter_mut().filter(|g| g.path.to_string() == "train") {
            g.totals.exposed_comm_ns = (wall as f64 * share) as u64 * count;
        }
    }
    let j = JobReport::merge(&ranks);
    let g = j.ranges.iter().find(|g| g.path.to_string() == "train").unwrap();
    assert_eq!(g.last_to_arrive, None, "1% of a call apart: noise");
    // A merged report of an older gpuscope reads back without the fields.
    let mut v: serde_json::Value = serde_json::from_str(&j.to_json()).unwrap();
    v["ranges"][0]["per_rank"][0].as_object_mut().unwrap().remove("exposed_comm_per_call_ns");
    let back: JobReport = serde_json::from_value(v).unwrap();
    assert_eq!(back.ranges.len(), j.ranges.len());
}

/// The Grafana dashboard in docs queries series this version writes: every
/// `gpuscope_` name in its queries is a family the OpenMetrics encoder
/// registers (families with no sample are not written, so the names are
/// read from the encoder's source).
#[test]
fn the_grafana_dashboard_queries_series_gpuscope_writes() {
    let dashboard: serde_json::Value =
        serde_json::from_str(include_str!("../docs/guides/grafana/gpuscope-dashboard.json")).expect("dashboard JSON");
    let source = include_str!("../report/src/render/openmetrics.rs");
    // `family::<..>(&mut reg, "name", ..)` and `reg.register("name", ..)`.
    let mut families = std::collections::HashSet::new();
    for marker in ["&mut reg,", "reg.register("] {
        for (i, _) in source.match_indices(marker) {
            let rest = source[i + marker.len()..].trim_start();
            if let Some(name) = rest.strip_prefix('"').and_then(|r| r.split('"').next()) {
                families.insert(format!("gpuscope_{name}"));
            }
        }
    }
    assert!(families.len() >= 20, "{families:?}");
    let text = workload(0).to_openmetrics();
    for l in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let name = l.split(' ').next().unwrap_or_default();
        assert!(families.contains(name), "{name} written but not found in the encoder's source: {families:?}");
    }
    let mut queries: Vec<String> = Vec::new();
    for p in dashboard["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            queries.push(t["expr"].as_str().expect("a query").to_string());
        }
    }
    for v in dashboard["templating"]["list"].as_array().expect("variables") {
        if let Some(q) = v["query"].as_str() {
            queries.push(q.to_string());
        }
    }
    let mut seen = 0;
    for q in &queries {
        for (i, _) in q.match_indices("gpuscope_") {
            let name: String = q[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let family = name.strip_suffix("_total").unwrap_or(&name);
            assert!(families.contains(family), "{name} (in {q}) is no series gpuscope writes: {families:?}");
            seen += 1;
        }
    }
    assert!(seen >= 15, "{seen} series named");
}
