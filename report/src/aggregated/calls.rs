//! Per-call figures of a range: what one opening of it measured, and the
//! log of its calls that steady-state figures are computed from (the first
//! calls one by one, every call's wall time in a histogram), in memory
//! bounded per path whatever the number of calls.

use crate::model::idle::CAUSES;
use crate::model::totals::Totals;
use std::collections::BTreeMap;

/// What one range instance (or a sum of them) measured. Additive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// Wall time, ns.
    pub wall: u64,
    /// Union of its kernels' GPU time, ns (they may run after the pop).
    pub busy: u64,
    /// The part of that union inside its window, ns.
    pub in_window: u64,
    /// Kernel launch calls made inside it (nested ranges included), and the
    /// CUDA graph launches among them.
    pub launches: u64,
    /// See `launches`.
    pub graph_launches: u64,
    /// GPU idle time in its window by cause (`model::idle` order).
    pub idle: [u64; CAUSES],
    /// Time gpuscope's launch callbacks took on its launches, ns.
    pub callback_ns: u64,
    /// Time a framework integration's hooks took inside it (outside launch
    /// calls), ns.
    pub hook_ns: u64,
    /// Time its launch calls took, entry to exit, ns, and how many were
    /// timed (a thread's last launch call is not).
    pub call_ns: u64,
    /// See `call_ns`.
    pub calls_timed: u64,
    /// Host synchronisations inside it, and their time, ns.
    pub syncs: u64,
    /// See `syncs`.
    pub sync_ns: u64,
    /// Copies made inside it, host-to-device bytes among them, and copies
    /// from or to pageable host memory.
    pub copies: u64,
    /// See `copies`.
    pub h2d_bytes: u64,
    /// See `copies`.
    pub pageable: u64,
    /// Device-to-host copies among them (`.item()`, `.cpu()`).
    pub d2h: u64,
    /// Model FLOPs counted inside it, in millions (a framework
    /// integration's count from operand shapes).
    pub mflops: u64,
    /// Its totals (communication time and the rest: a figure added there
    /// reaches the report by itself).
    pub totals: Totals,
}

/// Applies `$op` (a saturating add or sub) to every field of two
/// [`Figures`], named once here.
macro_rules! each_field {
    ($a:expr, $b:expr, $op:ident) => {{
        let (a, b) = ($a, $b);
        for (x, y) in [
            (&mut a.wall, b.wall),
            (&mut a.busy, b.busy),
            (&mut a.in_window, b.in_window),
            (&mut a.launches, b.launches),
            (&mut a.graph_launches, b.graph_launches),
            (&mut a.callback_ns, b.callback_ns),
            (&mut a.hook_ns, b.hook_ns),
            (&mut a.call_ns, b.call_ns),
            (&mut a.calls_timed, b.calls_timed),
            (&mut a.syncs, b.syncs),
            (&mut a.sync_ns, b.sync_ns),
            (&mut a.copies, b.copies),
            (&mut a.h2d_bytes, b.h2d_bytes),
            (&mut a.pageable, b.pageable),
            (&mut a.d2h, b.d2h),
            (&mut a.mflops, b.mflops),
        ] {
            *x = x.$op(y);
        }
        a.totals = a.totals.$op(b.totals);
        for (x, y) in a.idle.iter_mut().zip(b.idle) {
            *x = x.$op(y);
        }
    }};
}

impl Figures {
    /// Adds `o` (saturating).
    pub fn add(&mut self, o: &Figures) {
        each_field!(self, o, saturating_add);
    }

    /// Takes `o` away (saturating at 0).
    pub fn sub(&mut self, o: &Figures) {
        each_field!(self, o, saturating_sub);
    }
}

/// Calls of a path kept one by one: warm-up is looked for among them.
pub const FIRST_CALLS: usize = 64;

/// Wall times of every call of a path, in buckets 2% wide: quantiles to
/// 2%, in at most ~1400 buckets (1 ns to 10^12 ns) however many calls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WallHistogram {
    buckets: BTreeMap<u16, u64>,
    count: u64,
}

