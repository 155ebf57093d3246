//! The answer a report opens with: for the main step (the heaviest range
//! the program repeats, or without ranges the session's steady state), the
//! time per step, how busy the GPU was, where the step's time went, and the
//! actions that would save most, with what each could save.

mod sampled;

pub(crate) use sampled::{kernels_busy, wall_verdict};

use super::advice::{self, within};
use super::windowed::WindowedIdle;
use super::devices::DeviceUse;
use super::findings::{session_idle, Finding};
use super::rules::{idle_advice, runtime_syncs, session_advice, FindingKind, IDLE};
use super::verdict::{self, Bound, Verdict};
use super::KernelAnalysis;
use super::RangeAnalysis;
use crate::model::idle::{IdleSplit, COPY, DISPATCH, HOST, LAUNCH, OTHER, SYNC};
use crate::model::path::is_compile_range;
use crate::report::Report;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use serde::Serialize;

/// GPU busy from kernel records: the union of kernels' time.
pub const BUSY_TRACED: &str = "kernel records";
/// GPU busy from PM samples: the graphics engine's active cycles over its
/// elapsed ones (DCGM's `GR_ENGINE_ACTIVE`), times the kernels' share of
/// them inside trace windows where the steady state has some
/// ([`WindowsBusy`](crate::report::WindowsBusy)).
pub const BUSY_SAMPLED: &str = "PM samples of the graphics engine's activity";
/// GPU busy was not measured.
pub const BUSY_UNKNOWN: &str = "not measured";

/// Actions an answer lists at most.
pub const MAX_ACTIONS: usize = 3;

/// Where part of the main step's time went.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Part {
    /// "GPU busy", "communication" (communication kernels with no compute
    /// under them: part of the GPU's busy time, told apart), "dispatch",
    /// "host work", "sync", "copies", "waiting"; "GPU idle" where the idle
    /// time's cause was not traced (PM samples without kernel records, or
    /// trace windows that classified too little of it).
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
#[non_exhaustive]
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
#[non_exhaustive]
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
    /// Where `gpu_busy_pct` comes from: [`BUSY_TRACED`], [`BUSY_SAMPLED`]
    /// or [`BUSY_UNKNOWN`] (then it is not a figure: shown as "-").
    pub busy_source: &'static str,
    /// `per_step_ns` is the mean of the steps, not their median (steps
    /// known only by their count and total time: no kernel records).
    pub per_step_mean: bool,
    /// What the answer rests on, when it is not the kernel records.
    pub notes: Vec<String>,
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
    /// summed over the threads that compiled, ns.
    pub compile_ns: u64,
    /// Other ranges the program repeats outside the main one, with a tenth
    /// of its time or more.
    pub others: Vec<Other>,
    /// Without a range of the program's own: the steps found from its
    /// kernel stream, which the figures are per step of.
    pub found_steps: Option<crate::report::FoundSteps>,
    /// How to put an NVTX range around the step in the program's framework
    /// (PyTorch, JAX, or CUDA's own API), for a program without ranges.
    pub nvtx_example: &'static str,
}

/// Whether `r` is an always-on session's: trace windows of 0, so kernel
/// records only in windows asked for, if any.
pub(crate) fn always_on(r: &Report) -> bool {
    r.sampling.as_ref().and_then(|s| s.trace_windows.as_ref()).is_some_and(|w| w.window_ns == 0)
}

