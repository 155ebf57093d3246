//! `busy-but-underused`: ranges nvidia-smi calls busy whose SMs are
//! underused.

use super::{FindingKind, Found, Input, Rule};
use crate::analysis::findings::Finding;
use crate::analysis::verdict::Bound;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::BusyButUnderused,
    bound: Some(Bound::Latency),
    reads: "each range's `busy_but_underused` flag, nvidia-smi-style utilisation, SM efficiency and GPU busy time",
    when: "utilisation of at least 90% with SM efficiency under 50% or occupancy under 20%",
    cost: "busy time times the idle SM share",
    find,
};

fn find(rule: &Rule, input: &Input) -> Found {
    let out = input
        .e
        .r
        .ranges
        .iter()
        .filter(|g| g.busy_but_underused && g.library.is_none())
        .map(|g| {
            let eff = g.sm_efficiency_pct.unwrap_or(0.0);
            Finding {
                range: Some(g.path.to_string()),
                cost_ns: (g.gpu_busy_ns as f64 * (1.0 - eff / 100.0)) as u64,
                ..rule.finding(
                    format!(
                        "{}: busy {:.0}% of the time as nvidia-smi counts it, but SM efficiency {eff:.1}%",
                        g.path, g.gpu_utilization_pct
                    ),
                    ADVICE.into(),
                )
            }
        })
        .collect();
    (out, 0)
}

const ADVICE: &str = "nvidia-smi's utilisation hides idle SMs here: see the kernel findings for why they idle.";
