//! The answer a report opens with: for the main step (the heaviest range
//! the program repeats, or without ranges the session's steady state), the
//! time per step, how busy the GPU was, where the step's time went, and the
//! actions that would save most, with what each could save.

use super::advice::{self, within};
use super::findings::{session_idle, Finding};
use super::verdict::{self, Verdict};
use super::RangeAnalysis;
use crate::model::idle::{IdleSplit, COPY, DISPATCH, HOST, LAUNCH, OTHER, SYNC};
use crate::model::path::is_compile_range;
use crate::report::Report;
use serde::Serialize;

/// Actions an answer lists at most.
pub const MAX_ACTIONS: usize = 3;

/// Where part of the main step's time went.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Part {
    /// "GPU busy", "dispatch", "host work", "sync", "copies", "waiting".
    pub what: &'static str,
    /// Time per step (without ranges: in the whole steady state), ns.
    pub ns: u64,
    /// Share of the step's time without gpuscope's own, %.
    pub pct: f64,
    /// What it was.
    pub detail: String,
}

/// One thing to change, with what it could save.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Action {
    /// What to change.
    pub advice: String,
    /// The time it could save per step (without ranges: in the steady
    /// state), at most, ns, and as a share of it, %.
    pub saves_ns: u64,
    /// See `saves_ns`.
    pub saves_pct: f64,
    /// What was seen.
    pub why: String,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    /// The main step's path; `None`: the session's steady state (no range
    /// of the program's own repeats).
    pub range: Option<String>,
    /// Steps counted, after the warm-up ones left out.
    pub calls: u64,
    /// Warm-up steps left out and their time, ns (without ranges: the
    /// session's start-up and shutdown).
    pub warmup_calls: u64,
    /// See `warmup_calls`.
    pub warmup_ns: u64,
    /// Time per step: the median, ns (without ranges: the steady state's
    /// length).
    pub per_step_ns: u64,
    /// 90th percentile per step, ns.
    pub p90_ns: Option<u64>,
    /// Share of the step with a kernel running, gpuscope's own time left
    /// out, %.
    pub gpu_busy_pct: f64,
    /// gpuscope's own time per step, ns, and its share of the measured
    /// step, %.
    pub profiler_ns: Option<u64>,
    /// See `profiler_ns`.
    pub profiler_pct: Option<f64>,
    /// Where the time went, most first.
    pub parts: Vec<Part>,
    /// What bounds it.
    pub verdict: Verdict,
    /// What to change, most saved first.
    pub actions: Vec<Action>,
    /// Time in compilation ranges of frameworks' NVTX domains (XLA's),
    /// outside the steps counted, ns.
    pub compile_ns: u64,
}

/// The main step: the range of the program's own with most wall time over
/// its steady calls among those with enough calls to tell warm-up apart;
/// else the one with most wall time.
fn main_range(ranges: &[RangeAnalysis]) -> Option<&RangeAnalysis> {
    let own = || ranges.iter().filter(|g| g.library.is_none() && !g.untraced && g.idle.is_some());
    let key = |g: &&RangeAnalysis| (g.wall_ns, std::cmp::Reverse(g.path.matches('/').count()));
    own().filter(|g| g.median_ns.is_some()).max_by_key(key).or_else(|| own().max_by_key(key))
}

fn parts(idle: &IdleSplit, active: u64, per: u64, busy_detail: String, details: &dyn Fn(&str) -> String) -> Vec<Part> {
    let a = idle.to_array();
    let sum = |c: &[usize]| c.iter().map(|&i| a[i]).fold(0u64, u64::saturating_add);
    let idle_ns = sum(&[HOST, COPY, SYNC, LAUNCH, DISPATCH, OTHER]);
    let mut v = vec![Part { what: "GPU busy", ns: active.saturating_sub(idle_ns), pct: 0.0, detail: busy_detail }];
    for (what, causes) in [
        ("dispatch", &[LAUNCH, DISPATCH][..]),
        ("host work", &[HOST][..]),
        ("sync", &[SYNC][..]),
        ("copies", &[COPY][..]),
        ("waiting", &[OTHER][..]),
    ] {
        let ns = sum(causes);
        if ns > 0 {
            v.push(Part { what, ns, pct: 0.0, detail: details(what) });
        }
    }
    for p in &mut v {
        p.pct = 100.0 * p.ns as f64 / active.max(1) as f64;
        p.ns /= per.max(1);
    }
    v.sort_by_key(|p| std::cmp::Reverse(p.ns));
    v.retain(|p| p.pct >= 0.5 || p.what == "GPU busy");
    v
}

