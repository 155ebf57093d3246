//! `memory-bound`: a memory-bound kernel.

use super::{checklist, few_sms, tail_wave, FindingKind, Found, Input, Rule};
use crate::analysis::findings::ms;
use crate::analysis::verdict::Bound;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::MemoryBound,
    bound: Some(Bound::Memory),
    reads: "each memory-bound kernel's DRAM throughput and arithmetic intensity, and the device's ridge point",
    when: "a memory-bound kernel",
    cost: "its GPU time",
    find,
};

fn find(rule: &Rule, input: &Input) -> Found {
    let out = few_sms::judged(input)
        .filter(|k| few_sms::used(k).is_none() && tail_wave::filled(k).is_none())
        .filter(|k| k.verdict.as_ref().is_some_and(|v| v.bound == Bound::Memory))
        // Uncoalesced access, where the checklist finds it and it wastes most
        // of the kernel's traffic, is the cause.
        .filter(|k| {
            let chosen = checklist::chosen(input, k).is_some_and(|(c, _)| c == FindingKind::UncoalescedAccess);
            let waste = checklist::stats(input, k).and_then(checklist::uncoalesced).map_or(0.0, |u| u.wasted_share);
            !(chosen && waste >= checklist::MOSTLY_WASTED)
        })
        .map(|k| {
            let ai = k.arithmetic_intensity.map(|a| format!(", {a:.1} FLOP/byte")).unwrap_or_default();
            let ridge = input
                .peaks
                .and_then(|p| p.ridge(crate::analysis::peaks::TENSOR_BF16))
                .map(|r| format!(" (ridge point {r:.0})"))
                .unwrap_or_default();
            rule.kernel_finding(
                k,
                k.gpu_ns,
                format!(
                    "{}: memory-bound, DRAM at {:.0}% of peak{ai}{ridge}, {} of GPU time",
                    k.display_name,
                    k.dram_pct.unwrap_or(0.0),
                    ms(k.gpu_ns)
                ),
                MOVE_FEWER_BYTES.into(),
            )
        })
        .collect();
    (out, 0)
}

/// What to change for memory-bound kernels.
pub const MOVE_FEWER_BYTES: &str = "Move fewer bytes: fuse it with the ops around it (torch.compile) so \
     intermediates stay on chip, and use narrower dtypes (bf16, fp8).";
