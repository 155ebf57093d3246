//! OpenMetrics text (what Prometheus scrapes): the session, each kernel and
//! each NVTX range path as counters and gauges, encoded by the Prometheus
//! project's `prometheus-client` crate. Times in seconds, shares as ratios
//! (0 to 1), as Prometheus names them.

use crate::analysis::Analysis;
use crate::report::Report;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::borrow::Cow;
use std::sync::atomic::AtomicU64;

type FloatCounter = Counter<f64, AtomicU64>;
type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KernelLabels {
    kernel: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RangeLabels {
    path: String,
}

/// A figure with where it comes from: `measured` (metrics mode's counters)
/// or `sampled` (PM samples).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FigureLabels {
    path: String,
    source: String,
}

/// A device's labels; `UUID` as dcgm-exporter names it, so that its series
/// join gpuscope's (`on(UUID)`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
struct DeviceLabels {
    device: String,
    name: String,
    UUID: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
struct DeviceIdleLabels {
    device: String,
    name: String,
    UUID: String,
    cause: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    path: String,
    bound: String,
}

/// Ranges with series of their own at most, the longest (by wall time)
/// first: a program with a range per request or per step number must not
/// make a Prometheus series per range.
pub const MAX_RANGE_SERIES: usize = 100;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DropLabels {
    reason: String,
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Adds `n` to `c`, saturating: a report file may list one series twice,
/// and the counter's own add wraps.
fn add(c: &Counter, n: u64) {
    c.inc_by(n.min(u64::MAX - c.get()));
}

/// Registers a family and returns it for filling.
fn family<L, M>(reg: &mut Registry, name: &str, help: &str) -> Family<L, M>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
    M: prometheus_client::metrics::TypedMetric
        + prometheus_client::encoding::EncodeMetric
        + Default
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let f = Family::<L, M>::default();
    reg.register(name, help, f.clone());
    f
}

/// The report as OpenMetrics text, ending in `# EOF`; `labels` go on every
/// series.
pub(crate) fn render(r: &Report, a: &Analysis, labels: &[(String, String)]) -> String {
    let constant = labels.iter().map(|(k, v)| (Cow::Owned(k.clone()), Cow::Owned(v.clone())));
    let mut reg = Registry::with_prefix_and_labels("gpuscope", constant);

    let session = FloatGauge::default();
    session.set(secs(r.end_ns.saturating_sub(r.start_ns)));
    reg.register("session_seconds", "Length of the profiled session", session);
    if let Some(w) = r.sampling.as_ref().and_then(|s| s.trace_windows.as_ref()) {
        let windows = Counter::<u64>::default();
        windows.inc_by(w.windows);
        reg.register("trace_windows", "Trace windows taken (kernel records on), on demand included", windows);
        let asked = Counter::<u64>::default();
        asked.inc_by(w.on_demand);
        reg.register(
            "trace_windows_on_demand",
            "Trace windows asked for while the process ran (gpuscope trigger)",
            asked,
        );
        let traced = FloatCounter::default();
        traced.inc_by(secs(w.traced_ns));
        reg.register("traced_seconds", "Session time with kernel records on", traced);
    }
    let devices = family::<DeviceLabels, Gauge>(&mut reg, "device_sms", "SMs of each device that ran kernels");
    let labels_of = |device: u32| {
        let d = r.devices.iter().find(|d| d.id == device);
        DeviceLabels {
            device: device.to_string(),
            name: d.map_or_else(String::new, |d| d.name.clone()),
            UUID: d.and_then(|d| d.uuid.clone()).unwrap_or_default(),
        }
    };
    for d in &r.devices {
        devices.get_or_create(&labels_of(d.id)).set(d.sm_count as i64);
    }
    let mem_peak = family::<DeviceLabels, Gauge>(
        &mut reg,
        "device_memory_peak_bytes",
        "Most device memory allocated in the session and live at once, per device",
    );
    let mem_live = family::<DeviceLabels, Gauge>(
        &mut reg,
        "device_memory_live_bytes",
        "Device memory live at the report, per device",
    );
    let mem_total = family::<DeviceLabels, Gauge>(&mut reg, "device_memory_total_bytes", "Each device's memory");
    for m in &r.memory.devices {
        let l = labels_of(m.device);
        mem_peak.get_or_create(&l).set(m.peak_live_bytes.min(i64::MAX as u64) as i64);
        mem_live.get_or_create(&l).set(m.live_at_end_bytes.min(i64::MAX as u64) as i64);
    }
    let busy = family::<DeviceLabels, FloatCounter>(
        &mut reg,
        "device_busy_seconds",
        "Time some kernel of the process ran on each device",
    );
    let idle = family::<DeviceIdleLabels, FloatCounter>(
        &mut reg,
        "device_idle_seconds",
        "Time no kernel of the process ran on each device, by cause",
    );
    for t in &r.device_time {
        let l = labels_of(t.device);
        busy.get_or_create(&l).inc_by(secs(t.busy_ns));
        for (cause, ns) in crate::model::idle::CAUSE_NAMES.iter().zip(t.idle.to_array()) {
            let DeviceLabels { device, name, UUID } = l.clone();
            idle.get_or_create(&DeviceIdleLabels { device, name, UUID, cause: cause.to_string() }).inc_by(secs(ns));
        }
    }
    for d in &r.devices {
        if let Some(b) = d.memory_bytes {
            mem_total.get_or_create(&labels_of(d.id)).set(b.min(i64::MAX as u64) as i64);
        }
    }

    let k_launches = family::<KernelLabels, Counter>(&mut reg, "kernel_launches", "Launches of each kernel");
    let k_time = family::<KernelLabels, FloatCounter>(&mut reg, "kernel_gpu_seconds", "GPU time of each kernel");
    let k_sm = family::<KernelLabels, FloatGauge>(
        &mut reg,
        "kernel_sm_efficiency_ratio",
        "SM efficiency of each kernel's measured launches (metrics mode)",
    );
    let k_occ = family::<KernelLabels, FloatGauge>(
        &mut reg,
        "kernel_achieved_occupancy_ratio",
        "Achieved occupancy of each kernel's measured launches (metrics mode)",
    );
    for k in &r.kernels {
        let l = KernelLabels { kernel: k.display_name.clone() };
        add(&k_launches.get_or_create(&l), k.stats.launches);
        k_time.get_or_create(&l).inc_by(secs(k.stats.total_ns));
        if let Some(v) = k.stats.sm_efficiency_pct {
            k_sm.get_or_create(&l).set(v / 100.0);
        }
        if let Some(v) = k.stats.achieved_occupancy_pct {
            k_occ.get_or_create(&l).set(v / 100.0);
        }
    }

    let r_calls = family::<RangeLabels, Counter>(&mut reg, "range_calls", "Calls of each NVTX range path");
    let r_wall = family::<RangeLabels, FloatCounter>(&mut reg, "range_wall_seconds", "Wall time of each range path");
    let r_busy =
        family::<RangeLabels, FloatCounter>(&mut reg, "range_gpu_busy_seconds", "GPU busy time inside each range path");
    let r_launch =
        family::<RangeLabels, Counter>(&mut reg, "range_kernel_launches", "Kernels launched inside each range path");
    let r_util = family::<RangeLabels, FloatGauge>(
        &mut reg,
        "range_gpu_utilization_ratio",
        "Share of the range's time a kernel ran (what nvidia-smi's utilization shows)",
    );
    let r_sm = family::<FigureLabels, FloatGauge>(
        &mut reg,
        "range_sm_efficiency_ratio",
        "SM efficiency over the range's kernel time",
    );
    let r_occ = family::<FigureLabels, FloatGauge>(
        &mut reg,
        "range_achieved_occupancy_ratio",
        "Achieved occupancy over the range's kernel time",
    );
    let r_mfu = family::<RangeLabels, FloatGauge>(
        &mut reg,
        "range_model_flops_utilization_ratio",
        "Model FLOPs per second (declared, or counted from operand shapes) over the device's dense peak (MFU)",
    );
    let r_hmfu = family::<RangeLabels, FloatGauge>(
        &mut reg,
        "range_hardware_flops_utilization_ratio",
        "Counted FLOPs per second over the pipes' dense peaks",
    );
    let r_ucalls = family::<RangeLabels, Counter>(
        &mut reg,
        "range_untraced_calls",
        "Calls of each range path that touched time without kernel records (trace windows)",
    );
    let r_uwall =
        family::<RangeLabels, FloatCounter>(&mut reg, "range_untraced_wall_seconds", "Wall time of those calls");
    let r_ulaunch = family::<RangeLabels, Counter>(
        &mut reg,
        "range_untraced_kernel_launches",
        "Kernels launched in those calls, counted without records",
    );
    let r_gpu_busy = family::<FigureLabels, FloatGauge>(
        &mut reg,
        "range_gpu_busy_ratio",
        "Share of the range's time the GPU ran kernels: from kernel records (source=\"traced\"), or the sampled \
         graphics engine's activity over calls without them, times the kernels' share of it inside trace windows \
         where there are some (source=\"sampled\")",
    );
    let r_tensor = family::<FigureLabels, FloatGauge>(
        &mut reg,
        "range_tensor_active_ratio",
        "Tensor pipe active over active SM cycles in the range (PM samples)",
    );
    let r_compute = family::<FigureLabels, FloatGauge>(
        &mut reg,
        "range_compute_throughput_ratio",
        "Compute throughput over the range's kernel time, of peak (the busier of the issue slots and tensor pipe)",
    );
    let r_dram = family::<FigureLabels, FloatGauge>(
        &mut reg,
        "range_dram_throughput_ratio",
        "DRAM bandwidth over the range's kernel time, of peak",
    );
    let r_verdict = family::<VerdictLabels, Gauge>(
        &mut reg,
        "range_verdict",
        "What bounds each range: 1 for its verdict (bound=\"launch-bound\", \"memory-bound\", ...)",
    );
    // The longest ranges (all their calls' wall time, which only grows),
    // up to the cap; the report's order among them.
    let mut by_wall: Vec<usize> = (0..r.ranges.len().min(a.ranges.len())).collect();
    by_wall.sort_by_key(|&i| std::cmp::Reverse(r.ranges[i].wall_ns.saturating_add(r.ranges[i].untraced_wall_ns)));
    by_wall.truncate(MAX_RANGE_SERIES);
    by_wall.sort_unstable();
    let omitted = Gauge::<i64>::default();
    omitted.set(r.ranges.len().saturating_sub(by_wall.len()) as i64);
    reg.register(
        "range_series_omitted",
        "Ranges left without series of their own (beyond the longest ones exported)",
        omitted,
    );
    for (g, ra) in by_wall.into_iter().map(|i| (&r.ranges[i], &a.ranges[i])) {
        let l = RangeLabels { path: ra.path.clone() };
        add(&r_calls.get_or_create(&l), g.count);
        r_wall.get_or_create(&l).inc_by(secs(g.wall_ns));
        // Calls without kernel records (trace windows) count apart, so
        // that busy over wall above stays of the same calls.
        if g.untraced_count > 0 {
            add(&r_ucalls.get_or_create(&l), g.untraced_count);
            r_uwall.get_or_create(&l).inc_by(secs(g.untraced_wall_ns));
            add(&r_ulaunch.get_or_create(&l), g.untraced_launches);
        }
        r_busy.get_or_create(&l).inc_by(secs(g.gpu_busy_ns));
        add(&r_launch.get_or_create(&l), g.kernel_launches);
        if !ra.untraced {
            r_util.get_or_create(&l).set(ra.utilization_pct / 100.0);
        }
        let f = FigureLabels { path: ra.path.clone(), source: if ra.sampled { "sampled" } else { "measured" }.into() };
        if let Some(v) = ra.sm_efficiency_pct {
            r_sm.get_or_create(&f).set(v / 100.0);
        }
        if let Some(v) = ra.achieved_occupancy_pct {
            r_occ.get_or_create(&f).set(v / 100.0);
        }
        if let Some(v) = ra.model_mfu_pct {
            r_mfu.get_or_create(&l).set(v / 100.0);
        }
        if let Some(v) = ra.hardware_mfu_pct {
            r_hmfu.get_or_create(&l).set(v / 100.0);
        }
        // Calls without kernel records: their sampled figures over their
        // wall time (steady calls' when warm-up was told apart).
        let wall = g.sampled_wall_steady.as_ref().or(g.sampled_wall.as_ref());
        let busy = match ra.untraced {
            // The kernels' share of the engine's activity where trace windows
            // measured it (`utilization_pct`).
            true => wall.and_then(|w| w.gpu_busy_pct).map(|_| ("sampled", ra.utilization_pct)),
            false => Some(("traced", ra.utilization_pct)),
        };
        if let Some((source, b)) = busy {
            r_gpu_busy.get_or_create(&FigureLabels { path: ra.path.clone(), source: source.into() }).set(b / 100.0);
        }
        let tensor = if ra.untraced { wall } else { g.sampled.as_ref() }.and_then(|f| f.tensor_active_pct);
        if let Some(t) = tensor {
            r_tensor.get_or_create(&FigureLabels { path: ra.path.clone(), source: "sampled".into() }).set(t / 100.0);
        }
        if let Some(v) = ra.compute_pct {
            r_compute.get_or_create(&f).set(v / 100.0);
        }
        if let Some(v) = ra.dram_pct {
            r_dram.get_or_create(&f).set(v / 100.0);
        }
        if ra.library.is_none() {
            r_verdict
                .get_or_create(&VerdictLabels { path: ra.path.clone(), bound: ra.verdict.bound.as_str().into() })
                .set(1);
        }
    }

    // The answer: the main step's time, GPU busy and verdict.
    if let Some(ans) = &a.answer {
        let step = ans.range.clone().unwrap_or_else(|| "steady state".into());
        let per = family::<RangeLabels, FloatGauge>(
            &mut reg,
            "step_seconds",
            "The main step's time per step (median; the steady state's length without ranges)",
        );
        per.get_or_create(&RangeLabels { path: step.clone() }).set(secs(ans.per_step_ns));
        if ans.busy_source != crate::analysis::answer::BUSY_UNKNOWN {
            let busy = family::<FigureLabels, FloatGauge>(
                &mut reg,
                "step_gpu_busy_ratio",
                "Share of the main step the GPU ran kernels (source: traced or sampled)",
            );
            let source = if ans.busy_source == crate::analysis::answer::BUSY_SAMPLED { "sampled" } else { "traced" };
            busy.get_or_create(&FigureLabels { path: step.clone(), source: source.into() })
                .set(ans.gpu_busy_pct / 100.0);
        }
        let verdict = family::<VerdictLabels, Gauge>(&mut reg, "step_verdict", "What bounds the main step: 1 for it");
        verdict.get_or_create(&VerdictLabels { path: step, bound: ans.verdict.bound.as_str().into() }).set(1);
    }

    // Every drop counter of the report, by its field name: a field added
    // to `Drops` is exported without a change here.
    let drops =
        family::<DropLabels, Counter>(&mut reg, "dropped", "Records and events that did not make it into the report");
    if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(&r.drops) {
        for (reason, v) in m {
            if let Some(n) = v.as_u64() {
                add(&drops.get_or_create(&DropLabels { reason }), n);
            }
        }
    }

    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut text, &reg);
    sorted_samples(&text)
}

/// The encoder writes a family's samples in hash order; sorted by label
/// set, two reports of the same program diff line by line.
fn sorted_samples(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut samples: Vec<&str> = Vec::new();
    let flush = |samples: &mut Vec<&str>, out: &mut String| {
        samples.sort_unstable();
        for s in samples.drain(..) {
            out.push_str(s);
            out.push('\n');
        }
    };
    for line in text.lines() {
        if line.starts_with('#') {
            flush(&mut samples, &mut out);
            out.push_str(line);
            out.push('\n');
        } else {
            samples.push(line);
        }
    }
    flush(&mut samples, &mut out);
    out
}
