//! Steps found in a program with no range around its step: the sequence of
//! kernels a training or inference loop runs repeats every step, so the
//! shortest period with which the kernel names repeat over the whole
//! steady state is the step.
//!
//! The rule, over the last compute kernels of the steady state (at most
//! 65,536) of the stream that ran most of
//! them (communication kernels and other streams left out: they fall
//! between the main stream's kernels differently every step):
//! - candidate periods are the distances back to earlier occurrences of
//!   the last [`WINDOW`] kernel names;
//! - a candidate `p` holds over the longest run of the last kernels in
//!   which at least [`MATCH_PCT`] equal the one `p` before them; that run
//!   must hold [`MIN_STEPS`] periods or more and [`MIN_SHARE_PCT`] of the
//!   time the stretch's kernels span (a loop may begin after a stretch of other work that
//!   looked steady: autotuning, a first evaluation);
//! - the candidate with the longest run is the step, the shortest period
//!   among equals (layers that repeat inside a step hold only over one
//!   step's layers: the rest of the step does not repeat with them);
//! - where the period is one kernel, the step is the smallest number of
//!   them after which the host's gap stands out in nearly every step
//!   ([`STEP_GAP_RATIO`] times the median gap and every other place's), if
//!   any: one kernel launched twenty times, then host work, repeats its
//!   name every kernel and its gaps every twenty;
//! - the step begins where the host's gap before a kernel is longest in
//!   the median over the periods (data loading, the optimizer's end);
//! - its time is the median and 90th percentile of the spans between those
//!   beginnings.
//!
//! Without kernel records (trace windows of 0) the same rule runs over the
//! launches each thread logged between windows (their launched function
//! for the name, the launching thread for the stream, the launch's time
//! for the kernel's): in a steady loop the host launches with the step's
//! period too. With periodic windows the log has a hole at each window,
//! of an unknown number of launches: a period is compared only between
//! two holes, and the steps' times pooled over the spans between them.
//! A loop the GPU paces takes its steps from the kernel records inside
//! the windows instead, each window a stretch.
//!
//! Where the exact kernels do not repeat, or repeat only over a multiple of
//! a step, they are taken by family and searched again
//! ([`kernel_family`](crate::model::names::kernel_family): a library's
//! variants picked by size are one), so that shapes changing from step to
//! step (batches of graphs of other sizes) still give steps.
//!
//! It fails where nothing repeats: kernels that depend on data (MoE
//! routing, shapes that change how many kernels a step runs), steps of varying length
//! (generation with a growing cache picks other kernels every few tokens),
//! or a loop interleaved with other work on the same stream. Then the
//! steady state is answered as a whole.

use serde::{Deserialize, Serialize};

/// Kernel names compared to find candidate periods.
pub const WINDOW: usize = 16;

/// Share of kernels that must repeat with the period, %.
pub const MATCH_PCT: f64 = 98.0;

/// Periods the stretch must hold.
pub const MIN_STEPS: usize = 3;

/// Share of the stretch's time the repeating run must cover, %.
pub const MIN_SHARE_PCT: u64 = 25;

/// Candidate periods tried at most.
const MAX_CANDIDATES: usize = 256;

/// Steps found from the kernel stream (the rule and its failure cases:
/// "Steps found" in docs/concepts/figures.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FoundSteps {
    /// Kernels per step.
    pub kernels_per_step: u64,
    /// Steps seen whole in the stretch examined.
    pub steps_seen: u64,
    /// Median time per step, ns.
    pub median_ns: u64,
    /// 90th percentile, ns.
    pub p90_ns: u64,
    /// Share of kernels that repeated with the period, %.
    pub match_pct: f64,
    /// When the first whole step found began, ns (the repeating run may
    /// begin after the steady state does).
    #[serde(default)]
    pub first_ns: u64,
    /// Mean time per step over the steps seen, ns: the long-run period.
    /// With launches, the host's period varies where it runs ahead of the
    /// GPU in bursts (a data loader's batches), so their median can be
    /// far from the step; their mean is not. 0 where the median is the
    /// step ([`Self::by_mean`]).
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub mean_ns: u64,
    /// Found from the launches the host made (logged without kernel
    /// records: trace windows of 0, or between periodic windows), their
    /// times the launches', not the kernels'.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_launches: bool,
    /// Found with kernels taken by family
    /// ([`kernel_family`](crate::model::names::kernel_family)): a library
    /// picked other variants as the shapes changed from step to step, and
    /// the exact kernels did not repeat, or repeated only over a multiple
    /// of this step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_family: bool,
    /// The loop began after the stretch examined did, which reached back
    /// to the steady state's start (not written: the report's steady state
    /// is trimmed to the loop already).
    #[serde(skip)]
    pub late: bool,
    /// When the last step found began, ns: the loop runs to there at least
    /// (not written).
    #[serde(skip)]
    pub last_ns: u64,
}