/// Time in frameworks' compilation ranges (their outermost ones), ns.
fn compile_ns(r: &Report) -> u64 {
    let outermost_compile = |g: &&crate::report::RangeSummary| {
        let first =
            g.path.frames.iter().position(|f| f.domain.as_deref().is_some_and(crate::model::path::is_internal_domain));
        first == Some(g.path.frames.len() - 1) && is_compile_range(&g.path.frames[g.path.frames.len() - 1].name)
    };
    r.ranges
        .iter()
        .filter(|g| g.library.is_some())
        .filter(outermost_compile)
        .map(|g| g.wall_ns)
        .fold(0, u64::saturating_add)
}

fn actions(findings: &[Finding], relevant: impl Fn(&Finding) -> bool, per: u64, active_per: u64) -> Vec<Action> {
    let mut v: Vec<Action> = Vec::new();
    for f in findings.iter().filter(|f| relevant(f)) {
        if v.iter().any(|a| a.advice == f.advice) {
            continue;
        }
        let saves = f.cost_ns / per.max(1);
        v.push(Action {
            advice: f.advice.clone(),
            saves_ns: saves,
            saves_pct: 100.0 * saves as f64 / active_per.max(1) as f64,
            why: f.message.clone(),
        });
    }
    v.sort_by_key(|a| std::cmp::Reverse(a.saves_ns));
    v.truncate(MAX_ACTIONS);
    v
}

/// The answer for a report analysed into `ranges` and `findings`.
pub(super) fn answer(r: &Report, ranges: &[RangeAnalysis], findings: &[Finding]) -> Option<Answer> {
    let e = advice::Evidence { r, ranges };
    let compile = compile_ns(r);
    if let Some(g) = main_range(ranges) {
        let idle = g.idle?;
        let calls = g.count.max(1);
        let profiler = g.profiler_ns.filter(|p| *p > 0);
        let busy_detail = match (&g.verdict, g.utilization_pct >= verdict::GPU_BOUND_PCT) {
            (v, true) => v.evidence.split("; ").skip(1).collect::<Vec<_>>().join("; "),
            _ => String::new(),
        };
        let details = |what: &str| -> String {
            match what {
                "dispatch" => {
                    let per_call = g.kernel_ns as f64 / (g.count + g.warmup_calls).max(1) as f64;
                    advice::launch_rate(g.launches.unwrap_or(0), g.count, g.wall_ns, per_call)
                }
                "host work" => e.host_where(g).map(|c| format!("mostly in {}", c.path)).unwrap_or_default(),
                "sync" if g.host.syncs > 0 => {
                    format!("{:.1} synchronisations per step", g.host.syncs as f64 / calls as f64)
                }
                "copies" => format!("{:.1} copies per step", g.host.copies as f64 / calls as f64),
                _ => String::new(),
            }
        };
        let relevant = |f: &Finding| match &f.range {
            Some(p) => within(&g.path, p),
            None => f.kernel.is_some(),
        };
        // Kernel findings cost over every call of the session's kernels.
        let per = calls;
        return Some(Answer {
            range: Some(g.path.clone()),
            calls: g.count,
            warmup_calls: g.warmup_calls,
            warmup_ns: g.warmup_wall_ns,
            per_step_ns: g.median_ns.unwrap_or(g.wall_ns / calls),
            p90_ns: g.p90_ns,
            gpu_busy_pct: g.utilization_pct,
            profiler_ns: profiler.map(|p| p / calls),
            profiler_pct: profiler.map(|p| 100.0 * p as f64 / g.wall_ns.max(1) as f64),
            parts: parts(&idle, g.active_ns, calls, busy_detail, &details),
            verdict: g.verdict.clone(),
            actions: actions(findings, relevant, per, g.active_ns / calls),
            compile_ns: compile,
        });
    }
    // No range of the program's own: the session's steady state as a whole.
    let (idle, wall, _) = session_idle(r)?;
    let s = r.session_steady;
    let active = wall.saturating_sub(idle.profiler_ns);
    let shares = verdict::Shares::of(wall, &idle)?;
    let v = verdict::range(Some(shares), shares.busy, None, false);
    let details = |what: &str| match what {
        "dispatch" => s.map_or(String::new(), |s| {
            format!("{:.0} launches per second", s.launches as f64 / (s.wall_ns().max(1) as f64 / 1e9))
        }),
        _ => String::new(),
    };
    Some(Answer {
        range: None,
        calls: 0,
        warmup_calls: 0,
        warmup_ns: s.map_or(0, |s| s.startup_ns + s.shutdown_ns),
        per_step_ns: wall,
        p90_ns: None,
        gpu_busy_pct: shares.busy,
        profiler_ns: (idle.profiler_ns > 0).then_some(idle.profiler_ns),
        profiler_pct: (idle.profiler_ns > 0).then(|| 100.0 * idle.profiler_ns as f64 / wall.max(1) as f64),
        parts: parts(&idle, active, 1, String::new(), &details),
        verdict: v,
        actions: actions(findings, |f| f.range.is_none(), 1, active),
        compile_ns: compile,
    })
}
