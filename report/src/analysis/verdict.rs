//! What bounds a kernel or a range, with the evidence that decided it.

use super::rates::Rates;
use crate::model::idle::IdleSplit;
use crate::model::idle::LAUNCH_GAP_NS;
use crate::model::units::fmt_ns;
use serde::Serialize;

named_enum! {
    /// A verdict's name, as the report writes it.
    pub enum Bound {
        /// The SMs' math pipes are near their peak.
        Compute = "compute-bound",
        /// DRAM bandwidth is near its peak.
        Memory = "memory-bound",
        /// Neither is: warps wait on latency, too few SMs or warps are active.
        Latency = "latency-bound",
        /// Busy GPU, kind unknown: no hardware counters (trace mode).
        Gpu = "gpu-bound",
        /// The GPU idles while the host issues kernels one by one: short gaps
        /// between them, or longer ones while the launching thread dispatched
        /// operations back to back (many small ops).
        Launch = "launch-bound",
        /// The GPU idles because the host queued no work (or was blocked copying).
        Host = "host-bound",
        /// The GPU idles after the host synchronised with it.
        Sync = "sync-bound",
        /// Work was queued but waited on a dependency.
        Dependency = "dependency-bound",
        /// Communication kernels (NCCL's collectives) run with no compute under
        /// them for a large share of the range's time: it waits on the network and
        /// the other ranks.
        Communication = "communication-bound",
        /// The GPU idled and the report does not say why (schema 1), or (no
        /// kernel records) its SMs were mostly idle, the GPU or under kernels.
        Idle = "gpu-idle",
        /// Nothing was measured over the range: no kernel records and no PM
        /// samples (trace windows with sampling stopped or unsupported).
        Unknown = "unknown",
        /// Not a bound on time: how much of the device's memory the program uses
        /// (the memory findings' heading).
        DeviceMemory = "device-memory",
        /// A library's or framework's internal range (cuBLAS, CCCL, XLA's TSL):
        /// folded into the program's range around it, not judged on its own.
        Folded = "folded",
        /// A communication kernel's own verdict: its time is the network's and the
        /// other ranks', so its SM figures say nothing about what to change.
        CommKernel = "communication",
    }
}

/// The GPU busy at least this share of a range's time (gpuscope's own
/// measurement excluded) is what bounds it; below, whatever keeps it idle
/// does.
pub const GPU_BOUND_PCT: f64 = 50.0;

/// Exposed communication (communication kernels with no compute kernel of
/// the same device under them) of at least this share of a range's time
/// bounds it, unless an idle cause takes more.
///
/// Holistic Trace Analysis (HTA) measures, per rank, the share of
/// communication time that computation overlaps, and reads a low share as
/// the first thing to fix in distributed training; gpuscope counts the
/// other side of that overlap, the communication time left exposed, within
/// each range. Well-overlapped DDP and FSDP steps leave only the last
/// gradient bucket's all-reduce (or the first all-gather) exposed, a few
/// percent of a step; a quarter of the step waiting on collectives is time
/// that overlap, larger buckets or a faster interconnect would give back.
pub const COMM_BOUND_PCT: f64 = 25.0;

/// ncu's Speed Of Light rule: compute and memory throughput both under 60%
/// of peak "typically indicate latency issues"; the busier one at or over
/// 60% bounds the kernel.
pub const SOL_BOUND_PCT: f64 = 60.0;

/// Under this SM efficiency most SMs sit idle while the kernel runs (a grid
/// smaller than the GPU, or a long tail): latency-bound whatever the pipes
/// of the busy SMs do. The same threshold flags busy-but-underused ranges.
pub const FEW_SMS_PCT: f64 = crate::report::LOW_SM_EFFICIENCY_PCT;

/// A grid whose blocks reach fewer SMs than this share leaves the rest
/// idle (trace mode's stand-in for SM efficiency: the launch shape).
pub const LOW_COVERAGE_PCT: f64 = 50.0;

/// A grid whose last wave leaves more than a fifth of the block slots of
/// its waves empty has a tail worth naming.
pub const TAIL_WAVE_PCT: f64 = 80.0;

