//! Per-GPU figures and findings (`analysis::devices`) of sessions that
//! drove two GPUs, folded by the aggregator.

use crate::aggregate::devices::DeviceTable;
use crate::aggregate::{AggregateOptions, Aggregator};
use crate::decode::KernelActivity;
use crate::model::event::HostEvent;
use crate::model::path::ROOT;
use crate::report::Report;

fn launch_on(tid: u32, correlation_id: u32, ts: u64) -> HostEvent {
    HostEvent::launch(correlation_id, tid, ROOT, 0, ts)
}

/// Steps of 10 ms, 400 ms in all: one kernel on GPU 0 over `gpu0` and
/// one on GPU 1 over `gpu1` (offsets into the step, ns), launched 5 and
/// 15 us into it, while the host waits from 30 us to `wait_end`.
fn two_gpu_steps(gpu0: (u64, u64), gpu1: (u64, u64), wait_end: u64) -> Report {
    let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
    for i in 0..STEPS {
        let t = i * 10_000_000;
        let (c0, c1) = (2 * i as u32 + 1, 2 * i as u32 + 2);
        a.host_event(launch_on(1, c0, t + 5_000));
        a.host_event(launch_on(1, c1, t + 15_000));
        a.host_event(HostEvent::HostWait { start: t + 30_000, end: t + wait_end, instance: 0, main: true });
        a.kernel(&KernelActivity { device: 0, ..KernelActivity::sample(c0, t + gpu0.0, t + gpu0.1) });
        a.kernel(&KernelActivity { device: 1, ..KernelActivity::sample(c1, t + gpu1.0, t + gpu1.1) });
    }
    Report::build(a.finish(STEPS * 10_000_000), 0, STEPS * 10_000_000)
}

const STEPS: u64 = 40;

#[test]
fn a_process_driving_two_gpus_gets_each_one_s_busy_and_idle_time_and_the_uneven_finding() {
    // As nn.DataParallel on two GPUs: each 10 ms step runs 9 ms on GPU 0
    // and 3 ms on GPU 1, while the host waits for GPU 0 (the loss on it).
    let r = two_gpu_steps((10_000, 9_010_000), (20_000, 3_020_000), 9_010_000);
    let (steps, end) = (STEPS, STEPS * 10_000_000);
    // The session's idle time is when neither GPU worked: 1 ms a step.
    let session_idle = r.idle.unwrap().total();
    assert!((session_idle as f64 / end as f64 - 0.10).abs() < 0.005, "{session_idle}");
    assert_eq!(r.device_time.iter().map(|t| t.device).collect::<Vec<_>>(), [0, 1]);
    let (g0, g1) = (&r.device_time[0], &r.device_time[1]);
    assert_eq!(g0.busy_ns, steps * 9_000_000);
    assert_eq!(g1.busy_ns, steps * 3_000_000);
    for g in &r.device_time {
        assert_eq!(g.busy_ns + g.idle.total(), end, "GPU {}: every moment busy or idle", g.device);
    }
    // GPU 1 idles 6 ms a step while the host waits on GPU 0.
    assert!(g1.idle.sync_ns >= steps * 5_900_000, "{:?}", g1.idle);
    let an = r.analysis();
    assert_eq!(an.devices.len(), 2);
    assert!((an.devices[0].busy_pct - 90.0).abs() < 2.0, "{:?}", an.devices[0]);
    assert!((an.devices[1].busy_pct - 30.0).abs() < 2.0, "{:?}", an.devices[1]);
    let f = an.findings.iter().find(|f| f.kind == "uneven-devices").expect("the uneven finding");
    assert!(f.message.contains("GPU 1 idled mostly after host synchronisations"), "{}", f.message);
    let table = r.to_table(120);
    assert!(table.contains("GPU 1 ?: busy 30."), "{table}");
    assert!(
        table
            .contains("the GPUs worked at the same time but unevenly over the steady state: busy GPU 0 90%, GPU 1 30%"),
        "{table}"
    );
    // Spread evenly, each GPU would be busy 60%: a step bound by GPU 0
    // could shorten by about 30% of it.
    let act = an.answer.as_ref().unwrap().actions.iter().find(|x| x.advice.contains("DistributedDataParallel"));
    assert!(act.is_some_and(|x| (x.saves_pct - 30.0).abs() < 2.0), "{:?}", an.answer);
}

#[test]
fn one_gpu_s_figures_are_the_session_s_and_get_no_per_device_lines() {
    let mut a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
    a.host_event(launch_on(1, 1, 1_000));
    a.kernel(&KernelActivity::sample(1, 2_000, 5_000));
    let r = Report::build(a.finish(10_000), 0, 10_000);
    assert_eq!(r.device_time.len(), 1);
    let t = &r.device_time[0];
    assert_eq!((t.device, t.busy_ns, Some(t.idle)), (0, 3_000, r.idle));
    assert!(r.analysis().devices.is_empty());
    assert!(!r.to_table(100).contains("busy 30.0% of"));
}

#[test]
fn a_model_split_over_two_gpus_run_stage_by_stage_takes_turns() {
    // Each 10 ms step: 6 ms on GPU 0, then 2 ms on GPU 1 (queued behind
    // the copy between them), while the host waits for the step.
    let r = two_gpu_steps((10_000, 6_010_000), (6_020_000, 8_020_000), 8_020_000);
    let an = r.analysis();
    assert!((an.devices[0].busy_pct - 60.0).abs() < 2.0, "{:?}", an.devices);
    assert!((an.devices[1].busy_pct - 20.0).abs() < 2.0, "{:?}", an.devices);
    assert!(an.findings.iter().all(|f| f.kind != "uneven-devices"));
    let f = an.findings.iter().find(|f| f.kind == "devices-take-turns").expect("the turns finding");
    // Some GPU busy 80%, the busiest 60%: 20% could be saved.
    assert!((f.cost_ns as f64 / an.devices[0].wall_ns as f64 - 0.20).abs() < 0.02, "{f:?}");
    let act = an.answer.as_ref().unwrap().actions.iter().find(|x| x.advice.contains("micro-batches"));
    assert!(act.is_some_and(|x| (x.saves_pct - 20.0).abs() < 2.0), "{:?}", an.answer);
}
