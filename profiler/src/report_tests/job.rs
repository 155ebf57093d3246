//! Jobs of several ranks (`analysis::job`): waits at the collectives and
//! bus bandwidth, from ranks' reports folded by the aggregator.

use crate::report::Report;
use gpuscope_report::analysis::job::{aligned_waits, answer};

const MS: u64 = 1_000_000;

/// A rank's report kept with its kernel records: ten all-reduces,
/// each starting `late` after the call's true start and ending 4 ms
/// after it, read on a clock `skew` ahead.
fn rank_with_all_reduces(late: u64, skew: u64) -> Report {
    rank_with_calls(late, skew, 0)
}

/// Ten all-reduces ~50 ms apart (a little irregular, as steps are),
/// the first `missing` not kept.
fn rank_with_calls(late: u64, skew: u64, missing: u32) -> Report {
    rank_with_n_calls(late, skew, missing, 10)
}

/// `calls` all-reduces ~50 ms apart, the first `missing` not kept.
fn rank_with_n_calls(late: u64, skew: u64, missing: u32, calls: u32) -> Report {
    rank_with_sized_calls(late, skew, missing, calls, None)
}

/// As [`rank_with_n_calls`], each call's NCCL range carrying
/// `message` bytes.
fn rank_with_sized_calls(late: u64, skew: u64, missing: u32, calls: u32, message: Option<u64>) -> Report {
    use crate::aggregate::devices::DeviceTable;
    use crate::aggregate::{AggregateOptions, Aggregator};
    use crate::decode::KernelActivity;
    use crate::model::event::HostEvent;
    use crate::model::path::ROOT;
    let opts = AggregateOptions { trace_cap: 1000, ..Default::default() };
    let mut a = Aggregator::new(opts, DeviceTable::fixed(vec![]));
    for k in missing..calls {
        let t =
            1_000 * MS + k as u64 * 50 * MS + ((k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) * MS / 500 + skew;
        if let Some(bytes) = message {
            a.host_event(HostEvent::CommMessage { tid: 1, bytes, ts: t - 10_000 });
        }
        a.host_event(HostEvent::launch(k + 1, 1, ROOT, 0, t));
        let mut rec = KernelActivity::sample(k + 1, t + late, t + 4 * MS);
        rec.name = c"ncclDevKernel_AllReduce_Sum_bf16_RING_LL".as_ptr();
        a.kernel(&rec);
    }
    let end = 1_000 * MS + calls as u64 * 50 * MS + skew;
    Report::build(a.finish(end), 0, end)
}

#[test]
fn waits_at_each_collective_come_from_starts_aligned_by_their_common_ends() {
    // Rank 1 arrives 3 ms into every call; its clock reads 5 ms ahead.
    let (r0, r1) = (rank_with_all_reduces(0, 0), rank_with_all_reduces(3 * MS, 5 * MS));
    let w = aligned_waits(&[&r0, &r1]).expect("both kept their collectives");
    assert_eq!(w.calls, 10);
    assert_eq!(w.offset_ns, vec![0, 5 * MS as i64], "the skew, from the calls' common ends");
    assert_eq!(w.wait_ns, vec![30 * MS, 0], "rank 0 waits 3 ms at each call");
    assert_eq!(w.last, vec![0, 10]);
    assert_eq!(w.blame_ns, vec![0, 30 * MS], "rank 1 alone kept rank 0 waiting");
    // Without the alignment the skew would read as 8 ms a call.
    let r2 = rank_with_all_reduces(0, 0);
    assert_eq!(aligned_waits(&[&r0, &r2]).unwrap().wait_ns, vec![0, 0]);
    assert!(aligned_waits(&[&r0]).is_none(), "one rank waits for no one");
}

#[test]
fn ranks_traced_in_windows_are_not_aligned_call_by_call() {
    // The same two ranks, one of them with kernel records in windows only:
    // its calls kept are not the other's.
    let (r0, mut r1) = (rank_with_all_reduces(0, 0), rank_with_all_reduces(3 * MS, 5 * MS));
    let job = |r1: &Report| answer(&[("r0".into(), r0.clone()), ("r1".into(), r1.clone())]).expect("a job answer");
    assert!(job(&r1).aligned.is_some(), "both traced throughout");
    let windows = crate::model::sampled::TraceWindows {
        window_ns: 100 * MS,
        period_ns: 1000 * MS,
        traced_ns: 100 * MS,
        untraced_ns: 900 * MS,
        ..Default::default()
    };
    r1.sampling = Some(crate::model::sampled::SamplingStatus { trace_windows: Some(windows), ..Default::default() });
    let a = job(&r1);
    assert!(a.aligned.is_none(), "{:?}", a.aligned);
    assert!(a.notes.iter().any(|n| n.contains("need every rank's kernel records throughout")), "{:?}", a.notes);
}

#[test]
fn calls_match_by_their_ends_when_a_rank_kept_records_from_a_later_call() {
    // Rank 1's first three calls were not kept: its k-th record is
    // rank 0's (k+3)-th call. Matched by number they would read as a
    // clock offset of whole steps.
    let (r0, r1) = (rank_with_calls(0, 0, 0), rank_with_calls(2 * MS, 0, 3));
    let w = aligned_waits(&[&r0, &r1]).expect("both kept collectives");
    assert_eq!(w.calls, 7);
    assert_eq!(w.offset_ns, vec![0, 0], "one host, one clock");
    assert_eq!(w.wait_ns, vec![14 * MS, 0], "rank 0 waits 2 ms at each of the 7 calls");
    // Kept from 100 calls later: further than the shifts tried around
    // none, found by the calls' ends on the one clock.
    let (r0, r1) = (rank_with_n_calls(0, 0, 0, 300), rank_with_n_calls(MS, 0, 100, 300));
    let w = aligned_waits(&[&r0, &r1]).expect("both kept collectives");
    assert_eq!((w.calls, w.offset_ns.clone()), (200, vec![0, 0]));
    assert_eq!(w.wait_ns, vec![200 * MS, 0]);
}

#[test]
fn bus_bandwidth_is_timed_on_the_rank_that_arrived_last() {
    // 1 GiB all-reduces; rank 1 arrives 3 ms into each 4 ms kernel of
    // rank 0's: its own kernel, 1 ms, is the transfer.
    let gib = 1u64 << 30;
    let r0 = rank_with_sized_calls(0, 0, 0, 10, Some(gib));
    let r1 = rank_with_sized_calls(3 * MS, 0, 0, 10, Some(gib));
    let w = aligned_waits(&[&r0, &r1]).expect("both kept collectives");
    assert_eq!(w.bandwidth.len(), 1);
    let b = &w.bandwidth[0];
    assert_eq!((b.collective, b.calls, b.message_bytes, b.transfer_ns), ("AllReduce", 10, gib, 10 * MS));
    let gbps = gib as f64 / 1e6;
    assert!((b.algorithm_gb_per_s - gbps).abs() < 1e-6, "{}", b.algorithm_gb_per_s);
    assert!((b.bus_gb_per_s - gbps).abs() < 1e-6, "2(n-1)/n is 1 on two ranks");
    // Calls of another size (a barrier's) are kept apart, sizes a few
    // bytes apart (DDP's buckets) together.
    let mut r0 = rank_with_sized_calls(0, 0, 0, 10, Some(gib));
    let mut r1 = rank_with_sized_calls(3 * MS, 0, 0, 10, Some(gib));
    for r in [&mut r0, &mut r1] {
        let ks = &mut r.trace.as_mut().unwrap().kernels;
        ks.iter_mut().step_by(2).for_each(|k| k.message_bytes = Some(gib + 64));
    }
    let w = aligned_waits(&[&r0, &r1]).unwrap();
    assert_eq!((w.bandwidth.len(), w.bandwidth[0].message_bytes), (1, gib + 32));
    let mut r0 = rank_with_sized_calls(0, 0, 0, 10, Some(gib));
    let mut r1 = rank_with_sized_calls(3 * MS, 0, 0, 10, Some(gib));
    for r in [&mut r0, &mut r1] {
        let ks = &mut r.trace.as_mut().unwrap().kernels;
        ks.iter_mut().step_by(2).for_each(|k| k.message_bytes = Some(4));
    }
    let w = aligned_waits(&[&r0, &r1]).unwrap();
    let mut sizes: Vec<(u64, u64)> = w.bandwidth.iter().map(|b| (b.message_bytes, b.calls)).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, vec![(4, 5), (gib, 5)]);
    // The job's answer shows the large messages' bandwidth only.
    let ranks = vec![("r0".to_string(), r0), ("r1".to_string(), r1)];
    let text = answer(&ranks).expect("an answer for two ranks").to_table(120);
    assert!(text.contains("AllReduce: 5 calls of 1.00 GiB: bus bandwidth"), "{text}");
    assert!(!text.contains("of 4 B"), "{text}");
    // Without message sizes, no bandwidth.
    let (r0, r1) = (rank_with_all_reduces(0, 0), rank_with_all_reduces(3 * MS, 0));
    assert!(aligned_waits(&[&r0, &r1]).unwrap().bandwidth.is_empty());
}
