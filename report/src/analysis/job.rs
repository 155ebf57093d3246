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
//!   when the others wait at least 5% of a step for it.
//!
//! What sets the job's pace is the straggler's largest part: its compute,
//! its host work (dispatch, data, syncs, copies), or the transfer.

use super::answer::{Answer, BUSY_TRACED};
use super::peaks::LinkPeak;
use super::verdict::Bound;
use crate::model::comm::{collective, Collective};
use crate::report::Report;
use serde::Serialize;

/// The others' wait for a rank, as a share of the step, from which that
/// rank is named the straggler: below, noise between ranks.
pub(crate) const STRAGGLER_WAIT_PCT: f64 = 5.0;

/// A share of the step below which a part of it is not worth an action.
const MIN_ACTION_PCT: f64 = 5.0;

/// The job's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
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
    /// Waits per collective call from aligned kernel starts, where every
    /// rank kept its kernel records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aligned: Option<AlignedWaits>,
}

/// One rank's step.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
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
    /// gpuscope's own time on its host, ns per step (`None`: not
    /// measured, or none), already out of `host_ns`.
    pub profiler_ns: Option<u64>,
    /// Its own verdict.
    pub verdict: String,
}

/// How the job spreads its work, as its collectives tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
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
#[non_exhaustive]
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
    // Only with every rank's answer, so that indices agree, and every
    // rank's kernel records throughout: trace windows hold other calls on
    // each rank, and matching them by their ends mismatches the calls (two
    // ranks of one host read 115 ms apart, and each rank waited by turns).
    let traced_throughout = reports
        .iter()
        .all(|r| r.sampling.as_ref().and_then(|s| s.trace_windows.as_ref()).map_or(true, |w| w.untraced_ns == 0));
    let aligned = if answers.len() == ranks.len() && traced_throughout { aligned_waits(&reports) } else { None };
    let mut a = of_answers(&answers, parallelism(&reports))?;
    if !traced_throughout && a.parallelism != Parallelism::Unknown {
        a.notes.push(
            "the collectives call by call (each rank's arrival, bus bandwidth) need every rank's kernel records \
             throughout (trace mode): trace windows keep other calls on each rank"
                .to_string(),
        );
    }
    if let Some(w) = &aligned {
        confirm_straggler(&mut a, w);
        a.notes.extend(slow_link_note(w));
    }
    a.aligned = aligned;
    Some(a)
}

/// The rank that waits least is the straggler only where the collectives
/// agree: of the margins by which the last rank to arrive at each call
/// was late (over the next latest), two thirds or more are its. Ranks that take turns
/// arriving last (their hosts
/// issue the collectives unevenly) pace the job together: no straggler,
/// and a note that says so.
fn confirm_straggler(a: &mut JobAnswer, w: &AlignedWaits) {
    let Some(i) = a.straggler else { return };
    let total = w.blame_ns.iter().fold(0u64, |a, &b| a.saturating_add(b));
    let share = 100.0 * w.blame_ns.get(i).copied().unwrap_or(0) as f64 / total.max(1) as f64;
    if total == 0 || share >= STRAGGLER_BLAME_PCT {
        return;
    }
    a.notes.push(format!(
        "no one rank keeps the others waiting: the last to arrive at the collectives changes from call to call \
         ({} holds {share:.0}% of the margins by which the last to arrive was late); the ranks' hosts issue \
         them unevenly",
        a.ranks[i].name
    ));
    a.actions.retain(|x| !x.advice.starts_with(BALANCE_ADVICE));
    (a.straggler, a.straggler_cost_ns) = (None, 0);
}

/// Share of the margins by which the last rank to arrive at a collective
/// was late (over the next latest) that must be one rank's for it to be
/// named the straggler, %: two thirds. FSDP's two ranks, balanced by
/// construction, split them 61/39 in one run (and which rank held more
/// changed from run to run); a rank given twice the work arrived last at
/// 88% of the calls.
const STRAGGLER_BLAME_PCT: f64 = 200.0 / 3.0;

/// How the straggler's action begins.
const BALANCE_ADVICE: &str = "Balance the work per rank";

