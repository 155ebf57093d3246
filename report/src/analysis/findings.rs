//! What to change: one finding per cause of lost GPU time, with what it
//! cost and one line of advice, most costly first. The rules that find
//! them are in [`super::rules`], one file per kind.

use super::advice::Evidence;
use super::cost;
use super::peaks::Peaks;
use super::rules::{FindingKind, Input, RULES};
use super::verdict::Bound;
use super::{KernelAnalysis, RangeAnalysis};
use crate::model::idle::IdleSplit;
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
#[non_exhaustive]
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

pub(super) fn ms(ns: u64) -> String {
    crate::model::units::fmt_ns(ns)
}

/// Findings of one kind kept at most: the most costly. A report of a
/// million ranges has as many small idle gaps, and past the first hundred
/// of a kind they only repeat what those say.
pub const MAX_PER_KIND: usize = 100;

/// The findings of every rule of [`RULES`], most costly first, and how
/// many smaller ones were left out by [`MAX_PER_KIND`].
pub(super) fn findings(
    e: &Evidence,
    ranges: &[RangeAnalysis],
    kernels: &[KernelAnalysis],
    peaks: Option<&Peaks>,
) -> (Vec<Finding>, usize) {
    let stats = e.r.kernels.iter().map(|k| (k.name.as_str(), &k.stats)).collect();
    let input = Input { e, ranges, kernels, peaks, stats };
    let mut out = Vec::new();
    let mut omitted = 0;
    for rule in RULES {
        let (found, left_out) = (rule.find)(rule, &input);
        out.extend(found);
        omitted += left_out;
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

/// Device memory allocations and releases in the steady state at least
/// this many times make a finding: a caching allocator allocates at
/// warm-up and then reuses.
pub(super) const CHURN_MIN: u64 = 20;

/// A device memory peak of at least this share of the device's memory is
/// near its capacity.
pub(super) const NEAR_CAPACITY: f64 = 0.90;
/// A peak of at most this share leaves room worth a finding, when the
/// memory a larger batch would add is known.
pub(super) const HEADROOM_MAX: f64 = 0.60;

/// The session's idle time for a program without ranges: of its steady
/// state when one was found (start-up and shutdown left out), with
/// gpuscope's cost taken out; its span; and what it is called. With
/// periodic trace windows, scaled from theirs; `None` where they classified
/// too little of it (`windowed`).
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
            // With periodic trace windows, known inside them only: scaled
            // to the whole where they stand for it; else the samples answer.
            let idle = match super::windowed::windowed_idle(r) {
                super::windowed::WindowedIdle::Whole => s.idle,
                super::windowed::WindowedIdle::Scaled { split, .. } => split,
                super::windowed::WindowedIdle::TooLittle { .. } => return None,
            };
            Some((cost::taken_out(&r.profiler_cost, idle, Some(added)), s.wall_ns(), what))
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
pub(super) fn short_stack_range(g: &RangeAnalysis) -> bool {
    g.from_stack && g.launches.map_or(true, |l| l < MIN_STACK_RANGE_LAUNCHES.saturating_mul(g.count.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::framework::Framework;
    use crate::analysis::rules::{runtime_syncs, session_advice};
    use crate::report::{FoundSteps, SessionSteady};

    /// A steady state of 300 steps of 1.2 ms with `launches` launches.
    fn jax_loop(launches: u64) -> Report {
        let ms = 1_000_000;
        let steps = FoundSteps { kernels_per_step: 38, steps_seen: 299, median_ns: 1_200_000, ..Default::default() };
        let steady =
            SessionSteady { start_ns: 0, end_ns: 360 * ms, launches, steps: Some(steps), ..Default::default() };
        let mut r = Report::build(crate::aggregated::Aggregate::empty(), 0, 360 * ms);
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