impl FoundSteps {
    /// Whether a step's time is the mean period: launches' where the host
    /// paces the loop (it runs ahead in bursts; with periodic windows, over
    /// the spans between them); kernels', and launches where the GPU paces
    /// the loop, go by their median.
    pub fn by_mean(&self) -> bool {
        self.from_launches && self.mean_ns > 0
    }

    /// A step's time, ns: the mean or the median period ([`Self::by_mean`]).
    pub fn step_ns(&self) -> u64 {
        if self.by_mean() {
            self.mean_ns
        } else {
            self.median_ns
        }
    }
}

/// The steps of `stream` (kernel start, name id, lane: device and stream;
/// in arrival order) inside `[start, end)`, if its kernels repeat.
pub(crate) fn find(stream: &[(u64, u32, u32)], start: u64, end: u64) -> Option<FoundSteps> {
    find_within(stream, start, end, &|_, _| false)
}

/// [`find`], for a log with holes: `hole(a, b)` says whether launches
/// went unlogged between two logged at `a` and `b` (with periodic trace
/// windows the launches inside a window are not logged). A hole holds an
/// unknown number of launches, so the names repeat with the step only
/// between two holes: periods are looked for and compared within those
/// stretches, a step's beginning found in each, and its times pooled over
/// the spans inside them. A step longer than the stretches shows no
/// repeat in any: then the names are taken across the holes and the
/// spans by their median (a span across a hole holds several steps).
pub(crate) fn find_around(
    stream: &[(u64, u32, u32)],
    start: u64,
    end: u64,
    hole: impl Fn(u64, u64) -> bool,
) -> Option<FoundSteps> {
    find_within(stream, start, end, &hole).or_else(|| find(stream, start, end).map(|f| FoundSteps { mean_ns: 0, ..f }))
}

/// Stretches of a log with no hole between consecutive entries: the one
/// each entry of `ks` (by time) lies in.
fn stretches(ks: &[(u64, u32)], hole: &dyn Fn(u64, u64) -> bool) -> Vec<u32> {
    let mut part = Vec::with_capacity(ks.len());
    let mut s = 0u32;
    for (i, k) in ks.iter().enumerate() {
        if i > 0 && hole(ks[i - 1].0, k.0) {
            s += 1;
        }
        part.push(s);
    }
    part
}

/// `[from, to)` index ranges of the runs of equal values in `part`.
fn runs(part: &[u32]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        if i >= part.len() {
            return None;
        }
        let from = i;
        while i < part.len() && part[i] == part[from] {
            i += 1;
        }
        Some((from, i))
    })
}

