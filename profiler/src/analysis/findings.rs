//! What to change: one finding per cause of lost GPU time, with what it
//! cost and one line of advice, most costly first.

use super::advice::{Evidence, LAUNCH_OVERHEAD};
use super::cost;
use super::framework::Framework;
use super::peaks::Peaks;
use super::rules::FindingKind;
use super::verdict::{self, Bound, Counted};
use super::{KernelAnalysis, RangeAnalysis};
use crate::model::comm::is_comm_kernel;
use crate::model::idle::{IdleSplit, COPY, DISPATCH, HOST, LAUNCH, OTHER, SYNC};
use crate::report::Report;
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

/// An idle cause is a finding when it takes at least this share of a
/// range's time: smaller ones are noise next to run-to-run variation
/// (plain runs of one program vary by ~10%, `docs/contributing/cupti-findings.md`).
pub const MIN_SHARE_PCT: f64 = 10.0;
/// Copies from pageable memory are a finding from this share on: pinning
/// costs nothing and a blocking copy stops the host running ahead.
pub const MIN_PAGEABLE_SHARE_PCT: f64 = 1.0;
/// ... and at least this much time, ns.
pub const MIN_COST_NS: u64 = 100_000;
/// A range's finding is left to the ranges directly inside it when their
/// findings of the same cause add up to at least this share of its time:
/// the inner ranges say where.
pub const INNER_EXPLAINS_PCT: f64 = 80.0;

/// One thing to change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// What kind of loss (see [`FindingKind`]).
    pub kind: FindingKind,
    /// The verdict it explains.
    pub bound: Bound,
    /// The range it is about (`None`: the whole session, or a kernel).
    pub range: Option<String>,
    /// The kernel it is about.
    pub kernel: Option<String>,
    /// GPU time it cost, ns: idle time for idle causes, unused SM time for
    /// kernels.
    pub cost_ns: u64,
    /// Calls of its range the cost is over (0: not a range's).
    #[serde(skip_serializing_if = "super::is_zero")]
    pub calls: u64,
    /// What was seen.
    pub message: String,
    /// One line of advice.
    pub advice: String,
}

fn ms(ns: u64) -> String {
    crate::model::units::fmt_ns(ns)
}

/// The idle causes that make findings: (kind, the `model::idle` causes it
/// sums, verdict, what it means).
pub(super) const IDLE_CAUSES: [(FindingKind, &[usize], Bound, &str); 5] = [
    (FindingKind::HostIdle, &[HOST], Bound::Host, "waiting for the host, which ran code of its own"),
    (FindingKind::Copies, &[COPY], Bound::Host, "during copies"),
    (FindingKind::Sync, &[SYNC], Bound::Sync, "after host synchronisations"),
    (FindingKind::Dispatch, &[LAUNCH, DISPATCH], Bound::Launch, "while the host issued kernels one by one"),
    (FindingKind::Waiting, &[OTHER], Bound::Dependency, "with work queued behind a dependency"),
];

/// Copies from or to pageable memory, and all copies: in the steady state
/// where the report counted them there (a model moved to the GPU at
/// start-up is no loop's copies), else over the session.
fn pageable(r: &Report) -> (u64, u64) {
    match r.session_steady.as_ref().and_then(|s| s.copies.map(|n| (s.pageable_copies, n))) {
        Some(steady) => steady,
        None => r.memory.memcpy.iter().fold((0, 0), |(p, a), c| (p + c.pageable, a + c.count)),
    }
}

/// The advice for an idle cause of range `g`.
pub(super) fn idle_advice(kind: &FindingKind, e: &Evidence, g: &RangeAnalysis) -> String {
    match kind {
        FindingKind::HostIdle => e.host_work(g),
        FindingKind::Copies => e.copies(g),
        FindingKind::Sync => e.sync(g),
        FindingKind::Dispatch => e.dispatch(g),
        _ => "Queued work waited: look for cross-stream event waits and host functions (cudaLaunchHostFunc) in this range.".into(),
    }
}

/// Whether the program copies batches to the GPU in its loop: its steady
/// state waited on copies, and its host-to-device copies are more than a
/// few, of a batch's bytes ([`super::advice::BATCH_BYTES`]) on average
/// (the copy summary is the session's: a model moved to the GPU at
/// start-up copies much, once).
fn copies_batches(r: &Report) -> bool {
    let in_loop = r.session_steady.as_ref().is_some_and(|s| s.idle.copy_ns > 0);
    let (count, bytes) = r
        .memory
        .memcpy
        .iter()
        .filter(|c| c.kind == "HtoD")
        .fold((0u64, 0u64), |(n, b), c| (n + c.count, b.saturating_add(c.bytes)));
    in_loop && count >= MIN_BATCH_COPIES && bytes / count.max(1) >= super::advice::BATCH_BYTES
}

/// Host-to-device copies fewer than this are set-up (weights, constants),
/// not a loop's batches.
const MIN_BATCH_COPIES: u64 = 10;

