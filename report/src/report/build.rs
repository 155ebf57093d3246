//! From aggregation's running totals to the report's summaries.

use super::*;
use crate::aggregated::calls::Figures;
use crate::aggregated::kernels::{additive, KernelAcc};
use crate::aggregated::Aggregate;
use crate::aggregated::CopyAcc;
use crate::aggregated::RangeAcc;
use crate::model::device::DeviceTime;
use crate::model::sampled::SampledAcc;

use std::collections::HashMap;

fn stats(a: &KernelAcc) -> KernelStats {
    let mut s = exact_stats(a);
    s.sampled = a.sampled_own.figures();
    if let (0, Some(f)) = (a.profiled, &s.sampled) {
        s.sm_efficiency_pct = f.sm_efficiency_pct;
        s.achieved_occupancy_pct = f.achieved_occupancy_pct;
        s.metrics_sampled = true;
    }
    s
}

fn exact_stats(a: &KernelAcc) -> KernelStats {
    let lim = [Limiter::Warps, Limiter::Registers, Limiter::SharedMemory, Limiter::Blocks];
    let best = (0..4).max_by_key(|&i| a.limiter_time[i]).filter(|&i| a.limiter_time[i] > 0);
    KernelStats {
        launches: a.launches,
        total_ns: a.total,
        mean_ns: a.total.checked_div(a.launches).unwrap_or(0),
        min_ns: a.min,
        max_ns: a.max,
        theoretical_occupancy_pct: (a.occ_time > 0).then(|| a.occ_weighted / a.occ_time as f64),
        occupancy_limiter: best.map(|i| lim[i]),
        profiled_launches: a.profiled,
        achieved_occupancy_pct: (a.profiled > 0).then(|| a.achieved_weighted / a.metric_time),
        sm_efficiency_pct: (a.profiled > 0).then(|| a.efficiency_weighted / a.metric_time),
        counters: a
            .counters
            .iter()
            .map(|(n, v)| (n.clone(), if additive(n) { *v } else { v / a.metric_time }))
            .collect(),
        measured_ns: if a.profiled > 0 { a.metric_time } else { 0.0 },
        sm_coverage_pct: (a.grid_time > 0).then(|| 100.0 * a.coverage_weighted / a.grid_time as f64),
        wave_efficiency_pct: (a.grid_time > 0).then(|| 100.0 * a.waves_weighted / a.grid_time as f64),
        waves: (a.grid_time > 0).then(|| a.wave_count_weighted / a.grid_time as f64),
        sampled: None,
        metrics_sampled: false,
        first_ns: a.first_start,
        last_ns: a.last_end,
        host_before_ns: a.host_before,
    }
}

/// The untraced instances' steady state, and their samples without the
/// warm-up instances'.
fn untraced_steady(a: &RangeAcc) -> (Option<Steady>, Option<SampledFigures>) {
    let total = Figures {
        wall: a.untraced_wall,
        launches: a.untraced_launches,
        graph_launches: a.untraced_graph_launches,
        ..Default::default()
    };
    let Some(s) = steady::of_range(a.untraced_count, &total, &a.untraced_calls) else { return (None, None) };
    let w = s.warmup_calls as usize;
    if w == 0 || w > a.untraced_sampled_first.len() {
        return (Some(s), None);
    }
    let mut sampled = a.sampled_wall;
    for warm in &a.untraced_sampled_first[..w] {
        sampled.remove(warm);
    }
    (Some(s), sampled.figures())
}

fn range(path: RangePath, a: &RangeAcc, idle: bool) -> RangeSummary {
    let t = &a.total;
    let (untraced_steady, sampled_wall_steady) = untraced_steady(a);
    RangeSummary {
        library: path.internal_domain().map(str::to_string),
        path,
        count: a.count,
        wall_ns: t.wall,
        gpu_busy_ns: t.busy,
        gpu_utilization_pct: if t.wall > 0 { 100.0 * t.in_window as f64 / t.wall as f64 } else { 0.0 },
        kernel_launches: t.launches,
        sm_efficiency_pct: None,
        achieved_occupancy_pct: None,
        busy_but_underused: false,
        idle: idle.then(|| IdleSplit::from_array(t.idle)),
        sampled: None,
        sampled_wall: a.sampled_wall.figures(),
        metrics_sampled: false,
        untraced_count: a.untraced_count,
        untraced_wall_ns: a.untraced_wall,
        untraced_launches: a.untraced_launches,
        untraced_steady,
        sampled_wall_steady,
        host: steady::host_figures(t),
        steady: if idle { steady::of_range(a.count, t, &a.calls) } else { None },
        first_calls_ns: a.calls.first.iter().map(|c| c.figures.wall).collect(),
        counted_flops: t.mflops as f64 * 1e6,
        memory: a.framework.clone().map(|f| RangeMemory { framework: Some(f), ..Default::default() }),
        totals: t.totals,
        gpus: a.usual_gpus() as u64,
    }
}

