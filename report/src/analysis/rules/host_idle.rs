//! `host-idle`: the GPU idled while the host ran code of its own.

use super::idle::{self, IdleCause};
use super::{FindingKind, Rule};
use crate::analysis::advice::Evidence;
use crate::analysis::framework::{Framework, HostCpu};
use crate::analysis::verdict::Bound;
use crate::analysis::RangeAnalysis;
use crate::model::idle::HOST;
use crate::report::Report;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::HostIdle,
    bound: Some(Bound::Host),
    reads: "each range's idle time of the host-work cause (the session's steady state's without ranges); \
            data-loading ranges, host-to-device copies, forks and the launching threads' CPU time for the advice",
    when: "host work takes at least 10% of a range's active time and 100 us",
    cost: "the idle time",
    find: idle::find_rule,
};

/// Its idle cause.
pub(in crate::analysis) static CAUSE: IdleCause = IdleCause {
    kind: FindingKind::HostIdle,
    bound: Bound::Host,
    causes: &[HOST],
    meaning: "waiting for the host, which ran code of its own",
    min_share: idle::min_share,
    range_advice,
    session_advice,
    session_actionable: idle::actionable,
};

fn range_advice(e: &Evidence, g: &RangeAnalysis) -> String {
    e.host_work(g)
}

fn session_advice(r: &Report, fw: Framework) -> String {
    fw.host_work(r.forks, copies_batches(r), host_cpu(r, fw))
}

/// What the launching threads' CPU time over the steady state says, where
/// it was read and means something: not under metrics mode (kernels are
/// replayed inside the launch calls), not with trace windows that switch
/// (CUDA calls between them are not seen), not for XLA (its runtime's
/// threads launch, and wait for the program's dispatch off a CPU).
fn host_cpu(r: &Report, fw: Framework) -> Option<HostCpu> {
    let s = r.session_steady.as_ref()?;
    let windows = r.sampling.as_ref().and_then(|m| m.trace_windows.as_ref()).is_some_and(|w| w.window_ns < w.period_ns);
    if r.mode == "metrics" || windows || fw == Framework::Xla {
        return None;
    }
    // The host idle time as the finding gives it: gpuscope's share taken out.
    let host_idle_ns = crate::analysis::findings::session_idle(r).map_or(s.idle.host_ns, |(i, _, _)| i.host_ns);
    Some(HostCpu {
        cpu_ns: s.launching_cpu_ns?,
        own_ns: s.callback_ns.saturating_add(s.hook_ns),
        off_idle_ns: s.launching_off_cpu_ns()?,
        blocked_ns: s.cuda_blocked_ns,
        wall_ns: s.wall_ns(),
        busy_ns: s.wall_ns().saturating_sub(s.idle.total()),
        host_idle_ns,
    })
}

/// Whether the program copies batches to the GPU in its loop: its steady
/// state holds more than a few host-to-device copies of a batch's bytes
/// ([`crate::analysis::advice::BATCH_BYTES`]) or more. Reports that did not
/// count the steady state's copies fall back to the session's copy summary,
/// when the steady state waited on copies (the summary also holds a model's
/// move to the GPU at start-up).
fn copies_batches(r: &Report) -> bool {
    let Some(s) = r.session_steady.as_ref() else { return false };
    if let Some(n) = s.batch_copies {
        return n >= MIN_BATCH_COPIES;
    }
    let (count, bytes) = r
        .memory
        .memcpy
        .iter()
        .filter(|c| c.kind == "HtoD")
        .fold((0u64, 0u64), |(n, b), c| (n + c.count, b.saturating_add(c.bytes)));
    s.idle.copy_ns > 0 && count >= MIN_BATCH_COPIES && bytes / count.max(1) >= crate::analysis::advice::BATCH_BYTES
}

/// Batch-sized host-to-device copies fewer than this are set-up (weights,
/// constants), not a loop's batches.
const MIN_BATCH_COPIES: u64 = 10;