/// Launches a step below which a step is one launch of a compiled
/// executable (XLA launches each jitted call's executable once, with a
/// copy or two around it).
const ONE_LAUNCH_STEP: f64 = 2.5;

/// Launches per step and device of the steady state, where steps were
/// found in it.
fn launches_per_found_step(r: &Report) -> Option<f64> {
    let (s, steps) = found_steps(r)?;
    // Launches are counted over every device, steps on one: per device.
    let devices = r.device_time.iter().filter(|d| d.busy_ns > 0).count().max(1);
    Some(s.launches as f64 / steps / devices as f64)
}

/// Share of the synchronisations' time on the main thread under which an
/// XLA program's waits are its runtime's, %.
const RUNTIME_SYNC_PCT: f64 = 20.0;

/// Where a JAX program's synchronisations are XLA's runtime's own (made on
/// its threads, not the main one the program's Python runs on): why there
/// is no action for the GPU's idle time in them. `None` otherwise, or
/// where threads were not told apart.
pub(super) fn runtime_syncs(r: &Report, fw: Framework) -> Option<String> {
    // A program that reads a value every step waits through the runtime's
    // threads: its own loop syncs.
    if reads_per_step(r).is_some_and(|n| n >= READS_PER_STEP) {
        return None;
    }
    let m = &r.memory;
    let (main, main_ns) = (m.main_thread_synchronizations?, m.main_thread_synchronization_ns?);
    let share = 100.0 * main_ns as f64 / m.synchronization_ns.max(1) as f64;
    (fw == Framework::Xla && m.synchronizations > 0 && share < RUNTIME_SYNC_PCT).then(|| {
        format!(
            "host synchronisations: {} of {} ({:.0}% of their time) were made on threads other than the main one, \
             XLA's runtime's own: not calls in the program's loop, so no action to take them out",
            m.synchronizations.saturating_sub(main),
            m.synchronizations,
            100.0 - share
        )
    })
}

/// Device-to-host copies per step from which a program reads a value every
/// step (or nearly).
const READS_PER_STEP: f64 = 0.5;

/// Device-to-host copies per step found in the steady state (a program's
/// reads of results: `float()` of a device array, `jax.device_get`,
/// `.item()`); `None` where no steps were found or the steady state's
/// copies were not counted.
fn reads_per_step(r: &Report) -> Option<f64> {
    let (s, steps) = found_steps(r)?;
    // Not counted in the steady state (an older report): not known.
    s.copies?;
    Some(s.device_to_host_copies as f64 / steps)
}

/// The steady state and the steps found in it (its length over the median
/// step), where steps were found.
fn found_steps(r: &Report) -> Option<(&crate::report::SessionSteady, f64)> {
    let s = r.session_steady.as_ref()?;
    let f = s.steps?;
    Some((s, (s.wall_ns() as f64 / f.median_ns.max(1) as f64).max(1.0)))
}

/// Session-wide advice (a program without ranges): no per-call evidence.
pub(super) fn session_advice(kind: &FindingKind, r: &Report, fw: Framework) -> String {
    match kind {
        FindingKind::HostIdle => fw.host_work(r.forks, copies_batches(r)),
        FindingKind::Copies => {
            let (pageable, all) = pageable(r);
            if pageable > 0 {
                format!(
                    "{pageable} of {all} copies use pageable host memory, which blocks the host: pin it ({}.",
                    fw.pinning()
                )
            } else {
                "Overlap copies with compute: issue them on a side stream ahead of use.".into()
            }
        }
        FindingKind::Sync => format!(
            "Take host synchronisations out of the loop ({} in this run): {} per step; read values every N steps.",
            r.memory.synchronizations,
            fw.sync_calls()
        ),
        FindingKind::Dispatch if fw == Framework::PyTorch && r.kernels.is_empty() => {
            super::advice::PYTORCH_DISPATCH_UNSEEN.into()
        }
        // XLA's runtime makes the copy and waits on its own threads: the
        // program's read shows as a drained queue the next step's dispatch
        // then refills.
        FindingKind::Dispatch if fw == Framework::Xla && reads_per_step(r).is_some_and(|n| n >= READS_PER_STEP) => {
            format!(
                "Read values every N steps, not every step: {:.1} device-to-host copies a step (float() or \
             jax.device_get() of a device array, printing one) make the host wait for each step before it \
             dispatches the next, so the GPU idles while it does; keep them on the device and read them every N \
             steps.",
                reads_per_step(r).unwrap_or(0.0),
            )
        }
        FindingKind::Dispatch if fw == Framework::Xla => match launches_per_found_step(r) {
            Some(per) if per < ONE_LAUNCH_STEP => format!(
                "It launches each step as one compiled XLA executable already ({per:.1} launches a step): give each \
                 launch more work (a larger batch), or run several steps per launch (jax.lax.scan or fori_loop over \
                 steps)."
            ),
            _ => fw.launch_overhead().into(),
        },
        FindingKind::Dispatch => fw.launch_overhead().into(),
        _ => "Queued work waited: look for cross-stream event waits and host functions (cudaLaunchHostFunc).".into(),
    }
}