/// A verdict and what decided it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Verdict {
    /// What bounds it (see [`Bound`]).
    pub bound: Bound,
    /// The figures behind it.
    pub evidence: String,
}

use crate::model::units::fmt_pct as pct;

/// What bounds a kernel, from its figures; `None` when nothing is known
/// (not measured, and a launch shape that fills the GPU).
pub(crate) fn kernel(r: &Rates) -> Option<Verdict> {
    let v = |bound, evidence: String| Some(Verdict { bound, evidence });
    if let Some(eff) = r.sm_efficiency.filter(|e| *e < FEW_SMS_PCT) {
        let why = match (r.sm_coverage, r.wave_efficiency) {
            (Some(c), _) if c < LOW_COVERAGE_PCT => format!("; its grid reaches {} of the SMs", pct(c)),
            (_, Some(w)) if w < TAIL_WAVE_PCT && r.waves.is_some_and(|n| n > 1.0) => {
                format!("; its last wave is partial (wave efficiency {})", pct(w))
            }
            _ => String::new(),
        };
        return v(Bound::Latency, format!("SM efficiency {}: most SMs idle while it runs{why}", pct(eff)));
    }
    if r.sm_efficiency.is_none() {
        if let Some(c) = r.sm_coverage.filter(|c| *c < LOW_COVERAGE_PCT) {
            return v(Bound::Latency, format!("its grid reaches {} of the SMs (launch shape; not measured)", pct(c)));
        }
    }
    let (c, m) = (r.compute_pct, r.dram_pct);
    if c.is_none() && m.is_none() {
        return None;
    }
    // A figure not collected is unknown: only one that reaches the
    // threshold decides alone; "neither near its limit" needs both.
    if c.is_none() || m.is_none() {
        let (known, what) = match (c, m) {
            (Some(c), _) => (c, "compute"),
            (_, Some(m)) => (m, "DRAM"),
            _ => return None,
        };
        let other = if what == "compute" { "DRAM" } else { "compute" };
        return (known >= SOL_BOUND_PCT).then(|| Verdict {
            bound: if what == "compute" { Bound::Compute } else { Bound::Memory },
            evidence: format!("{what} {} of peak ({other} not collected)", pct(known)),
        });
    }
    let (Some(c), Some(m)) = (c, m) else { return None };
    let figures = format!("compute {} and DRAM {} of peak", pct(c), pct(m));
    if c.max(m) >= SOL_BOUND_PCT {
        if c >= m {
            let pipe = match r.tensor_pct {
                Some(t) if t * r.sm_efficiency.unwrap_or(100.0) / 100.0 >= c - 0.5 => " (tensor cores)",
                Some(_) => " (CUDA cores)",
                None => "",
            };
            v(Bound::Compute, format!("{figures}{pipe}"))
        } else {
            v(Bound::Memory, figures)
        }
    } else {
        let occ = r.occupancy.map(|o| format!(", achieved occupancy {}", pct(o))).unwrap_or_default();
        v(Bound::Latency, format!("{figures}: neither near its limit{occ}"))
    }
}

/// A range neither traced nor sampled: `unknown`, saying why (reading its
/// empty kernel time as an idle GPU would be a false verdict).
pub(crate) fn unmeasured(count: u64) -> Verdict {
    Verdict {
        bound: Bound::Unknown,
        evidence: format!(
            "none of its {count} instances was traced and no PM sample covers them (sampling was stopped or not \
             supported): nothing measured"
        ),
    }
}

/// What launches closer together than trace mode's launch gaps usually
/// mean, where samples alone cannot show it.
pub(crate) const DENSE_LAUNCHES: &str =
    "launches this close together usually mean short kernels waiting on the host's launches";

/// Launch calls of a range's untraced instances, counted by the launch
/// callbacks while kernel records were off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Counted {
    /// Instances.
    pub calls: u64,
    /// Their launch calls (nested ranges included).
    pub launches: u64,
    /// Their wall time, ns.
    pub wall_ns: u64,
}

