//! OpenMetrics series (`render::openmetrics`) of an always-on session
//! folded by the aggregator.

use crate::aggregate::Aggregator;
use crate::model::device::DeviceInfo;
use crate::model::event::HostEvent;
use crate::model::occupancy::SmLimits;
use crate::model::path::{paths, ROOT};
use crate::model::sampled::Sample;
use crate::render::openmetrics::MAX_RANGE_SERIES;
use crate::report::Report;

/// An always-on report (trace windows of 0): `ranges` paths of one
/// 10 ms call each but the main one's ten, busy 22% with dense launches.
pub(crate) fn always_on(ranges: u64) -> Report {
    let mut a = Aggregator::windows_of_zero();
    let ms = 1_000_000;
    let step = paths().intern(ROOT, 0, "om-step");
    let mut id = 0;
    for k in 0..10u64 {
        id += 1;
        let (start, end) = (k * 52 * ms, (k + 1) * 52 * ms);
        a.host_event(HostEvent::Push { instance: id, parent: 0, path: step, tid: 1, ts: start });
        let counted = HostEvent::UntracedLaunches { path: step, instance: id, launches: 1455, graphs: 0, start, end };
        a.host_event(counted);
        a.host_event(HostEvent::Pop { instance: id, ts: end });
    }
    for k in 0..ranges {
        id += 1;
        let p = paths().intern(ROOT, 0, &format!("om-request-{k}"));
        let t = 520 * ms + k * ms;
        a.host_event(HostEvent::Push { instance: id, parent: 0, path: p, tid: 1, ts: t });
        a.host_event(HostEvent::Pop { instance: id, ts: t + ms / 2 });
    }
    let end = 520 * ms + ranges * ms + ms;
    let mut samples = Sample::flat_every(ms, 0, 0, end, 22.0, 40.0);
    for s in &mut samples {
        s.sm_cycles_active = 1000.0;
    }
    a.samples(&samples);
    let mut r = Report::build(a.finish(end), 0, end);
    let mut d = DeviceInfo::new(0, "NVIDIA H100 80GB HBM3", 132, SmLimits::SM_90);
    d.uuid = Some("GPU-5c7a3f1e-2b9d-4e8a-9f10-7d6c5b4a3e21".into());
    r.devices = vec![d];
    r
}

#[test]
fn always_on_series_carry_the_sampled_figures_the_verdicts_and_the_gpu_uuid() {
    let mut r = always_on(3);
    let w = r.sampling.as_mut().and_then(|s| s.trace_windows.as_mut()).expect("an always-on report");
    (w.windows, w.on_demand, w.traced_ns) = (1, 1, 3_000_000_000);
    let text = r.to_openmetrics();
    for want in [
        "gpuscope_range_gpu_busy_ratio{path=\"om-step\",source=\"sampled\"} 0.22",
        "gpuscope_range_verdict{path=\"om-step\",bound=\"launch-bound\"} 1",
        "gpuscope_step_verdict{path=\"om-step\",bound=\"launch-bound\"} 1",
        "gpuscope_step_gpu_busy_ratio{path=\"om-step\",source=\"sampled\"} 0.22",
        "gpuscope_device_sms{device=\"0\",name=\"NVIDIA H100 80GB HBM3\",UUID=\"GPU-5c7a3f1e-2b9d-4e8a-9f10-7d6c5b4a3e21\"} 132",
        "gpuscope_range_series_omitted 0",
        "gpuscope_range_untraced_calls_total{path=\"om-step\"} 10",
        "gpuscope_range_untraced_wall_seconds_total{path=\"om-step\"} 0.52",
        "gpuscope_range_untraced_kernel_launches_total{path=\"om-step\"} 14550",
        "gpuscope_trace_windows_total 1",
        "gpuscope_trace_windows_on_demand_total 1",
        "gpuscope_traced_seconds_total 3.0",
    ] {
        assert!(text.lines().any(|l| l.starts_with(want)), "{want} missing from:\n{text}");
    }
}

#[test]
fn per_range_series_are_bounded_to_the_longest_ranges() {
    let r = always_on(MAX_RANGE_SERIES as u64 + 50);
    let text = r.to_openmetrics();
    let paths: std::collections::HashSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("gpuscope_range_untraced_calls_total{"))
        .filter_map(|l| l.split('"').nth(1))
        .collect();
    assert_eq!(paths.len(), MAX_RANGE_SERIES, "the cap");
    assert!(paths.contains("om-step"), "the longest range keeps its series");
    assert!(text.lines().any(|l| l == "gpuscope_range_series_omitted 51"), "{text}");
}
