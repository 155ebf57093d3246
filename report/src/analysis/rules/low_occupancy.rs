//! `low-occupancy`: a latency-bound kernel with few warps per SM.

use super::{checklist, few_sms, tail_wave, FindingKind, Found, Input, Rule};
use crate::analysis::verdict::Bound;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::LowOccupancy,
    bound: Some(Bound::Latency),
    reads: "each latency-bound kernel's achieved occupancy and compute and DRAM throughput (metrics mode)",
    when: "a latency-bound kernel of the program's own with achieved occupancy under 20%",
    cost: "GPU time not spent near a limit",
    find,
};

fn find(rule: &Rule, input: &Input) -> Found {
    let out = few_sms::judged(input)
        .filter(|k| few_sms::used(k).is_none() && tail_wave::filled(k).is_none())
        // The limiter, where the checklist names it, says more.
        .filter(|k| checklist::stats(input, k).and_then(|s| checklist::limited(k, s)).is_none())
        // A library's occupancy is its design.
        .filter(|k| !checklist::vendor_library(&k.name))
        .filter_map(|k| {
            let v = k.verdict.as_ref().filter(|v| v.bound == Bound::Latency)?;
            let o = k.achieved_occupancy_pct.filter(|o| *o < crate::report::LOW_OCCUPANCY_PCT)?;
            let busy = k.compute_pct.unwrap_or(0.0).max(k.dram_pct.unwrap_or(0.0));
            Some(rule.kernel_finding(
                k,
                (k.gpu_ns as f64 * (1.0 - busy / 100.0)) as u64,
                format!("{}: latency-bound at {o:.0}% achieved occupancy ({})", k.display_name, v.evidence),
                ADVICE.into(),
            ))
        })
        .collect();
    (out, 0)
}

const ADVICE: &str = "Give the SMs more warps to switch between: fewer registers per thread (__launch_bounds__, \
                      -maxrregcount) or less shared memory per block, or more independent work per warp.";
