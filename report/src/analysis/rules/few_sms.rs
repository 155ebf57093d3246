//! `few-sms`: a kernel whose grid leaves most SMs idle.

use super::{FindingKind, Found, Input, Rule};
use crate::analysis::findings::{ms, MIN_COST_NS};
use crate::analysis::verdict::{self, Bound};
use crate::analysis::KernelAnalysis;
use crate::model::comm::is_comm_kernel;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::FewSms,
    bound: Some(Bound::Latency),
    reads: "each kernel's GPU time, SM coverage (its launch shape) and SM efficiency, and the device's SMs",
    when: "a kernel of at least 100 us whose grid reaches under half the SMs (or SM efficiency under 50% with a \
           grid smaller than the GPU)",
    cost: "its GPU time times the share of SMs left idle",
    find,
};

/// The kernels the kernel rules judge: at least [`MIN_COST_NS`] of GPU
/// time. Communication kernels wait on transfers and other ranks: their
/// launch shape and occupancy are no advice (the ranges' exposed
/// communication is).
pub(super) fn judged<'a>(input: &Input<'a>) -> impl Iterator<Item = &'a KernelAnalysis> {
    input.kernels.iter().filter(|k| k.gpu_ns >= MIN_COST_NS && !is_comm_kernel(&k.name))
}

/// The share of the SMs `k`'s grid keeps busy, %, when it leaves most of
/// them idle; the other kernel rules leave such a kernel to this one.
pub(super) fn used(k: &KernelAnalysis) -> Option<f64> {
    k.sm_coverage_pct
        .filter(|c| *c < verdict::LOW_COVERAGE_PCT)
        .or(k.sm_efficiency_pct.filter(|e| *e < verdict::FEW_SMS_PCT && k.sm_coverage_pct.is_some_and(|c| c < 100.0)))
}

fn find(rule: &Rule, input: &Input) -> Found {
    let sms = input.e.r.devices.first().map(|d| d.sm_count).unwrap_or(0);
    let out = judged(input)
        .filter_map(|k| {
            let used = used(k)?;
            Some(rule.kernel_finding(
                k,
                (k.gpu_ns as f64 * (1.0 - used / 100.0)) as u64,
                format!(
                    "{}: its grid keeps {used:.1}% of the {sms} SMs busy ({} of GPU time)",
                    k.display_name,
                    ms(k.gpu_ns)
                ),
                more_blocks(sms),
            ))
        })
        .collect();
    (out, 0)
}

/// What to change for kernels whose grid leaves SMs idle, on a GPU of
/// `sms` SMs.
pub fn more_blocks(sms: u32) -> String {
    format!(
        "Launch at least one block per SM ({sms}): split the work into more, smaller blocks or use a grid-stride \
         loop over a grid of {sms} or more blocks."
    )
}