/// A range with no kernel records (trace windows) whose PM samples say its
/// SMs idled most of its wall time: SM time unused is its cost. Samples
/// cannot say why, so the advice is how to find out, and the likely fix
/// when its launches come closer together than trace mode's launch gaps.
fn sampled_idle(g: &RangeAnalysis) -> Option<Finding> {
    if !g.untraced || ![Bound::Idle, Bound::Launch, Bound::Host].contains(&g.verdict.bound) {
        return None;
    }
    let eff = g.sm_efficiency_pct?;
    // With the engine's activity sampled, the GPU's idle time; without,
    // the SMs' (which also counts SMs idle under running kernels).
    let busy = if g.utilization_pct > 0.0 { g.utilization_pct } else { eff };
    let cost = (g.wall_ns as f64 * (1.0 - busy / 100.0)) as u64;
    if 100.0 - busy < MIN_SHARE_PCT || cost < MIN_COST_NS {
        return None;
    }
    let counted = g.launches.map(|launches| Counted { calls: g.count, launches, wall_ns: g.wall_ns });
    let calls = if g.count > 1 { format!(" over {} calls", g.count) } else { String::new() };
    let launches = counted.map(|c| format!("{}; ", c.describe())).unwrap_or_default();
    let find_out = "PM samples cannot tell an idle GPU from kernels on a few SMs: a trace window \
                    (--trace-windows 100/1000) or trace mode splits its idle time by cause.";
    let advice = if counted.is_some_and(|c| c.dense()) {
        let (first, rest) = verdict::DENSE_LAUNCHES.split_at(1);
        format!("{}{rest}. {LAUNCH_OVERHEAD} {find_out}", first.to_uppercase())
    } else {
        find_out.to_string()
    };
    Some(Finding {
        kind: FindingKind::SmsIdle,
        bound: Bound::Idle,
        range: Some(g.path.clone()),
        kernel: None,
        cost_ns: cost,
        calls: g.count,
        message: format!(
            "{}: {}SMs active {eff:.0}% of its wall time{calls} ({launches}PM samples, no kernel records)",
            g.path,
            if g.utilization_pct > 0.0 { format!("GPU busy {busy:.0}%, ") } else { String::new() }
        ),
        advice,
    })
}

/// Ranges whose exposed communication (communication kernels with no
/// compute of the same device under them) takes at least
/// [`MIN_SHARE_PCT`] of their time: that time is the cost. A range inside
/// another carries the same communication, so only the outermost of a nest
/// is named.
fn exposed_communication(e: &Evidence, ranges: &[RangeAnalysis]) -> Vec<Finding> {
    let share = |g: &RangeAnalysis| 100.0 * g.exposed_comm_ns as f64 / g.active_ns.max(1) as f64;
    let costly: Vec<&RangeAnalysis> = ranges
        .iter()
        .filter(|g| g.library.is_none() && g.exposed_comm_ns >= MIN_COST_NS && share(g) >= MIN_SHARE_PCT)
        .collect();
    let paths: std::collections::HashSet<&str> = costly.iter().map(|g| g.path.as_str()).collect();
    let nested = |path: &str| path.match_indices('/').any(|(i, _)| paths.contains(&path[..i]));
    let mut out: Vec<Finding> = costly
        .iter()
        .filter(|g| !nested(&g.path))
        .map(|g| {
            let calls = if g.count > 1 {
                format!(" over {} calls, {} per call", g.count, ms(g.exposed_comm_ns / g.count))
            } else {
                String::new()
            };
            let share = share(g);
            Finding {
                kind: FindingKind::ExposedCommunication,
                bound: Bound::Communication,
                range: Some(g.path.clone()),
                kernel: None,
                cost_ns: g.exposed_comm_ns,
                calls: g.count,
                message: format!(
                    "{}: communication kernels ran {} ({share:.0}% of the range{calls}) with no compute under them, \
                     of {} in all; in a job of several ranks that includes this rank's wait for the slowest one \
                     (gpuscope report --merge of the ranks' reports tells the wait from the transfer)",
                    g.path,
                    ms(g.exposed_comm_ns),
                    ms(g.comm_ns)
                ),
                advice: e.fw.exposed_communication().to_string(),
            }
        })
        .collect();
    out.sort_by(|a, b| b.cost_ns.cmp(&a.cost_ns).then_with(|| a.range.cmp(&b.range)));
    out
}

/// Findings of one kind kept at most: the most costly. A report of a
/// million ranges has as many small idle gaps, and past the first hundred
/// of a kind they only repeat what those say.
pub const MAX_PER_KIND: usize = 100;

