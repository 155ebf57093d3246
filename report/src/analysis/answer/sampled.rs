//! The answer from PM samples and launch counts, for sessions that took no
//! kernel record (trace windows of 0, the always-on setting), and with
//! periodic trace windows for a steady state or a step the windows did not
//! hold (`windowed`): GPU busy from
//! the graphics engine's active cycles, the SM figures over the busy time,
//! and the idle time's likely cause from how close together the host
//! launched; where windows traced enough of it, the idle time split by
//! cause as they saw it, each cause of 2% or more an action as in trace
//! mode.

use super::{Action, Answer, Part, BUSY_SAMPLED, BUSY_UNKNOWN, IDLE_PARTS, MAX_ACTIONS, MIN_ACTION_PCT};
use crate::analysis::advice::Evidence;
use crate::analysis::rates::{self, Rates};
use crate::analysis::rules::{idle_advice, more_blocks, session_advice, FindingKind, IDLE, MOVE_FEWER_BYTES};
use crate::analysis::verdict::{self, Bound, Counted, Verdict};
use crate::analysis::windowed::{windowed_idle, WindowedIdle};
use crate::analysis::{peaks, RangeAnalysis};
use crate::model::idle::{IdleSplit, COPY, DISPATCH, HOST, LAUNCH, OTHER, SYNC};
use crate::model::sampled::SampledFigures;
use crate::report::Report;

/// The figures of a wall window over its busy part: SM efficiency and
/// DRAM bandwidth divided by the share of it the engine was active
/// (`busy`, %); shares of active cycles (occupancy, pipes) stay as they
/// are.
pub(crate) fn over_busy(f: &SampledFigures, busy: f64) -> SampledFigures {
    let k = if busy > 0.0 { 100.0 / busy } else { 1.0 };
    SampledFigures {
        sm_efficiency_pct: f.sm_efficiency_pct.map(|e| (e * k).min(100.0)),
        dram_gb_per_s: f.dram_gb_per_s.map(|d| d * k),
        ..*f
    }
}

/// A sampled GPU busy (the engine's active share, %) as the kernels' union:
/// times the kernels' share of the engine's activity inside trace windows,
/// where they measured both ([`WindowsBusy`](crate::report::WindowsBusy)).
pub(crate) fn kernels_busy(engine_pct: f64, kernel_share: Option<f64>) -> f64 {
    engine_pct * kernel_share.unwrap_or(1.0)
}

/// What bounds a wall window known from its samples `f` and launch counts:
/// [`verdict::sampled_wall`] when the engine's activity was sampled (GPU
/// busy the engine's share times `kernel_share`, the kernels' share of it
/// where trace windows measured both: [`WindowsBusy`](crate::report::WindowsBusy)), else
/// [`verdict::untraced`] (SM figures over the wall time only).
pub(crate) fn wall_verdict(
    f: &SampledFigures,
    kernel_share: Option<f64>,
    peaks: Option<&peaks::Peaks>,
    counted: Option<Counted>,
) -> Verdict {
    match f.gpu_busy_pct {
        Some(b) => verdict::sampled_wall(
            kernels_busy(b, kernel_share),
            &rates::sampled(&over_busy(f, b), Rates::default(), peaks),
            counted,
        ),
        None => verdict::untraced(&rates::sampled(f, Rates::default(), peaks), counted),
    }
}

/// Where a sampled GPU busy comes from: the engine's active share
/// (`engine`, %), times the kernels' share of it inside trace windows
/// (`kernel_share`) where they measured both.
fn busy_from(engine: Option<f64>, kernel_share: Option<f64>) -> String {
    const ENGINE: &str = "the graphics engine's active share from PM samples (DCGM's GR_ENGINE_ACTIVE, what \
                          nvidia-smi calls utilization)";
    match (engine, kernel_share) {
        (Some(e), Some(k)) if k < 1.0 => format!(
            "GPU busy is the kernels' share of the time, as trace mode measures it: {ENGINE}, {e:.0}%, times the \
             kernels' share of the engine's activity inside the trace windows, {:.0}% (the engine counts as active \
             between back-to-back kernels too)",
            100.0 * k
        ),
        _ => format!("GPU busy is {ENGINE}"),
    }
}

/// The idle split by cause of what trace windows asked for traced (the
/// main range's traced calls, or the session's traced time), to be scaled
/// to the idle time the samples found.
struct TracedIdle {
    split: IdleSplit,
    traced_ns: u64,
    /// What was traced, for the note.
    of: String,
    /// With periodic windows and no range: the share of the idle time the
    /// samples put in the windows that they classified, % (too little to
    /// split it: `windowed`); `None` where the split stands (a range's
    /// traced calls lie inside windows).
    classified_pct: Option<f64>,
}