impl Counted {
    /// "254 launches per call, one every 38.1 us" ("153109 launches, one
    /// every 23.5 us" for no calls: a session's), or "no kernel launch".
    pub(crate) fn describe(&self) -> String {
        if self.launches == 0 {
            return "no kernel launch".to_string();
        }
        if self.calls == 0 {
            return format!("{} launches, one every {}", self.launches, fmt_ns(self.wall_ns / self.launches));
        }
        let per_call = self.launches as f64 / self.calls.max(1) as f64;
        let per_call = if per_call >= 10.0 { format!("{per_call:.0}") } else { format!("{per_call:.1}") };
        format!("{per_call} launches per call, one every {}", fmt_ns(self.wall_ns / self.launches))
    }

    /// Launches at least as close together, on average, as trace mode's
    /// launch gaps.
    pub(crate) fn dense(&self) -> bool {
        self.launches > 0 && self.wall_ns / self.launches <= LAUNCH_GAP_NS
    }
}

/// What bounds a range known only from PM samples over its wall time (no
/// kernel records): compute or DRAM near its peak over the whole window
/// bounds it whatever else happened; SMs active most of the window with
/// neither near its limit is latency; SMs active little of it is an idle
/// GPU or idle SMs under running kernels, which samples alone cannot tell
/// apart. `counted`: its launches, when the launch callbacks counted them;
/// they go into the evidence, and dense ones are named as the likely
/// cause of idle SMs (short kernels waiting on launches), not as a verdict:
/// long kernels on a few SMs launched as often look the same to samples.
pub(crate) fn untraced(r: &Rates, counted: Option<Counted>) -> Verdict {
    let why = match counted {
        Some(_) => "PM samples over its wall time and launch counts; no kernel records",
        None => "PM samples over its wall time; no kernel records",
    };
    let v = |bound, evidence: String| Verdict { bound, evidence: format!("{evidence} ({why})") };
    let launches = counted.map(|n| format!("; {}", n.describe())).unwrap_or_default();
    let Some(eff) = r.sm_efficiency else {
        return v(Bound::Unknown, format!("SM activity was not sampled over it{launches}"));
    };
    let known = |x: Option<f64>| x.map_or("-".to_string(), pct);
    let figures = format!("compute {} and DRAM {} of peak", known(r.compute_pct), known(r.dram_pct));
    let active = format!("SMs active {} of its wall time{launches}", pct(eff));
    // A figure not collected decides nothing; one at the threshold does.
    let (c, m) = (r.compute_pct.unwrap_or(f64::NAN), r.dram_pct.unwrap_or(f64::NAN));
    if c >= SOL_BOUND_PCT || m >= SOL_BOUND_PCT {
        let compute = c >= SOL_BOUND_PCT && (m.is_nan() || c >= m);
        v(if compute { Bound::Compute } else { Bound::Memory }, format!("{figures}{launches}"))
    } else if eff < GPU_BOUND_PCT {
        let likely = if counted.is_some_and(|n| n.dense()) {
            format!("; {DENSE_LAUNCHES} (launch-bound)")
        } else {
            String::new()
        };
        v(
            Bound::Idle,
            format!(
                "{active}: an idle GPU and idle SMs under running kernels cannot be told apart without kernel \
                 records (a trace window, or trace mode, splits them){likely}"
            ),
        )
    } else if r.compute_pct.is_none() || r.dram_pct.is_none() {
        v(Bound::Gpu, format!("{active}; {figures}: the figure not collected leaves the kind unknown"))
    } else {
        v(Bound::Latency, format!("{active}; {figures}: neither near its limit"))
    }
}