/// The median of `value` over the ranks other than `i` that have it.
fn others_median(ranks: &[RankStep], i: usize, value: impl Fn(&RankStep) -> Option<u64>) -> Option<u64> {
    let mut v: Vec<u64> = ranks.iter().enumerate().filter(|&(j, _)| j != i).filter_map(|(_, r)| value(r)).collect();
    v.sort_unstable();
    v.get(v.len().checked_sub(1)? / 2).copied()
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
    if step.is_none() && !answers.iter().all(|(_, a)| a.found_steps.is_some()) {
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
            "exposed communication and waits need kernel records over every rank's steps (trace mode, or trace \
             windows that hold them): not known here"
                .to_string(),
        );
    }
    // Without a step the ranks share, each rank's figures are per second
    // of its own steady state (or main range), so that they compare.
    let found = answers.iter().all(|(_, a)| a.found_steps.is_some());
    let per_second = step.is_none() && !found;
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
            // "GPU idle": its cause not traced (PM samples), the host's
            // share as far as the job can tell.
            host_ns: scale(a, part(a, &["dispatch", "host work", "sync", "copies", "waiting", "GPU idle"])),
            profiler_ns: a.profiler_ns.map(|p| scale(a, p)),
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
    // The others' median wait: one rank whose own host slowed (it then
    // waits less) does not pull the cost down.
    let others_wait = |i: usize| others_median(&ranks, i, |r| r.wait_ns).unwrap_or(0);
    let pct = |ns: u64| 100.0 * ns as f64 / step_ns.max(1) as f64;
    let per = if per_second { "a second" } else { "per step" };
    let mut straggler = least.filter(|&i| ranks.len() > 1 && pct(others_wait(i)) >= STRAGGLER_WAIT_PCT);
    let mut straggler_cost_ns = straggler.map_or(0, others_wait);
    // gpuscope's own cost on the last rank's host beyond the others' is a
    // lateness the job does not have without gpuscope: it comes off the
    // others' wait, and what is left must still name the rank.
    if let Some((i, own)) = straggler.and_then(|i| Some((i, ranks[i].profiler_ns?))) {
        let extra = others_median(&ranks, i, |r| r.profiler_ns).map_or(0, |m| own.saturating_sub(m));
        if extra > 0 {
            let residual = straggler_cost_ns.saturating_sub(extra);
            let named = pct(residual) >= STRAGGLER_WAIT_PCT;
            notes.push(format!(
                "{} arrives last at the collectives (the others wait {} {per}), of which gpuscope's own cost on its \
                 host makes {} (beyond the others'){}",
                ranks[i].name,
                fmt(straggler_cost_ns),
                fmt(extra),
                if named { ": the rest is the program's" } else { ": no rank is named a straggler" },
            ));
            (straggler, straggler_cost_ns) = if named { (Some(i), residual) } else { (None, 0) };
        }
    }
    // Whose parts set the pace: the straggler's, else the slowest rank's.
    let pacer = straggler.or_else(|| (0..ranks.len()).max_by_key(|&i| ranks[i].step_ns)).unwrap_or(0);
    let p = &ranks[pacer];
    let transfer = transfer_ns.unwrap_or(0);
    let who = if ranks.len() > 1 { format!("{}'s ", p.name) } else { String::new() };
    // The pacing rank's own verdict names communication and the transfer
    // is a large share of the step (a rank's verdict names its
    // communication kernels also where compute hides most of them).
    let communication = (p.verdict == Bound::Communication.as_str() || p.verdict == Bound::CommKernel.as_str())
        && pct(transfer) >= super::verdict::COMM_BOUND_PCT;
    let pace = if transfer > 0 && (communication || (transfer > p.compute_ns && transfer > p.host_ns)) {
        format!(
            "exposed communication: {} {per} ({:.0}%) with no compute under it on any rank",
            fmt(transfer),
            pct(transfer)
        )
    } else if p.host_ns > p.compute_ns {
        format!(
            "{who}host: the GPU idle {} {per} ({:.0}%) waiting for it ({})",
            fmt(p.host_ns),
            pct(p.host_ns),
            p.verdict
        )
    } else {
        format!("{who}compute: {} {per} ({:.0}%) of GPU work ({})", fmt(p.compute_ns), pct(p.compute_ns), p.verdict)
    };
    let mut actions = Vec::new();
    if let Some(i) = straggler {
        actions.push(JobAction {
            advice: format!(
                "{BALANCE_ADVICE}: the others wait {} {per} for {} (give each rank as many tokens or \
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
    // The pacing rank's own actions speed up the job by what they save it
    // (per second of its steady state where the ranks share no step).
    let own = &answers[pacer].1;
    for a in &own.actions {
        let saves_ns = scale(own, a.saves_ns);
        if pct(saves_ns) >= MIN_ACTION_PCT && !actions.iter().any(|x| x.advice == a.advice) {
            actions.push(JobAction { advice: a.advice.clone(), saves_ns, saves_pct: pct(saves_ns) });
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
        aligned: None,
    })
}

/// Waits at each collective from the ranks' kernel records (kept with
/// `--keep-trace`), on a common timebase.
///
/// NCCL runs a communicator's collectives in the same order on every rank,
/// so the k-th collective of a kind is the same call everywhere. A
/// collective completes on all ranks at nearly the same moment, so each
/// rank's clock offset is the median difference of its collectives' ends
/// from the first rank's: on one host CUPTI's timestamps share a clock and
/// the offsets come out near 0; across hosts this aligns clocks that
/// differ. Then a rank's wait at a call is the last rank's (aligned) start
/// minus its own.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AlignedWaits {
    /// Collective calls matched on every rank.
    pub calls: u64,
    /// Per rank: its clock's offset from the first rank's, ns (signed).
    pub offset_ns: Vec<i64>,
    /// Per rank: time waiting for the last rank, summed over the calls, ns.
    pub wait_ns: Vec<u64>,
    /// Per rank: calls at which it arrived last.
    pub last: Vec<u64>,
    /// Per rank: how much later it arrived than the next latest rank, at
    /// the calls it arrived last, summed, ns: the others' wait for it alone.
    pub blame_ns: Vec<u64>,
    /// The matched calls' span on the first rank, ns (for rates).
    pub span_ns: u64,
    /// Per kind of collective and class of message size (an eighth of a
    /// power of two; the calls that gave theirs), the bandwidth of its transfers, most transfer time
    /// first (at most eight).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bandwidth: Vec<CollectiveBandwidth>,
    /// The peak the bus bandwidth compares with, where every rank ran on
    /// one host and its report gives its GPU's links: the slowest rank's
    /// link and its bandwidth per direction, GB/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkPeak>,
}

/// The bandwidth a kind of collective reached over the job's calls of one
/// message size.
/// A call's transfer is timed on the rank that arrived last: the others'
/// kernels began earlier and waited for it, its own ran the transfer alone
/// (with the others already inside).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CollectiveBandwidth {
    /// The collective (`AllReduce`, ...).
    pub collective: &'static str,
    /// Its calls of that size.
    pub calls: u64,
    /// The message size (NCCL's: one rank's part for `AllGather` and
    /// `ReduceScatter`), bytes, averaged over the calls.
    pub message_bytes: u64,
    /// The transfers' time, summed over the calls, ns.
    pub transfer_ns: u64,
    /// Algorithm bandwidth (nccl-tests' `algbw`), GB/s.
    pub algorithm_gb_per_s: f64,
    /// Bus bandwidth (nccl-tests' `busbw`: what each rank's links carried,
    /// comparable to their peak), GB/s.
    pub bus_gb_per_s: f64,
    /// The bus bandwidth's share of the link's peak ([`AlignedWaits::link`]), %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_pct: Option<f64>,
}

/// [`AlignedWaits`] of these ranks' kept kernel records, `None` unless
/// every rank kept collectives (from its steady state on, where it has
/// one).
pub fn aligned_waits(reports: &[&Report]) -> Option<AlignedWaits> {
    if reports.len() < 2 {
        return None;
    }
    // Per rank, per kind of collective: (start, end) in time order, and
    // each call's message size where its NCCL call gave it.
    type Calls = Vec<(u64, u64)>;
    type SizedCalls = Vec<(u64, u64, Option<u64>)>;
    let mut message: Vec<std::collections::BTreeMap<&'static str, Vec<Option<u64>>>> = Vec::new();
    let per_rank: Vec<std::collections::BTreeMap<&'static str, Calls>> = reports
        .iter()
        .map(|r| {
            let from = r.session_steady.as_ref().map_or(0, |s| s.start_ns);
            let mut m: std::collections::BTreeMap<&'static str, SizedCalls> = Default::default();
            for k in r.trace.iter().flat_map(|t| &t.kernels) {
                if let Some(op) = collective(&k.name) {
                    if k.start_ns >= from && k.end_ns >= k.start_ns {
                        m.entry(op.as_str()).or_default().push((k.start_ns, k.end_ns, k.message_bytes));
                    }
                }
            }
            for v in m.values_mut() {
                v.sort_unstable();
            }
            message.push(m.iter().map(|(k, v)| (*k, v.iter().map(|c| c.2).collect())).collect());
            m.into_iter().map(|(k, v)| (k, v.into_iter().map(|c| (c.0, c.1)).collect())).collect()
        })
        .collect();
    let kinds: Vec<&'static str> =
        per_rank[0].keys().copied().filter(|k| per_rank.iter().all(|m| m.contains_key(k))).collect();
    // Per rank and kind, the shift of its call numbers against rank 0's
    // (its kept records may begin calls earlier or later).
    let shifts: Vec<Vec<i64>> =
        per_rank.iter().map(|m| kinds.iter().map(|k| call_shift(&per_rank[0][k], &m[k])).collect()).collect();
    // Rank 0's calls that every rank has, per kind.
    let matched = |ki: usize, k: &str| -> Vec<usize> {
        (0..per_rank[0][k].len())
            .filter(|&i| {
                per_rank.iter().zip(&shifts).all(|(m, sh)| {
                    let j = i as i64 + sh[ki];
                    j >= 0 && (j as usize) < m[k].len()
                })
            })
            .collect()
    };
    let calls_of: Vec<Vec<usize>> = kinds.iter().enumerate().map(|(ki, k)| matched(ki, k)).collect();
    let calls: usize = calls_of.iter().map(Vec::len).sum();
    if calls == 0 {
        return None;
    }
    let at = |r: usize, ki: usize, i: usize| per_rank[r][kinds[ki]][(i as i64 + shifts[r][ki]) as usize];
    // Offsets: the median difference of ends from rank 0's.
    let offset_ns: Vec<i64> = (0..per_rank.len())
        .map(|r| {
            let mut d: Vec<i64> = calls_of
                .iter()
                .enumerate()
                .flat_map(|(ki, is)| is.iter().map(move |&i| (ki, i)))
                .map(|(ki, i)| at(r, ki, i).1 as i64 - at(0, ki, i).1 as i64)
                .collect();
            d.sort_unstable();
            d[d.len() / 2]
        })
        .collect();
    let ranks = reports.len();
    let (mut wait_ns, mut last, mut blame_ns) = (vec![0u64; ranks], vec![0u64; ranks], vec![0u64; ranks]);
    let (mut first, mut end) = (u64::MAX, 0u64);
    let mut bandwidth = Vec::new();
    for (ki, is) in calls_of.iter().enumerate() {
        // Per class of message size: calls, bytes, transfer ns.
        let mut sized: std::collections::BTreeMap<u32, (u64, u64, u64)> = Default::default();
        for &i in is {
            let starts: Vec<i64> = (0..ranks).map(|r| at(r, ki, i).0 as i64 - offset_ns[r]).collect();
            let (who, &latest) = starts.iter().enumerate().max_by_key(|&(_, s)| *s).expect("two ranks or more");
            last[who] += 1;
            let next = starts.iter().enumerate().filter(|&(r, _)| r != who).map(|(_, &s)| s).max().unwrap_or(latest);
            blame_ns[who] = blame_ns[who].saturating_add((latest - next) as u64);
            for (r, s) in starts.iter().enumerate() {
                wait_ns[r] = wait_ns[r].saturating_add((latest - s) as u64);
            }
            let (s0, e0) = at(0, ki, i);
            first = first.min(s0);
            end = end.max(e0);
            let j = (i as i64 + shifts[who][ki]) as usize;
            if let Some(bytes) = message[who].get(kinds[ki]).and_then(|v| v.get(j).copied().flatten()) {
                let (s, e) = at(who, ki, i);
                let c = sized.entry(size_class(bytes)).or_default();
                *c = (c.0 + 1, c.1.saturating_add(bytes), c.2.saturating_add(e - s));
            }
        }
        bandwidth.extend(sized.into_values().filter_map(|c| collective_bandwidth(kinds[ki], c, ranks)));
    }
    // The sizes that took the most transfer time.
    bandwidth.sort_by_key(|b| std::cmp::Reverse(b.transfer_ns));
    bandwidth.truncate(MAX_BANDWIDTH_ROWS);
    let link = link_of(reports);
    if let Some(peak) = link {
        for b in &mut bandwidth {
            // Over the peak, the peak is wrong (links gpuscope misread):
            // no share rather than a false one.
            let pct = 100.0 * b.bus_gb_per_s / peak.gb_per_s;
            b.link_pct = (pct <= MAX_LINK_PCT).then_some(pct);
        }
    }
    Some(AlignedWaits {
        calls: calls as u64,
        offset_ns,
        wait_ns,
        last,
        blame_ns,
        span_ns: end.saturating_sub(first),
        bandwidth,
        link,
    })
}

/// The link the ranks' collectives run over and its peak per direction:
/// the slowest of the ranks' GPUs' ([`super::peaks::link_peak`]), where
/// every report names the same host (across hosts the network sets the
/// peak, which gpuscope does not read) and gives its GPU's links.
fn link_of(reports: &[&Report]) -> Option<LinkPeak> {
    let host = reports.first()?.host.as_deref()?;
    if reports.iter().any(|r| r.host.as_deref() != Some(host)) {
        return None;
    }
    let mut slowest: Option<LinkPeak> = None;
    for r in reports {
        // A rank with no device, or one without link figures: unknown.
        if r.devices.is_empty() {
            return None;
        }
        for d in &r.devices {
            let p = super::peaks::link_peak(d)?;
            if !slowest.is_some_and(|s| s.gb_per_s <= p.gb_per_s) {
                slowest = Some(p);
            }
        }
    }
    slowest
}

/// A bus bandwidth more than this share of the link's peak says the peak
/// is wrong, %.
const MAX_LINK_PCT: f64 = 105.0;

/// Messages from this size are bound by the links' bandwidth, not by
/// latency: a 1 GiB all-reduce reached 70-80% of NVLink's peak on 2 and 4
/// H100s, 62.5 MiB FSDP gathers 51-56%.
const LINK_CHECK_BYTES: u64 = 128 << 20;

/// Share of the link's peak under which such messages run far below it, %.
const SLOW_LINK_PCT: f64 = 50.0;

/// A note for collectives of large messages that run far below their
/// NVLinks' peak (over PCIe, NCCL may rightly go through host memory:
/// no note).
fn slow_link_note(w: &AlignedWaits) -> Option<String> {
    let LinkPeak { link, gb_per_s: peak, .. } = w.link.filter(|l| l.link == "NVLink")?;
    let b = w
        .bandwidth
        .iter()
        .filter(|b| b.message_bytes >= LINK_CHECK_BYTES && b.link_pct.is_some_and(|p| p < SLOW_LINK_PCT))
        .max_by_key(|b| b.transfer_ns)?;
    Some(format!(
        "{} of {}: bus bandwidth {:.0} GB/s, {:.0}% of {link}'s {peak:.0} GB/s, where messages this large reach \
         70-80%: check the transport NCCL chose (NCCL_DEBUG=INFO: P2P over {link}, not SHM or the network; \
         NCCL_P2P_DISABLE unset) and the topology (nvidia-smi topo -m)",
        b.collective,
        crate::model::units::fmt_bytes(b.message_bytes),
        b.bus_gb_per_s,
        b.link_pct.unwrap_or(0.0),
    ))
}

/// Collective kinds and message sizes whose bandwidth is kept, at most.
const MAX_BANDWIDTH_ROWS: usize = 8;

/// Message sizes share a class an eighth of a power of two wide (about
/// 9%: DDP's buckets, a few parameters' bytes apart, fall together; two
/// sizes astride a class's edge do not).
fn size_class(bytes: u64) -> u32 {
    ((bytes.max(1) as f64).log2() * 8.0).round() as u32
}

/// The bandwidth of `kind`'s calls of one size class (how many, their
/// message bytes and transfer time summed) over `ranks` ranks.
fn collective_bandwidth(
    kind: &'static str,
    (calls, bytes, ns): (u64, u64, u64),
    ranks: usize,
) -> Option<CollectiveBandwidth> {
    use Collective::*;
    let op = [AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, SendRecv, Send, Recv]
        .into_iter()
        .find(|c| c.as_str() == kind)?;
    if calls == 0 || ns == 0 {
        return None;
    }
    let algorithm = op.algorithm_bytes(bytes, ranks) as f64 / ns as f64;
    Some(CollectiveBandwidth {
        collective: kind,
        calls,
        message_bytes: bytes / calls,
        transfer_ns: ns,
        algorithm_gb_per_s: algorithm,
        bus_gb_per_s: algorithm * op.bus_factor(ranks)?,
        link_pct: None,
    })
}

/// Call numbers tried apart, each way, when matching a rank's collectives
/// to rank 0's.
const MAX_CALL_SHIFT: i64 = 64;

/// Calls of a kind compared when finding a rank's shift, at most.
const SHIFT_SAMPLE: usize = 256;

/// The shift `s` of `other`'s calls against `base`'s (`base[i]` is
/// `other[i + s]`) under which their ends differ most nearly by a constant
/// (the clocks' offset): the smallest mean deviation of the differences
/// from their median, over at least half the calls. A collective ends at nearly the same
/// moment on every rank; calls matched wrongly differ by whole steps.
fn call_shift(base: &[(u64, u64)], other: &[(u64, u64)]) -> i64 {
    let mut best = (u64::MAX, 0i64);
    let need = base.len().min(other.len()).div_ceil(2).max(1);
    // A few hundred calls tell the shift: merging stays linear in ranks.
    let every = base.len().div_ceil(SHIFT_SAMPLE).max(1);
    let need = need.div_ceil(every);
    // Shifts near none, and near the one that pairs rank 0's middle call
    // with the other's call ending closest to it (clocks of one host agree:
    // records kept from a different moment may be many calls apart).
    let near = if base.is_empty() || other.is_empty() {
        0
    } else {
        let m = base.len() / 2;
        let j = other.partition_point(|o| o.1 < base[m].1).min(other.len() - 1);
        let j = if j > 0 && base[m].1.abs_diff(other[j - 1].1) < base[m].1.abs_diff(other[j].1) { j - 1 } else { j };
        j as i64 - m as i64
    };
    let mut tried: Vec<i64> =
        (-MAX_CALL_SHIFT..=MAX_CALL_SHIFT).chain(near - MAX_CALL_SHIFT..=near + MAX_CALL_SHIFT).collect();
    tried.sort_unstable();
    tried.dedup();
    for s in tried {
        let mut d: Vec<i64> = (0..base.len())
            .step_by(every)
            .filter_map(|i| {
                let j = usize::try_from(i as i64 + s).ok()?;
                other.get(j).map(|o| o.1 as i64 - base[i].1 as i64)
            })
            .collect();
        if d.len() < need {
            continue;
        }
        d.sort_unstable();
        let med = d[d.len() / 2];
        // The mean deviation: a wrong shift may pair half the calls right.
        let mad = d.iter().map(|x| x.abs_diff(med)).fold(0u64, u64::saturating_add) / d.len() as u64;
        if mad < best.0 || (mad == best.0 && s.abs() < best.1.abs()) {
            best = (mad, s);
        }
    }
    best.1
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
            verdict: Verdict { bound: crate::analysis::Bound::Gpu, evidence: String::new() },
            actions,
            compile_ns: 0,
            others: Vec::new(),
            found_steps: None,
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
    fn a_rank_late_by_gpuscope_s_own_cost_is_not_named_a_straggler() {
        // Balanced ranks; gpuscope's callbacks cost rank 1's host 9 ms a
        // step more than rank 0's, so rank 0 waits 8 ms at the collectives.
        let with_cost = |mut a: Answer, ms: u64| {
            a.profiler_ns = Some(ms * MS);
            a
        };
        let ranks = |own1| {
            named(vec![
                with_cost(rank(Some("step"), 30, 10, 2, vec![]), 3),
                with_cost(rank(Some("step"), 30, 2, 10, vec![]), own1),
            ])
        };
        let a = of_answers(&ranks(12), Parallelism::Sharded).unwrap();
        assert_eq!((a.straggler, a.straggler_cost_ns), (None, 0));
        assert_eq!(a.ranks[1].profiler_ns, Some(12 * MS));
        assert!(
            a.notes.iter().any(|n| n.contains("rank1 arrives last")
                && n.contains("makes 9.00 ms")
                && n.contains("no rank is named")),
            "{:?}",
            a.notes
        );
        assert!(!a.actions.iter().any(|x| x.advice.starts_with(BALANCE_ADVICE)), "{:?}", a.actions);
        // Its own cost as the others': the wait is the program's.
        let b = of_answers(&ranks(3), Parallelism::Sharded).unwrap();
        assert_eq!((b.straggler, b.straggler_cost_ns), (Some(1), 8 * MS));
        // 2 ms of its 8 ms lateness is gpuscope's: the rest still names it.
        let c = of_answers(&ranks(5), Parallelism::Sharded).unwrap();
        assert_eq!((c.straggler, c.straggler_cost_ns), (Some(1), 6 * MS));
        assert!(c.notes.iter().any(|n| n.contains("the rest is the program's")), "{:?}", c.notes);
        // The others' cost not measured: nothing is taken off.
        let mut d = ranks(12);
        d[0].1.profiler_ns = None;
        let d = of_answers(&d, Parallelism::Sharded).unwrap();
        assert_eq!((d.straggler, d.straggler_cost_ns), (Some(1), 8 * MS));
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
    fn a_rank_whose_verdict_names_its_communication_kernels_paces_by_them_only_when_they_are_exposed() {
        // Long all-reduces under compute: each rank's verdict names them,
        // but 2 ms of 100 are exposed.
        let mut a = rank(Some("step"), 90, 2, 8, vec![]);
        a.verdict.bound = Bound::CommKernel;
        let j = of_answers(&named(vec![a.clone(), a.clone()]), Parallelism::DataParallel).unwrap();
        assert!(j.pace.contains("compute"), "{}", j.pace);
        // 30 of 100 exposed: the transfer sets the pace, though compute is larger.
        let mut b = rank(Some("step"), 60, 30, 10, vec![]);
        b.verdict.bound = Bound::CommKernel;
        let j = of_answers(&named(vec![b.clone(), b]), Parallelism::DataParallel).unwrap();
        assert!(j.pace.starts_with("exposed communication"), "{}", j.pace);
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
    fn large_messages_far_below_the_link_s_peak_get_a_note_and_only_on_one_host() {
        use crate::model::device::DeviceInfo;
        use crate::model::occupancy::SmLimits;
        let report = |host: &str, nvlinks| {
            let mut r = Report::build(crate::aggregated::Aggregate::empty(), 0, 1);
            let mut d = DeviceInfo::new(0, "NVIDIA H200", 132, SmLimits::SM_90);
            (d.nvlinks, d.pcie) = (Some(nvlinks), Some((5, 16)));
            r.devices = vec![d];
            r.host = Some(host.into());
            r
        };
        let (a, b) = (report("node1", 18), report("node1", 18));
        assert_eq!(link_of(&[&a, &b]), Some(LinkPeak { link: "NVLink", gb_per_s: 450.0 }));
        // One rank over PCIe only: the slowest link sets the peak.
        let c = report("node1", 0);
        assert_eq!(link_of(&[&a, &c]).map(|l| l.link), Some("PCIe"));
        // Across hosts the network sets it: not known.
        assert_eq!(link_of(&[&a, &report("node2", 18)]), None);
        let mut old = report("node1", 18);
        old.devices[0].nvlinks = None;
        old.devices[0].pcie = None;
        assert_eq!(link_of(&[&a, &old]), None, "a report without link figures");
        let row = |bytes: u64, bus: f64| CollectiveBandwidth {
            collective: "AllReduce",
            calls: 20,
            message_bytes: bytes,
            transfer_ns: 1_000,
            algorithm_gb_per_s: bus,
            bus_gb_per_s: bus,
            link_pct: Some(100.0 * bus / 450.0),
        };
        let mut w = AlignedWaits {
            calls: 20,
            offset_ns: vec![0, 0],
            wait_ns: vec![0, 0],
            last: vec![10, 10],
            blame_ns: vec![0, 0],
            span_ns: 1,
            bandwidth: vec![row(1 << 30, 120.0), row(12 << 20, 90.0)],
            link: Some(LinkPeak { link: "NVLink", gb_per_s: 450.0 }),
        };
        let note = slow_link_note(&w).expect("1 GiB at 27% of the peak");
        assert!(note.starts_with("AllReduce of 1.00 GiB: bus bandwidth 120 GB/s, 27% of NVLink's 450 GB/s"), "{note}");
        assert!(note.contains("NCCL_DEBUG=INFO"), "{note}");
        // Healthy large messages; small ones are latency-bound, not checked.
        w.bandwidth = vec![row(1 << 30, 330.0), row(12 << 20, 90.0)];
        assert_eq!(slow_link_note(&w), None);
        w.bandwidth = vec![row(1 << 30, 20.0)];
        w.link = Some(LinkPeak { link: "PCIe", gb_per_s: 63.0 });
        assert_eq!(slow_link_note(&w), None, "over PCIe, host memory may be NCCL's right choice");
        w.link = None;
        assert_eq!(slow_link_note(&w), None, "no peak known");
    }

    #[test]
    fn a_straggler_is_named_only_where_the_others_wait_for_it_at_the_collectives() {
        // Rank 1 waits least: the exposed-communication rule names it.
        let v = vec![rank(Some("step"), 30, 11, 1, vec![]), rank(Some("step"), 30, 1, 1, vec![])];
        let named_one = of_answers(&named(v), Parallelism::Sharded).unwrap();
        assert_eq!(named_one.straggler, Some(1));
        let waits = |blame_ns: Vec<u64>| AlignedWaits {
            calls: 100,
            offset_ns: vec![0, 0],
            wait_ns: vec![0, 0],
            last: vec![50, 50],
            blame_ns,
            span_ns: 1,
            bandwidth: Vec::new(),
            link: None,
        };
        // The others waited for it at most calls: it stays.
        let mut a = named_one.clone();
        confirm_straggler(&mut a, &waits(vec![10 * MS, 90 * MS]));
        assert_eq!(a.straggler, Some(1));
        // The ranks took turns keeping each other waiting: no straggler,
        // also at FSDP's 61/39 (an H200 run whose ranks are balanced by
        // construction).
        let mut b = named_one.clone();
        confirm_straggler(&mut b, &waits(vec![1676 * MS, 2597 * MS]));
        assert_eq!(b.straggler, None);
        let mut a = named_one;
        confirm_straggler(&mut a, &waits(vec![60 * MS, 40 * MS]));
        assert_eq!((a.straggler, a.straggler_cost_ns), (None, 0));
        assert!(a.actions.iter().all(|x| !x.advice.starts_with(BALANCE_ADVICE)));
        assert!(a.notes.iter().any(|n| n.contains("no one rank keeps the others waiting")), "{:?}", a.notes);
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