/// The findings, most costly first, and how many smaller ones were left
/// out by [`MAX_PER_KIND`].
pub(super) fn findings(
    e: &Evidence,
    ranges: &[RangeAnalysis],
    kernels: &[KernelAnalysis],
    peaks: Option<&Peaks>,
) -> (Vec<Finding>, usize) {
    let mut out = Vec::new();
    let r = e.r;
    // Idle time, per range and cause, over the calls after warm-up. Costs
    // first; messages and advice only for the findings kept.
    let mut idle: Vec<IdleCandidate> = Vec::new();
    for g in ranges.iter().filter(|g| g.library.is_none() && !short_stack_range(g)) {
        let Some(split) = g.idle else { continue };
        let a = split.to_array();
        let min_copy_share = if g.host.pageable_copies > 0 { MIN_PAGEABLE_SHARE_PCT } else { MIN_SHARE_PCT };
        for (cause, (kind, causes, _, _)) in IDLE_CAUSES.iter().enumerate() {
            let cost = crate::model::units::saturating_sum(causes.iter().map(|&c| a[c]));
            let share = 100.0 * cost as f64 / g.active_ns.max(1) as f64;
            let min_share = if *kind == "copies" { min_copy_share } else { MIN_SHARE_PCT };
            if share < min_share || cost < MIN_COST_NS {
                continue;
            }
            idle.push(IdleCandidate { cause, g, cost, share });
        }
    }
    // A finding whose ranges directly inside explain it (same cause, most
    // of the time) is left to them: each finding's cost is summed into its
    // parent's, so this stays linear in the findings.
    // Sampled ranges' idle SMs are the cause after the idle causes.
    let mut sampled: Vec<(&RangeAnalysis, Finding)> =
        ranges.iter().filter_map(|g| Some((g, sampled_idle(g)?))).collect();
    let sms_idle = IDLE_CAUSES.len();
    let mut inside: HashMap<(usize, &str), u64> = HashMap::default();
    let costs = idle.iter().map(|c| (c.cause, c.g.path.as_str(), c.cost));
    for (cause, path, cost) in costs.chain(sampled.iter().map(|(g, f)| (sms_idle, g.path.as_str(), f.cost_ns))) {
        if let Some((parent, _)) = path.rsplit_once('/') {
            let sum = inside.entry((cause, parent)).or_default();
            *sum = sum.saturating_add(cost);
        }
    }
    let explained = |cause: usize, path: &str, cost: u64| {
        let inner = inside.get(&(cause, path)).copied().unwrap_or(0);
        inner as f64 >= cost as f64 * INNER_EXPLAINS_PCT / 100.0
    };
    idle.retain(|f| !explained(f.cause, &f.g.path, f.cost));
    sampled.retain(|(g, f)| !explained(sms_idle, &g.path, f.cost_ns));
    let mut sampled: Vec<Finding> = sampled.into_iter().map(|(_, f)| f).collect();
    // The costliest of each cause, found without sorting them all.
    let mut omitted = 0;
    let mut by_cause: Vec<Vec<IdleCandidate>> = (0..IDLE_CAUSES.len()).map(|_| Vec::new()).collect();
    for c in idle {
        by_cause[c.cause].push(c);
    }
    let order = |a: &IdleCandidate, b: &IdleCandidate| b.cost.cmp(&a.cost).then_with(|| a.g.path.cmp(&b.g.path));
    for mut list in by_cause {
        if list.len() > MAX_PER_KIND {
            list.select_nth_unstable_by(MAX_PER_KIND - 1, order);
            omitted += list.len() - MAX_PER_KIND;
            list.truncate(MAX_PER_KIND);
        }
        list.sort_by(order);
        for c in list {
            let (kind, _, bound, what) = IDLE_CAUSES[c.cause].clone();
            let g = c.g;
            let calls = if g.count > 1 {
                format!(" over {} calls, {} per call", g.count, ms(c.cost / g.count))
            } else {
                String::new()
            };
            out.push(Finding {
                kind: kind.clone(),
                bound,
                range: Some(g.path.clone()),
                kernel: None,
                cost_ns: c.cost,
                calls: g.count,
                message: format!("{}: GPU idle {} ({:.0}% of the range{calls}) {what}", g.path, ms(c.cost), c.share),
                advice: idle_advice(&kind, e, g),
            });
        }
    }
    sampled.sort_by(|a, b| b.cost_ns.cmp(&a.cost_ns).then_with(|| a.range.cmp(&b.range)));
    omitted += sampled.len().saturating_sub(MAX_PER_KIND);
    out.extend(sampled.into_iter().take(MAX_PER_KIND));
    // Whole-session idle when the program has no ranges of its own: its
    // steady state's, gpuscope's cost taken out.
    if ranges.iter().all(|g| g.library.is_some() || g.from_stack) {
        if let Some((split, wall, what)) = session_idle(r) {
            let a = split.to_array();
            let wall = wall.saturating_sub(split.profiler_ns).max(1);
            for (kind, causes, bound, meaning) in IDLE_CAUSES {
                let cost = crate::model::units::saturating_sum(causes.iter().map(|&c| a[c]));
                let share = 100.0 * cost as f64 / wall as f64;
                // A runtime's own waits are nothing the program can change.
                let runtime = kind == "sync" && runtime_syncs(r, e.fw).is_some();
                if share >= MIN_SHARE_PCT && cost >= MIN_COST_NS && !runtime {
                    out.push(Finding {
                        kind: kind.clone(),
                        bound,
                        range: None,
                        kernel: None,
                        cost_ns: cost,
                        calls: 0,
                        message: format!("{what}: GPU idle {} ({share:.0}%) {meaning}", ms(cost)),
                        advice: session_advice(&kind, r, e.fw),
                    });
                }
            }
        }
    }
    if let Some(f) = allocator_churn(r) {
        out.push(f);
    }
    out.extend(super::devices::split(r, &e.devices));
    out.extend(device_memory(r));
    // Ranges nvidia-smi calls busy whose SMs are underused.
    for g in r.ranges.iter().filter(|g| g.busy_but_underused && g.library.is_none()) {
        let eff = g.sm_efficiency_pct.unwrap_or(0.0);
        out.push(Finding {
            kind: FindingKind::BusyButUnderused,
            bound: Bound::Latency,
            range: Some(g.path.to_string()),
            kernel: None,
            cost_ns: (g.gpu_busy_ns as f64 * (1.0 - eff / 100.0)) as u64,
            calls: 0,
            message: format!(
                "{}: busy {:.0}% of the time as nvidia-smi counts it, but SM efficiency {eff:.1}%",
                g.path, g.gpu_utilization_pct
            ),
            advice: "nvidia-smi's utilisation hides idle SMs here: see the kernel findings for why they idle.".into(),
        });
    }
    let mut comm = exposed_communication(e, ranges);
    omitted += comm.len().saturating_sub(MAX_PER_KIND);
    comm.truncate(MAX_PER_KIND);
    out.extend(comm);
    // Kernels. Communication kernels wait on transfers and other ranks:
    // their launch shape and occupancy are no advice (the ranges'
    // exposed communication is).
    let sms = r.devices.first().map(|d| d.sm_count).unwrap_or(0);
    for k in kernels.iter().filter(|k| k.gpu_ns >= MIN_COST_NS && !is_comm_kernel(&k.name)) {
        let t = k.gpu_ns as f64;
        let short = &k.display_name;
        let few = k.sm_coverage_pct.filter(|c| *c < verdict::LOW_COVERAGE_PCT).or(k
            .sm_efficiency_pct
            .filter(|e| *e < verdict::FEW_SMS_PCT && k.sm_coverage_pct.is_some_and(|c| c < 100.0)));
        if let Some(used) = few {
            out.push(Finding {
                kind: FindingKind::FewSms,
                bound: Bound::Latency,
                range: None,
                kernel: Some(k.name.clone()),
                cost_ns: (t * (1.0 - used / 100.0)) as u64,
                calls: 0,
                message: format!(
                    "{short}: its grid keeps {used:.1}% of the {sms} SMs busy ({} of GPU time)",
                    ms(k.gpu_ns)
                ),
                advice: more_blocks(sms),
            });
            continue;
        }
        // A tail needs a full wave before it: a grid under one wave is an
        // occupancy question (below).
        let tail = k.wave_efficiency_pct.filter(|w| *w < verdict::TAIL_WAVE_PCT && k.waves.is_some_and(|n| n > 1.0));
        if let Some(w) = tail {
            let waves = k.waves.unwrap_or(0.0);
            out.push(Finding {
                kind: FindingKind::TailWave,
                bound: Bound::Latency,
                range: None,
                kernel: Some(k.name.clone()),
                cost_ns: (t * (1.0 - w / 100.0)) as u64,
                calls: 0,
                message: format!("{short}: {waves:.2} waves of blocks, so the last one runs partly empty: the grid fills {w:.0}% of the block slots of its {} waves", waves.ceil()),
                advice: "Size the grid to whole waves (a multiple of SMs x blocks per SM), or use smaller blocks so the last wave is fuller.".into(),
            });
            continue;
        }
        let Some(v) = &k.verdict else { continue };
        if v.bound == Bound::Latency {
            if let Some(o) = k.achieved_occupancy_pct.filter(|o| *o < crate::report::LOW_OCCUPANCY_PCT) {
                let busy = k.compute_pct.unwrap_or(0.0).max(k.dram_pct.unwrap_or(0.0));
                out.push(Finding {
                    kind: FindingKind::LowOccupancy,
                    bound: Bound::Latency,
                    range: None,
                    kernel: Some(k.name.clone()),
                    cost_ns: (t * (1.0 - busy / 100.0)) as u64,
                    calls: 0,
                    message: format!("{short}: latency-bound at {o:.0}% achieved occupancy ({})", v.evidence),
                    advice: "Give the SMs more warps to switch between: fewer registers per thread (__launch_bounds__, -maxrregcount) or less shared memory per block, or more independent work per warp.".into(),
                });
            }
        } else if v.bound == Bound::Memory {
            let ai = k.arithmetic_intensity.map(|a| format!(", {a:.1} FLOP/byte")).unwrap_or_default();
            let ridge = peaks
                .and_then(|p| p.ridge(super::peaks::TENSOR_BF16))
                .map(|r| format!(" (ridge point {r:.0})"))
                .unwrap_or_default();
            out.push(Finding {
                kind: FindingKind::MemoryBound,
                bound: Bound::Memory,
                range: None,
                kernel: Some(k.name.clone()),
                cost_ns: k.gpu_ns,
                calls: 0,
                message: format!(
                    "{short}: memory-bound, DRAM at {:.0}% of peak{ai}{ridge}, {} of GPU time",
                    k.dram_pct.unwrap_or(0.0),
                    ms(k.gpu_ns)
                ),
                advice: MOVE_FEWER_BYTES.into(),
            });
        }
    }
    out.sort_by(|a, b| b.cost_ns.cmp(&a.cost_ns).then(a.message.cmp(&b.message)));
    let mut kept: HashMap<FindingKind, usize> = HashMap::default();
    let before = out.len();
    out.retain(|f| {
        let n = kept.entry(f.kind.clone()).or_default();
        *n += 1;
        *n <= MAX_PER_KIND
    });
    let dropped = before - out.len();
    (out, omitted + dropped)
}

