//! The session's steady state (`report::steady`) with communication
//! handed out by the aggregator's `SessionComm`.

use gpuscope_report::aggregated::timeline::Timeline;
use gpuscope_report::report::steady::of_session;

#[test]
fn the_steady_state_has_the_communication_no_compute_ran_under() {
    use crate::aggregate::comm::SessionComm;
    let ms = 1_000_000u64;
    let mut t = Timeline::new(0);
    let mut comm = SessionComm::default();
    // Start-up: compute only, before any communication (not tracked).
    for i in 0..10u64 {
        t.launch(i * 100 * ms, 0, 0);
    }
    // 3 s of 30 ms steps: 20 ms of compute, an all-reduce from 15 to
    // 25 ms (5 ms under compute, 5 exposed), launches all along.
    for k in 0..100u64 {
        let t0 = 1000 * ms + k * 30 * ms;
        for us in (0..30_000u64).step_by(100) {
            t.launch(t0 + us * 1000, 0, 0);
        }
        let tl = &mut t;
        comm.kernel(0, t0, t0 + 20 * ms, false, &mut |u, s, e| tl.comm_span(u, s, e));
        comm.kernel(0, t0 + 15 * ms, t0 + 25 * ms, true, &mut |u, s, e| tl.comm_span(u, s, e));
    }
    let tl = &mut t;
    comm.drain(&mut |u, s, e| tl.comm_span(u, s, e));
    let s = of_session(&t, 0, 4000 * ms).expect("a steady state");
    let steps = s.wall_ns() / (30 * ms);
    assert!((98..=100).contains(&steps), "{s:?}");
    assert_eq!((s.comm_ns / steps, s.exposed_comm_ns / steps), (10 * ms, 5 * ms), "{s:?}");
}
