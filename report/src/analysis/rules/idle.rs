//! What the idle-cause rules share: a range's idle time by cause, the
//! session's when the program has no ranges of its own, and the step
//! figures their advice reads. Not a rule of its own.

use super::{waiting, Found, Input, Rule, IDLE};
use crate::analysis::advice::Evidence;
use crate::analysis::findings::{
    self, session_idle, short_stack_range, Finding, INNER_EXPLAINS_PCT, MAX_PER_KIND, MIN_COST_NS, MIN_SHARE_PCT,
};
use crate::analysis::framework::Framework;
use crate::analysis::verdict::Bound;
use crate::analysis::RangeAnalysis;
use crate::report::Report;
use rustc_hash::FxHashMap as HashMap;

use super::FindingKind;

/// An idle cause that makes findings.
pub(in crate::analysis) struct IdleCause {
    /// The findings' kind.
    pub kind: FindingKind,
    /// The verdict it explains.
    pub bound: Bound,
    /// The `model::idle` causes it sums.
    pub causes: &'static [usize],
    /// What the GPU idled for, after "GPU idle 3 ms (12% of the range)".
    pub meaning: &'static str,
    /// The least share of a range's active time that makes a finding, %.
    pub min_share: fn(&RangeAnalysis) -> f64,
    /// The advice for range `g`.
    pub range_advice: fn(&Evidence, &RangeAnalysis) -> String,
    /// Session-wide advice (a program without ranges): no per-call
    /// evidence.
    pub session_advice: fn(&Report, Framework) -> String,
    /// Whether the program can act on the session's idle time of this
    /// cause (not a runtime's own waits).
    pub session_actionable: fn(&Report, Framework) -> bool,
}

/// Most idle causes: [`MIN_SHARE_PCT`] of a range's time.
pub(super) fn min_share(_: &RangeAnalysis) -> f64 {
    MIN_SHARE_PCT
}

/// Most idle causes: the program can act on any of its session's.
pub(super) fn actionable(_: &Report, _: Framework) -> bool {
    true
}

/// The idle cause of `kind` (another kind gets waiting's, the cause with
/// no evidence of its own).
fn cause(kind: &FindingKind) -> &'static IdleCause {
    IDLE.iter().copied().find(|c| c.kind == *kind).unwrap_or(&waiting::CAUSE)
}

/// The advice for an idle cause of range `g`.
pub(in crate::analysis) fn idle_advice(kind: &FindingKind, e: &Evidence, g: &RangeAnalysis) -> String {
    (cause(kind).range_advice)(e, g)
}

/// Whether the program can act on its session's idle time of `kind`.
pub(in crate::analysis) fn session_actionable(kind: &FindingKind, r: &Report, fw: Framework) -> bool {
    (cause(kind).session_actionable)(r, fw)
}

/// What the GPU idled for, for idle time of `kind` ("after host
/// synchronisations").
pub(in crate::analysis) fn idle_meaning(kind: &FindingKind) -> &'static str {
    cause(kind).meaning
}

/// Session-wide advice (a program without ranges): no per-call evidence.
pub(in crate::analysis) fn session_advice(kind: &FindingKind, r: &Report, fw: Framework) -> String {
    (cause(kind).session_advice)(r, fw)
}

/// A range's idle time of one cause large enough to be a finding, before
/// its text.
struct Candidate<'a> {
    g: &'a RangeAnalysis,
    cost: u64,
    share: f64,
}

/// `items` less those the ranges directly inside explain: their items
/// (same cause) add up to [`INNER_EXPLAINS_PCT`] of its cost or more. Each
/// item's cost is summed into its parent's, so this stays linear.
pub(super) fn without_explained<'a, T>(
    items: Vec<T>,
    path: impl Fn(&T) -> &'a str,
    cost: impl Fn(&T) -> u64,
) -> Vec<T> {
    let mut inside: HashMap<&str, u64> = HashMap::default();
    for i in &items {
        if let Some((parent, _)) = path(i).rsplit_once('/') {
            let sum = inside.entry(parent).or_default();
            *sum = sum.saturating_add(cost(i));
        }
    }
    items
        .into_iter()
        .filter(|i| {
            let inner = inside.get(path(i)).copied().unwrap_or(0);
            (inner as f64) < cost(i) as f64 * INNER_EXPLAINS_PCT / 100.0
        })
        .collect()
}

/// The findings of an idle-cause rule: those of the cause of its kind in
/// [`IDLE`].
pub(super) fn find_rule(rule: &Rule, input: &Input) -> Found {
    match IDLE.iter().find(|c| c.kind == rule.kind) {
        Some(c) => find(c, input),
        None => (Vec::new(), 0),
    }
}