impl TracedIdle {
    fn of(r: &Report, main: Option<usize>) -> Option<Self> {
        let w = r.sampling.as_ref()?.trace_windows.as_ref()?;
        if w.traced_ns == 0 {
            return None;
        }
        let (split, of, traced_ns, classified_pct) = match main {
            Some(i) => {
                let g = r.ranges.get(i)?;
                // `count` holds the traced calls only.
                let traced = g.count;
                let of = format!("its {traced} traced call{}", if traced == 1 { "" } else { "s" });
                (g.idle?, of, w.traced_ns, None)
            }
            // The steady state's traced time where it has any (with
            // periodic windows only, the time they held of it), else the
            // session's.
            None => {
                let steady = r.session_steady.map(|s| s.idle).filter(|i| i.total() > 0);
                let split = if w.window_ns > 0 { steady? } else { steady.or(r.idle)? };
                let (traced, classified) = match windowed_idle(r) {
                    WindowedIdle::TooLittle { classified_pct, traced_ns } => (traced_ns, Some(classified_pct)),
                    WindowedIdle::Scaled { traced_ns, .. } => (traced_ns, None),
                    WindowedIdle::Whole => (w.traced_ns, None),
                };
                (split, "the traced time".to_string(), traced, classified)
            }
        };
        (classified(&split, &CLASSIFIED) > 0).then_some(TracedIdle { split, traced_ns, of, classified_pct })
    }

    /// Whether the split stands for the idle time.
    fn representative(&self) -> bool {
        self.classified_pct.is_none()
    }

    /// The share of the classified idle time that `causes` took.
    fn share(&self, causes: &[usize]) -> f64 {
        classified(&self.split, causes) as f64 / classified(&self.split, &CLASSIFIED).max(1) as f64
    }

    /// The time's shares with the GPU busy `busy` %, the rest split as the
    /// traced idle time was.
    fn shares(&self, busy: f64) -> verdict::Shares {
        let p = |c: usize| (100.0 - busy) * self.share(&[c]);
        verdict::Shares {
            busy,
            host: p(HOST),
            copy: p(COPY),
            sync: p(SYNC),
            launch: p(LAUNCH),
            dispatch: p(DISPATCH),
            other: p(OTHER),
        }
    }

    /// `idle_ns` split by idle cause (the rules') as the traced idle time
    /// was.
    fn by_cause(&self, idle_ns: u64) -> Vec<(FindingKind, u64)> {
        IDLE.iter().map(|c| (c.kind.clone(), (idle_ns as f64 * self.share(c.causes)) as u64)).collect()
    }

    /// `idle_ns` of each of `per` ns split as the traced idle time was.
    fn parts(&self, idle_ns: u64, per: u64) -> Vec<Part> {
        let mut v = Vec::new();
        for (what, causes) in IDLE_PARTS {
            let share = self.share(causes);
            let ns = (idle_ns as f64 * share) as u64;
            let pct = 100.0 * ns as f64 / per.max(1) as f64;
            if pct >= 0.5 {
                let detail = format!("{:.0}% of the idle time, as traced in the windows", 100.0 * share);
                v.push(Part { what, ns, pct, detail });
            }
        }
        v
    }
}

/// The idle causes a trace classifies (not gpuscope's own time).
const CLASSIFIED: [usize; 6] = [HOST, SYNC, COPY, LAUNCH, DISPATCH, OTHER];

/// The idle time of `causes` in `split`, ns.
fn classified(split: &IdleSplit, causes: &[usize]) -> u64 {
    let a = split.to_array();
    causes.iter().map(|&c| a[c]).fold(0, u64::saturating_add)
}