/// What to change for memory-bound kernels.
pub(super) const MOVE_FEWER_BYTES: &str = "Move fewer bytes: fuse it with the ops around it (torch.compile) so \
     intermediates stay on chip, and use narrower dtypes (bf16, fp8).";

/// What to change for kernels whose grid leaves SMs idle, on a GPU of
/// `sms` SMs.
pub(super) fn more_blocks(sms: u32) -> String {
    format!(
        "Launch at least one block per SM ({sms}): split the work into more, smaller blocks or use a grid-stride \
         loop over a grid of {sms} or more blocks."
    )
}

/// A range's idle cause large enough to be a finding, before its text.
struct IdleCandidate<'a> {
    /// Index in [`IDLE_CAUSES`].
    cause: usize,
    g: &'a RangeAnalysis,
    cost: u64,
    share: f64,
}

/// Device memory allocations and releases in the steady state at least
/// this many times make a finding: a caching allocator allocates at
/// warm-up and then reuses.
pub(super) const CHURN_MIN: u64 = 20;

/// Device memory released and allocated again and again in the steady
/// state (allocation records): each release waits for the device.
fn allocator_churn(r: &Report) -> Option<Finding> {
    let s = r.session_steady.as_ref()?;
    if s.releases.saturating_add(s.allocations) < CHURN_MIN || s.releases == 0 {
        return None;
    }
    let secs = s.wall_ns().max(1) as f64 / 1e9;
    Some(Finding {
        kind: FindingKind::AllocatorChurn,
        bound: Bound::Sync,
        range: None,
        kernel: None,
        cost_ns: 0,
        calls: 0,
        message: format!(
            "the steady state released device memory {} times and allocated it {} times ({:.0} releases per \
             second, over {})",
            s.releases,
            s.allocations,
            s.releases as f64 / secs,
            ms(s.wall_ns())
        ),
        advice: "Each cudaFree/cuMemFree waits for the whole device to finish its work, and the next allocation \
                 pays again: keep memory allocated across steps (no torch.cuda.empty_cache() or \
                 cupy.get_default_memory_pool().free_all_blocks() in the loop; PyTorch's caching allocator on, \
                 PYTORCH_NO_CUDA_MEMORY_CACHING unset)."
            .into(),
    })
}

