//! gpuscope's own cost, taken out of a range's idle time before it is
//! judged. Tracing makes every launch call slower (CUPTI's kernel records,
//! measured at the first launch, and gpuscope's callback, timed at each),
//! so a program that launches many small kernels shows more idle GPU under
//! the profiler than without it. That added time is host time on the
//! launching thread: where the GPU waited for the host (launch gaps,
//! dispatch, host work), it would have waited that much less. It is moved
//! to the profiler's share, which every share and verdict leaves out; an
//! idle GPU that waited on something else (a copy, a synchronisation, a
//! dependency) keeps its time.

use crate::model::idle::{IdleSplit, DISPATCH, HOST, LAUNCH, PROFILER};
use crate::report::ProfilerCost;

/// `idle` with gpuscope's cost taken out: where the report decided it gap
/// by gap ([`ProfilerCost::in_idle`]) it is in already, else `added_ns` is
/// moved by [`remove`].
pub fn taken_out(c: &ProfilerCost, idle: IdleSplit, added_ns: Option<u64>) -> IdleSplit {
    if c.in_idle {
        idle
    } else {
        remove(idle, added_ns.unwrap_or(0))
    }
}

/// As [`taken_out`] with `f` times the cost (the estimate's margin): where
/// it is in the idle time already, its share scaled, what comes off given
/// back to host work.
pub fn scaled(c: &ProfilerCost, idle: IdleSplit, added_ns: u64, f: f64) -> IdleSplit {
    if !c.in_idle {
        return remove(idle, (added_ns as f64 * f) as u64);
    }
    let own = idle.profiler_ns;
    let want = (own as f64 * f) as u64;
    if want >= own {
        return remove(idle, want - own);
    }
    let mut a = idle.to_array();
    a[PROFILER] = want;
    a[HOST] = a[HOST].saturating_add(own - want);
    IdleSplit::from_array(a)
}

/// The cost taken out of `idle` by [`taken_out`], ns.
pub fn taken(c: &ProfilerCost, idle: &IdleSplit, added_ns: Option<u64>) -> Option<u64> {
    if c.in_idle {
        Some(idle.profiler_ns)
    } else {
        added_ns
    }
}

/// How far the estimate of gpuscope's cost may be off, either way, as a
/// share of it: CUPTI's cost is measured on an empty kernel launched in a
/// tight loop, while the program's own launches run with colder caches.
pub const MARGIN: f64 = 0.5;

/// `idle` with `added_ns` of gpuscope's cost moved from the host's causes
/// to the profiler's: from launch gaps and dispatch first (the gaps a
/// slower launch call widens), in proportion, then from host work.
pub fn remove(idle: IdleSplit, added_ns: u64) -> IdleSplit {
    let mut a = idle.to_array();
    let near = a[LAUNCH].saturating_add(a[DISPATCH]);
    let mut left = added_ns.min(near.saturating_add(a[HOST]));
    let from_near = left.min(near);
    if from_near > 0 {
        let from_launch = (from_near as u128 * a[LAUNCH] as u128 / near as u128) as u64;
        a[LAUNCH] -= from_launch;
        a[DISPATCH] -= from_near - from_launch;
        a[PROFILER] = a[PROFILER].saturating_add(from_near);
        left -= from_near;
    }
    a[HOST] -= left;
    a[PROFILER] = a[PROFILER].saturating_add(left);
    IdleSplit::from_array(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::idle::{CAUSES, SYNC};

    fn split(host: u64, sync: u64, launch: u64, dispatch: u64) -> IdleSplit {
        let mut a = [0; CAUSES];
        (a[HOST], a[SYNC], a[LAUNCH], a[DISPATCH]) = (host, sync, launch, dispatch);
        IdleSplit::from_array(a)
    }

    #[test]
    fn the_cost_comes_out_of_launch_gaps_and_dispatch_first_then_host_work_never_sync() {
        let r = remove(split(100, 50, 30, 90), 60);
        assert_eq!((r.launch_ns, r.dispatch_ns, r.host_ns, r.sync_ns, r.profiler_ns), (15, 45, 100, 50, 60));
        let r = remove(split(100, 50, 30, 90), 170);
        assert_eq!((r.launch_ns, r.dispatch_ns, r.host_ns, r.profiler_ns), (0, 0, 50, 170));
        // More cost than host-caused idle: the GPU was not waiting on it.
        let r = remove(split(10, 50, 0, 0), 1_000);
        assert_eq!((r.host_ns, r.sync_ns, r.profiler_ns), (0, 50, 10));
        assert_eq!(r.total(), 60, "idle time is moved, never created");
    }
}
