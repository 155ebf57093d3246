//! Chrome trace event JSON (opens in ui.perfetto.dev and chrome://tracing):
//! kernels and copies on one track per stream under one process per GPU,
//! with counter tracks of GPU utilisation and SM efficiency over time, and
//! NVTX ranges on one track per host thread, each with its verdict.

use crate::analysis::Analysis;
use crate::report::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

const HOST_PID: u32 = 1;

/// A GPU's process id: after the host's, one per device ordinal (`u64`:
/// every `u32` ordinal has its own).
fn gpu_pid(device: u32) -> u64 {
    100 + device as u64
}

/// Counter buckets per session at most; each is at least 10 us wide.
const BUCKETS: u64 = 4000;

/// Per device and time bucket: the share of the bucket in which a kernel
/// ran, and SM efficiency (active SMs' share) over the bucket, both %.
/// A kernel without measured values takes those of its name (measured
/// launches of the same kernel), or counts for utilisation only.
fn counters(r: &Report, t: &Trace) -> Vec<Value> {
    let (t0, t1) = (r.start_ns, r.end_ns.max(r.start_ns.saturating_add(1)));
    let width = ((t1 - t0) / BUCKETS).max(10_000);
    let n = ((t1 - t0).div_ceil(width)) as usize;
    let eff_of_name: HashMap<&str, f64> =
        r.kernels.iter().filter_map(|k| k.stats.sm_efficiency_pct.map(|e| (k.name.as_str(), e))).collect();
    let mut devices: BTreeMap<u32, Vec<&KernelRecord>> = BTreeMap::new();
    for k in &t.kernels {
        devices.entry(k.device).or_default().push(k);
    }
    let mut ev = Vec::new();
    for (device, mut ks) in devices {
        ks.sort_by_key(|k| k.start_ns);
        let mut busy = vec![0u64; n];
        let mut eff = vec![0f64; n];
        let mut any_eff = false;
        let spread = |a: u64, b: u64, f: &mut dyn FnMut(usize, u64)| {
            let (a, b) = (a.clamp(t0, t1), b.clamp(t0, t1));
            let mut at = a;
            while at < b {
                let i = ((at - t0) / width) as usize;
                let end = t0.saturating_add((i as u64 + 1).saturating_mul(width)).min(b);
                f(i.min(n - 1), end - at);
                at = end;
            }
        };
        // Utilisation: the union of kernel intervals.
        let mut cur: Option<(u64, u64)> = None;
        for k in &ks {
            match cur {
                Some((s, e)) if k.start_ns <= e => cur = Some((s, e.max(k.end_ns))),
                _ => {
                    if let Some((s, e)) = cur {
                        spread(s, e, &mut |i, d| busy[i] = busy[i].saturating_add(d));
                    }
                    cur = Some((k.start_ns, k.end_ns));
                }
            }
        }
        if let Some((s, e)) = cur {
            spread(s, e, &mut |i, d| busy[i] = busy[i].saturating_add(d));
        }
        for k in &ks {
            let e =
                k.metrics.as_ref().map(|m| m.sm_efficiency_pct).or_else(|| eff_of_name.get(k.name.as_str()).copied());
            if let Some(e) = e.filter(|e| e.is_finite()) {
                any_eff = true;
                spread(k.start_ns, k.end_ns, &mut |i, d| eff[i] += e * d as f64);
            }
        }
        let mut last = (f64::NAN, f64::NAN);
        for i in 0..n {
            let ts = (i as u64 * width) as f64 / 1000.0;
            let u = (100.0 * busy[i] as f64 / width as f64).min(100.0);
            let e = (eff[i] / width as f64).min(100.0);
            // Only changes: a flat stretch is one event.
            if u != last.0 {
                ev.push(json!({"ph": "C", "name": "GPU utilisation %", "pid": gpu_pid(device), "ts": ts, "args": {"util": u}}));
            }
            if any_eff && e != last.1 {
                ev.push(json!({"ph": "C", "name": "SM efficiency %", "pid": gpu_pid(device), "ts": ts, "args": {"sm_eff": e}}));
            }
            last = (u, e);
        }
    }
    ev
}