/// A device memory peak of at least this share of the device's memory is
/// near its capacity.
pub(super) const NEAR_CAPACITY: f64 = 0.90;
/// A peak of at most this share leaves room worth a finding, when the
/// memory a larger batch would add is known.
pub(super) const HEADROOM_MAX: f64 = 0.60;

/// What a larger batch adds, per batch's worth: the device bytes one step
/// takes on top of what it starts with (activations, gradients and
/// temporaries), from the framework allocator's figures of the `step`
/// range (its peak inside above its bytes in use at the start, scaled by
/// the bytes it holds per byte in use), else the most a `forward` range
/// kept (activations only). With what it was measured from.
fn per_batch_bytes(r: &Report) -> Option<(u64, &'static str)> {
    let framework = |name: &'static str| {
        r.ranges
            .iter()
            .filter(move |g| g.path.frames.last().is_some_and(|f| f.name == name))
            .filter_map(|g| g.memory.as_ref()?.framework.as_ref())
    };
    let step = framework("step")
        .filter_map(|f| {
            let added = f.peak_inside_bytes?.checked_sub(f.allocated_at_start_bytes)?;
            let held_per_used = f.reserved_at_end_bytes as f64 / f.peak_allocated_bytes.max(1) as f64;
            Some((added as f64 * held_per_used.max(1.0)) as u64)
        })
        .max()
        .filter(|&b| b > 0);
    if let Some(b) = step {
        return Some((b, "a step takes on top of what it starts with (activations, gradients, temporaries)"));
    }
    framework("forward")
        .map(|f| f.max_growth_bytes)
        .max()
        .filter(|&b| b > 0)
        .map(|b| (b, "a forward pass keeps (activations)"))
}

