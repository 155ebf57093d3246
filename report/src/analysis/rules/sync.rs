//! `sync`: the GPU idled after host synchronisations.

use super::idle::{self, IdleCause};
use super::{FindingKind, Rule};
use crate::analysis::advice::Evidence;
use crate::analysis::framework::Framework;
use crate::analysis::verdict::Bound;
use crate::analysis::RangeAnalysis;
use crate::model::idle::SYNC;
use crate::report::Report;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::Sync,
    bound: Some(Bound::Sync),
    reads: "each range's idle time after synchronisations and its synchronisations per call (the session's \
            steady state's without ranges, and which threads synchronised)",
    when: "idle after synchronisations, at least 10% and 100 us",
    cost: "the idle time",
    find: idle::find_rule,
};

/// Its idle cause.
pub(in crate::analysis) static CAUSE: IdleCause = IdleCause {
    kind: FindingKind::Sync,
    bound: Bound::Sync,
    causes: &[SYNC],
    meaning: "after host synchronisations",
    min_share: idle::min_share,
    range_advice,
    session_advice,
    session_actionable,
};

fn range_advice(e: &Evidence, g: &RangeAnalysis) -> String {
    e.sync(g)
}

fn session_advice(r: &Report, fw: Framework) -> String {
    format!(
        "Take host synchronisations out of the loop ({} in this run): {} per step; read values every N steps.",
        r.memory.synchronizations,
        fw.sync_calls()
    )
}

/// A runtime's own waits are nothing the program can change.
fn session_actionable(r: &Report, fw: Framework) -> bool {
    runtime_syncs(r, fw).is_none()
}

/// Share of the synchronisations' time on the main thread under which an
/// XLA program's waits are its runtime's, %.
const RUNTIME_SYNC_PCT: f64 = 20.0;

/// Where a JAX program's synchronisations are XLA's runtime's own (made on
/// its threads, not the main one the program's Python runs on): why there
/// is no action for the GPU's idle time in them. `None` otherwise, or
/// where threads were not told apart.
pub(in crate::analysis) fn runtime_syncs(r: &Report, fw: Framework) -> Option<String> {
    // A program that reads a value every step waits through the runtime's
    // threads: its own loop syncs.
    if idle::reads_per_step(r).is_some_and(|n| n >= idle::READS_PER_STEP) {
        return None;
    }
    let m = &r.memory;
    let (main, main_ns) = (m.main_thread_synchronizations?, m.main_thread_synchronization_ns?);
    let share = 100.0 * main_ns as f64 / m.synchronization_ns.max(1) as f64;
    (fw == Framework::Xla && m.synchronizations > 0 && share < RUNTIME_SYNC_PCT).then(|| {
        format!(
            "host synchronisations: {} of {} ({:.0}% of their time) were made on threads other than the main one, \
             XLA's runtime's own: not calls in the program's loop, so no action to take them out",
            m.synchronizations.saturating_sub(main),
            m.synchronizations,
            100.0 - share
        )
    })
}