/// The steps of `stream` inside its stretches between holes only, if they
/// repeat there: kernel records taken in periodic trace windows, where the
/// names taken across two windows repeat with the windows' period.
pub(crate) fn find_within(
    stream: &[(u64, u32, u32)],
    start: u64,
    end: u64,
    hole: &dyn Fn(u64, u64) -> bool,
) -> Option<FoundSteps> {
    let (device, ks) = main_lane(stream, start, end)?;
    let names: Vec<u32> = ks.iter().map(|k| k.1).collect();
    let n = names.len();
    if n < WINDOW * MIN_STEPS {
        return None;
    }
    let part = stretches(&ks, hole);
    let parts: Vec<(usize, usize)> = runs(&part).collect();
    let mut tried: Vec<usize> = Vec::new();
    // (period, first kernel of its run, match %): the longest run wins.
    let mut best: Option<(usize, usize, f64)> = None;
    // Distances back to earlier occurrences of the last WINDOW names of a
    // stretch, nearest first; the last stretch's first.
    'stretches: for &(a, b) in parts.iter().rev() {
        if b - a <= WINDOW {
            continue;
        }
        let key = &names[b - WINDOW..b];
        for j in (a + WINDOW..b).rev() {
            let d = b - j;
            if d * MIN_STEPS > n || tried.len() >= MAX_CANDIDATES {
                break;
            }
            if &names[j - WINDOW..j] != key || tried.contains(&d) {
                continue;
            }
            tried.push(d);
            if let Some((from, compared, m)) = run_of(&names, &part, d) {
                let span = |i: usize| ks[n - 1].0.saturating_sub(ks[i].0);
                let long_enough = (n - from) >= d * MIN_STEPS
                    && compared >= d * (MIN_STEPS - 1)
                    && span(from).saturating_mul(100) >= span(0).saturating_mul(MIN_SHARE_PCT);
                // Longer by a period at least: a multiple of the step holds
                // over nearly the same run.
                if long_enough && !best.is_some_and(|(_, f, _)| from + d > f) {
                    best = Some((d, from, m));
                    if from == 0 {
                        break 'stretches;
                    }
                }
            }
        }
    }
    let (p, from, match_pct) = best?;
    let from = first_repeating_period(&names, &part, p, from);
    // The loop began after the examined kernels did, and those are all of
    // the stretch's (the stream kept kernels from before it): what came
    // before the loop was other work.
    let late = from > 0 && stream.iter().any(|&(t, _, l)| l == device && t < start);
    let (ks, part) = (&ks[from..], &part[from..]);
    // A burst's gaps line up only within a stretch (a hole shifts them):
    // the longest stretch tells.
    let longest = runs(part).max_by_key(|&(a, b)| b - a).unwrap_or((0, ks.len()));
    let p = widened(&ks[longest.0..longest.1], p);
    // In each stretch, a step begins where the host's gap before a kernel
    // is longest in the median over the periods.
    let (mut spans, mut first_ns, mut last_ns) = (Vec::new(), None, 0);
    for (a, b) in runs(part) {
        if b - a <= p {
            continue;
        }
        let phase = (0..p)
            .max_by_key(|&o| {
                let mut gaps: Vec<u64> =
                    (a + o..b).step_by(p).filter(|&i| i > a).map(|i| ks[i].0.saturating_sub(ks[i - 1].0)).collect();
                gaps.sort_unstable();
                gaps.get(gaps.len() / 2).copied().unwrap_or(0)
            })
            .unwrap_or(0);
        let begins: Vec<u64> = (a + phase..b).step_by(p).map(|i| ks[i].0).collect();
        first_ns.get_or_insert(begins[0]);
        last_ns = begins[begins.len() - 1];
        spans.extend(begins.windows(2).map(|w| w[1].saturating_sub(w[0])));
    }
    // Steps that outlast most of the time between holes leave too few
    // spans inside the stretches.
    let holed = part.first() != part.last();
    if spans.is_empty() || (holed && spans.len() < MIN_STEPS) {
        return None;
    }
    let mean_ns = spans.iter().sum::<u64>() / spans.len() as u64;
    spans.sort_unstable();
    let at = |q: usize| spans[(spans.len() * q / 100).min(spans.len() - 1)];
    Some(FoundSteps {
        kernels_per_step: p as u64,
        steps_seen: spans.len() as u64,
        median_ns: at(50),
        p90_ns: at(90),
        match_pct,
        first_ns: first_ns.unwrap_or(0),
        last_ns,
        mean_ns,
        late,
        from_launches: false,
        by_family: false,
    })
}