/// Device memory against the device's: near its capacity (a larger input
/// or fragmentation risks running out), or a peak low enough that a larger
/// batch fits (with the activations a forward pass keeps to size it).
fn device_memory(r: &Report) -> Vec<Finding> {
    let fmt = crate::model::units::fmt_bytes;
    let mut out = Vec::new();
    let per_batch = per_batch_bytes(r);
    // PyTorch's caching allocator at the end of its last step: held
    // against in use.
    let step = r
        .ranges
        .iter()
        .filter(|g| g.path.frames.len() == 1 && g.path.frames[0].name == "step")
        .find_map(|g| g.memory.as_ref()?.framework.clone());
    for d in &r.memory.devices {
        let Some(capacity) = r.devices.iter().find(|x| x.id == d.device).and_then(|x| x.memory_bytes) else {
            continue;
        };
        if capacity == 0 || d.peak_live_bytes == 0 {
            continue;
        }
        let share = d.peak_live_bytes as f64 / capacity as f64;
        let peak = format!(
            "GPU {}'s device memory peaked at {} of {} ({:.0}%)",
            d.device,
            fmt(d.peak_live_bytes),
            fmt(capacity),
            100.0 * share
        );
        let finding = |kind, message: String, advice: String| Finding {
            kind,
            bound: Bound::DeviceMemory,
            range: None,
            kernel: None,
            cost_ns: 0,
            calls: 0,
            message,
            advice,
        };
        if share >= NEAR_CAPACITY {
            let cached = step.as_ref().map_or(String::new(), |f| {
                format!(
                    "; PyTorch's allocator held {} at the end of a step, {} of it in tensors",
                    fmt(f.reserved_at_end_bytes),
                    fmt(f.allocated_at_end_bytes)
                )
            });
            out.push(finding(
                FindingKind::NearCapacity,
                format!("{peak}{cached}"),
                "Little room is left: a longer sequence, a larger batch or fragmentation can run out of memory. \
                 Keep the peak down with activation checkpointing, a smaller micro-batch with gradient \
                 accumulation, or sharded optimizer state; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
                 lets PyTorch's allocator reuse fragmented memory."
                    .into(),
            ));
        } else if let Some((a, what)) = per_batch {
            // Memory allocated before the session is not in its peak (a
            // session begun after the model was loaded): the free memory
            // is not known.
            let earlier =
                d.earlier_releases > 0 || step.as_ref().is_some_and(|f| f.reserved_at_end_bytes > d.peak_live_bytes);
            if earlier {
                continue;
            }
            let free = capacity - d.peak_live_bytes;
            let times = free as f64 / a as f64;
            let doubled = d.peak_live_bytes.saturating_add(a);
            let message = if doubled <= capacity {
                if share > HEADROOM_MAX {
                    continue;
                }
                format!(
                    "{peak}; {what} {}, and the {} free is about {times:.1}x that: by this estimate twice the \
                     batch peaks near {} and fits, and about {:.0}x the batch still fits",
                    fmt(a),
                    fmt(free),
                    fmt(doubled),
                    (1.0 + times).floor(),
                )
            } else {
                format!(
                    "{peak}; {what} {}, more than the {} free: by this estimate twice the batch would need \
                     about {}, more than the device has",
                    fmt(a),
                    fmt(free),
                    fmt(doubled),
                )
            };
            let advice = if doubled <= capacity {
                "Use the memory: a larger batch (scale the learning rate with it), or less activation \
                 checkpointing."
            } else {
                "A larger batch needs less memory per sample first: activation checkpointing, or gradient \
                 accumulation over micro-batches of this size."
            };
            out.push(finding(FindingKind::MemoryHeadroom, message, advice.into()));
        }
    }
    out
}

/// The session's idle time for a program without ranges: of its steady
/// state when one was found (start-up and shutdown left out), with
/// gpuscope's cost taken out; its span; and what it is called.
pub(super) fn session_idle(r: &Report) -> Option<(IdleSplit, u64, String)> {
    match &r.session_steady {
        Some(s) => {
            let added =
                r.profiler_cost.added_ns(s.launches, s.callback_ns, s.call_ns, s.calls_timed, s.hook_ns).unwrap_or(0);
            let what = if s.startup_ns.saturating_add(s.shutdown_ns) > 0 {
                format!(
                    "the session's steady state ({} of start-up and {} of shutdown left out)",
                    ms(s.startup_ns),
                    ms(s.shutdown_ns)
                )
            } else {
                "the session".to_string()
            };
            Some((cost::remove(s.idle, added), s.wall_ns(), what))
        }
        None => r.idle.map(|i| (i, r.timeline_ns(), "the session".to_string())),
    }
}

