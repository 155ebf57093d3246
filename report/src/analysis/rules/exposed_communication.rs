//! `exposed-communication`: communication kernels with no compute under
//! them.

use super::{FindingKind, Found, Input, Rule};
use crate::analysis::findings::{ms, Finding, MAX_PER_KIND, MIN_COST_NS, MIN_SHARE_PCT};
use crate::analysis::verdict::Bound;
use crate::analysis::RangeAnalysis;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::ExposedCommunication,
    bound: Some(Bound::Communication),
    reads: "each range's communication kernel time and the part of it with no compute kernel of the same \
            device under it (`exposed_comm_ns`)",
    when: "exposed communication takes at least 10% of a range's active time and 100 us (the outermost such \
           range of a nest)",
    cost: "the exposed time",
    find,
};

/// Ranges whose exposed communication (communication kernels with no
/// compute of the same device under them) takes at least
/// [`MIN_SHARE_PCT`] of their time: that time is the cost. A range inside
/// another carries the same communication, so only the outermost of a nest
/// is named.
fn find(rule: &Rule, input: &Input) -> Found {
    let share = |g: &RangeAnalysis| 100.0 * g.exposed_comm_ns as f64 / g.active_ns.max(1) as f64;
    let costly: Vec<&RangeAnalysis> = input
        .ranges
        .iter()
        .filter(|g| g.library.is_none() && g.exposed_comm_ns >= MIN_COST_NS && share(g) >= MIN_SHARE_PCT)
        .collect();
    let paths: std::collections::HashSet<&str> = costly.iter().map(|g| g.path.as_str()).collect();
    let nested = |path: &str| path.match_indices('/').any(|(i, _)| paths.contains(&path[..i]));
    let mut out: Vec<Finding> = costly
        .iter()
        .filter(|g| !nested(&g.path))
        .map(|g| {
            let calls = if g.count > 1 {
                format!(" over {} calls, {} per call", g.count, ms(g.exposed_comm_ns / g.count))
            } else {
                String::new()
            };
            let share = share(g);
            Finding {
                range: Some(g.path.clone()),
                cost_ns: g.exposed_comm_ns,
                calls: g.count,
                ..rule.finding(
                    format!(
                        "{}: communication kernels ran {} ({share:.0}% of the range{calls}) with no compute under \
                         them, of {} in all; in a job of several ranks that includes this rank's wait for the \
                         slowest one (gpuscope report --merge of the ranks' reports tells the wait from the \
                         transfer)",
                        g.path,
                        ms(g.exposed_comm_ns),
                        ms(g.comm_ns)
                    ),
                    input.e.fw.exposed_communication().to_string(),
                )
            }
        })
        .collect();
    out.sort_by(|a, b| b.cost_ns.cmp(&a.cost_ns).then_with(|| a.range.cmp(&b.range)));
    let omitted = out.len().saturating_sub(MAX_PER_KIND);
    out.truncate(MAX_PER_KIND);
    (out, omitted)
}
