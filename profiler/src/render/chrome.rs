//! Chrome trace event JSON (opens in ui.perfetto.dev and chrome://tracing):
//! kernels and copies on one track per stream under one process per GPU,
//! NVTX ranges on one track per host thread.

use crate::report::*;
use serde_json::{json, Value};

const HOST_PID: u32 = 1;

fn gpu_pid(device: u32) -> u32 {
    100 + device
}

/// Renders `r` (its trace part; statistics go in `otherData`).
pub fn render(r: &Report) -> String {
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
    if let Some(tr) = &r.trace {
        for k in &tr.kernels {
            streams.insert((k.device, k.stream));
            ev.push(json!({
                "name": super::table::short_name(&k.name), "cat": "kernel", "ph": "X",
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
        for g in &tr.ranges {
            let name = g.path.frames.last().map_or("", |f| f.name.as_str());
            ev.push(json!({
                "name": name, "cat": "nvtx", "ph": "X", "ts": us(g.start_ns), "dur": dur(g.start_ns, g.end_ns),
                "pid": HOST_PID, "tid": g.thread, "args": {"path": g.path.to_string()}
            }));
        }
    }
    for (d, s) in streams {
        ev.push(json!({"ph": "M", "name": "thread_name", "pid": gpu_pid(d), "tid": s, "args": {"name": format!("stream {s}")}}));
    }
    let doc = json!({
        "traceEvents": ev,
        "displayTimeUnit": "ns",
        "otherData": {
            "producer": format!("gpuscope {}", r.gpuscope_version),
            "has_trace": r.trace.is_some(),
            "kernel_launches": r.kernels.iter().map(|k| k.stats.launches).sum::<u64>(),
            "drops": serde_json::to_value(&r.drops).unwrap_or(Value::Null),
        }
    });
    serde_json::to_string(&doc).unwrap_or_default()
}