/// Launches a call of a Python-stack range needs for its idle time to
/// mean something: its span runs from its first launch to the return of
/// its last, so a range of one launch is idle by construction (its kernel
/// runs after it).
const MIN_STACK_RANGE_LAUNCHES: u64 = 4;

/// Whether `g` is a range of the Python stack too short for idle findings.
fn short_stack_range(g: &RangeAnalysis) -> bool {
    g.from_stack && g.launches.map_or(true, |l| l < MIN_STACK_RANGE_LAUNCHES.saturating_mul(g.count.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{FoundSteps, SessionSteady};

    /// A steady state of 300 steps of 1.2 ms with `launches` launches.
    fn jax_loop(launches: u64) -> Report {
        let ms = 1_000_000;
        let steps = FoundSteps { kernels_per_step: 38, steps_seen: 299, median_ns: 1_200_000, ..Default::default() };
        let steady =
            SessionSteady { start_ns: 0, end_ns: 360 * ms, launches, steps: Some(steps), ..Default::default() };
        use crate::aggregate::{devices::DeviceTable, AggregateOptions, Aggregator};
        let a = Aggregator::new(AggregateOptions::default(), DeviceTable::fixed(vec![]));
        let mut r = Report::build(a.finish(360 * ms), 0, 360 * ms);
        r.session_steady = Some(steady);
        r
    }

    #[test]
    fn xla_s_own_synchronisations_get_a_note_not_an_action() {
        let mut r = jax_loop(307);
        r.memory.synchronizations = 1260;
        r.memory.synchronization_ns = 900_000_000;
        // On XLA's threads: not the program's.
        (r.memory.main_thread_synchronizations, r.memory.main_thread_synchronization_ns) = (Some(2), Some(1_000_000));
        let note = runtime_syncs(&r, Framework::Xla).expect("the runtime's");
        assert!(note.contains("1258 of 1260") && note.contains("XLA's runtime's own"), "{note}");
        // The same waits in PyTorch, or on the main thread, are the program's.
        assert!(runtime_syncs(&r, Framework::PyTorch).is_none());
        r.memory.main_thread_synchronization_ns = Some(600_000_000);
        assert!(runtime_syncs(&r, Framework::Xla).is_none());
        // A loop reading a value every step (one copy to the host a step)
        // waits through the runtime's threads: no note, and the reads are
        // named where the GPU idles for dispatch.
        r.memory.main_thread_synchronization_ns = Some(1_000_000);
        let steady = r.session_steady.as_mut().unwrap();
        (steady.copies, steady.device_to_host_copies) = (Some(300), 300);
        assert!(runtime_syncs(&r, Framework::Xla).is_none());
        let advice = session_advice(&FindingKind::Dispatch, &r, Framework::Xla);
        assert!(advice.starts_with("Read values every N steps") && advice.contains("1.0 device-to-host"), "{advice}");
        // A report that did not tell threads apart says nothing of them.
        (r.memory.main_thread_synchronizations, r.memory.main_thread_synchronization_ns) = (None, None);
        assert!(runtime_syncs(&r, Framework::Xla).is_none());
    }

    #[test]
    fn pageable_copies_of_start_up_are_not_the_loop_s() {
        // A model moved to the GPU at start-up: 320 pageable copies; the
        // loop's own copies come from pinned memory.
        let mut r = jax_loop(307);
        r.memory.memcpy.push(crate::report::CopySummary {
            kind: "HtoD".into(),
            count: 682,
            pageable: 320,
            ..Default::default()
        });
        let steady = r.session_steady.as_mut().unwrap();
        (steady.copies, steady.pageable_copies) = (Some(362), 0);
        let advice = session_advice(&FindingKind::Copies, &r, Framework::PyTorch);
        assert!(advice.starts_with("Overlap copies"), "{advice}");
        // Pageable in the loop: pin them.
        r.session_steady.as_mut().unwrap().pageable_copies = 300;
        let advice = session_advice(&FindingKind::Copies, &r, Framework::PyTorch);
        assert!(advice.starts_with("300 of 362 copies use pageable"), "{advice}");
        // A report that did not count the steady state's copies: the session's.
        r.session_steady.as_mut().unwrap().copies = None;
        assert!(session_advice(&FindingKind::Copies, &r, Framework::PyTorch).starts_with("320 of 682"));
    }

    #[test]
    fn a_jax_step_launched_as_one_executable_is_not_told_to_jit_its_step() {
        let once = session_advice(&FindingKind::Dispatch, &jax_loop(307), Framework::Xla);
        assert!(once.contains("one compiled XLA executable already (1.0 launches a step)"), "{once}");
        assert!(!once.contains("under one jax.jit"), "{once}");
        // 38 launches a step: its ops run one by one.
        let eager = session_advice(&FindingKind::Dispatch, &jax_loop(300 * 38), Framework::Xla);
        assert!(eager.contains("under one jax.jit"), "{eager}");
    }
}