/// The main step among the ranges `usable` takes: the range of the
/// program's own with most wall time over its steady calls among those with
/// enough calls to tell warm-up apart; else the one with most wall time.
/// With its index in `ranges` (the report's order).
fn main_range(ranges: &[RangeAnalysis], usable: impl Fn(&RangeAnalysis) -> bool) -> Option<(usize, &RangeAnalysis)> {
    let own = || ranges.iter().enumerate().filter(|(_, g)| g.library.is_none() && !g.from_stack && usable(g));
    let key = |(_, g): &(usize, &RangeAnalysis)| (g.wall_ns, std::cmp::Reverse(g.path.matches('/').count()));
    let best = own().filter(|(_, g)| g.median_ns.is_some()).max_by_key(key).or_else(|| own().max_by_key(key))?;
    // The program's own step leads over the hooks' automatic one, where it
    // repeats and holds a good part of its time.
    if best.1.from_hooks {
        let program = own().filter(|(_, g)| !g.from_hooks && g.median_ns.is_some()).max_by_key(key);
        let steps = |p: &RangeAnalysis| p.count.saturating_add(p.warmup_calls);
        if let Some(p) = program.filter(|(_, p)| {
            p.wall_ns as f64 >= PROGRAM_STEP_SHARE * best.1.wall_ns as f64 && steps(p) <= steps(best.1) + 1
        }) {
            return Some(p);
        }
    }
    Some(best)
}

/// Which step the answer used, where the automatic ranges made one too.
fn step_note(ranges: &[RangeAnalysis], g: &RangeAnalysis) -> Option<String> {
    let auto =
        ranges.iter().find(|o| o.from_hooks && o.median_ns.is_some() && o.path.rsplit('/').next() == Some("step"));
    match auto {
        Some(a) if !g.from_hooks => Some(format!(
            "the step is the program's own range {}; gpuscope's automatic step ({}, {} calls) is not counted twice",
            g.path, a.path, a.count
        )),
        _ => None,
    }
}

/// The share of the hooks' step's time a repeating range of the program's
/// own, called once a step at most, holds to be the step instead (a range
/// around the forward alone is not the step).
const PROGRAM_STEP_SHARE: f64 = 0.8;

/// The parts of a step's idle time, by the causes each gathers.
pub(crate) const IDLE_PARTS: [(&str, &[usize]); 5] = [
    ("dispatch", &[LAUNCH, DISPATCH]),
    ("host work", &[HOST]),
    ("sync", &[SYNC]),
    ("copies", &[COPY]),
    ("waiting", &[OTHER]),
];

/// Where the time went: `exposed_comm` of the busy time was communication
/// with no compute under it.
fn parts(
    idle: &IdleSplit,
    active: u64,
    per: u64,
    exposed_comm: u64,
    busy_detail: String,
    details: &dyn Fn(&str) -> String,
) -> Vec<Part> {
    let a = idle.to_array();
    let sum = |c: &[usize]| c.iter().map(|&i| a[i]).fold(0u64, u64::saturating_add);
    let idle_ns = sum(&[HOST, COPY, SYNC, LAUNCH, DISPATCH, OTHER]);
    let busy = active.saturating_sub(idle_ns);
    let comm = exposed_comm.min(busy);
    let mut v = vec![Part { what: "GPU busy", ns: busy - comm, pct: 0.0, detail: busy_detail }];
    if comm > 0 {
        let detail = "communication kernels with no compute under them".to_string();
        v.push(Part { what: "communication", ns: comm, pct: 0.0, detail });
    }
    for (what, causes) in IDLE_PARTS {
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
        let last = g.path.frames.last();
        first.is_some()
            && first == g.path.frames.len().checked_sub(1)
            && last.is_some_and(|f| is_compile_range(&f.name))
    };
    r.ranges
        .iter()
        .filter(|g| g.library.is_some())
        .filter(outermost_compile)
        .map(|g| g.wall_ns)
        .fold(0, u64::saturating_add)
}