/// What bounds a stretch known only from PM samples over its wall time
/// when the graphics engine's activity was sampled (`busy`, %: the share
/// of the time any kernel ran, as kernel records would give it). A GPU
/// busy at least [`GPU_BOUND_PCT`] of it is judged on the SM figures over
/// its busy time (`over_busy`), by the speed-of-light rule; an idle one by
/// the host's launches (`counted`): launches as close together as trace
/// mode's launch gaps are short kernels waiting on them (launch-bound),
/// sparser ones leave the GPU waiting for the host's other work
/// (host-bound; syncs and copies are not told apart without kernel
/// records).
pub(crate) fn sampled_wall(busy: f64, over_busy: &Rates, counted: Option<Counted>) -> Verdict {
    let why = "PM samples of the graphics engine's and SMs' activity; no kernel records";
    let v = |bound, evidence: String| Verdict { bound, evidence: format!("{evidence} ({why})") };
    let launches = counted.map(|n| format!("; {}", n.describe())).unwrap_or_default();
    if busy >= GPU_BOUND_PCT {
        let head = format!("GPU busy {}", pct(busy));
        return match kernel(over_busy) {
            Some(k) => v(k.bound, format!("{head}; {}{launches}", k.evidence)),
            None => v(
                Bound::Gpu,
                format!("{head}{launches}; the SM figures over its busy time do not say compute, memory or latency"),
            ),
        };
    }
    let idle = format!("GPU idle {} of the time", pct(100.0 - busy));
    match counted {
        Some(n) if n.dense() => v(Bound::Launch, format!("{idle}{launches}: {DENSE_LAUNCHES}")),
        Some(_) => v(
            Bound::Host,
            format!(
                "{idle}{launches}: the GPU waited for the host between sparse launches (host work, syncs and copies \
                 are not told apart without kernel records)"
            ),
        ),
        None => v(Bound::Idle, format!("{idle}: launches were not counted, so the host's share is not known")),
    }
}

/// Time shares of a range (or a session), % of its time without
/// gpuscope's own measurements: GPU busy, and idle by cause.
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)]
pub struct Shares {
    pub busy: f64,
    pub host: f64,
    pub copy: f64,
    pub sync: f64,
    pub launch: f64,
    pub dispatch: f64,
    pub other: f64,
}

impl Shares {
    /// "GPU idle 61%: host 40%, copies 20%, launch gaps 1.0%": idle time
    /// and the causes of at least half a percent.
    pub fn describe(&self) -> String {
        let idle = format!("GPU idle {}", pct(100.0 - self.busy));
        match self.causes() {
            causes if causes.is_empty() => idle,
            causes => format!("{idle}: {causes}"),
        }
    }

    /// "host 40%, copies 20%, launch gaps 1.0%": the idle causes of at
    /// least half a percent.
    pub fn causes(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for (name, v) in [
            ("dispatch", self.dispatch),
            ("host", self.host),
            ("copies", self.copy),
            ("sync", self.sync),
            ("launch gaps", self.launch),
            ("waiting", self.other),
        ] {
            if v >= 0.5 {
                parts.push(format!("{name} {}", pct(v)));
            }
        }
        parts.join(", ")
    }

    /// From a range's wall time and idle split.
    pub fn of(wall_ns: u64, idle: &IdleSplit) -> Option<Shares> {
        let base = wall_ns.saturating_sub(idle.profiler_ns) as f64;
        if base <= 0.0 {
            return None;
        }
        let p = |ns: u64| 100.0 * ns as f64 / base;
        let idle_ns = idle.total().saturating_sub(idle.profiler_ns);
        Some(Shares {
            busy: (100.0 - p(idle_ns)).max(0.0),
            host: p(idle.host_ns),
            copy: p(idle.copy_ns),
            sync: p(idle.sync_ns),
            launch: p(idle.launch_ns),
            dispatch: p(idle.dispatch_ns),
            other: p(idle.other_ns),
        })
    }
}

/// What bounds a range: its GPU side when the GPU was busy at least
/// [`GPU_BOUND_PCT`] of its time, otherwise the largest cause of idle time.
/// `gpu_side`: the verdict of its kernels (time-weighted), if known;
/// `measured`: whether any of them had hardware counters.
pub(crate) fn range(shares: Option<Shares>, utilization: f64, gpu_side: Option<Verdict>, measured: bool) -> Verdict {
    let unknown = if measured {
        "its kernels' measurements have no throughput counters (issue slots, tensor pipe, DRAM: gpuscope's default metric set)"
    } else {
        "hardware counters (metrics mode) tell compute, memory and latency apart"
    };
    let Some(s) = shares else {
        // Schema 1: the range's own kernels' utilisation, no idle causes.
        if utilization >= GPU_BOUND_PCT {
            return gpu_side.unwrap_or(Verdict {
                bound: Bound::Gpu,
                evidence: format!("GPU busy {}; {unknown}", pct(utilization)),
            });
        }
        return Verdict {
            bound: Bound::Idle,
            evidence: format!("GPU idle {}; this report (schema 1) does not record why", pct(100.0 - utilization)),
        };
    };
    if s.busy >= GPU_BOUND_PCT {
        let busy = format!("GPU busy {}", pct(s.busy));
        return match gpu_side {
            Some(v) => Verdict { bound: v.bound, evidence: format!("{busy}; {}", v.evidence) },
            None => Verdict { bound: Bound::Gpu, evidence: format!("{busy}; {unknown}") },
        };
    }
    let causes = [
        (Bound::Host, s.host + s.copy),
        (Bound::Sync, s.sync),
        (Bound::Launch, s.launch + s.dispatch),
        (Bound::Dependency, s.other),
    ];
    let (bound, _) = causes.into_iter().fold((Bound::Host, -1.0), |best, c| if c.1 > best.1 { c } else { best });
    Verdict { bound, evidence: s.describe() }
}

