//! `occupancy-limit`: a latency-bound kernel held to few warps by its
//! registers, shared memory or block size.

use super::{checklist, few_sms, FindingKind, Found, Input, Rule};
use crate::analysis::findings::ms;
use crate::analysis::verdict::Bound;
use crate::model::occupancy::Limiter;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::OccupancyLimit,
    bound: Some(Bound::Latency),
    reads: "each measured latency-bound kernel's theoretical occupancy and its limiter (from its launch and \
            compiled resources) and its achieved occupancy (metrics mode)",
    when: "a latency-bound kernel of the program's own (not cuBLAS, cuDNN or CUTLASS) whose grid fills the GPU and \
           whose theoretical occupancy is 50% or less, limited by registers, shared memory or blocks per SM, and which \
           reaches 70% of it, where this is its costliest checklist cause",
    cost: "GPU time not spent near a limit",
    find,
};

fn find(rule: &Rule, input: &Input) -> Found {
    let out = few_sms::judged(input)
        .filter_map(|k| {
            let (FindingKind::OccupancyLimit, cost_ns) = checklist::chosen(input, k)? else { return None };
            let (limiter, theoretical) = checklist::limited(k, checklist::stats(input, k)?)?;
            let by = match limiter {
                Limiter::Registers => "registers per thread",
                Limiter::SharedMemory => "shared memory per block",
                Limiter::Blocks => "the blocks an SM holds at once: its blocks are small",
                Limiter::Warps => return None,
            };
            Some(rule.kernel_finding(
                k,
                cost_ns,
                format!(
                    "{}: latency-bound, theoretical occupancy {theoretical:.0}% limited by {by} (achieved {:.0}%), \
                         {} of GPU time",
                    k.display_name,
                    k.achieved_occupancy_pct.unwrap_or(0.0),
                    ms(k.gpu_ns)
                ),
                advice(limiter).into(),
            ))
        })
        .collect();
    (out, 0)
}

fn advice(l: Limiter) -> &'static str {
    match l {
        Limiter::Registers => {
            "Use fewer registers per thread: cap them with __launch_bounds__(threads, minBlocksPerSM) or \
             -maxrregcount, or keep fewer values live (smaller unrolled arrays, recompute instead of keeping)."
        }
        Limiter::SharedMemory => {
            "Use less shared memory per block (smaller tiles), or let the SM give more to shared memory \
             (cudaFuncSetAttribute with cudaFuncAttributePreferredSharedMemoryCarveout)."
        }
        Limiter::Blocks | Limiter::Warps => {
            "Launch larger blocks (128-256 threads): an SM holds a fixed number of blocks (32 on H100 and H200, 16 or \
             24 on some others), so small ones leave its warp slots empty."
        }
    }
}