/// Sampling mode: one counter track per sampled metric and device, a value
/// per PM sample (the hardware's own figures, not derived from kernels).
fn sampled_counters(r: &Report, t: &Trace) -> Vec<Value> {
    let us = |ns: u64| ns.saturating_sub(r.start_ns) as f64 / 1000.0;
    let mut ev = Vec::new();
    for s in &t.samples {
        let pid = gpu_pid(s.device);
        let ts = us(s.start_ns);
        let mut add = |name: &str, key: &str, v: Option<f32>| {
            if let Some(v) = v.filter(|v| v.is_finite()) {
                ev.push(json!({"ph": "C", "name": name, "pid": pid, "ts": ts, "args": {key: v}}));
            }
        };
        add("GPU busy % (sampled)", "gpu_busy", s.gpu_busy_pct);
        add("SM efficiency % (sampled)", "sm_eff", s.sm_efficiency_pct);
        add("achieved occupancy % (sampled)", "occupancy", s.achieved_occupancy_pct);
        add("tensor pipe active % (sampled)", "tensor", s.tensor_active_pct);
        add("DRAM GB/s (sampled)", "dram", s.dram_gb_per_s);
    }
    ev
}

/// Renders `r` (its trace part; statistics go in `otherData`).
pub fn render(r: &Report, a: &Analysis) -> String {
    let t0 = r.start_ns;
    let us = |ns: u64| ns.saturating_sub(t0) as f64 / 1000.0;
    let dur = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1000.0;
    let mut ev: Vec<Value> = Vec::new();
    ev.push(json!({"ph": "M", "name": "process_name", "pid": HOST_PID, "args": {"name": "host"}}));
    for d in &r.devices {
        ev.push(json!({"ph": "M", "name": "process_name", "pid": gpu_pid(d.id), "args": {"name": format!("GPU {}: {}", d.id, d.name)}}));
    }
    for t in &r.thread_names {
        ev.push(json!({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": t.tid, "args": {"name": t.name}}));
    }
    let mut streams = std::collections::BTreeSet::new();
    let shown = r.display_names();
    if let Some(tr) = &r.trace {
        for k in &tr.kernels {
            streams.insert((k.device, k.stream));
            ev.push(json!({
                "name": shown.get(k.name.as_str()).copied().unwrap_or(k.name.as_str()), "cat": "kernel", "ph": "X",
                "ts": us(k.start_ns), "dur": dur(k.start_ns, k.end_ns),
                "pid": gpu_pid(k.device), "tid": k.stream,
                "args": {
                    "name": k.name, "grid": k.grid, "block": k.block, "registers": k.registers_per_thread,
                    "static_smem": k.static_smem_bytes, "dynamic_smem": k.dynamic_smem_bytes,
                    "theoretical_occupancy_pct": k.occupancy.map(|o| o.theoretical_pct),
                    "limiter": k.occupancy.map(|o| o.limiter.as_str()),
                    "correlation_id": k.correlation_id, "nvtx": k.path.to_string(), "thread": k.thread,
                }
            }));
        }
        for m in &tr.memory {
            streams.insert((m.device, m.stream));
            ev.push(json!({
                "name": m.kind, "cat": "memory", "ph": "X", "ts": us(m.start_ns), "dur": dur(m.start_ns, m.end_ns),
                "pid": gpu_pid(m.device), "tid": m.stream, "args": {"bytes": m.bytes}
            }));
        }
        let bound: HashMap<&str, &str> = a.ranges.iter().map(|g| (g.path.as_str(), g.verdict.bound.as_str())).collect();
        for g in &tr.ranges {
            let name = g.path.frames.last().map_or("", |f| f.name.as_str());
            let path = g.path.to_string();
            let verdict = bound.get(path.as_str()).copied();
            ev.push(json!({
                "name": name, "cat": "nvtx", "ph": "X", "ts": us(g.start_ns), "dur": dur(g.start_ns, g.end_ns),
                "pid": HOST_PID, "tid": g.thread, "args": {"path": path, "bound": verdict}
            }));
        }
        if tr.samples.is_empty() {
            ev.extend(counters(r, tr));
        } else {
            ev.extend(sampled_counters(r, tr));
        }
    }
    for (d, s) in streams {
        ev.push(json!({"ph": "M", "name": "thread_name", "pid": gpu_pid(d), "tid": s, "args": {"name": format!("stream {s}")}}));
    }
    // Live device memory per device, as a counter track.
    for m in &r.memory.devices {
        for &(ts, bytes) in &m.timeline {
            ev.push(json!({"ph": "C", "name": "device memory (bytes)", "pid": gpu_pid(m.device), "ts": us(ts), "args": {"live": bytes}}));
        }
    }
    let doc = json!({
        "traceEvents": ev,
        "displayTimeUnit": "ns",
        "otherData": {
            "producer": format!("gpuscope {}", r.gpuscope_version),
            "has_trace": r.trace.is_some(),
            "kernel_launches": crate::model::units::saturating_sum(r.kernels.iter().map(|k| k.stats.launches)),
            "drops": serde_json::to_value(&r.drops).unwrap_or(Value::Null),
        }
    });
    serde_json::to_string(&doc).unwrap_or_default()
}
