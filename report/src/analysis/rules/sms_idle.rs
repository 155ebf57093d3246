//! `sms-idle`: a range known from PM samples only whose SMs idled most of
//! its wall time.

use super::idle::without_explained;
use super::{FindingKind, Found, Input, Rule};
use crate::analysis::advice::LAUNCH_OVERHEAD;
use crate::analysis::findings::{Finding, MAX_PER_KIND, MIN_COST_NS, MIN_SHARE_PCT};
use crate::analysis::verdict::{self, Bound, Counted};
use crate::analysis::RangeAnalysis;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::SmsIdle,
    bound: Some(Bound::Idle),
    reads: "ranges with no kernel records: their PM samples' SM efficiency (and the graphics engine's \
            activity), wall time and counted launches",
    when: "a range known from PM samples only whose SMs idle at least 10% of its wall time",
    cost: "the SM time unused",
    find,
};

fn find(rule: &Rule, input: &Input) -> Found {
    let sampled: Vec<(&RangeAnalysis, Finding)> =
        input.ranges.iter().filter_map(|g| Some((g, sampled_idle(rule, g)?))).collect();
    // Left to the ranges directly inside when they explain it, as idle
    // causes are.
    let sampled = without_explained(sampled, |(g, _)| g.path.as_str(), |(_, f)| f.cost_ns);
    let mut sampled: Vec<Finding> = sampled.into_iter().map(|(_, f)| f).collect();
    sampled.sort_by(|a, b| b.cost_ns.cmp(&a.cost_ns).then_with(|| a.range.cmp(&b.range)));
    let omitted = sampled.len().saturating_sub(MAX_PER_KIND);
    sampled.truncate(MAX_PER_KIND);
    (sampled, omitted)
}

/// A range with no kernel records (trace windows) whose PM samples say its
/// SMs idled most of its wall time: SM time unused is its cost. Samples
/// cannot say why, so the advice is how to find out, and the likely fix
/// when its launches come closer together than trace mode's launch gaps.
fn sampled_idle(rule: &Rule, g: &RangeAnalysis) -> Option<Finding> {
    if !g.untraced || ![Bound::Idle, Bound::Launch, Bound::Host].contains(&g.verdict.bound) {
        return None;
    }
    let eff = g.sm_efficiency_pct?;
    // With the engine's activity sampled, the GPU's idle time; without,
    // the SMs' (which also counts SMs idle under running kernels).
    let busy = if g.utilization_pct > 0.0 { g.utilization_pct } else { eff };
    let cost = (g.wall_ns as f64 * (1.0 - busy / 100.0)) as u64;
    if 100.0 - busy < MIN_SHARE_PCT || cost < MIN_COST_NS {
        return None;
    }
    let counted = g.launches.map(|launches| Counted { calls: g.count, launches, wall_ns: g.wall_ns });
    let calls = if g.count > 1 { format!(" over {} calls", g.count) } else { String::new() };
    let launches = counted.map(|c| format!("{}; ", c.describe())).unwrap_or_default();
    let find_out = "PM samples cannot tell an idle GPU from kernels on a few SMs: a trace window \
                    (--trace-windows 100/1000) or trace mode splits its idle time by cause.";
    let advice = if counted.is_some_and(|c| c.dense()) {
        let (first, rest) = verdict::DENSE_LAUNCHES.split_at(1);
        format!("{}{rest}. {LAUNCH_OVERHEAD} {find_out}", first.to_uppercase())
    } else {
        find_out.to_string()
    };
    Some(Finding {
        range: Some(g.path.clone()),
        cost_ns: cost,
        calls: g.count,
        ..rule.finding(
            format!(
                "{}: {}SMs active {eff:.0}% of its wall time{calls} ({launches}PM samples, no kernel records)",
                g.path,
                if g.utilization_pct > 0.0 { format!("GPU busy {busy:.0}%, ") } else { String::new() }
            ),
            advice,
        )
    })
}