/// What to change for the main range `g` (split `idle`, over `per` calls
/// of `active_per` each): for each cause of idle time, all of it could be
/// saved, with the advice of the costliest finding of that cause inside
/// `g`; for each kernel finding on a kernel `ran_here`, its cost per call.
fn actions(
    findings: &[Finding],
    idle: &IdleSplit,
    per: u64,
    active_per: u64,
    inside: &dyn Fn(&Finding) -> bool,
    fallback: &dyn Fn(&FindingKind) -> Option<(String, String)>,
    ran_here: &dyn Fn(&str) -> Option<f64>,
) -> Vec<Action> {
    let a = idle.to_array();
    let pct = |ns: u64| (100.0 * ns as f64 / active_per.max(1) as f64).min(100.0);
    let mut v: Vec<Action> = Vec::new();
    for cause in IDLE {
        let (kind, causes) = (cause.kind.clone(), cause.causes);
        let ns = causes.iter().map(|&c| a[c]).fold(0u64, u64::saturating_add) / per.max(1);
        if pct(ns) < MIN_ACTION_PCT {
            continue;
        }
        let best = findings.iter().filter(|f| f.kind == kind && inside(f)).max_by_key(|f| f.cost_ns);
        let (advice, why) = match best.map(|f| (f.advice.clone(), f.message.clone())).or_else(|| fallback(&kind)) {
            Some(a) => a,
            // Nothing the program can change (a runtime's own waits).
            None => continue,
        };
        v.push(Action { advice, saves_ns: ns, saves_pct: pct(ns), why });
    }
    // Exposed communication: all of it could be hidden under compute.
    let comm =
        findings.iter().filter(|f| f.kind == FindingKind::ExposedCommunication && inside(f)).max_by_key(|f| f.cost_ns);
    if let Some(f) = comm {
        let ns = f.cost_ns / per.max(1);
        if pct(ns) >= MIN_ACTION_PCT {
            v.push(Action { advice: f.advice.clone(), saves_ns: ns, saves_pct: pct(ns), why: f.message.clone() });
        }
    }
    for f in findings.iter().filter(|f| f.kernel.is_some()) {
        let Some(share) = f.kernel.as_deref().and_then(ran_here) else { continue };
        let ns = (f.cost_ns as f64 * share) as u64 / per.max(1);
        if pct(ns) < MIN_ACTION_PCT || v.iter().any(|x| x.advice == f.advice) {
            continue;
        }
        v.push(Action { advice: f.advice.clone(), saves_ns: ns, saves_pct: pct(ns), why: f.message.clone() });
    }
    v.sort_by_key(|x| std::cmp::Reverse(x.saves_ns));
    v.truncate(MAX_ACTIONS);
    v
}

/// `actions` with a better split of the work over the process's GPUs, when
/// they worked unevenly or took turns: the share of the devices' window its
/// finding could save, of `active_per` per step.
fn with_devices(mut v: Vec<Action>, uses: &[DeviceUse], findings: &[Finding], active_per: u64) -> Vec<Action> {
    let kinds = [FindingKind::UnevenDevices, FindingKind::DevicesTakeTurns];
    let Some(f) = findings.iter().find(|f| kinds.contains(&f.kind)) else { return v };
    // The finding's cost is over the busiest GPU's window.
    let window = uses.iter().max_by(|a, b| a.busy_pct.total_cmp(&b.busy_pct)).map_or(0, |u| u.wall_ns);
    let pct = (100.0 * f.cost_ns as f64 / window.max(1) as f64).min(100.0);
    if pct >= MIN_ACTION_PCT {
        let saves_ns = (pct / 100.0 * active_per as f64) as u64;
        v.push(Action { advice: f.advice.clone(), saves_ns, saves_pct: pct, why: f.message.clone() });
        v.sort_by_key(|x| std::cmp::Reverse(x.saves_ns));
        v.truncate(MAX_ACTIONS);
    }
    v
}

/// Another repeated range beside the main one.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Other {
    /// Its path.
    pub range: String,
    /// Calls counted (after warm-up).
    pub calls: u64,
    /// Median time per call, ns.
    pub per_call_ns: u64,
    /// GPU busy share, %.
    pub gpu_busy_pct: f64,
    /// What bounds it.
    pub bound: Bound,
}

/// Ranges the answer names beside the main one at most.
const MAX_OTHERS: usize = 3;
/// A range worth naming beside the main one takes at least this share of
/// the main one's time.
const OTHER_SHARE: f64 = 0.1;
/// An action is worth listing from this share of the step on, %.
pub const MIN_ACTION_PCT: f64 = 2.0;