fn copies(kind: &str, a: &CopyAcc) -> CopySummary {
    CopySummary { kind: kind.to_string(), count: a.count, bytes: a.bytes, total_ns: a.ns, pageable: a.pageable }
}

/// Measured values of each range: its measured kernels and those of the
/// ranges nested in it, weighted by measured GPU time. Each (path, kernel)
/// adds to every prefix of its path: linear in paths times depth.
fn range_metrics(ranges: &mut [RangeSummary], path_kernels: &[(RangePath, String, KernelAcc)]) {
    let mut sums: HashMap<&[RangeFrame], (f64, f64, f64, SampledAcc)> = HashMap::new();
    for (p, _, a) in path_kernels.iter().filter(|(_, _, a)| a.profiled > 0 || a.sampled.covered_ns > 0.0) {
        let figures = a.sampled.figures();
        for n in 1..=p.frames.len() {
            let s = sums.entry(&p.frames[..n]).or_default();
            s.0 += a.achieved_weighted;
            s.1 += a.efficiency_weighted;
            s.2 += a.metric_time;
            if let Some(f) = &figures {
                s.3.add_figures(f);
            }
        }
    }
    for g in ranges {
        let Some((ach, eff, w, sampled)) = sums.get(g.path.frames.as_slice()) else { continue };
        g.sampled = sampled.figures();
        let (ach, eff) = if *w > 0.0 {
            (Some(ach / w), Some(eff / w))
        } else if let Some(f) = &g.sampled {
            g.metrics_sampled = true;
            (f.achieved_occupancy_pct, f.sm_efficiency_pct)
        } else {
            continue;
        };
        g.achieved_occupancy_pct = ach;
        g.sm_efficiency_pct = eff;
        g.busy_but_underused = g.gpu_utilization_pct >= BUSY_PCT
            && (eff.is_some_and(|e| e < LOW_SM_EFFICIENCY_PCT) || ach.is_some_and(|a| a < LOW_OCCUPANCY_PCT));
    }
}

/// A loop found to begin later than a tenth of the way into the steady
/// state trims the steady state to it.
const LATE_LOOP_DIV: u64 = 10;

/// Steps found over the whole session whose run lasts more than this many
/// times the steady state found from its bins replace it.
const LOOP_OVER_STEADY: u64 = 2;

/// How many of the exact kernels must equal the one a family step before
/// them, %, for that step to stand where the exact kernels repeat only
/// over a multiple of it: the kernels picked by shape are a few of a
/// step's (6 of 135 on a GNN's batches, half of them changing).
const FAMILY_STEP_MATCH_PCT: f64 = 90.0;

/// How far the family step's time, times the multiple, may be from the
/// exact kernels' step, as a share of it.
const FAMILY_STEP_TIME_TOLERANCE: f64 = 0.2;

/// Steps by exact kernels, else by family: where those find none, or a
/// multiple of the families' step (a few kernels that change with the
/// shapes can repeat over several steps better than over one; batches of
/// two shapes in turn repeat exactly over two). A multiple gives way only
/// to a family step the exact kernels of `stream` repeat with nearly
/// everywhere inside `[start, end)`, and that lasts its share of the
/// multiple: a layer whose variants alone differ from the next layer's is
/// no step.
fn exact_or_family(
    exact: Option<super::FoundSteps>,
    stream: &[(u64, u32, u32)],
    start: u64,
    end: u64,
    family: &dyn Fn() -> Option<super::FoundSteps>,
) -> Option<super::FoundSteps> {
    let family = family().map(|f| super::FoundSteps { by_family: true, ..f });
    match (exact, family) {
        (Some(e), Some(f)) => {
            let (big, small) = (e.kernels_per_step, f.kernels_per_step.max(1));
            let m = big / small;
            let divides = small < big && big % small == 0;
            let agrees = divides
                && super::steps::match_at(stream, start, end, small as usize) >= FAMILY_STEP_MATCH_PCT
                && (f.step_ns().saturating_mul(m) as f64 - e.step_ns() as f64).abs()
                    <= FAMILY_STEP_TIME_TOLERANCE * e.step_ns() as f64;
            Some(if agrees { f } else { e })
        }
        (e, f) => e.or(f),
    }
}

