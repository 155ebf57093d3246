//! `copies`: the GPU idled during copies.

use super::idle::{self, IdleCause};
use super::{FindingKind, Rule};
use crate::analysis::advice::Evidence;
use crate::analysis::findings::{MIN_PAGEABLE_SHARE_PCT, MIN_SHARE_PCT};
use crate::analysis::framework::Framework;
use crate::analysis::verdict::Bound;
use crate::analysis::RangeAnalysis;
use crate::model::idle::COPY;
use crate::report::Report;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::Copies,
    bound: Some(Bound::Host),
    reads: "each range's idle time of the copy cause and its pageable copies (the session's steady state's \
            without ranges)",
    when: "copies take at least 10% (1% when the range copies from pageable memory) and 100 us",
    cost: "the idle time",
    find: idle::find_rule,
};

/// Its idle cause.
pub(in crate::analysis) static CAUSE: IdleCause = IdleCause {
    kind: FindingKind::Copies,
    bound: Bound::Host,
    causes: &[COPY],
    meaning: "during copies",
    min_share,
    range_advice,
    session_advice,
    session_actionable: idle::actionable,
};

/// Copies from pageable memory are a finding from a smaller share:
/// pinning costs nothing and a blocking copy stops the host running ahead.
fn min_share(g: &RangeAnalysis) -> f64 {
    if g.host.pageable_copies > 0 {
        MIN_PAGEABLE_SHARE_PCT
    } else {
        MIN_SHARE_PCT
    }
}

fn range_advice(e: &Evidence, g: &RangeAnalysis) -> String {
    e.copies(g)
}

pub(super) fn session_advice(r: &Report, fw: Framework) -> String {
    let (pageable, all) = pageable(r);
    if pageable > 0 {
        format!("{pageable} of {all} copies use pageable host memory, which blocks the host: pin it ({}.", fw.pinning())
    } else {
        "Overlap copies with compute: issue them on a side stream ahead of use.".into()
    }
}

/// Copies from or to pageable memory, and all copies: in the steady state
/// where the report counted them there (a model moved to the GPU at
/// start-up is no loop's copies), else over the session.
fn pageable(r: &Report) -> (u64, u64) {
    match r.session_steady.as_ref().and_then(|s| s.copies.map(|n| (s.pageable_copies, n))) {
        Some(steady) => steady,
        None => r.memory.memcpy.iter().fold((0, 0), |(p, a), c| (p + c.pageable, a + c.count)),
    }
}