/// The kernel verdict of most of the kernel time among `kernels` (each
/// with the share of its time that counts), when kernels with one make up
/// at least half of it.
fn kernels_verdict(kernels: &[(&KernelAnalysis, f64)]) -> Option<Verdict> {
    let total: f64 = kernels.iter().map(|(k, s)| k.gpu_ns as f64 * s).sum();
    let mut votes: Vec<(&Bound, f64, &KernelAnalysis)> = Vec::new();
    for (k, s) in kernels {
        let Some(v) = &k.verdict else { continue };
        let t = k.gpu_ns as f64 * s;
        match votes.iter_mut().find(|x| *x.0 == v.bound) {
            Some(x) => x.1 += t,
            None => votes.push((&v.bound, t, k)),
        }
    }
    let (bound, t, k) = votes.into_iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let share = 100.0 * t / total.max(1.0);
    let evidence = k.verdict.as_ref().map(|v| v.evidence.clone()).unwrap_or_default();
    (share >= 50.0).then(|| Verdict {
        bound: bound.clone(),
        evidence: format!("{share:.0}% of its kernel time is {bound} (largest: {}: {evidence})", k.display_name),
    })
}

/// The answer for a report analysed into `ranges`, `kernels` (all of them)
/// and `findings`.
pub(super) fn answer(
    r: &Report,
    ranges: &[RangeAnalysis],
    kernels: &[KernelAnalysis],
    findings: &[Finding],
    e: &advice::Evidence,
) -> Option<Answer> {
    let compile = compile_ns(r);
    // No kernel records but in windows asked for (trace windows of 0): PM
    // samples and launch counts answer, over every call; a window's records
    // stay in the tables beside it, not in place of it.
    if always_on(r) {
        return sampled::answer(r, ranges, e).map(|a| Answer { compile_ns: compile, ..a });
    }
    if let Some((_, g)) = main_range(ranges, |g| !g.untraced && g.idle.is_some()) {
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
                    let per_call = g.kernel_ns as f64 / g.count.saturating_add(g.warmup_calls).max(1) as f64;
                    advice::launch_rate(g.launches.unwrap_or(0), g.count, g.wall_ns, per_call)
                }
                "host work" => e.host_where(g).map(|c| format!("mostly in {}", c.path)).unwrap_or_default(),
                "sync" if g.host.syncs > 0 => {
                    format!("{:.1} synchronisations per step", g.host.syncs as f64 / calls as f64)
                }
                "sync" if g.host.d2h_copies > 0 => {
                    format!("{:.1} device-to-host copies per step", g.host.d2h_copies as f64 / calls as f64)
                }
                "copies" => format!("{:.1} copies per step", g.host.copies as f64 / calls as f64),
                _ => String::new(),
            }
        };
        let inside = |f: &Finding| f.range.as_deref().is_some_and(|p| within(&g.path, p));
        let fallback =
            |kind: &FindingKind| Some((idle_advice(kind, e, g), format!("{}: {}", g.path, g.verdict.evidence)));
        // A kernel's share launched inside the main range (its cost is
        // over all its calls, warm-up included).
        let mut time: HashMap<&str, (u64, u64)> = HashMap::default();
        // Analyses are in the report's range order.
        let g_frames =
            ranges.iter().position(|o| std::ptr::eq(o, g)).and_then(|i| r.ranges.get(i)).map(|s| &s.path.frames[..]);
        for k in &r.path_kernels {
            let t = time.entry(k.name.as_str()).or_default();
            t.1 = t.1.saturating_add(k.stats.total_ns);
            let here = match g_frames {
                Some(frames) => k.path.user_frames().starts_with(frames),
                None => within(&g.path, &k.path.user_prefix().to_string()),
            };
            if here {
                t.0 = t.0.saturating_add(k.stats.total_ns);
            }
        }
        let steady_share = calls as f64 / calls.saturating_add(g.warmup_calls) as f64;
        let ran_here = |name: &str| -> Option<f64> {
            let &(here, all) = time.get(name)?;
            (here > 0).then(|| here as f64 / all.max(1) as f64 * steady_share)
        };
        // Repeated ranges outside the main one, not nested in another such.
        let repeated = |o: &&RangeAnalysis| {
            o.library.is_none()
                && !o.from_stack
                && o.median_ns.is_some()
                && !within(&g.path, &o.path)
                && !within(&o.path, &g.path)
        };
        let candidates: HashSet<&str> = ranges.iter().filter(repeated).map(|o| o.path.as_str()).collect();
        let outermost = |o: &&RangeAnalysis| o.path.match_indices('/').all(|(i, _)| !candidates.contains(&o.path[..i]));
        let mut others: Vec<&RangeAnalysis> = ranges
            .iter()
            .filter(repeated)
            .filter(|o| o.wall_ns as f64 >= OTHER_SHARE * g.wall_ns as f64)
            .filter(outermost)
            .collect();
        others.sort_by_key(|o| std::cmp::Reverse(o.wall_ns));
        let others = others
            .into_iter()
            .take(MAX_OTHERS)
            .map(|o| Other {
                range: o.path.clone(),
                calls: o.count,
                per_call_ns: o.median_ns.unwrap_or(0),
                gpu_busy_pct: o.utilization_pct,
                bound: o.verdict.bound.clone(),
            })
            .collect();
        return Some(Answer {
            range: Some(g.path.clone()),
            calls: g.count,
            warmup_calls: g.warmup_calls,
            warmup_ns: g.warmup_wall_ns,
            per_step_ns: g.median_ns.unwrap_or(g.wall_ns / calls),
            p90_ns: g.p90_ns,
            gpu_busy_pct: g.utilization_pct,
            busy_source: BUSY_TRACED,
            per_step_mean: false,
            notes: step_note(ranges, g).into_iter().collect(),
            profiler_ns: profiler.map(|p| p / calls),
            profiler_pct: profiler.map(|p| 100.0 * p as f64 / g.wall_ns.max(1) as f64),
            parts: parts(&idle, g.active_ns, calls, g.exposed_comm_ns, busy_detail, &details),
            verdict: g.verdict.clone(),
            actions: with_devices(
                actions(findings, &idle, calls, g.active_ns / calls, &inside, &fallback, &ran_here),
                &e.devices,
                findings,
                g.active_ns / calls,
            ),
            compile_ns: compile,
            others,
            found_steps: None,
            nvtx_example: e.fw.nvtx_example(),
        });
    }
    // No traced range to answer for, and kernel records in periodic
    // windows: the PM samples answer, which cover the steady state (the
    // windows hold a tenth of it, with records' cost on, and not the gaps
    // that cross their edges), the idle time split as in the windows where
    // they stand for it; so too for a step range no window held whole, and
    // where the windows classified too little (busy unknown without the
    // engine's counter, not the windows' idle time over all of it). Only
    // with none of those, the windows' idle time scaled (`session_idle`).
    let windowed = crate::analysis::windowed::windowed_idle(r);
    let sampled_busy = r.session_steady.and_then(|s| s.sampled).and_then(|f| f.gpu_busy_pct).is_some();
    let untraced_range = main_range(ranges, |g| g.untraced && g.sampled).is_some();
    let too_little = matches!(windowed, WindowedIdle::TooLittle { .. });
    if windowed != WindowedIdle::Whole && (sampled_busy || untraced_range || too_little) {
        if let Some(a) = sampled::answer(r, ranges, e) {
            return Some(Answer { compile_ns: compile, ..a });
        }
    }
    // No range of the program's own: the session's steady state as a whole.
    let (idle, wall, what) = session_idle(r)?;
    // Exposed communication, like the idle time, seen in the windows only.
    let exposed_comm = r.session_steady.map_or(0, |s| match windowed {
        WindowedIdle::Scaled { factor, .. } => ((s.exposed_comm_ns as f64 * factor) as u64).min(wall),
        _ => s.exposed_comm_ns,
    });
    let s = r.session_steady;
    let active = wall.saturating_sub(idle.profiler_ns);
    let shares = verdict::Shares::of(wall, &idle)?;
    // The share of each kernel's time inside the steady state.
    let window = s.map(|s| (s.start_ns, s.end_ns));
    let by_name: HashMap<&str, &crate::report::KernelSummary> =
        r.kernels.iter().map(|k| (k.name.as_str(), k)).collect();
    let ran_here = |name: &str| -> Option<f64> {
        let k = by_name.get(name)?;
        let (first, last) = (k.stats.first_ns, k.stats.last_ns);
        match window {
            Some((a, b)) if last > first => {
                let overlap = last.min(b).saturating_sub(first.max(a));
                (overlap > 0).then(|| overlap as f64 / (last - first) as f64)
            }
            _ => Some(1.0),
        }
    };
    let weighted: Vec<(&KernelAnalysis, f64)> =
        kernels.iter().filter_map(|k| ran_here(&k.name).map(|share| (k, share))).collect();
    let v = verdict::range(Some(shares), shares.busy, kernels_verdict(&weighted), false);
    let details = |what: &str| match what {
        "dispatch" => s.map_or(String::new(), |s| {
            format!("{:.0} launches per second", s.launches as f64 / (s.wall_ns().max(1) as f64 / 1e9))
        }),
        _ => String::new(),
    };
    let runtime_syncs = runtime_syncs(r, e.fw);
    let runtime = runtime_syncs.is_some();
    let fallback = |kind: &FindingKind| {
        (*kind != FindingKind::Sync || !runtime)
            .then(|| (session_advice(kind, r, e.fw), format!("{what}: {}", shares.describe())))
    };
    // Steps found from the kernel stream: the steady state's figures per
    // step (its length over the median step's, the number of steps).
    let found = s.and_then(|s| s.steps);
    let steps = found.map_or(1, |f| ((wall as f64 / f.median_ns.max(1) as f64).round() as u64).max(1));
    Some(Answer {
        range: None,
        calls: if found.is_some() { steps } else { 0 },
        warmup_calls: 0,
        warmup_ns: s.map_or(0, |s| s.startup_ns.saturating_add(s.shutdown_ns)),
        per_step_ns: found.map_or(wall, |f| f.median_ns),
        p90_ns: found.map(|f| f.p90_ns),
        gpu_busy_pct: shares.busy,
        busy_source: BUSY_TRACED,
        per_step_mean: false,
        notes: runtime_syncs
            .into_iter()
            .chain(match windowed {
                WindowedIdle::Scaled { traced_ns, .. } => Some(format!(
                    "kernel records only in trace windows ({} of the steady state's {}): its idle time is the \
                     windows', scaled to the rest",
                    crate::model::units::fmt_ns(traced_ns),
                    crate::model::units::fmt_ns(wall)
                )),
                _ => None,
            })
            .collect(),
        profiler_ns: (idle.profiler_ns > 0).then_some(idle.profiler_ns / steps),
        profiler_pct: (idle.profiler_ns > 0).then(|| 100.0 * idle.profiler_ns as f64 / wall.max(1) as f64),
        parts: parts(&idle, active, steps, exposed_comm, String::new(), &details),
        verdict: v,
        actions: with_devices(
            actions(
                findings,
                &idle,
                steps,
                active / steps,
                &|f| f.range.is_none() && f.kernel.is_none(),
                &fallback,
                &ran_here,
            ),
            &e.devices,
            findings,
            active / steps,
        ),
        compile_ns: compile,
        others: Vec::new(),
        found_steps: found,
        nvtx_example: e.fw.nvtx_example(),
    })
}
