//! One answer for a job of several ranks, from each rank's own answer.
//!
//! The ranks of a synchronous job meet at every collective, so each step
//! takes as long as its slowest rank's work. A rank that arrives early
//! waits inside the collective: its communication kernels run with no
//! compute under them, so its exposed communication holds that wait. The
//! rank that arrives last waits for no one: its exposed communication is
//! the transfer itself. So, per step:
//! - transfer = the least exposed communication of any rank;
//! - a rank's wait for the others = its exposed communication − the
//!   transfer;
//! - the straggler = the rank with the least exposed communication, named
//!   when the others wait at least [`STRAGGLER_WAIT_PCT`] of a step for it.
//!
//! What sets the job's pace is the straggler's largest part: its compute,
//! its host work (dispatch, data, syncs, copies), or the transfer.

use super::answer::{Answer, BUSY_TRACED};
use crate::model::comm::{collective, Collective};
use crate::report::Report;
use serde::Serialize;

/// The others' wait for a rank, as a share of the step, from which that
/// rank is named the straggler: below, noise between ranks.
pub const STRAGGLER_WAIT_PCT: f64 = 5.0;

/// A share of the step below which a part of it is not worth an action.
const MIN_ACTION_PCT: f64 = 5.0;

/// The job's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobAnswer {
    /// What a step is: the main range the ranks share, or `None` (each
    /// rank's steady state).
    pub step: Option<String>,
    /// Time per step of the job: its slowest rank's, ns; 1 s when there is
    /// no shared step (`per_second`).
    pub step_ns: u64,
    /// No step the ranks share: every figure is per second of each rank's
    /// steady state.
    pub per_second: bool,
    /// Per rank, in the order given.
    pub ranks: Vec<RankStep>,
    /// Exposed communication of the rank that waits least, per step: the
    /// transfer no rank can skip, ns (`None`: not measured on every rank).
    pub transfer_ns: Option<u64>,
    /// The rank the others wait for (index into `ranks`).
    pub straggler: Option<usize>,
    /// What the others wait for it per step, on average, ns.
    pub straggler_cost_ns: u64,
    /// What sets the job's pace, in words.
    pub pace: String,
    /// How the job trains, from its collectives.
    pub parallelism: Parallelism,
    /// What to change, most time saved per step first.
    pub actions: Vec<JobAction>,
    /// What the answer could not see, and why.
    pub notes: Vec<String>,
}

/// One rank's step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankStep {
    /// Its label.
    pub name: String,
    /// Time per step (its main range's median, or its steady state's
    /// length), ns.
    pub step_ns: u64,
    /// GPU busy with compute (communication kernels with nothing under
    /// them left out), ns per step.
    pub compute_ns: u64,
    /// Communication kernels with no compute under them, ns per step
    /// (`None`: not measured: no step range to measure it in).
    pub exposed_comm_ns: Option<u64>,
    /// Of which waiting for other ranks, ns per step.
    pub wait_ns: Option<u64>,
    /// GPU idle: the host's dispatch, its own work, syncs, copies and
    /// waits on other streams, ns per step.
    pub host_ns: u64,
    /// Its own verdict.
    pub verdict: String,
}

/// How the job spreads its work, as its collectives tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Parallelism {
    /// Gradients all-reduced (DDP, Horovod, DeepSpeed ZeRO-0/1).
    DataParallel,
    /// Parameters gathered and gradients reduce-scattered (FSDP, ZeRO-3).
    Sharded,
    /// No collective seen.
    Unknown,
}

/// One thing to change for the job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobAction {
    /// What to change.
    pub advice: String,
    /// Up to this much per step of the job, ns.
    pub saves_ns: u64,
    /// Its share of the step, %.
    pub saves_pct: f64,
}

/// The job's answer from its ranks' reports (`(label, report)`), `None`
/// when no rank has an answer.
pub fn answer(ranks: &[(String, Report)]) -> Option<JobAnswer> {
    let answers: Vec<(String, Answer)> =
        ranks.iter().filter_map(|(name, r)| super::analyze(r).answer.map(|a| (name.clone(), a))).collect();
    let reports: Vec<&Report> = ranks.iter().map(|(_, r)| r).collect();
    of_answers(&answers, parallelism(&reports))
}