/// A communication kernel's verdict: `op`, its collective.
pub(crate) fn comm_kernel(op: &str) -> Verdict {
    Verdict {
        bound: Bound::CommKernel,
        evidence: format!(
            "NCCL {op}: its time is spent on transfers and waiting for the other ranks, not on its SMs' work (see \
             the ranges' exposed communication)"
        ),
    }
}

/// `v`, or communication-bound when exposed communication takes at least
/// [`COMM_BOUND_PCT`] of the range's `active_ns` and no idle cause of
/// `shares` takes more. `comm_ns`, `exposed_ns`: its communication
/// kernels' time and the part of it no compute kernel ran under.
pub(crate) fn communication(
    v: Verdict,
    shares: Option<Shares>,
    active_ns: u64,
    comm_ns: u64,
    exposed_ns: u64,
) -> Verdict {
    if active_ns == 0 || exposed_ns == 0 {
        return v;
    }
    let exposed = 100.0 * exposed_ns as f64 / active_ns as f64;
    let idle_cause = shares
        .map_or(0.0, |s| [s.host + s.copy, s.sync, s.launch + s.dispatch, s.other].into_iter().fold(0.0, f64::max));
    if exposed < COMM_BOUND_PCT || exposed < idle_cause {
        return v;
    }
    let hidden = 100.0 * (1.0 - exposed_ns as f64 / comm_ns.max(exposed_ns) as f64);
    Verdict {
        bound: Bound::Communication,
        evidence: format!(
            "communication kernels ran {} of its time with no compute under them ({} of their {} overlapped by \
             compute)",
            pct(exposed),
            pct(hidden),
            fmt_ns(comm_ns)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_written_as_their_names_and_unknown_ones_read_back_as_written() {
        assert_eq!(serde_json::to_string(&Bound::Idle).unwrap(), r#""gpu-idle""#);
        assert_eq!(serde_json::from_str::<Bound>(r#""communication""#).unwrap(), Bound::CommKernel);
        // A verdict of a later version: kept, and written again as read.
        let later: Bound = serde_json::from_str(r#""pcie-bound""#).unwrap();
        assert_eq!(later, Bound::Other("pcie-bound".into()));
        assert_eq!(serde_json::to_string(&later).unwrap(), r#""pcie-bound""#);
        for b in Bound::ALL {
            assert_eq!(&Bound::from_name(b.as_str()), b);
        }
        assert_eq!(Bound::Compute, "compute-bound");
        assert_eq!(Bound::Folded.to_string(), "folded");
    }

    #[test]
    fn exposed_communication_bounds_a_range_unless_an_idle_cause_takes_more() {
        let compute = || Verdict { bound: Bound::Compute, evidence: "compute 90%".into() };
        let busy = Shares::of(1000, &IdleSplit::default());
        // 400 of 1000 ns exposed, 500 of communication.
        let v = communication(compute(), busy, 1000, 500, 400);
        assert_eq!(v.bound, Bound::Communication);
        assert!(v.evidence.contains("40% of its time") && v.evidence.contains("20% of their"), "{}", v.evidence);
        // Mostly hidden: the verdict stands.
        assert_eq!(communication(compute(), busy, 1000, 500, 100).bound, Bound::Compute);
        assert_eq!(communication(compute(), busy, 1000, 0, 0).bound, Bound::Compute);
        // The host idled the GPU longer than communication held it.
        let host = Shares::of(1000, &idle(450, 0, 0, 0, 0, 0));
        assert_eq!(communication(compute(), host, 1000, 400, 300).bound, Bound::Compute);
        assert_eq!(communication(compute(), host, 1000, 600, 500).bound, Bound::Communication);
    }

    fn measured(eff: f64, compute: f64, dram: f64) -> Rates {
        Rates {
            sm_efficiency: Some(eff),
            occupancy: Some(50.0),
            compute_pct: Some(compute),
            dram_pct: Some(dram),
            sm_coverage: Some(100.0),
            wave_efficiency: Some(100.0),
            ..Default::default()
        }
    }

    #[test]
    fn ranges_without_kernel_records_are_judged_by_their_wall_samples_only() {
        let v = |eff, c: Option<f64>, d: Option<f64>| {
            untraced(&Rates { sm_efficiency: Some(eff), compute_pct: c, dram_pct: d, ..Default::default() }, None)
        };
        // DRAM near its peak over the whole window bounds it.
        let m = v(40.0, Some(10.0), Some(75.0));
        assert_eq!(m.bound, Bound::Memory);
        assert!(m.evidence.contains("no kernel records"), "{}", m.evidence);
        assert_eq!(v(90.0, Some(70.0), Some(10.0)).bound, Bound::Compute);
        // SMs busy most of the window, neither unit near its limit.
        assert_eq!(v(80.0, Some(20.0), Some(10.0)).bound, Bound::Latency);
        assert_eq!(v(80.0, None, None).bound, Bound::Gpu, "no peaks: busy, kind unknown");
        // One of them not collected: not "latency-bound at 0%".
        let g = v(80.0, None, Some(30.0));
        assert_eq!(g.bound, Bound::Gpu, "{g:?}");
        assert!(g.evidence.contains("compute - and DRAM 30%"), "{}", g.evidence);
        assert_eq!(v(80.0, None, Some(75.0)).bound, Bound::Memory);
        let none = untraced(&Rates::default(), None);
        assert_eq!(none.bound, Bound::Unknown, "SM activity not sampled: {none:?}");
        // SMs mostly idle: idle GPU or idle SMs, not told apart.
        for (eff, c, d) in [(12.0, Some(5.0), Some(3.0)), (35.0, Some(20.0), Some(10.0)), (5.0, None, None)] {
            let i = v(eff, c, d);
            assert_eq!(i.bound, Bound::Idle, "{eff}");
            assert!(i.evidence.contains("cannot be told apart"), "{}", i.evidence);
        }
    }

    #[test]
    fn a_figure_not_collected_is_unknown_and_no_verdict_rests_on_it() {
        let r = |c: Option<f64>, m: Option<f64>| Rates {
            sm_efficiency: Some(90.0),
            compute_pct: c,
            dram_pct: m,
            sm_coverage: Some(100.0),
            ..Default::default()
        };
        // Compute not collected, DRAM 50%: not "latency-bound at compute 0%".
        assert_eq!(kernel(&r(None, Some(50.0))), None);
        assert_eq!(kernel(&r(Some(40.0), None)), None);
        let m = kernel(&r(None, Some(91.0))).unwrap();
        assert_eq!(m.bound, Bound::Memory);
        assert!(m.evidence.contains("compute not collected"), "{}", m.evidence);
        assert_eq!(kernel(&r(Some(95.0), None)).unwrap().bound, Bound::Compute);
        assert_eq!(kernel(&r(Some(40.0), Some(20.0))).unwrap().bound, Bound::Latency, "both known");
    }

    #[test]
    fn sampled_engine_activity_tells_an_idle_gpu_from_idle_sms() {
        let counted = |launches, wall_ns| Some(Counted { calls: 10, launches, wall_ns });
        let busy = |eff: f64, dram: f64| Rates {
            sm_efficiency: Some(eff),
            compute_pct: Some(10.0),
            dram_pct: Some(dram),
            ..Default::default()
        };
        // Busy, DRAM near its peak over the busy time: memory-bound.
        let m = sampled_wall(99.0, &busy(95.0, 91.0), counted(1000, 1_000_000_000));
        assert_eq!(m.bound, Bound::Memory);
        assert!(m.evidence.starts_with("GPU busy 99%") && m.evidence.contains("no kernel records"), "{}", m.evidence);
        // Busy on 2 of 132 SMs: latency-bound, whatever the launches.
        assert_eq!(sampled_wall(97.0, &busy(1.5, 0.1), counted(2000, 1_000_000_000)).bound, Bound::Latency);
        // Idle: 1455 launches in 52 ms (one every 36 us) are launch overhead.
        let l = sampled_wall(22.0, &busy(80.0, 10.0), counted(14_550, 520_000_000));
        assert_eq!(l.bound, Bound::Launch);
        assert!(l.evidence.contains("GPU idle 78%") && l.evidence.contains("one every 35.7 us"), "{}", l.evidence);
        // Idle with sparse launches: the host.
        assert_eq!(sampled_wall(15.0, &busy(80.0, 10.0), counted(50, 1_430_000_000)).bound, Bound::Host);
        assert_eq!(sampled_wall(15.0, &busy(80.0, 10.0), None).bound, Bound::Idle);
    }

    #[test]
    fn launch_counts_of_untraced_ranges_go_into_the_evidence_without_changing_the_bound() {
        let idle =
            Rates { sm_efficiency: Some(9.0), compute_pct: Some(3.0), dram_pct: Some(2.0), ..Default::default() };
        let counted = |launches, wall_ns| Some(Counted { calls: 100, launches, wall_ns });
        // 254 launches per 9.7 ms step: one every 38 us, denser than
        // trace mode's launch gaps.
        let dense = untraced(&idle, counted(25_400, 970_000_000));
        assert_eq!(dense.bound, Bound::Idle, "samples cannot tell short kernels from long ones on few SMs");
        assert!(dense.evidence.contains("254 launches per call, one every 38.2 us"), "{}", dense.evidence);
        assert!(
            dense.evidence.contains("launch-bound") && dense.evidence.contains("launch counts"),
            "{}",
            dense.evidence
        );
        // Sparse launches: no hint.
        let sparse = untraced(&idle, counted(300, 970_000_000));
        assert!(sparse.evidence.contains("3.0 launches per call, one every 3.23 ms"), "{}", sparse.evidence);
        assert!(!sparse.evidence.contains("launch-bound"), "{}", sparse.evidence);
        let none = untraced(&idle, counted(0, 970_000_000));
        assert!(
            none.evidence.contains("no kernel launch") && !none.evidence.contains("launch-bound"),
            "{}",
            none.evidence
        );
        // Not counted (an older report): as before.
        let old = untraced(&idle, None);
        assert!(!old.evidence.contains("launch"), "{}", old.evidence);
        // A bound from the samples keeps its verdict, with the counts.
        let busy =
            Rates { sm_efficiency: Some(95.0), compute_pct: Some(80.0), dram_pct: Some(10.0), ..Default::default() };
        let c = untraced(&busy, counted(25_400, 970_000_000));
        assert_eq!(c.bound, Bound::Compute);
        assert!(c.evidence.contains("254 launches per call"), "{}", c.evidence);
    }

    #[test]
    fn kernels_are_compute_memory_or_latency_bound_by_the_speed_of_light_rule() {
        assert_eq!(kernel(&measured(98.8, 95.6, 0.0)).unwrap().bound, Bound::Compute);
        assert_eq!(kernel(&measured(91.7, 3.1, 66.3)).unwrap().bound, Bound::Memory);
        let l = kernel(&measured(95.0, 30.0, 7.0)).unwrap();
        assert_eq!(l.bound, Bound::Latency);
        assert!(l.evidence.contains("neither near its limit"), "{}", l.evidence);
        // At exactly the threshold, the busier unit bounds it.
        assert_eq!(kernel(&measured(90.0, 60.0, 59.0)).unwrap().bound, Bound::Compute);
        assert_eq!(kernel(&measured(90.0, 59.9, 59.9)).unwrap().bound, Bound::Latency);
    }

    #[test]
    fn few_active_sms_make_a_kernel_latency_bound_whatever_its_pipes_do() {
        let mut one_block = measured(0.75, 0.1, 0.0);
        one_block.sm_coverage = Some(100.0 / 132.0);
        let v = kernel(&one_block).unwrap();
        assert_eq!(v.bound, Bound::Latency);
        assert!(
            v.evidence.contains("SM efficiency 0.75%") && v.evidence.contains("0.76% of the SMs"),
            "{}",
            v.evidence
        );
        let mut tail = measured(45.0, 90.0, 0.0);
        tail.wave_efficiency = Some(67.0);
        tail.waves = Some(2.01);
        assert!(kernel(&tail).unwrap().evidence.contains("last wave is partial"));
        // Trace mode: the launch shape alone.
        let shape = Rates { sm_coverage: Some(0.76), ..Default::default() };
        assert_eq!(kernel(&shape).unwrap().bound, Bound::Latency);
        let full = Rates { sm_coverage: Some(100.0), wave_efficiency: Some(67.0), ..Default::default() };
        assert_eq!(kernel(&full), None, "nothing measured, nothing to say");
    }

    #[test]
    fn the_tensor_pipe_is_named_when_it_is_what_is_busy() {
        let mut gemm = measured(96.4, 93.4, 40.0);
        gemm.tensor_pct = Some(96.9);
        assert!(kernel(&gemm).unwrap().evidence.ends_with("(tensor cores)"));
        gemm.tensor_pct = Some(0.0);
        assert!(kernel(&gemm).unwrap().evidence.ends_with("(CUDA cores)"));
    }

    fn idle(host: u64, copy: u64, sync: u64, launch: u64, other: u64, profiler: u64) -> IdleSplit {
        IdleSplit::from_array([host, sync, copy, launch, other, profiler, 0])
    }

    #[test]
    fn an_idle_range_is_bound_by_its_largest_cause_of_idle_time() {
        let compute = Some(Verdict { bound: Bound::Compute, evidence: "compute 90%".into() });
        // 1000 ns of wall time.
        let v = |i: IdleSplit| range(Shares::of(1000, &i), 0.0, compute.clone(), true);
        assert_eq!(v(idle(600, 0, 0, 0, 0, 0)).bound, Bound::Host);
        assert_eq!(v(idle(300, 300, 0, 0, 0, 0)).bound, Bound::Host, "blocking copies are the host's");
        assert_eq!(v(idle(100, 0, 500, 0, 0, 0)).bound, Bound::Sync);
        assert_eq!(v(idle(100, 0, 0, 550, 0, 0)).bound, Bound::Launch);
        assert_eq!(v(idle(0, 0, 0, 0, 700, 0)).bound, Bound::Dependency);
        let busy = v(idle(100, 0, 0, 300, 0, 0));
        assert_eq!(busy.bound, Bound::Compute, "busy 60%: the GPU side");
        assert!(busy.evidence.starts_with("GPU busy 60%; compute 90%"), "{}", busy.evidence);
        // gpuscope's own measurement time is left out of the shares.
        assert_eq!(v(idle(110, 0, 0, 0, 0, 800)).bound, Bound::Host, "110 of 200 ns idle by the host");
        assert_eq!(v(idle(50, 0, 0, 0, 0, 800)).bound, Bound::Compute, "150 of 200 ns busy");
        let e = v(idle(400, 200, 0, 10, 0, 0)).evidence;
        assert_eq!(e, "GPU idle 61%: host 40%, copies 20%, launch gaps 1.0%");
    }

    #[test]
    fn without_counters_or_idle_causes_the_verdict_says_what_is_missing() {
        let v = range(Shares::of(1000, &IdleSplit::default()), 0.0, None, false);
        assert_eq!(v.bound, Bound::Gpu);
        assert!(v.evidence.contains("metrics mode"), "{}", v.evidence);
        let m = range(Shares::of(1000, &IdleSplit::default()), 0.0, None, true);
        assert!(m.evidence.contains("default metric set"), "{}", m.evidence);
        let old = range(None, 30.0, None, false);
        assert_eq!(old.bound, Bound::Idle);
        assert!(old.evidence.contains("schema 1"));
        assert_eq!(range(None, 95.0, None, false).bound, Bound::Gpu);
    }
}
