//! `warp-stalls`: what a kernel's warps wait for, when no more specific
//! cause of the checklist explains it.

use super::{checklist, few_sms, FindingKind, Found, Input, Rule};
use crate::analysis::findings::ms;
use crate::analysis::verdict::Bound;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::WarpStalls,
    bound: None,
    reads: "each measured kernel's warp stall reasons per issued instruction, as ncu names them (metrics mode, \
            --metrics checklist), and its verdict",
    when: "a kernel of the program's own with no more specific cause: warps waiting at barriers for 30% of the \
           stalls or more, or latency-bound with its largest stall reason at 40% of the stalls or more",
    cost: "its GPU time times the reason's share of the stalls, times the share not spent near a limit",
    find,
};

fn find(rule: &Rule, input: &Input) -> Found {
    let out = few_sms::judged(input)
        .filter_map(|k| {
            let s = checklist::stats(input, k)?;
            if checklist::chosen(input, k).is_some() || checklist::vendor_library(&k.name) {
                return None;
            }
            let stalls = checklist::stalls(s);
            let latency = k.verdict.as_ref().is_some_and(|v| v.bound == Bound::Latency);
            let barrier =
                stalls.iter().find(|(r, _)| *r == "barrier").filter(|(_, p)| *p >= checklist::BARRIER_STALL_PCT);
            let (reason, share) =
                barrier.or(stalls.first().filter(|(_, p)| latency && *p >= checklist::DOMINANT_STALL_PCT)).copied()?;
            let (what, advice) = explain(reason)?;
            Some(rule.kernel_finding(
                k,
                (k.gpu_ns as f64 * share / 100.0 * checklist::idle_share(k)) as u64,
                format!(
                    "{}: warps {what} ({reason}) {share:.0}% of their stalled cycles, {} of GPU time",
                    k.display_name,
                    ms(k.gpu_ns)
                ),
                advice.into(),
            ))
        })
        .collect();
    (out, 0)
}

/// What a stall reason means and what to change; `None`: no change to
/// advise (warps ready but another was picked, a pipe at its limit).
fn explain(reason: &str) -> Option<(&'static str, &'static str)> {
    Some(match reason {
        "barrier" => (
            "wait at barriers for sibling warps",
            "Balance the work between a block's warps before each __syncthreads(), or synchronise less often (warp \
             shuffles or cooperative groups for exchanges within a warp).",
        ),
        "long_scoreboard" => (
            "wait on global or local memory",
            "Give each warp more independent loads in flight (load early, unroll, vector loads), keep reused data in \
             shared memory or registers, and check for local-memory spills.",
        ),
        "short_scoreboard" | "mio_throttle" => (
            "wait on shared memory or special math (the MIO queue)",
            "Issue fewer shared-memory instructions (wider accesses, data kept in registers) or fewer transcendental \
             operations.",
        ),
        "lg_throttle" => (
            "wait for the global memory instruction queue",
            "Issue fewer, wider global memory instructions (float4 loads), or fewer local-memory spills.",
        ),
        "wait" => (
            "wait on fixed-latency dependencies",
            "Give each warp more independent instructions (unroll, interleave independent work) or more warps per SM.",
        ),
        "membar" => ("wait at memory fences", "Use fewer memory fences (__threadfence) or narrower ones."),
        "branch_resolving" => (
            "wait for branch targets",
            "Make branches uniform across a warp, or replace them with arithmetic (select).",
        ),
        "no_instruction" | "imc_miss" => (
            "wait for instructions to be fetched",
            "Make the hot loop's code smaller (less unrolling or inlining), or give the SM more warps.",
        ),
        "drain" => {
            ("wait for stores to drain at exit", "Write less at the end of the kernel, or coalesce those stores.")
        }
        "dispatch_stall" | "tex_throttle" | "sleeping" | "misc" => return None,
        _ => return None,
    })
}
