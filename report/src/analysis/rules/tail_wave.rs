//! `tail-wave`: a kernel whose last wave of blocks runs partly empty.

use super::{few_sms, FindingKind, Found, Input, Rule};
use crate::analysis::verdict::{self, Bound};
use crate::analysis::KernelAnalysis;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::TailWave,
    bound: Some(Bound::Latency),
    reads: "each kernel's waves of blocks and wave efficiency (its launch shape)",
    when: "more than one wave and wave efficiency under 80%",
    cost: "GPU time times the empty share of the block slots",
    find,
};

/// The wave efficiency of `k`, %, when its last wave leaves a tail worth
/// naming (and it is no `few-sms` kernel). A tail needs a full wave
/// before it: a grid under one wave is an occupancy question.
pub(super) fn filled(k: &KernelAnalysis) -> Option<f64> {
    if few_sms::used(k).is_some() {
        return None;
    }
    k.wave_efficiency_pct.filter(|w| *w < verdict::TAIL_WAVE_PCT && k.waves.is_some_and(|n| n > 1.0))
}

fn find(rule: &Rule, input: &Input) -> Found {
    let out = few_sms::judged(input)
        .filter_map(|k| {
            let w = filled(k)?;
            let waves = k.waves.unwrap_or(0.0);
            Some(rule.kernel_finding(
                k,
                (k.gpu_ns as f64 * (1.0 - w / 100.0)) as u64,
                format!(
                    "{}: {waves:.2} waves of blocks, so the last one runs partly empty: the grid fills {w:.0}% \
                         of the block slots of its {} waves",
                    k.display_name,
                    waves.ceil()
                ),
                ADVICE.into(),
            ))
        })
        .collect();
    (out, 0)
}

const ADVICE: &str = "Size the grid to whole waves (a multiple of SMs x blocks per SM), or use smaller blocks so \
                      the last wave is fuller.";
