//! `uneven-devices`: a process's GPUs working at the same time, unevenly.

use super::{FindingKind, Found, Input, Rule};
use crate::analysis::devices;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::UnevenDevices,
    bound: None,
    reads: "each GPU's busy and idle time over the steady state, and the time any GPU was busy",
    when: "in a process driving several GPUs that work at the same time, one busy less than half the busiest \
           one's share of the steady state, and at least 10 points less (GPUs under 1% busy are left out)",
    cost: "the busiest GPU's share less the mean one: what an even spread could save",
    find,
};

/// How the GPUs shared the work is decided once, in
/// [`devices::split`](crate::analysis::devices): they either take turns
/// or work at once.
fn find(rule: &Rule, input: &Input) -> Found {
    (devices::split(input.e.r, &input.e.devices).filter(|f| f.kind == rule.kind).into_iter().collect(), 0)
}
