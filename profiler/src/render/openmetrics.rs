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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeviceLabels {
    device: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeviceIdleLabels {
    device: String,
    name: String,
    cause: String,
}

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
    let devices = family::<DeviceLabels, Gauge>(&mut reg, "device_sms", "SMs of each device that ran kernels");
    for d in &r.devices {
        devices.get_or_create(&DeviceLabels { device: d.id.to_string(), name: d.name.clone() }).set(d.sm_count as i64);
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
        let name = r.devices.iter().find(|d| d.id == m.device).map_or_else(String::new, |d| d.name.clone());
        let l = DeviceLabels { device: m.device.to_string(), name };
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
        let name = r.devices.iter().find(|d| d.id == t.device).map_or_else(String::new, |d| d.name.clone());
        busy.get_or_create(&DeviceLabels { device: t.device.to_string(), name: name.clone() }).inc_by(secs(t.busy_ns));
        for (cause, ns) in crate::model::idle::CAUSE_NAMES.iter().zip(t.idle.to_array()) {
            let l = DeviceIdleLabels { device: t.device.to_string(), name: name.clone(), cause: cause.to_string() };
            idle.get_or_create(&l).inc_by(secs(ns));
        }
    }
    for d in &r.devices {
        if let Some(b) = d.memory_bytes {
            let l = DeviceLabels { device: d.id.to_string(), name: d.name.clone() };
            mem_total.get_or_create(&l).set(b.min(i64::MAX as u64) as i64);
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
    for (g, ra) in r.ranges.iter().zip(&a.ranges) {
        let l = RangeLabels { path: ra.path.clone() };
        add(&r_calls.get_or_create(&l), g.count);
        r_wall.get_or_create(&l).inc_by(secs(g.wall_ns));
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