/// The answer of a session without kernel records: for the range of the
/// program's own with most wall time (its calls' mean), or without ranges
/// for the session's steady state.
pub(super) fn answer(r: &Report, ranges: &[RangeAnalysis], e: &Evidence) -> Option<Answer> {
    let p = r.devices.first().and_then(peaks::peaks);
    // The main step, as with kernel records, among the sampled ranges.
    let main = super::main_range(ranges, |g| g.untraced && g.sampled);
    let counted_total = r.sampling.as_ref().and_then(|s| s.trace_windows.as_ref()).and_then(|w| w.untraced_launches);
    let (g, f, calls, wall, counted, warmup_ns) = match main {
        Some((i, g)) => {
            let s = r.ranges.get(i)?;
            let f = s.sampled_wall_steady.or(s.sampled_wall)?;
            let counted = g.launches.map(|launches| Counted { calls: g.count, launches, wall_ns: g.wall_ns });
            (Some(g), f, g.count.max(1), g.wall_ns, counted, g.warmup_wall_ns)
        }
        None => {
            let s = r.session_steady?;
            // The steady state's own launches, placed in time as they were
            // counted (none there: no kernel launch, whatever start-up made).
            let counted = counted_total.map(|_| Counted { calls: 0, launches: s.launches, wall_ns: s.wall_ns() });
            // Steps found from the launches: the steady state's figures per
            // step, as with kernel records; the host's launch period by its
            // mean (its median drifts where the host runs ahead in bursts),
            // its median where the GPU paces the loop (`FoundSteps::by_mean`).
            let steps = s.steps.map_or(1, |f| ((s.wall_ns() as f64 / f.step_ns().max(1) as f64).round() as u64).max(1));
            (None, s.sampled?, steps, s.wall_ns(), counted, s.startup_ns.saturating_add(s.shutdown_ns))
        }
    };
    let found = if g.is_none() { r.session_steady.and_then(|s| s.steps) } else { None };
    // GPU busy as the kernels' union (trace mode's measure), where trace
    // windows measured it against the engine's sampled activity.
    let share = r.session_steady.and_then(|s| s.kernel_share());
    let busy_pct = f.gpu_busy_pct.map(|b| kernels_busy(b, share));
    let traced = TracedIdle::of(r, main.map(|(i, _)| i));
    let v = match g {
        Some(g) => g.verdict.clone(),
        None => match (busy_pct, traced.as_ref().filter(|t| t.representative())) {
            // An idle GPU with its idle time split as the windows traced
            // it: the largest cause, as in trace mode.
            (Some(busy), Some(t)) if busy < verdict::GPU_BOUND_PCT => {
                let mut v = verdict::range(Some(t.shares(busy)), busy, None, false);
                v.evidence.push_str(" (GPU busy from PM samples; its idle time split as the trace windows traced it)");
                v
            }
            _ => wall_verdict(&f, share, p.as_ref(), counted),
        },
    };
    let per = wall / calls;
    let median = g.and_then(|g| g.median_ns).or(found.map(|f| f.step_ns()));
    let windows = r.sampling.as_ref().and_then(|m| m.trace_windows.as_ref());
    let window_ns = windows.map_or(0, |w| w.window_ns);
    // Windows that hold a step split its idle time in the step's traced
    // calls; shorter ones split none.
    let split_how = if window_ns > median.unwrap_or(per) {
        "an NVTX range around the step splits it in the steps traced whole"
    } else {
        "trace windows longer than a step (with an NVTX range around it), or trace mode, split it"
    };
    let mut notes = vec![format!(
        "{}: {}",
        match &traced {
            Some(t) if t.representative() => format!(
                "kernel records only in trace windows asked for ({} traced): the idle time is split by cause as \
                 in {}, scaled to the rest",
                crate::model::units::fmt_ns(t.traced_ns),
                t.of
            ),
            Some(t) => format!(
                "kernel records only in trace windows asked for ({} traced): they classified {:.0}% of the idle \
                 time in them (a gap that crosses a window's edge is not classified), too little to split it by \
                 cause; {}",
                crate::model::units::fmt_ns(t.traced_ns),
                t.classified_pct.unwrap_or(0.0),
                split_how
            ),
            None if window_ns > 0 && g.is_none() => format!(
                "kernel records only in trace windows asked for ({} traced), none of it in the steady state's idle \
                 time: the idle time is not split by cause",
                crate::model::units::fmt_ns(windows.map_or(0, |w| w.traced_ns))
            ),
            None if window_ns > 0 => format!(
                "kernel records only in trace windows asked for ({} traced), none of which held a whole call of \
                 the step (each crossed a window's edge): the idle time is not split by cause; {split_how}",
                crate::model::units::fmt_ns(windows.map_or(0, |w| w.traced_ns))
            ),
            None => "no kernel records (trace windows of 0); a trace window (gpuscope trigger PID --trace 5s) or \
                     trace mode splits the idle time by cause"
                .to_string(),
        },
        match (f.gpu_busy_pct, &traced) {
            (Some(_), Some(t)) if t.representative() => busy_from(f.gpu_busy_pct, share),
            (Some(_), _) => format!("{}, its cause judged from the host's launch counts", busy_from(f.gpu_busy_pct, share)),
            (None, _) => "GPU busy not measured (this GPU's PM sampling has no graphics-engine counter)".to_string(),
        }
    )];
    if g.is_some() && median.is_none() {
        notes.push(format!(
            "per step: the mean of its {calls} calls, warm-up included (too few, or too unlike, to tell warm-up \
             apart)"
        ));
    }
    let mut parts = Vec::new();
    let mut actions = Vec::new();
    if let Some(busy) = busy_pct {
        let busy_ns = (per as f64 * busy / 100.0) as u64;
        let idle_ns = per.saturating_sub(busy_ns);
        let launches = counted.map_or("launches not counted".to_string(), |n| n.describe());
        parts.push(Part { what: "GPU busy", ns: busy_ns, pct: busy, detail: String::new() });
        let scaled = traced
            .as_ref()
            .filter(|t| t.representative() && 100.0 - busy >= 0.5)
            .map(|t| t.parts(idle_ns, per))
            .unwrap_or_default();
        if !scaled.is_empty() {
            parts.extend(scaled);
        } else if 100.0 - busy >= 0.5 {
            parts.push(Part {
                what: "GPU idle",
                ns: idle_ns,
                pct: 100.0 - busy,
                detail: format!("cause not traced; {launches}"),
            });
        }
        parts.sort_by_key(|p| std::cmp::Reverse(p.ns));
        let advice = |kind: &FindingKind| match g {
            Some(g) => idle_advice(kind, e, g),
            None => session_advice(kind, r, e.fw),
        };
        // SM figures over the engine's active time, as sampled.
        let over = rates::sampled(&over_busy(&f, f.gpu_busy_pct.unwrap_or(busy)), Rates::default(), p.as_ref());
        let sms = r.devices.first().map_or(0, |d| d.sm_count);
        // With the idle time split as the windows traced it, every cause of
        // MIN_ACTION_PCT or more is an action, as in trace mode: a step
        // busy just over half the time still has its dispatch to cut.
        let split = traced.as_ref().filter(|t| t.representative() && 100.0 - busy >= 0.5);
        if let Some(t) = split {
            for (kind, ns) in t.by_cause(idle_ns) {
                let pct = 100.0 * ns as f64 / per.max(1) as f64;
                let actionable = g.is_some() || crate::analysis::rules::session_actionable(&kind, r, e.fw);
                if pct >= MIN_ACTION_PCT && !actionable {
                    // A runtime's own waits: why no action, as in trace mode.
                    notes.extend(crate::analysis::rules::runtime_syncs(r, e.fw));
                }
                if pct >= MIN_ACTION_PCT && actionable {
                    let why = format!(
                        "GPU idle {:.0}% of the step, {:.0}% of it {} (the trace windows' split)",
                        100.0 - busy,
                        100.0 * ns as f64 / idle_ns.max(1) as f64,
                        crate::analysis::rules::idle_meaning(&kind)
                    );
                    actions.push(Action { advice: advice(&kind), saves_ns: ns, saves_pct: pct, why });
                }
            }
        }
        // Without the split, the verdict's cause takes all the idle time.
        let action = match v.bound {
            Bound::Launch if split.is_none() => Some((advice(&FindingKind::Dispatch), idle_ns)),
            Bound::Host if split.is_none() => Some((advice(&FindingKind::HostIdle), idle_ns)),
            Bound::Memory => Some((MOVE_FEWER_BYTES.to_string(), busy_ns)),
            Bound::Latency => over
                .sm_efficiency
                .filter(|e| *e < verdict::FEW_SMS_PCT && sms > 0)
                .map(|eff| (more_blocks(sms), (busy_ns as f64 * (1.0 - eff / 100.0)) as u64)),
            _ => None,
        };
        if let Some((advice, ns)) = action {
            let pct = 100.0 * ns as f64 / per.max(1) as f64;
            if pct >= MIN_ACTION_PCT {
                actions.push(Action { advice, saves_ns: ns, saves_pct: pct, why: v.evidence.clone() });
            }
        }
        actions.sort_by_key(|x| std::cmp::Reverse(x.saves_ns));
        actions.truncate(MAX_ACTIONS);
    }
    Some(Answer {
        range: g.map(|g| g.path.clone()),
        calls: if g.is_some() || found.is_some() { calls } else { 0 },
        warmup_calls: g.map_or(0, |g| g.warmup_calls),
        warmup_ns,
        per_step_ns: median.unwrap_or(per),
        p90_ns: g.and_then(|g| g.p90_ns).or(found.map(|f| f.p90_ns)),
        gpu_busy_pct: busy_pct.unwrap_or(0.0),
        busy_source: if busy_pct.is_some() { BUSY_SAMPLED } else { BUSY_UNKNOWN },
        per_step_mean: (g.is_some() && median.is_none()) || found.is_some_and(|f| f.by_mean()),
        notes,
        profiler_ns: None,
        profiler_pct: None,
        parts,
        verdict: v,
        actions,
        compile_ns: 0,
        others: Vec::new(),
        found_steps: found,
        nvtx_example: e.fw.nvtx_example(),
    })
}
