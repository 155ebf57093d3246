//! One job from its ranks' reports: per range, each rank's time per call,
//! the slowest rank, and the rank the others wait for at the collectives.
//!
//! Collectives line the ranks of a synchronous job up: every rank's step
//! takes about as long as the slowest one's, and the ranks that arrived
//! early spend the difference inside the collective's kernel, waiting. So
//! wall times alone hardly tell the straggler apart, while exposed
//! communication does: the rank that arrives last waits least.

use super::Report;
use crate::model::path::RangePath;
use crate::model::units::saturating_sum;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The reports of a job's ranks, side by side.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct JobReport {
    /// The ranks, in the order given.
    pub ranks: Vec<RankSummary>,
    /// Every range path of any rank, by total wall time over the ranks.
    pub ranges: Vec<JobRange>,
}

/// One rank's report in brief.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct RankSummary {
    /// Its label (the report's file name without `.json`).
    pub name: String,
    /// Session length, ns.
    pub session_ns: u64,
    /// GPU time of all its kernels, ns.
    pub kernel_ns: u64,
    /// Its kernel launches.
    pub launches: u64,
}

/// One range path across the ranks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct JobRange {
    /// The range and its parents.
    pub path: RangePath,
    /// Per rank (in [`JobReport::ranks`] order; `None`: the rank never
    /// entered it).
    pub per_rank: Vec<Option<RankRange>>,
    /// Index of the rank with the longest wall time per call.
    pub slowest: Option<usize>,
    /// How much longer per call the slowest rank took than the median rank
    /// (the lower one of an even count: with two ranks, the other), % (0
    /// with one rank).
    pub slowest_over_median_pct: f64,
    /// The rank the others wait for at the collectives: the one with the
    /// least exposed communication per call, named when the others wait at
    /// least `STRAGGLER_WAIT_PCT` of the median rank's wall time per
    /// call longer than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_to_arrive: Option<usize>,
    /// What it costs the others per call, averaged over them, ns: for each,
    /// its GPU-busy time beyond the last arriver's, or its exposed
    /// communication beyond the last arriver's where that is more. Ranks
    /// doing the same work differ in busy time by what their kernels spent
    /// waiting: collective kernels spinning under compute (which exposed
    /// communication counts as hidden) and the compute they slowed.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub wait_per_call_ns: u64,
}

/// The others' extra wait for a rank, as a share of a call's wall time,
/// from which that rank is named the straggler: below, run-to-run noise
/// between ranks.
pub const STRAGGLER_WAIT_PCT: f64 = 5.0;

/// One rank's figures for a range.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct RankRange {
    /// Times entered.
    pub count: u64,
    /// Wall time per call, ns.
    pub wall_per_call_ns: u64,
    /// GPU time of its kernels per call, ns.
    pub gpu_busy_per_call_ns: u64,
    /// Share of its wall time with one of its kernels running, %.
    pub gpu_utilization_pct: f64,
    /// Communication kernels' time per call with no compute under them
    /// (see [`super::Totals::exposed_comm_ns`]), ns.
    #[serde(default)]
    pub exposed_comm_per_call_ns: u64,
}

impl JobReport {
    /// The job of these `(label, report)` ranks.
    pub fn merge(ranks: &[(String, Report)]) -> JobReport {
        let summaries = ranks
            .iter()
            .map(|(name, r)| RankSummary {
                name: name.clone(),
                session_ns: r.end_ns.saturating_sub(r.start_ns),
                kernel_ns: r.total_kernel_ns(),
                launches: saturating_sum(r.kernels.iter().map(|k| k.stats.launches)),
            })
            .collect();
        let mut paths: BTreeMap<String, (RangePath, Vec<Option<RankRange>>, u64)> = BTreeMap::new();
        for (i, (_, r)) in ranks.iter().enumerate() {
            // Libraries' ranges (NCCL's own calls, a framework's) are not
            // the job's: their waits are read from the collectives' kernels.
            for g in r.ranges.iter().filter(|g| g.library.is_none()) {
                let e = paths.entry(g.path.to_string()).or_insert_with(|| (g.path.clone(), vec![None; ranks.len()], 0));
                let n = g.count.max(1);
                e.1[i] = Some(RankRange {
                    count: g.count,
                    wall_per_call_ns: g.wall_ns / n,
                    gpu_busy_per_call_ns: g.gpu_busy_ns / n,
                    gpu_utilization_pct: g.gpu_utilization_pct,
                    exposed_comm_per_call_ns: g.totals.exposed_comm_ns / n,
                });
                e.2 = e.2.saturating_add(g.wall_ns);
            }
        }
        let mut ranges: Vec<(u64, JobRange)> = paths
            .into_values()
            .map(|(path, per_rank, total)| {
                let mut walls: Vec<(u64, usize)> = per_rank
                    .iter()
                    .enumerate()
                    .filter_map(|(i, r)| r.as_ref().map(|r| (r.wall_per_call_ns, i)))
                    .collect();
                walls.sort_unstable();
                let slowest = walls.last().map(|&(_, i)| i);
                let median = walls.get(walls.len().saturating_sub(1) / 2).map_or(0, |&(w, _)| w);
                let over = match (walls.last(), walls.len()) {
                    (Some(&(w, _)), n) if n > 1 && median > 0 => 100.0 * (w as f64 - median as f64) / median as f64,
                    _ => 0.0,
                };
                let (last_to_arrive, wait_per_call_ns) = last_to_arrive(&per_rank, median);
                let range = JobRange {
                    path,
                    per_rank,
                    slowest,
                    slowest_over_median_pct: over,
                    last_to_arrive,
                    wait_per_call_ns,
                };
                (total, range)
            })
            .collect();
        ranges.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.path.to_string().cmp(&b.1.path.to_string())));
        JobReport { ranks: summaries, ranges: ranges.into_iter().map(|(_, r)| r).collect() }
    }
}

/// The rank the others wait for (see [`JobRange::last_to_arrive`]) and the
/// others' mean extra wait per call; `median_wall`: the median rank's wall
/// time per call, ns.
fn last_to_arrive(per_rank: &[Option<RankRange>], median_wall: u64) -> (Option<usize>, u64) {
    let ranks: Vec<(usize, &RankRange)> =
        per_rank.iter().enumerate().filter_map(|(i, r)| Some((i, r.as_ref()?))).collect();
    let Some(&(least, own)) = ranks.iter().min_by_key(|&&(i, r)| (r.exposed_comm_per_call_ns, i)) else {
        return (None, 0);
    };
    if ranks.len() < 2 || ranks.iter().all(|&(_, r)| r.exposed_comm_per_call_ns == 0) {
        return (None, 0);
    }
    let waits = ranks.iter().filter(|&&(i, _)| i != least).map(|&(_, r)| {
        let exposed = r.exposed_comm_per_call_ns - own.exposed_comm_per_call_ns;
        exposed.max(r.gpu_busy_per_call_ns.saturating_sub(own.gpu_busy_per_call_ns))
    });
    let wait = saturating_sum(waits) / (ranks.len() as u64 - 1);
    if (wait as f64) < STRAGGLER_WAIT_PCT / 100.0 * median_wall as f64 {
        return (None, 0);
    }
    (Some(least), wait)
}