/// How the job spreads its work, from the collectives its ranks ran.
fn parallelism(reports: &[&Report]) -> Parallelism {
    let time = |op: Collective| -> u64 {
        reports
            .iter()
            .flat_map(|r| &r.kernels)
            .filter(|k| collective(&k.name) == Some(op))
            .map(|k| k.stats.total_ns)
            .fold(0, u64::saturating_add)
    };
    let (all_reduce, gather) = (time(Collective::AllReduce), time(Collective::AllGather));
    let scatter = time(Collective::ReduceScatter);
    if gather > 0 && scatter > 0 && gather.saturating_add(scatter) >= all_reduce {
        Parallelism::Sharded
    } else if all_reduce > 0 {
        Parallelism::DataParallel
    } else {
        Parallelism::Unknown
    }
}

fn part(a: &Answer, what: &[&str]) -> u64 {
    a.parts.iter().filter(|p| what.contains(&p.what)).map(|p| p.ns).fold(0, u64::saturating_add)
}

/// The job's answer from its ranks' own.
fn of_answers(answers: &[(String, Answer)], parallelism: Parallelism) -> Option<JobAnswer> {
    if answers.is_empty() {
        return None;
    }
    let mut notes = Vec::new();
    // A step the ranks share: the same main range on every rank.
    let step = answers[0].1.range.clone().filter(|s| answers.iter().all(|(_, a)| a.range.as_deref() == Some(s)));
    if step.is_none() {
        notes.push(
            if answers.iter().any(|(_, a)| a.range.is_some()) {
                "the ranks' main ranges differ: each rank's figures are per second of its own"
            } else {
                "no range of the program's own around the step: each rank's figures are per second of its steady \
                 state (add an NVTX range around the step for per-step figures)"
            }
            .to_string(),
        );
    }
    // Exposed communication needs kernel records on every rank.
    let comm_measured = answers.iter().all(|(_, a)| a.busy_source == BUSY_TRACED);
    if !comm_measured {
        notes.push(
            "exposed communication and waits need kernel records on every rank (trace mode, or trace windows): \
             not known here"
                .to_string(),
        );
    }
    // Without a step the ranks share, each rank's figures are per second
    // of its own steady state (or main range), so that they compare.
    let per_second = step.is_none();
    let scale = |a: &Answer, ns: u64| {
        if per_second {
            (ns as f64 * 1e9 / a.per_step_ns.max(1) as f64) as u64
        } else {
            ns
        }
    };
    let mut ranks: Vec<RankStep> = answers
        .iter()
        .map(|(name, a)| RankStep {
            name: name.clone(),
            step_ns: a.per_step_ns,
            compute_ns: scale(a, part(a, &["GPU busy"])),
            exposed_comm_ns: comm_measured.then(|| scale(a, part(a, &["communication"]))),
            wait_ns: None,
            host_ns: scale(a, part(a, &["dispatch", "host work", "sync", "copies", "waiting"])),
            verdict: a.verdict.bound.to_string(),
        })
        .collect();
    let step_ns = if per_second { 1_000_000_000 } else { ranks.iter().map(|r| r.step_ns).max().unwrap_or(0) };
    let transfer_ns = if comm_measured { ranks.iter().filter_map(|r| r.exposed_comm_ns).min() } else { None };
    if let Some(t) = transfer_ns {
        for r in &mut ranks {
            r.wait_ns = r.exposed_comm_ns.map(|c| c.saturating_sub(t));
        }
    }
    // The straggler: the rank that waits least, when the others wait for it.
    let least = transfer_ns.and_then(|t| ranks.iter().position(|r| r.exposed_comm_ns == Some(t)));
    let others_wait = |i: usize| {
        let n = ranks.len().saturating_sub(1).max(1) as u64;
        ranks.iter().enumerate().filter(|&(j, _)| j != i).filter_map(|(_, r)| r.wait_ns).fold(0, u64::saturating_add)
            / n
    };
    let pct = |ns: u64| 100.0 * ns as f64 / step_ns.max(1) as f64;
    let straggler = least.filter(|&i| ranks.len() > 1 && pct(others_wait(i)) >= STRAGGLER_WAIT_PCT);
    let straggler_cost_ns = straggler.map_or(0, others_wait);
    // Whose parts set the pace: the straggler's, else the slowest rank's.
    let pacer = straggler.or_else(|| (0..ranks.len()).max_by_key(|&i| ranks[i].step_ns)).unwrap_or(0);
    let p = &ranks[pacer];
    let transfer = transfer_ns.unwrap_or(0);
    let who = if ranks.len() > 1 { format!("{}'s ", p.name) } else { String::new() };
    let pace = if transfer > p.compute_ns && transfer > p.host_ns {
        format!(
            "exposed communication: {} per step ({:.0}%) with no compute under it on any rank",
            fmt(transfer),
            pct(transfer)
        )
    } else if p.host_ns > p.compute_ns {
        format!(
            "{who}host: the GPU idle {} per step ({:.0}%) waiting for it ({})",
            fmt(p.host_ns),
            pct(p.host_ns),
            p.verdict
        )
    } else {
        format!("{who}compute: {} per step ({:.0}%) of GPU work ({})", fmt(p.compute_ns), pct(p.compute_ns), p.verdict)
    };
    let mut actions = Vec::new();
    if let Some(i) = straggler {
        actions.push(JobAction {
            advice: format!(
                "Balance the work per rank: the others wait {} per step for {} (give each rank as many tokens or \
                 samples, or take its extra host work off the loop's thread)",
                fmt(straggler_cost_ns),
                ranks[i].name
            ),
            saves_ns: straggler_cost_ns,
            saves_pct: pct(straggler_cost_ns),
        });
    }
    if pct(transfer) >= MIN_ACTION_PCT {
        actions.push(JobAction { advice: overlap_advice(parallelism), saves_ns: transfer, saves_pct: pct(transfer) });
    }
    // The pacing rank's own actions speed up the job by what they save it.
    for a in &answers[pacer].1.actions {
        if a.saves_pct >= MIN_ACTION_PCT && !actions.iter().any(|x| x.advice == a.advice) {
            actions.push(JobAction { advice: a.advice.clone(), saves_ns: a.saves_ns, saves_pct: pct(a.saves_ns) });
        }
    }
    actions.sort_by_key(|a| std::cmp::Reverse(a.saves_ns));
    actions.truncate(3);
    Some(JobAnswer {
        step,
        step_ns,
        per_second,
        ranks,
        transfer_ns,
        straggler,
        straggler_cost_ns,
        pace,
        parallelism,
        actions,
        notes,
    })
}

