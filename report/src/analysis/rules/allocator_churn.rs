//! `allocator-churn`: device memory released and allocated again and
//! again in the steady state.

use super::{FindingKind, Found, Input, Rule};
use crate::analysis::findings::{ms, CHURN_MIN};
use crate::analysis::verdict::Bound;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::AllocatorChurn,
    bound: Some(Bound::Sync),
    reads: "the steady state's device memory allocations and releases (allocation records)",
    when: "the steady state released and allocated device memory 20 times or more (with at least one release)",
    cost: "not costed",
    find,
};

/// Each release waits for the device.
fn find(rule: &Rule, input: &Input) -> Found {
    let Some(s) = input.e.r.session_steady.as_ref() else { return (Vec::new(), 0) };
    if s.releases.saturating_add(s.allocations) < CHURN_MIN || s.releases == 0 {
        return (Vec::new(), 0);
    }
    let secs = s.wall_ns().max(1) as f64 / 1e9;
    let message = format!(
        "the steady state released device memory {} times and allocated it {} times ({:.0} releases per second, \
         over {})",
        s.releases,
        s.allocations,
        s.releases as f64 / secs,
        ms(s.wall_ns())
    );
    (vec![rule.finding(message, ADVICE.into())], 0)
}

const ADVICE: &str = "Each cudaFree/cuMemFree waits for the whole device to finish its work, and the next \
                      allocation pays again: keep memory allocated across steps (no torch.cuda.empty_cache() or \
                      cupy.get_default_memory_pool().free_all_blocks() in the loop; PyTorch's caching allocator \
                      on, PYTORCH_NO_CUDA_MEMORY_CACHING unset).";
