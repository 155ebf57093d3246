//! GPU idle time and its causes. A timeline of when any kernel ran (on any
//! of the process's GPUs) whose gaps are classified once no kernel still to
//! arrive can fill them, so memory stays bounded over long runs.
//!
//! A gap is final when every launch made before its end has delivered its
//! kernel: kernels start after their launch, so a kernel still missing
//! cannot run in a gap that ends before its launch. Each final gap is split
//! by what the host was doing (see [`IdleTracker::classify`]):
//!
//! 1. gpuscope's own measurement held the program (metrics mode);
//! 2. a copy ran on the GPU, or the host was blocked in a copy call;
//! 3. the gap began while the host waited in a synchronisation, and lasted
//!    until at most [`SYNC_RESUME_NS`] after it returned;
//! 4. the rest: before the next kernel's launch, the host had not launched
//!    yet (launch overhead when the whole gap is short; dispatch from the
//!    program's previous CUDA call when that came within [`DISPATCH_NS`]
//!    before, so it was issuing calls back to back; host work otherwise);
//!    after it, the
//!    kernel was queued (launch latency when short, a dependency on
//!    something else when long).

use super::host_delay::HostDelay;
use super::windows::Untraced;
use crate::model::idle::DISPATCH_NS;
use crate::model::idle::{Cause, COPY, DISPATCH, HOST, LAUNCH, OTHER, PROFILER, SYNC};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

pub use crate::model::idle::LAUNCH_GAP_NS;

/// After a synchronisation returns, a host that launches again within this
/// long was only waiting on it (the next few ops' dispatch); idle time
/// beyond is host work of its own.
pub const SYNC_RESUME_NS: u64 = 100_000;

/// A synchronisation that began up to this long after the GPU went idle
/// still counts as the host waiting when it did: host and GPU timestamps
/// agree to about 1 us (measured on H100 and H200).
const CLOCK_SLACK_NS: u64 = 5_000;

/// Busy spans kept undecided at once. Beyond, the oldest gap is decided
/// even if a launch is still missing its kernel (a failed launch never
/// delivers one).
const MAX_SPANS: usize = 8192;

/// Host intervals (synchronisations, copies, overhead) kept at once.
const MAX_INTERVALS: usize = 65_536;

/// Launches waited for at once: a launch that fails never delivers its
/// kernel; past this many, the oldest are forgotten (as attribution does).
const MAX_PENDING: usize = 1 << 20;
/// Graph launches waited for at once (an empty graph delivers no kernel).
const MAX_PENDING_GRAPHS: usize = 4096;

pub(crate) use gpuscope_report::aggregated::{Piece, NO_KERNEL};

/// When the program's threads last left CUDA calls (launches, blocking
/// copies and synchronisations), any thread: the framework hands work
/// between threads (PyTorch's autograd worker runs backward), so a launch
/// follows the process's previous call, not only its own thread's. Events
/// of different threads arrive slightly out of order: the latest few are
/// kept to find the one before a given time.
#[derive(Debug, Clone, Default)]
pub(crate) struct RecentCalls {
    ring: [u64; 32],
    next: usize,
    latest: u64,
}

impl RecentCalls {
    pub(crate) fn add(&mut self, t: u64) {
        self.ring[self.next] = t;
        self.next = (self.next + 1) % self.ring.len();
        self.latest = self.latest.max(t);
    }

    /// The latest call end at or before `t` (0: none kept).
    pub(crate) fn before(&self, t: u64) -> u64 {
        // In order, the usual case: the latest of all.
        if self.latest <= t {
            return self.latest;
        }
        self.ring.iter().copied().filter(|&c| c <= t).max().unwrap_or(0)
    }
}

/// A kernel's launch call, as the timeline needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Launched {
    /// When the call was entered.
    pub ts: u64,
    /// A graph launch.
    pub graph: bool,
    /// When the program last left a CUDA call before it (a launch, a
    /// blocking copy or synchronisation, on any thread); 0: never.
    pub since: u64,
    /// The launched kernel's name id ([`NO_KERNEL`]: unknown).
    pub kernel: u32,
}