/// How to hide communication under compute, in the terms of the job's
/// parallelism.
fn overlap_advice(p: Parallelism) -> String {
    match p {
        Parallelism::DataParallel => "Hide the gradient all-reduce under the backward pass: smaller DDP buckets \
             (bucket_cap_mb) start it earlier, gradient_as_bucket_view=True saves the copies, static_graph=True \
             when the graph does not change; with gradient accumulation, no_sync() on all but the last micro-batch"
            .to_string(),
        Parallelism::Sharded => "Hide the all-gathers and reduce-scatters under compute: keep FSDP's prefetching on \
             (forward and backward), reshard_after_forward=False when the model fits unsharded, a larger per-GPU \
             batch or gradient accumulation so that each gather serves more work; across nodes, hybrid sharding"
            .to_string(),
        Parallelism::Unknown => "Overlap communication with compute: issue it on its own stream ahead of the work \
             that needs it"
            .to_string(),
    }
}

fn fmt(ns: u64) -> String {
    crate::model::units::fmt_ns(ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::answer::{Action, Part};
    use crate::analysis::verdict::Verdict;

    const MS: u64 = 1_000_000;

    /// A rank's answer for `step`: compute, exposed communication and host
    /// time per step, ms.
    fn rank(step: Option<&str>, compute: u64, comm: u64, host: u64, actions: Vec<Action>) -> Answer {
        let per = (compute + comm + host) * MS;
        let mut parts = vec![Part { what: "GPU busy", ns: compute * MS, pct: 0.0, detail: String::new() }];
        if comm > 0 {
            parts.push(Part { what: "communication", ns: comm * MS, pct: 0.0, detail: String::new() });
        }
        parts.push(Part { what: "host work", ns: host * MS, pct: 0.0, detail: String::new() });
        Answer {
            range: step.map(String::from),
            calls: 20,
            warmup_calls: 1,
            warmup_ns: 0,
            per_step_ns: per,
            p90_ns: None,
            gpu_busy_pct: 100.0 * (compute + comm) as f64 / (per / MS) as f64,
            busy_source: BUSY_TRACED,
            per_step_mean: false,
            notes: Vec::new(),
            profiler_ns: None,
            profiler_pct: None,
            parts,
            verdict: Verdict { bound: "gpu-bound", evidence: String::new() },
            actions,
            compile_ns: 0,
            others: Vec::new(),
            nvtx_example: "",
        }
    }

    fn named(v: Vec<Answer>) -> Vec<(String, Answer)> {
        v.into_iter().enumerate().map(|(i, a)| (format!("rank{i}"), a)).collect()
    }

    #[test]
    fn the_rank_that_waits_least_is_the_straggler_and_its_cost_is_the_others_wait() {
        // DDP with uneven work: rank 1 computes 42 ms, rank 0 31 ms; the
        // all-reduce's own transfer is 2 ms; rank 0 waits 11 ms in it.
        let a = of_answers(
            &named(vec![rank(Some("step"), 31, 13, 1, vec![]), rank(Some("step"), 42, 2, 1, vec![])]),
            Parallelism::DataParallel,
        )
        .unwrap();
        assert_eq!((a.straggler, a.straggler_cost_ns, a.transfer_ns), (Some(1), 11 * MS, Some(2 * MS)));
        assert_eq!(a.ranks[0].wait_ns, Some(11 * MS));
        assert_eq!(a.step_ns, 45 * MS);
        assert!(a.pace.starts_with("rank1's compute"), "{}", a.pace);
        assert!(a.actions[0].advice.starts_with("Balance the work per rank"), "{:?}", a.actions);
        assert_eq!(a.actions[0].saves_ns, 11 * MS);
    }

    #[test]
    fn exposed_transfer_on_every_rank_sets_the_pace_with_advice_for_the_parallelism() {
        let ranks = || named(vec![rank(Some("step"), 10, 25, 2, vec![]), rank(Some("step"), 10, 26, 2, vec![])]);
        let ddp = of_answers(&ranks(), Parallelism::DataParallel).unwrap();
        assert_eq!(ddp.straggler, None, "1 ms apart is noise, not a straggler");
        assert!(ddp.pace.starts_with("exposed communication: 25.00 ms"), "{}", ddp.pace);
        assert!(ddp.actions[0].advice.contains("bucket_cap_mb"), "{:?}", ddp.actions);
        let fsdp = of_answers(&ranks(), Parallelism::Sharded).unwrap();
        assert!(fsdp.actions[0].advice.contains("reshard_after_forward=False"), "{:?}", fsdp.actions);
        assert!(!fsdp.actions.iter().any(|a| a.advice.contains("DataLoader")));
    }

    #[test]
    fn a_host_bound_straggler_brings_its_own_actions() {
        let own = Action {
            advice: "Keep data loading off the loop's thread (DataLoader(num_workers>0))".into(),
            saves_ns: 20 * MS,
            saves_pct: 40.0,
            why: String::new(),
        };
        let a = of_answers(
            &named(vec![rank(Some("step"), 20, 22, 3, vec![]), rank(Some("step"), 20, 2, 23, vec![own])]),
            Parallelism::DataParallel,
        )
        .unwrap();
        assert_eq!(a.straggler, Some(1));
        assert!(a.pace.starts_with("rank1's host"), "{}", a.pace);
        assert!(a.actions.iter().any(|x| x.advice.contains("DataLoader")), "{:?}", a.actions);
    }

    #[test]
    fn without_step_ranges_the_ranks_compare_per_second_of_their_steady_state() {
        // Steady states of 4 s and 2 s with 1 s and 0.5 s of exposed
        // communication: 0.25 s per second on both.
        let (mut r0, mut r1) = (rank(None, 2000, 1000, 1000, vec![]), rank(None, 1400, 500, 100, vec![]));
        r0.per_step_ns = 4000 * MS;
        r1.per_step_ns = 2000 * MS;
        let a = of_answers(&named(vec![r0, r1]), Parallelism::DataParallel).unwrap();
        assert!(a.per_second && a.step.is_none());
        assert_eq!(a.ranks[0].exposed_comm_ns, Some(250 * MS));
        assert_eq!(a.ranks[1].exposed_comm_ns, Some(250 * MS));
        assert!(a.notes.iter().any(|n| n.contains("per second of its steady state")), "{:?}", a.notes);
        // Sampled answers (no kernel records): communication is unknown.
        let mut sampled = rank(None, 30, 0, 5, vec![]);
        sampled.busy_source = crate::analysis::answer::BUSY_SAMPLED;
        let b = of_answers(&named(vec![sampled.clone(), sampled]), Parallelism::Unknown).unwrap();
        assert_eq!((b.transfer_ns, b.straggler), (None, None));
        assert!(b.ranks.iter().all(|r| r.wait_ns.is_none() && r.exposed_comm_ns.is_none()));
        assert!(b.notes.iter().any(|n| n.contains("need kernel records")), "{:?}", b.notes);
    }

    #[test]
    fn sixty_four_ranks_merge_in_linear_time_and_name_the_one_straggler() {
        let v: Vec<Answer> = (0..64)
            .map(|i| if i == 37 { rank(Some("step"), 40, 1, 1, vec![]) } else { rank(Some("step"), 30, 11, 1, vec![]) })
            .collect();
        let a = of_answers(&named(v), Parallelism::DataParallel).unwrap();
        assert_eq!(a.straggler, Some(37));
        assert_eq!(a.straggler_cost_ns, 10 * MS);
        assert_eq!(a.ranks.len(), 64);
    }
}