/// The lane (device and stream, or thread) that ran most of `stream`'s
/// kernels inside `[start, end)`, and those kernels (start, name) by time.
fn main_lane(stream: &[(u64, u32, u32)], start: u64, end: u64) -> Option<(u32, Vec<(u64, u32)>)> {
    let mut counts: Vec<(u32, usize)> = Vec::new();
    for &(t, _, d) in stream {
        if (start..end).contains(&t) {
            match counts.iter_mut().find(|(x, _)| *x == d) {
                Some(c) => c.1 += 1,
                None => counts.push((d, 1)),
            }
        }
    }
    let device = counts.iter().max_by_key(|c| c.1)?.0;
    let mut ks: Vec<(u64, u32)> =
        stream.iter().filter(|&&(t, _, d)| d == device && (start..end).contains(&t)).map(|&(t, n, _)| (t, n)).collect();
    ks.sort_by_key(|k| k.0);
    Some((device, ks))
}

/// The share of the main lane's kernels inside `[start, end)` that equal
/// the one `p` before them, % (0 with fewer than `p` kernels).
pub(crate) fn match_at(stream: &[(u64, u32, u32)], start: u64, end: u64, p: usize) -> f64 {
    let Some((_, ks)) = main_lane(stream, start, end) else { return 0.0 };
    if p == 0 || ks.len() <= p {
        return 0.0;
    }
    let same = (p..ks.len()).filter(|&i| ks[i].1 == ks[i - p].1).count();
    100.0 * same as f64 / (ks.len() - p) as f64
}

/// `stream` with each kernel's name id replaced by its family's
/// ([`kernel_family`](crate::model::names::kernel_family)); `names`: the
/// stream's ids and their names (an id without one is its own family).
/// `None` without names: the families would be the kernels.
pub(crate) fn by_family(stream: &[(u64, u32, u32)], names: &[(u32, String)]) -> Option<Vec<(u64, u32, u32)>> {
    if names.is_empty() {
        return None;
    }
    let mut families: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    let of: std::collections::HashMap<u32, u32> = names
        .iter()
        .map(|(id, name)| {
            let next = families.len() as u32;
            (*id, *families.entry(crate::model::names::kernel_family(name)).or_insert(next))
        })
        .collect();
    // Ids without a name stay apart from every family.
    let base = families.len() as u32;
    Some(stream.iter().map(|&(t, id, lane)| (t, of.get(&id).copied().unwrap_or(base.saturating_add(id)), lane)).collect())
}

/// How much longer than the median gap between kernels the host's gap
/// before a step must be, and than the gap at any other place of the step,
/// for a multiple of the names' period to be the step.
pub const STEP_GAP_RATIO: u64 = 10;

/// Launches of one kernel per step tried at most when widening a period
/// of one kernel.
const MAX_WIDENED: usize = 256;

/// The step of kernels whose names repeat every `p` (`ks`: start, name):
/// `p` itself, or, where the period is one kernel, the smallest number of
/// them after which the host leaves a gap that stands out in nearly every
/// step (its 25th percentile over the steps is [`STEP_GAP_RATIO`] times the
/// median gap between kernels and every other place's): a loop of the same
/// kernel launched twenty times, then host work. A longer period is the
/// step as it is: a stall every tenth step (a value read every ten steps)
/// is no ten-step step.
fn widened(ks: &[(u64, u32)], p: usize) -> usize {
    if p != 1 {
        return p;
    }
    let n = ks.len();
    let gaps: Vec<u64> = ks.windows(2).map(|w| w[1].0.saturating_sub(w[0].0)).collect();
    if gaps.is_empty() {
        return p;
    }
    let mut sorted = gaps.clone();
    sorted.sort_unstable();
    let all = sorted[sorted.len() / 2].max(1);
    let mut v: Vec<u64> = Vec::with_capacity(gaps.len());
    // The gap before each place of a step of `len` kernels, at its 25th
    // percentile over the steps: the largest, and the next.
    let mut stands_out = |len: usize| -> bool {
        let (mut first, mut second) = (0u64, 0u64);
        for o in 0..len {
            v.clear();
            v.extend(gaps.iter().skip(o).step_by(len));
            if v.is_empty() {
                continue;
            }
            let q = v.len() / 4;
            let g = *v.select_nth_unstable(q).1;
            if g > first {
                (first, second) = (g, first);
            } else if g > second {
                second = g;
            }
        }
        first >= all.saturating_mul(STEP_GAP_RATIO) && first >= second.max(1).saturating_mul(STEP_GAP_RATIO)
    };
    (2..=MAX_WIDENED).take_while(|&len| len * MIN_STEPS <= n).find(|&len| stands_out(len)).unwrap_or(p)
}