/// What a span keeps of the launch of its first kernel: spans are moved
/// often while the timeline is undecided, so they stay 32 bytes (a launch
/// at time 0 stands for none).
#[derive(Debug, Clone, Copy)]
struct SpanLaunch {
    ts: u64,
    /// How long before it the program left its previous CUDA call, ns
    /// (`u32::MAX`: unknown, or longer).
    back: u32,
    /// The kernel's name id (in what was padding).
    kernel: u32,
}

impl SpanLaunch {
    const NONE: SpanLaunch = SpanLaunch { ts: 0, back: u32::MAX, kernel: NO_KERNEL };

    fn of(l: Option<Launched>) -> Self {
        let Some(l) = l else { return Self::NONE };
        let back = if l.since == 0 { u32::MAX } else { l.ts.saturating_sub(l.since).min(u32::MAX as u64 - 1) as u32 };
        SpanLaunch { ts: l.ts, back, kernel: l.kernel }
    }

    fn known(self) -> Option<Self> {
        (self.ts > 0).then_some(self)
    }

    /// The program was issuing CUDA calls back to back: it left its
    /// previous one at most [`DISPATCH_NS`] before.
    fn dispatched(&self) -> bool {
        (self.back as u64) <= DISPATCH_NS
    }

    /// When it left that call.
    fn since(&self) -> u64 {
        self.ts.saturating_sub(self.back as u64)
    }
}

#[derive(Debug, Clone, Copy)]
struct Span {
    start: u64,
    end: u64,
    /// The launch of the kernel that starts the span.
    launch: SpanLaunch,
}

/// Launches whose kernels have not arrived: launch times (with a count
/// each) in order. Launches come nearly in time order and kernels nearly in
/// the same order, so entries are added at the back and leave from the
/// front; a kernel that arrives out of order leaves a zero count behind,
/// dropped once it reaches the front: cheaper per launch than an ordered
/// map, which took a quarter of the decoder's time under launch-heavy loads.
#[derive(Default, Clone)]
struct PendingLaunches(VecDeque<(u64, u32)>);

impl PendingLaunches {
    fn add(&mut self, ts: u64) {
        match self.0.back_mut() {
            Some(last) if last.0 == ts => last.1 = last.1.saturating_add(1),
            Some(last) if last.0 > ts => {
                let i = crate::sorted_deque::partition_point_from_back(&self.0, |&(t, _)| t < ts);
                match self.0.get_mut(i) {
                    Some(e) if e.0 == ts => e.1 = e.1.saturating_add(1),
                    _ => self.0.insert(i, (ts, 1)),
                }
            }
            _ => self.0.push_back((ts, 1)),
        }
        if self.0.len() > MAX_PENDING {
            // Launches that never delivered a kernel (failed launches,
            // records CUPTI dropped): forget the oldest half.
            self.0.drain(..MAX_PENDING / 2);
            self.trim();
        }
    }

    fn remove(&mut self, ts: u64) {
        let i = crate::sorted_deque::partition_point_from_front(&self.0, |&(t, _)| t < ts);
        if let Some(e) = self.0.get_mut(i).filter(|e| e.0 == ts) {
            e.1 = e.1.saturating_sub(1);
            if i == 0 {
                self.trim();
            }
        }
    }

    fn trim(&mut self) {
        while self.0.front().is_some_and(|e| e.1 == 0) {
            self.0.pop_front();
        }
    }

    /// The earliest launch still waited for.
    fn oldest(&self) -> Option<u64> {
        self.0.front().map(|e| e.0)
    }

    fn forget_before(&mut self, ts: u64) {
        while self.0.front().is_some_and(|e| e.0 < ts) {
            self.0.pop_front();
        }
        self.trim();
    }
}

/// Disjoint-or-not intervals sorted by start; dropped once decided.
#[derive(Default, Clone)]
struct Intervals(Vec<(u64, u64)>);

impl Intervals {
    fn add(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        let i = self.0.partition_point(|&(s, _)| s <= start);
        self.0.insert(i, (start, end));
        if self.0.len() > MAX_INTERVALS {
            self.0.remove(0);
        }
    }

    /// The parts of `[lo, hi)` they cover, merged and sorted.
    fn covered(&self, lo: u64, hi: u64) -> Vec<(u64, u64)> {
        let upto = self.0.partition_point(|&(s, _)| s < hi);
        let mut v: Vec<(u64, u64)> =
            self.0[..upto].iter().filter(|&&(_, e)| e > lo).map(|&(s, e)| (s.max(lo), e.min(hi))).collect();
        v.sort_unstable();
        merge(v)
    }