/// The findings of idle cause `c`: per range, over the calls after
/// warm-up, the innermost range that explains the time; and the session's
/// when the program has no ranges of its own.
pub(super) fn find(c: &IdleCause, input: &Input) -> Found {
    let (e, ranges) = (input.e, input.ranges);
    let mut out = Vec::new();
    // Costs first; messages and advice only for the findings kept.
    let mut idle: Vec<Candidate> = Vec::new();
    for g in ranges.iter().filter(|g| g.library.is_none() && !short_stack_range(g)) {
        let Some(split) = g.idle else { continue };
        let a = split.to_array();
        let cost = crate::model::units::saturating_sum(c.causes.iter().map(|&i| a[i]));
        let share = 100.0 * cost as f64 / g.active_ns.max(1) as f64;
        if share < (c.min_share)(g) || cost < MIN_COST_NS {
            continue;
        }
        idle.push(Candidate { g, cost, share });
    }
    let mut list = without_explained(idle, |f| f.g.path.as_str(), |f| f.cost);
    // The costliest, found without sorting them all.
    let mut omitted = 0;
    let order = |a: &Candidate, b: &Candidate| b.cost.cmp(&a.cost).then_with(|| a.g.path.cmp(&b.g.path));
    if list.len() > MAX_PER_KIND {
        list.select_nth_unstable_by(MAX_PER_KIND - 1, order);
        omitted += list.len() - MAX_PER_KIND;
        list.truncate(MAX_PER_KIND);
    }
    list.sort_by(order);
    for f in list {
        let g = f.g;
        let calls = if g.count > 1 {
            format!(" over {} calls, {} per call", g.count, findings::ms(f.cost / g.count))
        } else {
            String::new()
        };
        out.push(Finding {
            kind: c.kind.clone(),
            bound: c.bound.clone(),
            range: Some(g.path.clone()),
            kernel: None,
            cost_ns: f.cost,
            calls: g.count,
            message: format!(
                "{}: GPU idle {} ({:.0}% of the range{calls}) {}",
                g.path,
                findings::ms(f.cost),
                f.share,
                c.meaning
            ),
            advice: (c.range_advice)(e, g),
        });
    }
    out.extend(session(c, input));
    (out, omitted)
}

/// Whole-session idle when the program has no ranges of its own: its
/// steady state's, gpuscope's cost taken out.
fn session(c: &IdleCause, input: &Input) -> Option<Finding> {
    let r = input.e.r;
    if !input.ranges.iter().all(|g| g.library.is_some() || g.from_stack) {
        return None;
    }
    let (split, wall, what) = session_idle(r)?;
    let a = split.to_array();
    let wall = wall.saturating_sub(split.profiler_ns).max(1);
    let cost = crate::model::units::saturating_sum(c.causes.iter().map(|&i| a[i]));
    let share = 100.0 * cost as f64 / wall as f64;
    // A runtime's own waits are nothing the program can change.
    if share < MIN_SHARE_PCT || cost < MIN_COST_NS || !(c.session_actionable)(r, input.e.fw) {
        return None;
    }
    Some(Finding {
        kind: c.kind.clone(),
        bound: c.bound.clone(),
        range: None,
        kernel: None,
        cost_ns: cost,
        calls: 0,
        message: format!("{what}: GPU idle {} ({share:.0}%) {}", findings::ms(cost), c.meaning),
        advice: (c.session_advice)(r, input.e.fw),
    })
}

/// Device-to-host copies per step from which a program reads a value every
/// step (or nearly).
pub(super) const READS_PER_STEP: f64 = 0.5;

/// Device-to-host copies per step found in the steady state (a program's
/// reads of results: `float()` of a device array, `jax.device_get`,
/// `.item()`); `None` where no steps were found or the steady state's
/// copies were not counted.
pub(super) fn reads_per_step(r: &Report) -> Option<f64> {
    let (s, steps) = found_steps(r)?;
    // Not counted in the steady state (an older report): not known.
    s.copies?;
    Some(s.device_to_host_copies as f64 / steps)
}

/// The steady state and the steps found in it (its length over the median
/// step), where steps were found.
pub(super) fn found_steps(r: &Report) -> Option<(&crate::report::SessionSteady, f64)> {
    let s = r.session_steady.as_ref()?;
    let f = s.steps?;
    Some((s, (s.wall_ns() as f64 / f.median_ns.max(1) as f64).max(1.0)))
}