/// Where the run found from `from` begins: the first kernel from which a
/// whole period repeats, but for [`MATCH_PCT`]'s share (the run's
/// tolerance may take in kernels of what came before it).
fn first_repeating_period(names: &[u32], part: &[u32], p: usize, from: usize) -> usize {
    let n = names.len();
    let allowed = ((100.0 - MATCH_PCT) / 100.0 * p as f64) as usize;
    let miss = |i: usize| (part[i] == part[i + p] && names[i] != names[i + p]) as usize;
    if from + 2 * p > n {
        return from;
    }
    // Misses over the window [i, i + p), slid one kernel at a time.
    let mut missed: usize = (from..from + p).map(miss).sum();
    let mut i = from;
    while missed > allowed && i + 2 * p < n {
        missed = missed - miss(i) + miss(i + p);
        i += 1;
    }
    if missed > allowed {
        from
    } else {
        i
    }
}

/// The longest run of the last kernels of `names` in which at least
/// [`MATCH_PCT`] equal the one `p` before them in the same stretch of
/// `part` (across a hole the two are not compared): its first kernel's
/// index, the kernels compared in it and the share that matched, %.
fn run_of(names: &[u32], part: &[u32], p: usize) -> Option<(usize, usize, f64)> {
    let n = names.len();
    let (mut missed, mut compared, mut best) = (0usize, 0usize, None);
    for i in (p..n).rev() {
        if part[i] != part[i - p] {
            continue;
        }
        compared += 1;
        missed += (names[i] != names[i - p]) as usize;
        if missed as f64 <= (100.0 - MATCH_PCT) / 100.0 * compared as f64 {
            best = Some((i - p, compared, 100.0 * (compared - missed) as f64 / compared as f64));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    /// `steps` steps of: an embedding kernel, `layers` identical layers of
    /// 5 kernels, a head and 3 optimizer kernels; 10 us between kernels, a
    /// 2 ms host gap before each step.
    fn training(steps: usize, layers: usize) -> Vec<(u64, u32, u32)> {
        let mut one = vec![100u32];
        for _ in 0..layers {
            one.extend([1, 2, 3, 4, 5]);
        }
        one.extend([200, 300, 301, 302]);
        let mut out = Vec::new();
        let mut t = 0;
        for _ in 0..steps {
            t += 2_000 * US;
            for &k in &one {
                out.push((t, k, 0));
                t += 10 * US;
            }
        }
        out
    }

    #[test]
    fn the_step_is_the_period_of_the_whole_sequence_not_of_its_layers() {
        let s = training(20, 12);
        let f = find(&s, 0, u64::MAX).expect("a repeating loop");
        assert_eq!(f.kernels_per_step, 1 + 12 * 5 + 4, "not one layer's 5");
        // 65 kernels 10 us apart and the 2 ms gap.
        assert_eq!(f.median_ns, 2_000 * US + 65 * 10 * US);
        assert_eq!(f.steps_seen, 19);
        assert!(f.match_pct > 99.9);
    }

    #[test]
    fn a_step_begins_after_the_host_gap_and_a_stray_kernel_is_tolerated() {
        let mut s = training(60, 4);
        // One stray kernel (a logging sync) in step 30.
        let i = 30 * 25 + 7;
        s[i].1 = 999;
        let f = find(&s, 0, u64::MAX).expect("still a loop");
        assert_eq!(f.kernels_per_step, 25);
        assert_eq!(f.median_ns, 2_000 * US + 25 * 10 * US);
        // Only the window given, and only the busiest stream.
        let mut other: Vec<(u64, u32, u32)> = (0..500).map(|k| (k * 7 * US, (k % 3) as u32, 1)).collect();
        other.extend(training(10, 4));
        let f = find(&other, 0, u64::MAX).expect("lane 0's loop");
        assert_eq!(f.kernels_per_step, 3, "lane 1 ran most: its period");
    }

    /// `count` kernels 10 us apart from `t0`, their names of no period
    /// (autotuning, a first evaluation), on lane 0.
    fn no_period(count: u64, t0: u64) -> Vec<(u64, u32, u32)> {
        let mut x = 11u64;
        (0..count)
            .map(|i| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (t0 + i * 10 * US, 1000 + (x >> 40) as u32 % 50, 0)
            })
            .collect()
    }

    #[test]
    fn a_loop_after_other_work_that_looked_steady_is_found_where_it_begins() {
        // 3000 kernels of no period (autotuning, a first evaluation), then
        // 40 steps of the loop.
        let mut s = no_period(3000, 0);
        let head_end = 3000 * 10 * US;
        s.extend(training(40, 4).into_iter().map(|(t, n, d)| (t + head_end, n, d)));
        let f = find(&s, 0, u64::MAX).expect("the loop after the head");
        assert_eq!(f.kernels_per_step, 25);
        assert_eq!(f.median_ns, 2_000 * US + 25 * 10 * US);
        // The first whole step: after the loop's first host gap.
        assert_eq!(f.first_ns, head_end + 2_000 * US);
        assert_eq!(f.steps_seen, 39);
    }

    #[test]
    fn a_loop_is_late_only_when_the_kernels_kept_reach_back_before_the_stretch() {
        // The last 30 steps of a long loop, after 3000 kernels of no period:
        // with kernels kept from before the stretch the loop began late in
        // it; kept from inside it only, nothing says what came first.
        let mut s = no_period(3000, 1_000 * US);
        let head_end = 1_000 * US + 3000 * 10 * US;
        s.extend(training(30, 4).into_iter().map(|(t, n, d)| (t + head_end, n, d)));
        let from_start = find(&s, 1_000 * US, u64::MAX).expect("the loop");
        assert!(!from_start.late, "nothing kept before the stretch");
        s.insert(0, (0, 7, 0));
        let with_before = find(&s, 1_000 * US, u64::MAX).expect("the loop");
        assert!(with_before.late, "a kernel kept from before the stretch");
        assert_eq!(with_before.kernels_per_step, 25);
    }

    #[test]
    fn a_run_of_one_kernel_at_the_end_of_each_step_is_not_the_step() {
        // Each step ends with 40 launches of one optimizer kernel: their
        // period of 1 holds over the last 40 kernels only.
        let mut one = vec![100u32];
        for _ in 0..6 {
            one.extend([1, 2, 3]);
        }
        one.extend(std::iter::repeat_n(300, 40));
        let mut s = Vec::new();
        let mut t = 0;
        for _ in 0..30 {
            t += 1_000 * US;
            for &k in &one {
                s.push((t, k, 0));
                t += 5 * US;
            }
        }
        let f = find(&s, 0, u64::MAX).expect("a loop");
        assert_eq!(f.kernels_per_step, one.len() as u64);
        assert_eq!(f.first_ns, 1_000 * US, "the loop is the whole stretch");
    }

    #[test]
    fn a_side_stream_that_falls_differently_every_step_is_left_out() {
        // FSDP's all-gather copies: 3 kernels a step on another stream of
        // the same device, at other moments every step.
        let mut s = training(40, 4);
        let mut x = 3u64;
        for k in 0..40u64 {
            for c in 0..3u32 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let t = 2_000 * US + k * (2_000 + 250) * US + (x >> 40) % (250 * US);
                s.push((t, 500 + c, crate::aggregated::lane(0, 7)));
            }
        }
        s.sort_by_key(|e| e.0);
        let f = find(&s, 0, u64::MAX).expect("the main stream's loop");
        assert_eq!(f.kernels_per_step, 25);
        assert_eq!(f.median_ns, 2_000 * US + 25 * 10 * US);
    }

    #[test]
    fn the_same_kernel_launched_in_bursts_makes_a_step_of_a_burst() {
        // 20 launches of one kernel 7 us apart, then 3 ms of host work.
        let mut t = 0;
        let mut ks = Vec::new();
        for _ in 0..300 {
            for k in 0..20 {
                t += if k == 0 { 3_000_000 } else { 7_000 };
                ks.push((t, 5, 0));
            }
        }
        let f = find(&ks, 0, t + 1).expect("steps");
        assert_eq!((f.kernels_per_step, f.median_ns), (20, 3_000_000 + 19 * 7_000));
        // Kept from inside a burst: the same step.
        let f = find(&ks[13..], 0, t + 1).expect("steps");
        assert_eq!(f.kernels_per_step, 20);
        // A five-kernel step with a stall every tenth step stays five.
        let mut t = 0;
        let mut stalls = Vec::new();
        for step in 0..300u64 {
            for k in 0..5u32 {
                t += if k == 0 && step % 10 == 0 { 5_000_000 } else { 100_000 };
                stalls.push((t, k, 0));
            }
        }
        assert_eq!(find(&stalls, 0, t + 1).expect("steps").kernels_per_step, 5);
        // Launched back to back, the kernel alone is the step.
        let even: Vec<(u64, u32, u32)> = (0..600u64).map(|i| (i * 450_000, 5, 0)).collect();
        assert_eq!(find(&even, 0, 600 * 450_000).expect("steps").kernels_per_step, 1);
    }

    /// Logged launches: time, name, lane.
    type Log = Vec<(u64, u32, u32)>;

    /// What a launch log keeps of `launches` (time, name) with nothing
    /// logged in the first `window` ns of every `period` (trace windows),
    /// and where its holes are.
    fn logged_between(
        launches: &[(u64, u32)],
        window: u64,
        period: u64,
    ) -> (Log, impl Fn(u64, u64) -> bool) {
        let inside = move |t: u64| t % period < window;
        let kept = launches.iter().filter(|&&(t, _)| !inside(t)).map(|&(t, n)| (t, n, 0)).collect();
        (kept, move |a: u64, b: u64| inside(a) || inside(b) || a / period != b / period)
    }

    #[test]
    fn spans_across_a_hole_in_the_log_are_no_steps() {
        // Launches of a 5-launch step logged between trace windows: the host
        // runs ahead in bursts (steps of 0.6, 0.6 and 1.8 ms: 1 ms on
        // average), and nothing is logged in the first 100 ms of every
        // second.
        const MS: u64 = 1_000_000;
        let (mut t, mut launches) = (100 * MS, Vec::new());
        for step in 0..3000u64 {
            for k in 0..5u32 {
                launches.push((t, k));
                t += if k == 4 { [600_000, 600_000, 1_800_000][step as usize % 3] - 4 * 50_000 } else { 50_000 };
            }
        }
        let (stream, hole) = logged_between(&launches, 100 * MS, 1000 * MS);
        let f = find_around(&stream, 0, t, hole).expect("steps");
        assert_eq!(f.kernels_per_step, 5);
        assert!(f.mean_ns.abs_diff(MS) < 10_000 && f.median_ns == 600_000, "{f:?}");
        assert!(f.p90_ns == 1_800_000, "{f:?}");
        // Taken across the holes (two in 2.7 s), the mean reads 7% long.
        let across = find(&stream, 0, t).expect("steps");
        assert!(across.mean_ns > 1_060_000, "{across:?}");
        // Steps longer than the time between holes: every span, by the
        // median.
        let mut long = Vec::new();
        for s in 0..40u64 {
            long.extend((0..5u32).map(|k| (s * 900 * MS + k as u64 * MS, k, 0)));
        }
        let f = find_around(&long, 0, u64::MAX, |_, _| true).expect("steps");
        assert_eq!((f.median_ns, f.mean_ns, f.steps_seen), (900 * MS, 0, 39), "{f:?}");
    }

    #[test]
    fn holes_inside_the_steps_do_not_hide_them() {
        // Steps of 205 launches of as many kernels, 10 us apart, and a 2 ms
        // host gap (4.05 ms); nothing logged in the first 3 ms of every 50:
        // the windows cut the steps' bursts at every place, each hiding an
        // unknown number of launches.
        const MS: u64 = 1_000_000;
        let (mut t, mut launches) = (0, Vec::new());
        for _ in 0..700 {
            t += 2_000 * US;
            for k in 0..205u32 {
                launches.push((t, k));
                t += 10 * US;
            }
        }
        let (stream, hole) = logged_between(&launches, 3 * MS, 50 * MS);
        let f = find_around(&stream, 0, t, hole).expect("steps");
        assert_eq!(f.kernels_per_step, 205, "{f:?}");
        let step = 2_000 * US + 205 * 10 * US;
        assert_eq!((f.median_ns, f.mean_ns), (step, step), "{f:?}");
        // Every stretch holds 10 or 11 steps: 9 or more spans in each.
        assert!(f.steps_seen >= 9 * 55, "{f:?}");
        assert!(f.first_ns < 60 * MS && f.last_ns > t - 55 * MS, "{f:?}");
        // Taken across the holes, the names do not repeat with the step.
        assert!(find(&stream, 0, t).map_or(true, |f| f.kernels_per_step != 205), "{:?}", find(&stream, 0, t));
    }

    #[test]
    fn bursts_of_one_kernel_are_the_step_between_holes_too() {
        // 20 launches of one kernel 100 us apart, then 1.5 ms of host work;
        // nothing logged in the first 13 ms of every 100: a hole's edges
        // fall inside bursts, shifting their place in the log.
        const MS: u64 = 1_000_000;
        let (mut t, mut launches) = (0, Vec::new());
        for _ in 0..600 {
            for k in 0..20 {
                t += if k == 0 { 1_500_000 } else { 100_000 };
                launches.push((t, 5));
            }
        }
        let (ks, hole) = logged_between(&launches, 13 * MS, 100 * MS);
        let f = find_around(&ks, 0, t + 1, hole).expect("steps");
        assert_eq!((f.kernels_per_step, f.median_ns), (20, 1_500_000 + 19 * 100_000), "{f:?}");
    }

    #[test]
    fn families_keep_unnamed_kernels_apart_and_match_at_counts_repeats() {
        let stream: Vec<(u64, u32, u32)> = [(0, 7), (1, 8), (2, 0), (3, 7), (4, 8), (5, 1)]
            .into_iter()
            .map(|(t, n)| (t, n, 0))
            .collect();
        let names = [(7, "sm80_xmma_gemm_a".to_string()), (8, "sm80_xmma_gemm_b".to_string())];
        let f = by_family(&stream, &names).expect("named");
        // 7 and 8 are one family (0); unnamed ids 0 and 1 are neither it
        // nor each other.
        let ids: Vec<u32> = f.iter().map(|k| k.1).collect();
        assert_eq!((ids[0], ids[1], ids[3], ids[4]), (0, 0, 0, 0), "{ids:?}");
        assert!(ids[2] != 0 && ids[5] != 0 && ids[2] != ids[5], "{ids:?}");
        assert_eq!(by_family(&stream, &[]), None, "no names: no families");
        // A period of 3: the exact kernels repeat at 2 of the 3 compared.
        assert_eq!(match_at(&stream, 0, 6, 3), 200.0 / 3.0);
        assert_eq!(match_at(&f, 0, 6, 3), 200.0 / 3.0);
        assert_eq!(match_at(&stream, 0, 6, 6), 0.0);
    }

    #[test]
    fn nothing_repeating_finds_no_step() {
        // Names from a long linear-congruential sequence: no period.
        let mut x = 7u64;
        let s: Vec<(u64, u32, u32)> = (0..5000)
            .map(|i| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (i * 10 * US, (x >> 40) as u32 % 50, 0)
            })
            .collect();
        assert_eq!(find(&s, 0, u64::MAX), None);
        assert_eq!(find(&training(2, 3), 0, u64::MAX), None, "two steps are not yet a loop");
    }
}
