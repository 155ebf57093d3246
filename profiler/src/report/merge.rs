//! One job from its ranks' reports: per range, each rank's time per call,
//! and the slowest rank (the straggler the others wait for at the next
//! collective).

use super::Report;
use crate::model::path::RangePath;
use crate::model::units::saturating_sum;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The reports of a job's ranks, side by side.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobReport {
    /// The ranks, in the order given.
    pub ranks: Vec<RankSummary>,
    /// Every range path of any rank, by total wall time over the ranks.
    pub ranges: Vec<JobRange>,
}

/// One rank's report in brief.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
}

/// One rank's figures for a range.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RankRange {
    /// Times entered.
    pub count: u64,
    /// Wall time per call, ns.
    pub wall_per_call_ns: u64,
    /// GPU time of its kernels per call, ns.
    pub gpu_busy_per_call_ns: u64,
    /// Share of its wall time with one of its kernels running, %.
    pub gpu_utilization_pct: f64,
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
            for g in &r.ranges {
                let e = paths.entry(g.path.to_string()).or_insert_with(|| (g.path.clone(), vec![None; ranks.len()], 0));
                let n = g.count.max(1);
                e.1[i] = Some(RankRange {
                    count: g.count,
                    wall_per_call_ns: g.wall_ns / n,
                    gpu_busy_per_call_ns: g.gpu_busy_ns / n,
                    gpu_utilization_pct: g.gpu_utilization_pct,
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
                (total, JobRange { path, per_rank, slowest, slowest_over_median_pct: over })
            })
            .collect();
        ranges.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.path.to_string().cmp(&b.1.path.to_string())));
        JobReport { ranks: summaries, ranges: ranges.into_iter().map(|(_, r)| r).collect() }
    }
}