/// Bucket width: each bucket's upper bound is this much above its lower.
const BUCKET_RATIO: f64 = 1.02;

impl WallHistogram {
    fn bucket(ns: u64) -> u16 {
        if ns <= 1 {
            return 0;
        }
        ((ns as f64).ln() / BUCKET_RATIO.ln()).floor().min(u16::MAX as f64) as u16
    }

    /// A representative value of bucket `b`: its geometric middle.
    fn value(b: u16) -> u64 {
        BUCKET_RATIO.powf(b as f64 + 0.5).round() as u64
    }

    /// Counts a call of `ns`.
    pub fn add(&mut self, ns: u64) {
        *self.buckets.entry(Self::bucket(ns)).or_default() += 1;
        self.count += 1;
    }

    /// Takes away a call of `ns` counted before.
    pub fn remove(&mut self, ns: u64) {
        let b = Self::bucket(ns);
        if let Some(n) = self.buckets.get_mut(&b) {
            *n -= 1;
            self.count -= 1;
            if *n == 0 {
                self.buckets.remove(&b);
            }
        }
    }

    #[cfg(test)]
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The `q` quantile (0 to 1), to the bucket's resolution.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (&b, &n) in &self.buckets {
            seen += n;
            if seen >= rank {
                return Some(Self::value(b));
            }
        }
        self.buckets.keys().next_back().map(|&b| Self::value(b))
    }
}

/// One call: when it opened and what it measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// When it opened, ns.
    pub start: u64,
    /// What it measured.
    pub figures: Figures,
}

/// The calls of one path.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallLog {
    /// The first [`FIRST_CALLS`] calls folded (ranges are folded in the
    /// order they end: for one thread's calls of a path, their order),
    /// kept in the order they opened.
    pub first: Vec<Call>,
    /// Every call's wall time.
    pub walls: WallHistogram,
}

impl CallLog {
    /// Logs a call; where it went among the first calls, if it is one of
    /// them (a caller keeping more per first call inserts there too).
    pub fn add(&mut self, start: u64, figures: &Figures) -> Option<usize> {
        self.walls.add(figures.wall);
        if self.first.len() >= FIRST_CALLS {
            return None;
        }
        let at = self.first.partition_point(|c| c.start <= start);
        self.first.insert(at, Call { start, figures: *figures });
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_two_percent() {
        let mut h = WallHistogram::default();
        for ns in 1..=1000u64 {
            h.add(ns * 1000);
        }
        let med = h.quantile(0.5).unwrap() as f64;
        assert!((med / 500_000.0 - 1.0).abs() < 0.02, "{med}");
        let p90 = h.quantile(0.9).unwrap() as f64;
        assert!((p90 / 900_000.0 - 1.0).abs() < 0.02, "{p90}");
        h.remove(1_000_000);
        assert_eq!(h.count(), 999);
        h.remove(123); // never added: nothing changes
        assert_eq!(h.count(), 999);
        assert_eq!(WallHistogram::default().quantile(0.5), None);
    }

    #[test]
    fn figures_add_and_subtract_field_by_field() {
        let mut a = Figures { wall: 10, launches: 2, idle: [1, 0, 0, 0, 0, 0, 3], ..Default::default() };
        let b = Figures { wall: 5, launches: 1, copies: 4, idle: [1, 0, 0, 0, 0, 0, 1], ..Default::default() };
        a.add(&b);
        assert_eq!((a.wall, a.launches, a.copies, a.idle[6]), (15, 3, 4, 4));
        a.sub(&b);
        a.sub(&b);
        assert_eq!((a.wall, a.launches, a.copies, a.idle[0]), (5, 1, 0, 0), "saturates at 0");
    }

    #[test]
    fn the_first_calls_are_kept_in_the_order_they_opened() {
        let mut log = CallLog::default();
        for start in [30, 10, 20] {
            log.add(start, &Figures { wall: start, ..Default::default() });
        }
        assert_eq!(log.first.iter().map(|c| c.start).collect::<Vec<_>>(), [10, 20, 30]);
    }
}