    /// One that contains `t` (within the slack), the latest ending.
    fn around(&self, t: u64) -> Option<(u64, u64)> {
        let upto = self.0.partition_point(|&(s, _)| s <= t.saturating_add(CLOCK_SLACK_NS));
        self.0[..upto].iter().filter(|&&(_, e)| e.saturating_add(CLOCK_SLACK_NS) >= t).max_by_key(|&&(_, e)| e).copied()
    }

    fn forget_before(&mut self, t: u64) {
        self.0.retain(|&(_, e)| e > t);
    }
}

fn merge(v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// `[lo, hi)` minus `cut` (sorted, merged).
fn minus(lo: u64, hi: u64, cut: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut at = lo;
    for &(s, e) in cut {
        if s > at {
            out.push((at, s.min(hi)));
        }
        at = at.max(e);
        if at >= hi {
            break;
        }
    }
    if at < hi {
        out.push((at, hi));
    }
    out.retain(|&(s, e)| e > s);
    out
}

/// The idle timeline of one session (or of one of its devices).
#[derive(Clone)]
pub(crate) struct IdleTracker {
    /// Undecided busy time, merged and sorted.
    spans: VecDeque<Span>,
    /// Time before this is decided.
    done_until: u64,
    /// Launches whose kernels have not arrived, by launch time (a count per
    /// time).
    pending: PendingLaunches,
    /// Graph launches whose first kernel has not arrived.
    pending_graphs: FxHashMap<u32, u64>,
    syncs: Intervals,
    copies: Intervals,
    overhead: Intervals,
    /// How far gpuscope's cost has delayed the host: the part of a gap
    /// ended by a launch that is gpuscope's.
    delay: HostDelay,
    /// Decided time some kernel ran, ns.
    pub busy_ns: u64,
    /// Kernels that arrived after their time was decided (counted, and
    /// their late part added as busy).
    pub late_kernels: u64,
    /// Time of gaps left unclassified because they touched an untraced
    /// stretch (sampling mode's trace windows: no kernel records there to
    /// tell idle from busy), ns.
    pub untraced_gaps: u64,
    /// Where kept ([`IdleTracker::keep_unclassified`]): the traced parts of
    /// those gaps (inside a window, before its first kernel record or
    /// after its last, where kernels launched outside it may have run),
    /// until taken.
    unclassified: Option<Vec<(u64, u64)>>,
}

impl IdleTracker {
    /// A timeline starting at `start_ns`.
    pub(crate) fn new(start_ns: u64) -> Self {
        IdleTracker {
            spans: VecDeque::new(),
            done_until: start_ns,
            pending: PendingLaunches::default(),
            pending_graphs: FxHashMap::default(),
            syncs: Intervals::default(),
            copies: Intervals::default(),
            overhead: Intervals::default(),
            delay: HostDelay::default(),
            busy_ns: 0,
            late_kernels: 0,
            untraced_gaps: 0,
            unclassified: None,
        }
    }

    /// Keeps the traced parts of the gaps left unclassified, for
    /// [`IdleTracker::take_unclassified`] (the session's timeline with
    /// trace windows).
    pub(crate) fn keep_unclassified(&mut self) {
        self.unclassified.get_or_insert_with(Vec::new);
    }

    /// The traced parts of unclassified gaps decided since the last call.
    pub(crate) fn take_unclassified(&mut self) -> Vec<(u64, u64)> {
        self.unclassified.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Kernel records came back on at `ts` (sampling mode's trace
    /// windows). Launches made before whose kernels have not come never
    /// will (their records were off, or came on only after): they no longer
    /// hold the timeline.
    pub(crate) fn forget_launches_before(&mut self, ts: u64) {
        self.pending.forget_before(ts);
        self.pending_graphs.retain(|_, t| *t >= ts);
    }

    /// A launch at `ts` whose kernel will come (`graph`: a graph launch,
    /// waited for until its first kernel).
    pub(crate) fn launch(&mut self, correlation_id: u32, ts: u64, graph: bool) {
        if graph {
            if self.pending_graphs.len() >= MAX_PENDING_GRAPHS {
                if let Some((&oldest, _)) = self.pending_graphs.iter().min_by_key(|(_, t)| **t) {
                    self.pending_graphs.remove(&oldest);
                }
            }
            self.pending_graphs.insert(correlation_id, ts);
        } else {
            self.pending.add(ts);
        }
    }

    /// A kernel ran over `[start, end)`; `launch`: its launch when it was
    /// seen.
    pub(crate) fn kernel(&mut self, correlation_id: u32, start: u64, end: u64, launch: Option<Launched>) {
        if let Some(Launched { ts, graph, .. }) = launch {
            if graph {
                self.pending_graphs.remove(&correlation_id);
            } else {
                self.pending.remove(ts);
            }
        }
        let mut start = start;
        if start < self.done_until {
            self.late_kernels += 1;
            if self.late_kernels <= 20 {
                crate::collect::debug::debug(&format!(
                    "idle: kernel {correlation_id} [{start}, {end}) launched at {launch:?} came after {} was decided",
                    self.done_until
                ));
            }
            start = self.done_until;
        }
        if end <= start {
            return;
        }
        // First span that ends at or after `start`: it and the later spans
        // it overlaps merge with the kernel.
        let i = self.spans.partition_point(|s| s.end < start);
        let mut merged = Span { start, end, launch: SpanLaunch::of(launch) };
        while i < self.spans.len() && self.spans[i].start <= merged.end {
            let s = self.spans.remove(i).expect("index checked");
            if s.start < merged.start {
                merged.launch = s.launch;
            }
            merged.start = merged.start.min(s.start);
            merged.end = merged.end.max(s.end);
        }
        self.spans.insert(i, merged);
    }

    /// The host waited in a synchronisation over `[start, end)`.
    pub(crate) fn sync(&mut self, start: u64, end: u64) {
        self.delay.wait(start, end);
        if end > self.done_until {
            self.syncs.add(start, end);
        }
    }

    /// gpuscope's own cost held a program's thread `ns` at `ts` (a traced
    /// launch call's added time, a hook): the host's later calls come that
    /// much later until it next waits for the GPU.
    pub(crate) fn host_cost(&mut self, ts: u64, ns: u64) {
        self.delay.cost(ts, ns);
    }

    /// A program's launch call ending at `ts` blocked as long as a wait
    /// for the GPU (a full launch queue): the delay is gone.
    pub(crate) fn host_waited(&mut self, ts: u64) {
        self.delay.waited_at(ts);
    }

    /// A copy ran on the GPU, or the host was blocked in a copy call.
    pub(crate) fn copy(&mut self, start: u64, end: u64) {
        if end > self.done_until {
            self.copies.add(start, end);
        }
    }

    /// gpuscope's own measurement held a thread.
    pub(crate) fn overhead(&mut self, start: u64, end: u64) {
        if end > self.done_until {
            self.overhead.add(start, end);
        }
    }

    /// Whether undecided time has reached its cap: [`IdleTracker::advance`]
    /// should run (it decides the oldest gaps then).
    pub(crate) fn full(&self) -> bool {
        self.spans.len() > MAX_SPANS
    }

    /// Time before this is decided.
    pub(crate) fn decided_until(&self) -> u64 {
        self.done_until
    }

    /// The earliest launch whose kernel has not arrived: time from there
    /// on may still be filled.
    pub(crate) fn watermark(&self) -> Option<u64> {
        self.pending.oldest().into_iter().chain(self.pending_graphs.values().copied()).min()
    }

    /// Decides every gap that no missing kernel can fill, handing each
    /// piece of idle time to `out`.
    /// Gaps touching `untraced` are not classified.
    pub(crate) fn advance(&mut self, untraced: &Untraced, out: &mut impl FnMut(Piece)) {
        self.advance_to(self.watermark(), untraced, out);
    }

    /// [`IdleTracker::advance`] up to another tracker's watermark: one
    /// device's timeline is told its launches by the session's, which sees
    /// them all (a launch callback does not say its device).
    pub(crate) fn advance_to(&mut self, watermark: Option<u64>, untraced: &Untraced, out: &mut impl FnMut(Piece)) {
        self.decide(watermark.unwrap_or(u64::MAX), untraced, out);
    }

    /// A timeline from `start_ns` for a device that ran no kernel yet: it
    /// keeps the host's undecided synchronisations, copies and overhead,
    /// and waits for no launch of its own (see [`IdleTracker::advance_to`]).
    pub(crate) fn for_new_device(&self, start_ns: u64) -> IdleTracker {
        IdleTracker {
            syncs: self.syncs.clone(),
            copies: self.copies.clone(),
            overhead: self.overhead.clone(),
            delay: self.delay.clone(),
            ..IdleTracker::new(start_ns)
        }
    }

    /// A copy of this timeline that waits for no launch of its own (see
    /// [`IdleTracker::advance_to`]).
    pub(crate) fn without_launches(&self) -> IdleTracker {
        let mut t = self.clone();
        t.pending = PendingLaunches::default();
        t.pending_graphs.clear();
        // Only the session's own timeline hands its unclassified gaps on.
        t.unclassified = None;
        t
    }

    /// Decides what is known at `until` (the session's decided time, which
    /// no launch still in flight can reach back before): gaps up to it, and
    /// when its kernels all ended by then, the gap from the last one's end
    /// to it, which a later kernel of this timeline would otherwise close.
    pub(crate) fn settle(&mut self, until: u64, untraced: &Untraced, out: &mut impl FnMut(Piece)) {
        if self.spans.back().map_or(true, |s| s.end <= until) {
            self.finish(until, untraced, out);
        } else {
            self.advance_to(Some(until), untraced, out);
        }
    }

    /// Decides everything up to `end_ns` (the session's end).
    pub(crate) fn finish(&mut self, end_ns: u64, untraced: &Untraced, out: &mut impl FnMut(Piece)) {
        self.decide(u64::MAX, untraced, out);
        if let Some(last) = self.spans.pop_front() {
            self.busy_ns = self.busy_ns.saturating_add(last.end.saturating_sub(self.done_until.max(last.start)));
            self.done_until = self.done_until.max(last.end);
        }
        if end_ns > self.done_until {
            self.classify(self.done_until, end_ns, None, true, untraced, out);
            self.done_until = end_ns;
        }
    }

    fn decide(&mut self, watermark: u64, untraced: &Untraced, out: &mut impl FnMut(Piece)) {
        // Over the cap, decide down to half of it, so that forcing happens
        // once per many kernels, not at every one.
        let keep = if self.spans.len() > MAX_SPANS { MAX_SPANS / 2 } else { usize::MAX };
        loop {
            let forced = self.spans.len() > keep;
            let Some(&first) = self.spans.front() else { break };
            if self.done_until < first.start {
                // The gap before the first span.
                if first.start > watermark && !forced {
                    break;
                }
                self.classify(self.done_until, first.start, first.launch.known(), false, untraced, out);
                self.done_until = first.start;
            } else {
                // The first span is busy time; its end is final once the
                // next span's start is.
                let Some(next) = self.spans.get(1) else { break };
                if next.start > watermark && !forced {
                    break;
                }
                self.busy_ns = self.busy_ns.saturating_add(first.end.saturating_sub(self.done_until));
                self.done_until = self.done_until.max(first.end);
                self.spans.pop_front();
            }
        }
        let t = self.done_until;
        // Every later gap ends after it: the delay's points before are
        // applied now rather than kept.
        self.delay.at(t);
        self.syncs.forget_before(t);
        self.copies.forget_before(t);
        self.overhead.forget_before(t);
    }

    /// Splits the idle gap `[g0, g1)` by cause. `next_launch`: the launch
    /// of the kernel that ends it (`None`: unknown); `last`: no kernel
    /// followed before the session ended.
    fn classify(
        &mut self,
        g0: u64,
        g1: u64,
        next_launch: Option<SpanLaunch>,
        last: bool,
        untraced: &Untraced,
        out: &mut impl FnMut(Piece),
    ) {
        if g1 <= g0 {
            return;
        }
        if untraced.touches(g0, g1) {
            // Part of it went unseen: kernels may have run there.
            self.untraced_gaps = self.untraced_gaps.saturating_add(g1 - g0);
            // Bounded: taken at every advance; past the bound a part is
            // left out, which only reads the windows' kernels a little high.
            if let Some(v) = self.unclassified.as_mut().filter(|v| v.len() < MAX_INTERVALS) {
                untraced.traced_parts(g0, g1, |a, b| v.push((a, b)));
            }
            return;
        }
        let before = next_launch.map_or(NO_KERNEL, |l| l.kernel);
        let mut emit = |start: u64, end: u64, cause: Cause| {
            if end > start {
                out(Piece { start, end, cause, before });
            }
        };
        let gap = g1 - g0;
        let overhead = self.overhead.covered(g0, g1);
        for &(s, e) in &overhead {
            emit(s, e, PROFILER);
        }
        let mut rest = Vec::new();
        for (a, b) in minus(g0, g1, &overhead) {
            let copies = self.copies.covered(a, b);
            for &(s, e) in &copies {
                emit(s, e, COPY);
            }
            rest.extend(minus(a, b, &copies));
        }
        // The host was waiting in a synchronisation when the GPU ran dry:
        // nothing could be queued behind the work it waited for.
        let shadow = self.syncs.around(g0).map(|(_, end)| (g0, end.max(g0).saturating_add(SYNC_RESUME_NS).min(g1)));
        let mut host_parts = Vec::new();
        for (a, b) in rest {
            match shadow {
                Some((s, e)) if e > a && s < b => {
                    emit(a.max(s), b.min(e), SYNC);
                    host_parts.extend(minus(a, b, &[(s, e)]));
                }
                _ => host_parts.push((a, b)),
            }
        }
        if last {
            // The program did something else until the session ended.
            for (a, b) in host_parts {
                emit(a, b, HOST);
            }
            return;
        }
        let split_of = |a: u64, b: u64| next_launch.map_or(b, |l| l.ts.clamp(a, b));
        // The host had not launched yet before the launch: gpuscope's for
        // as long as its cost had delayed the host by then, the latest part.
        let waited: u64 = host_parts.iter().map(|&(a, b)| split_of(a, b) - a).sum();
        let mut theirs = next_launch.map_or(0, |l| self.delay.at(l.ts)).min(waited);
        self.delay.spend(theirs);
        let mut own = vec![0u64; host_parts.len()];
        for (i, &(a, b)) in host_parts.iter().enumerate().rev() {
            own[i] = theirs.min(split_of(a, b) - a);
            theirs -= own[i];
        }
        for (&(a, b), own) in host_parts.iter().zip(own) {
            let split = split_of(a, b);
            let host_end = split - own;
            // Before that: short, launch overhead; since the program's
            // previous CUDA call, when that was just before: dispatch; the
            // rest host work.
            match next_launch {
                _ if gap <= LAUNCH_GAP_NS => emit(a, host_end, LAUNCH),
                Some(l) if l.dispatched() => {
                    let from = l.since().clamp(a, host_end);
                    emit(a, from, HOST);
                    emit(from, host_end, DISPATCH);
                }
                _ => emit(a, host_end, HOST),
            }
            emit(host_end, split, PROFILER);
            // After it: the kernel was queued.
            emit(split, b, if gap <= LAUNCH_GAP_NS || b - split <= LAUNCH_GAP_NS { LAUNCH } else { OTHER });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::idle::CAUSES;

    /// A plain launch at `ts`.
    fn at(ts: u64) -> Launched {
        Launched { ts, graph: false, since: 0, kernel: NO_KERNEL }
    }

    fn run(t: &mut IdleTracker, end: Option<u64>) -> [u64; CAUSES] {
        let mut by = [0u64; CAUSES];
        let mut add = |p: Piece| by[p.cause] += p.end - p.start;
        match end {
            Some(e) => t.finish(e, &Untraced::default(), &mut add),
            None => t.advance(&Untraced::default(), &mut add),
        }
        by
    }

    #[test]
    fn a_gap_waits_for_launches_that_could_fill_it() {
        let mut t = IdleTracker::new(0);
        t.launch(1, 0, false);
        t.launch(2, 5, false);
        t.launch(3, 200_000, false);
        t.kernel(1, 10, 100, Some(at(0)));
        // Kernel 2 (launched at 5) is missing: the gap after kernel 1 may
        // still be filled.
        t.kernel(3, 300_000, 310_000, Some(at(200_000)));
        assert_eq!(run(&mut t, None), [0; CAUSES], "kernel 2 may still start at 5");
        t.kernel(2, 120, 200, Some(at(5)));
        let by = run(&mut t, None);
        // [0,10) and [100,120): queued, short. [200,300000): the host
        // launched at 200000: host work before, queued after.
        assert_eq!(by[LAUNCH], 10 + 20);
        assert_eq!(by[HOST], 200_000 - 200);
        assert_eq!(by[OTHER], 100_000, "queued for 100 us with nothing else running");
    }

    #[test]
    fn short_gaps_are_launch_overhead_and_long_ones_host_work() {
        let mut t = IdleTracker::new(0);
        // Tiny kernels launched 4 us apart, each running 1 us.
        for i in 0..10u64 {
            t.launch(i as u32, i * 4_000, false);
            t.kernel(i as u32, i * 4_000 + 2_000, i * 4_000 + 3_000, Some(at(i * 4_000)));
        }
        let by = run(&mut t, Some(36_000 + 3_000));
        assert_eq!(by[LAUNCH], 2_000 + 9 * 3_000, "the leading 2 us and nine 3 us gaps");
        assert_eq!(by[HOST] + by[SYNC] + by[COPY] + by[OTHER], 0);
        // One long pause of the host.
        let mut t = IdleTracker::new(0);
        t.kernel(1, 0, 1_000, None);
        t.launch(2, 5_000_000, false);
        t.kernel(2, 5_004_000, 5_005_000, Some(at(5_000_000)));
        let by = run(&mut t, Some(5_005_000));
        assert_eq!(by[HOST], 5_000_000 - 1_000);
        assert_eq!(by[LAUNCH], 4_000);
    }

    #[test]
    fn a_long_gap_ended_by_a_launch_dispatched_back_to_back_is_dispatch_not_host_work() {
        let mut t = IdleTracker::new(0);
        t.kernel(1, 0, 1_000, None);
        // 80 us of the host in the framework between two launches 90 us apart.
        t.launch(2, 81_000, false);
        t.kernel(2, 85_000, 86_000, Some(Launched { ts: 81_000, graph: false, since: 500, kernel: NO_KERNEL }));
        let by = run(&mut t, Some(86_000));
        assert_eq!(by[DISPATCH], 80_000);
        assert_eq!(by[HOST], 0);
        assert_eq!(by[LAUNCH], 4_000, "queued after the launch: short, launch latency");
        // The thread left a blocking copy at 60 us and launched at 81 us:
        // dispatch from 60 us only; before, it did host work of its own.
        let mut t = IdleTracker::new(0);
        t.kernel(1, 0, 1_000, None);
        t.launch(2, 81_000, false);
        t.kernel(2, 85_000, 86_000, Some(Launched { ts: 81_000, graph: false, since: 60_000, kernel: NO_KERNEL }));
        let by = run(&mut t, Some(86_000));
        assert_eq!((by[HOST], by[DISPATCH]), (59_000, 21_000));
        // Its previous call was long before: host work.
        let mut t = IdleTracker::new(0);
        t.kernel(1, 0, 1_000, None);
        t.launch(2, 2_881_000, false);
        let l = Launched { ts: 2_881_000, graph: false, since: 500, kernel: NO_KERNEL };
        t.kernel(2, 2_885_000, 2_886_000, Some(l));
        let by = run(&mut t, Some(2_886_000));
        assert_eq!((by[HOST], by[DISPATCH]), (2_880_000, 0));
    }

    #[test]
    fn a_gap_that_begins_in_a_synchronisation_is_the_sync_s_until_the_host_resumes() {
        let mut t = IdleTracker::new(0);
        t.kernel(1, 0, 10_000, None);
        // The host waits from 2 us to 12 us, launches again at 20 us.
        t.sync(2_000, 12_000);
        t.launch(2, 20_000, false);
        t.kernel(2, 25_000, 30_000, Some(at(20_000)));
        // And after the second kernel waits again, then works for 1 ms.
        t.sync(26_000, 31_000);
        t.launch(3, 1_031_000, false);
        t.kernel(3, 1_035_000, 1_040_000, Some(at(1_031_000)));
        let by = run(&mut t, Some(1_040_000));
        // Gap 1 [10,25) us: all sync (resume within 100 us).
        // Gap 2 [30, 1035) us: sync until 31 + 100 us, then host until the
        // launch at 1031 us, then 4 us queued (launch).
        assert_eq!(by[SYNC], 15_000 + 101_000);
        assert_eq!(by[HOST], 1_031_000 - 131_000);
        assert_eq!(by[LAUNCH], 4_000);
        // A sync that starts after the GPU went idle is not what it waited on.
        let mut t = IdleTracker::new(0);
        t.kernel(1, 0, 10_000, None);
        t.sync(500_000, 500_010);
        t.launch(2, 900_000, false);
        t.kernel(2, 905_000, 906_000, Some(at(900_000)));
        let by = run(&mut t, Some(906_000));
        assert_eq!(by[SYNC], 0);
        assert_eq!(by[HOST], 890_000);
    }

    #[test]
    fn copies_and_gpuscope_s_own_measurements_take_their_share_first() {
        let mut t = IdleTracker::new(0);
        t.kernel(1, 0, 1_000, None);
        t.copy(100_000, 300_000); // a pageable copy, host blocked
        t.overhead(400_000, 500_000);
        t.launch(2, 600_000, false);
        t.kernel(2, 605_000, 700_000, Some(at(600_000)));
        let by = run(&mut t, Some(700_000));
        assert_eq!(by[COPY], 200_000);
        assert_eq!(by[PROFILER], 100_000);
        assert_eq!(by[HOST], 99_000 + 100_000 + 100_000);
        assert_eq!(by[LAUNCH], 5_000);
        assert_eq!(by.iter().sum::<u64>(), 700_000 - 1_000 - 95_000);
    }

    #[test]
    fn overlapping_streams_merge_and_the_trailing_gap_is_the_host_s() {
        let mut t = IdleTracker::new(0);
        t.kernel(1, 100, 500, None);
        t.kernel(2, 300, 900, None);
        t.kernel(3, 200, 250, None);
        let by = run(&mut t, Some(2_000));
        assert_eq!(by[LAUNCH], 100, "the leading gap is short");
        assert_eq!(by[HOST], 1_100, "nothing followed: the host's");
        assert_eq!(by.iter().sum::<u64>(), 2_000 - 800);
    }

    #[test]
    fn a_kernel_arriving_after_its_time_was_decided_is_counted() {
        let mut t = IdleTracker::new(0);
        t.kernel(1, 0, 100, None);
        t.kernel(2, 1_000, 1_100, None);
        let _ = run(&mut t, None);
        t.kernel(3, 500, 600, None);
        assert_eq!(t.late_kernels, 1);
    }

    #[test]
    fn spans_stay_small_while_the_timeline_waits() {
        assert_eq!(std::mem::size_of::<Span>(), 32, "moved on every insert into an undecided timeline");
    }

    #[test]
    fn a_launch_that_never_delivers_does_not_hold_memory_forever() {
        let mut t = IdleTracker::new(0);
        t.launch(0, 0, false); // never arrives
        for i in 1..(MAX_SPANS as u64 * 3) {
            t.kernel(i as u32, i * 1_000, i * 1_000 + 10, None);
            let _ = run(&mut t, None);
        }
        assert!(t.spans.len() <= MAX_SPANS + 1, "{}", t.spans.len());
    }

    #[test]
    fn launches_that_never_deliver_are_forgotten_not_accumulated() {
        let mut t = IdleTracker::new(0);
        for i in 0..(MAX_PENDING as u64 + 10) {
            t.launch(i as u32, i, false);
        }
        assert!(t.pending.0.len() <= MAX_PENDING, "{}", t.pending.0.len());
        assert_eq!(t.pending.oldest(), Some(MAX_PENDING as u64 / 2), "the oldest half went");
        for i in 0..(MAX_PENDING_GRAPHS as u32 + 10) {
            t.launch(i, i as u64, true);
        }
        assert!(t.pending_graphs.len() <= MAX_PENDING_GRAPHS);
    }

    #[test]
    fn graph_launches_hold_the_watermark_until_their_first_kernel() {
        let mut t = IdleTracker::new(0);
        t.launch(7, 50, true);
        t.kernel(1, 0, 10, None);
        t.kernel(2, 100, 110, None);
        assert_eq!(run(&mut t, None).iter().sum::<u64>(), 0, "the graph launched at 50 may run in [10,100)");
        t.kernel(7, 60, 70, Some(Launched { ts: 50, graph: true, since: 0, kernel: NO_KERNEL }));
        t.kernel(7, 75, 80, Some(Launched { ts: 50, graph: true, since: 0, kernel: NO_KERNEL }));
        assert_eq!(run(&mut t, None).iter().sum::<u64>(), 50 + 5 + 20);
    }
}