/// GPU busy (its engine's sampled activity) over a stretch from which the
/// GPU paces its loop, %: its steps are then the kernels' inside periodic
/// trace windows where they hold some, else the launches' by their median.
const GPU_PACED_PCT: f64 = 90.0;

/// Bins a steady state keeps at least when the bins its loop filled only in
/// part are left out.
const TRIMMED_BINS: u64 = 3;

impl Report {
    /// The report of what aggregation folded between `start_ns` and
    /// `end_ns`.
    #[doc(hidden)]
    pub fn build(a: Aggregate, start_ns: u64, end_ns: u64) -> Report {
        let mut kernels: Vec<KernelSummary> = a
            .kernels
            .iter()
            .map(|(n, k)| KernelSummary { name: n.clone(), display_name: String::new(), stats: stats(k) })
            .collect();
        kernels.sort_by(|a, b| b.stats.total_ns.cmp(&a.stats.total_ns).then(a.name.cmp(&b.name)));
        let mut path_kernels: Vec<PathKernelSummary> = a
            .path_kernels
            .iter()
            .map(|(p, n, k)| PathKernelSummary {
                path: p.clone(),
                name: n.clone(),
                display_name: String::new(),
                stats: stats(k),
            })
            .collect();
        path_kernels.sort_by(|a, b| a.path.cmp(&b.path).then(b.stats.total_ns.cmp(&a.stats.total_ns)));
        let mut ranges: Vec<RangeSummary> = a.ranges.iter().map(|(p, r)| range(p.clone(), r, true)).collect();
        ranges.sort_by(|a, b| a.path.cmp(&b.path));
        range_metrics(&mut ranges, &a.path_kernels);
        let mut start_end_ranges: Vec<RangeSummary> =
            a.start_end_ranges.iter().map(|(p, r)| range(p.clone(), r, false)).collect();
        start_end_ranges.sort_by(|a, b| a.path.cmp(&b.path));
        let memory_by_path: std::collections::HashMap<&RangePath, &RangeMemory> =
            a.range_memory.iter().map(|(p, m)| (p, m)).collect();
        for r in ranges.iter_mut().chain(start_end_ranges.iter_mut()) {
            if let Some(m) = memory_by_path.get(&r.path) {
                let framework = r.memory.take().and_then(|m| m.framework);
                r.memory = Some(RangeMemory { framework, ..(*m).clone() });
            }
        }
        let memory = MemorySummary {
            memcpy: a.memcpy.iter().map(|(k, c)| copies(k, c)).collect(),
            memset: CopySummary { pageable: 0, ..copies("memset", &a.memset) },
            synchronizations: a.syncs.0,
            synchronization_ns: a.syncs.1,
            main_thread_synchronizations: a.main_syncs.map(|m| m.0),
            main_thread_synchronization_ns: a.main_syncs.map(|m| m.1),
            devices: a.device_memory.clone(),
        };
        // Without kernel records in it, the steady state's steps are found
        // from the launches logged between trace windows: every thread's in
        // one stream, as one stream runs the kernels (PyTorch's backward
        // launches from autograd's thread, its forward from the program's),
        // else the busiest thread's.
        // With periodic trace windows the launches come before the kernels
        // taken across windows: the kernel stream repeats once a window
        // where a step outlasts one, and its period is then the windows'.
        let merged: Vec<(u64, u32, u32)> = a.launch_stream.iter().map(|&(t, f, _)| (t, f, 0)).collect();
        let trace_windows = a.sampling.as_ref().and_then(|m| m.trace_windows.as_ref());
        let partly_traced = trace_windows.is_some_and(|w| w.untraced_ns > 0);
        let windows = trace_windows.filter(|w| w.periodic());
        // Launches inside a window are not logged: a span between two steps'
        // beginnings that reaches into one holds several steps. Windows open
        // every period from the session's start, on the decoder's poll, and
        // close up to a few tens of percent late.
        let in_window = |a: u64, b: u64| {
            windows.is_some_and(|w| {
                let late_close = (w.window_ns + w.window_ns / 2).min(w.period_ns);
                crate::model::sampled::traced_between(start_ns, late_close, w.period_ns, a, b) > 0
            })
        };
        // Kernel records are taken inside windows only, one a period: two
        // kernels of two periods lie in two windows.
        let across_windows = |a: u64, b: u64| {
            windows.is_some_and(|w| {
                let period = |t: u64| t.saturating_sub(start_ns) / w.period_ns.max(1);
                period(a) != period(b)
            })
        };
        // Where the GPU was busy nearly all of a stretch, it sets the loop's
        // pace and the host runs ahead of it, launching faster than the step
        // while it fills the GPU's queue (at the loop's start, and after a
        // window whose slower launches let it drain). The kernels' steps
        // inside the windows are the GPU's. Judged on each stretch looked
        // at: the bins' first steady state may be start-up's, the loop found
        // after it.
        let gpu_paced = |start: u64, end: u64| {
            steady::of_span(&a.timeline, start_ns, end_ns, start, end.saturating_sub(1))
                .and_then(|s| s.sampled)
                .and_then(|f| f.gpu_busy_pct)
                .is_some_and(|b| b >= GPU_PACED_PCT)
        };
        // Where the shapes change from step to step (batches of graphs of
        // other sizes), libraries pick other kernels for them (cuBLAS's
        // GEMM tiles, PyTorch's vectorized or unrolled launches), and only
        // the kernels' families repeat.
        let families = super::steps::by_family(&a.kernel_stream, &a.kernel_stream_names);
        let launch_families = super::steps::by_family(&a.launch_stream, &a.launch_stream_names);
        let merged_families = super::steps::by_family(&merged, &a.launch_stream_names);
        let find = |start: u64, end: u64| {
            let paced = gpu_paced(start, end);
            let kernels = || {
                let exact = super::steps::find(&a.kernel_stream, start, end);
                exact_or_family(exact, &a.kernel_stream, start, end, &|| {
                    families.as_ref().and_then(|f| super::steps::find(f, start, end))
                })
            };
            // The launches' period by its mean (a host that runs ahead in
            // bursts launches some steps faster, others slower), but where
            // the GPU paces the loop by its median: the host runs ahead only
            // while it fills the GPU's queue (a 0.35 s JAX loop launched its
            // steps 1.04 ms apart on average, 1.14 by the median, for 1.16
            // on the GPU).
            let launches = || {
                // Each stream's exact steps against its own families'.
                let of = |stream: &[(u64, u32, u32)], families: Option<&Vec<(u64, u32, u32)>>| {
                    let exact = super::steps::find_around(stream, start, end, in_window);
                    exact_or_family(exact, stream, start, end, &|| {
                        families.and_then(|f| super::steps::find_around(f, start, end, in_window))
                    })
                };
                of(&merged, merged_families.as_ref())
                    .or_else(|| of(&a.launch_stream, launch_families.as_ref()))
                    .map(|f| super::FoundSteps { from_launches: true, mean_ns: if paced { 0 } else { f.mean_ns }, ..f })
            };
            if windows.is_none() {
                return kernels().or_else(launches);
            }
            let between = launches();
            // A step longer than a window repeats in none: a layer that
            // repeats inside one is no step. The host runs ahead of the GPU
            // between windows, never several times faster than the step.
            let in_windows = paced
                .then(|| {
                    let exact = super::steps::find_within(&a.kernel_stream, start, end, &across_windows);
                    exact_or_family(exact, &a.kernel_stream, start, end, &|| {
                        families.as_ref().and_then(|f| super::steps::find_within(f, start, end, &across_windows))
                    })
                })
                .flatten()
                .filter(|k| between.map_or(true, |l| k.step_ns().saturating_mul(2) >= l.step_ns()));
            in_windows.or(between).or_else(kernels)
        };
        let session_steady = steady::of_session_from(&a.timeline, start_ns, end_ns, 0, partly_traced).map(|mut s| {
            s.steps = find(s.start_ns, s.end_ns);
            // A loop that began well after the steady state did (other work
            // before it looked steady): the steady state is the loop's.
            let late =
                s.steps.filter(|f| f.late && f.first_ns > s.start_ns.saturating_add(s.wall_ns() / LATE_LOOP_DIV));
            if let Some(f) = late {
                if let Some(mut from) =
                    steady::of_session_from(&a.timeline, start_ns, end_ns, f.first_ns, partly_traced)
                {
                    from.steps = find(from.start_ns, from.end_ns).or(Some(f));
                    if from.settled || !s.settled {
                        s = from;
                    }
                }
            }
            // A loop whose step outlasts a bin and leaves the GPU idle
            // between its bursts (a host waiting for data) fills bins and
            // empties others in turn: no run of steady bins holds it, and the
            // steady state found is a sliver of it (or of its first steps,
            // where the loader had batches ready). The steps found over the
            // session's last kernels (or launches) then give its span, where
            // they hold the sliver or it is shorter than a few of their steps
            // (not a steady state of its own before another loop).
            if let Some(f) = find(start_ns, end_ns) {
                let to = f.last_ns.saturating_add(f.step_ns());
                let holds = f.first_ns <= s.start_ns && to >= s.end_ns;
                let sliver = s.wall_ns() < f.step_ns().saturating_mul(super::steps::MIN_STEPS as u64);
                if (holds || sliver) && to.saturating_sub(f.first_ns) > s.wall_ns().saturating_mul(LOOP_OVER_STEADY) {
                    let last = to.saturating_sub(1);
                    if let Some(mut over) = steady::of_span(&a.timeline, start_ns, end_ns, f.first_ns, last) {
                        over.steps = find(over.start_ns, over.end_ns).or(Some(f));
                        s = over;
                    }
                }
            }
            // A bin the loop began or ended inside, a step or more from its
            // edge, dilutes its figures with what came before or after (a
            // 0.35 s JAX loop in 40 ms bins read 91% busy from its samples,
            // 98% true): left out where three bins remain. A loop running
            // through the steady state finds its first whole step within a
            // step of the edge, and keeps its bins.
            if let Some(f) = s.steps {
                let (w, step) = (a.timeline.width, f.step_ns());
                let loop_end = f.last_ns.saturating_add(step);
                let began_inside =
                    f.first_ns >= s.start_ns.saturating_add(step) && f.first_ns < s.start_ns.saturating_add(w);
                let ended_inside = s.end_ns >= loop_end.saturating_add(step) && loop_end.saturating_add(w) > s.end_ns;
                let from = if began_inside { s.start_ns.saturating_add(w) } else { s.start_ns };
                let to = if ended_inside { s.end_ns.saturating_sub(w) } else { s.end_ns };
                let trimmed = from > s.start_ns || to < s.end_ns;
                if trimmed && to >= from.saturating_add(TRIMMED_BINS * w) {
                    if let Some(inner) = steady::of_span(&a.timeline, start_ns, end_ns, from, to.saturating_sub(1)) {
                        s = SessionSteady { steps: s.steps, settled: s.settled, ..inner };
                    }
                }
            }
            s
        });
        let device_time = a
            .per_device
            .iter()
            .map(|(device, busy_ns, total, timeline)| DeviceTime {
                device: *device,
                busy_ns: *busy_ns,
                idle: IdleSplit::from_array(*total),
                steady_idle: session_steady
                    .as_ref()
                    .map(|s| IdleSplit::from_array(timeline.idle_between(s.start_ns, s.end_ns, end_ns))),
            })
            .collect();
        let mut report = Report {
            schema_version: SCHEMA_VERSION,
            gpuscope_version: env!("CARGO_PKG_VERSION").to_string(),
            mode: if a.metrics_mode {
                "metrics"
            } else if a.sampling.is_some() {
                "sampling"
            } else {
                "trace"
            }
            .into(),
            sampling: a.sampling,
            metrics: None,
            profiler_kernels: a.profiler_kernels.0,
            profiler_kernel_ns: a.profiler_kernels.1,
            start_ns,
            end_ns,
            devices: a.devices,
            kernels,
            ranges,
            path_kernels,
            start_end_ranges,
            memory,
            drops: a.drops,
            thread_names: a.thread_names.into_iter().map(|(tid, name)| ThreadName { tid, name }).collect(),
            trace: a.trace,
            idle: Some(IdleSplit::from_array(a.idle)),
            declared: Vec::new(),
            cross_thread: CrossThread { inherit: false, kernels: a.cross_thread.0, kernel_ns: a.cross_thread.1 },
            profiler_cost: ProfilerCost {
                calibration: a.calibration.as_ref().ok().copied(),
                not_calibrated: a.calibration.err(),
                threads: a.threads,
                in_idle: a.cost_in_idle,
            },
            forks: a.forks,
            frameworks: Vec::new(),
            host: None,
            session_steady,
            device_time,
            analysis: Default::default(),
        };
        report.fill_display_names();
        report
    }
}
