//! `dispatch`: the GPU idled while the host issued kernels one by one
//! (launch gaps and dispatch idle).

use super::idle::{self, IdleCause};
use super::{FindingKind, Rule};
use crate::analysis::advice::{Evidence, PYTORCH_DISPATCH_UNSEEN};
use crate::analysis::framework::Framework;
use crate::analysis::verdict::Bound;
use crate::analysis::RangeAnalysis;
use crate::model::idle::{DISPATCH, LAUNCH};
use crate::report::Report;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::Dispatch,
    bound: Some(Bound::Launch),
    reads: "each range's idle time in launch gaps and dispatch, its launch rate and mean kernel time, CUDA \
            graphs and Triton kernels (the session's steady state's without ranges, with its steps and reads \
            per step)",
    when: "launch gaps and dispatch, at least 10% and 100 us",
    cost: "the idle time",
    find: idle::find_rule,
};

/// Its idle cause.
pub(in crate::analysis) static CAUSE: IdleCause = IdleCause {
    kind: FindingKind::Dispatch,
    bound: Bound::Launch,
    causes: &[LAUNCH, DISPATCH],
    meaning: "while the host issued kernels one by one",
    min_share: idle::min_share,
    range_advice,
    session_advice,
    session_actionable: idle::actionable,
};

fn range_advice(e: &Evidence, g: &RangeAnalysis) -> String {
    e.dispatch(g)
}

fn session_advice(r: &Report, fw: Framework) -> String {
    if fw == Framework::PyTorch && r.kernels.is_empty() {
        return PYTORCH_DISPATCH_UNSEEN.into();
    }
    if fw != Framework::Xla {
        return fw.launch_overhead().into();
    }
    // XLA's runtime makes the copy and waits on its own threads: the
    // program's read shows as a drained queue the next step's dispatch
    // then refills.
    if let Some(reads) = idle::reads_per_step(r).filter(|n| *n >= idle::READS_PER_STEP) {
        return format!(
            "Read values every N steps, not every step: {reads:.1} device-to-host copies a step (float() or \
             jax.device_get() of a device array, printing one) make the host wait for each step before it \
             dispatches the next, so the GPU idles while it does; keep them on the device and read them every N \
             steps.",
        );
    }
    match launches_per_found_step(r) {
        Some(per) if per < ONE_LAUNCH_STEP => format!(
            "It launches each step as one compiled XLA executable already ({per:.1} launches a step): give each \
             launch more work (a larger batch), or run several steps per launch (jax.lax.scan or fori_loop over \
             steps)."
        ),
        _ => fw.launch_overhead().into(),
    }
}

/// Launches a step below which a step is one launch of a compiled
/// executable (XLA launches each jitted call's executable once, with a
/// copy or two around it).
const ONE_LAUNCH_STEP: f64 = 2.5;

/// Launches per step and device of the steady state, where steps were
/// found in it.
fn launches_per_found_step(r: &Report) -> Option<f64> {
    let (s, steps) = idle::found_steps(r)?;
    // Launches are counted over every device, steps on one: per device.
    let devices = r.device_time.iter().filter(|d| d.busy_ns > 0).count().max(1);
    Some(s.launches as f64 / steps / devices as f64)
}
