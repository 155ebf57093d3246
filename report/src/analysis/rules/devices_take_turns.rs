//! `devices-take-turns`: a process's GPUs working one after another.

use super::{FindingKind, Found, Input, Rule};
use crate::analysis::devices;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::DevicesTakeTurns,
    bound: None,
    reads: "each GPU's busy and idle time over the steady state, and the time any GPU was busy",
    when: "in a process driving several GPUs, their busy time overlaps less than half the least busy one's (a \
           model split across GPUs, run stage by stage)",
    cost: "the share in which some GPU was busy less the busiest one's: what running the stages at once could \
           save, when at least 10 points",
    find,
};

/// How the GPUs shared the work is decided once, in
/// [`devices::split`](crate::analysis::devices): they either take turns
/// or work at once.
fn find(rule: &Rule, input: &Input) -> Found {
    (devices::split(input.e.r, &input.e.devices).filter(|f| f.kind == rule.kind).into_iter().collect(), 0)
}
