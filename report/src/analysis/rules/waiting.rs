//! `waiting`: queued work waited behind a dependency.

use super::idle::{self, IdleCause};
use super::{FindingKind, Rule};
use crate::analysis::advice::Evidence;
use crate::analysis::framework::Framework;
use crate::analysis::verdict::Bound;
use crate::analysis::RangeAnalysis;
use crate::model::idle::OTHER;
use crate::report::Report;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::Waiting,
    bound: Some(Bound::Dependency),
    reads: "each range's idle time with work queued (the session's steady state's without ranges)",
    when: "queued work waiting, at least 10% and 100 us",
    cost: "the idle time",
    find: idle::find_rule,
};

/// Its idle cause.
pub(in crate::analysis) static CAUSE: IdleCause = IdleCause {
    kind: FindingKind::Waiting,
    bound: Bound::Dependency,
    causes: &[OTHER],
    meaning: "with work queued behind a dependency",
    min_share: idle::min_share,
    range_advice,
    session_advice,
    session_actionable: idle::actionable,
};

fn range_advice(_: &Evidence, _: &RangeAnalysis) -> String {
    "Queued work waited: look for cross-stream event waits and host functions (cudaLaunchHostFunc) in this range."
        .into()
}

fn session_advice(_: &Report, _: Framework) -> String {
    "Queued work waited: look for cross-stream event waits and host functions (cudaLaunchHostFunc).".into()
}
