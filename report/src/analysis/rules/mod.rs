//! The finding rules: one file per finding kind, each declaring its kind,
//! the evidence it reads, when it fires and what it costs (the rows of
//! `docs/concepts/verdicts-and-findings.md`, checked against [`RULES`] by
//! `tests/report_schema.rs`), and the function that finds it with its
//! message and advice. [`RULES`] is the registry the analysis runs, in
//! order.
//!
//! Adding a finding: a variant of [`FindingKind`] and a line in [`RULES`]
//! here, the rule's file, and its row on the concepts page.

use super::advice::Evidence;
use super::findings::Finding;
use super::peaks::Peaks;
use super::verdict::Bound;
use super::{KernelAnalysis, RangeAnalysis};

mod allocator_churn;
mod bank_conflicts;
mod busy_but_underused;
pub(in crate::analysis) mod checklist;
mod copies;
mod device_memory;
mod devices_take_turns;
mod dispatch;
mod exposed_communication;
mod few_sms;
mod fp32_matmul;
mod fp32_matmul_named;
mod host_idle;
pub(in crate::analysis) mod idle;
mod low_occupancy;
mod memory_bound;
mod memory_headroom;
mod near_capacity;
mod occupancy_limit;
mod sms_idle;
mod sync;
mod tail_wave;
mod uncoalesced_access;
mod uneven_devices;
mod waiting;
mod warp_stalls;

#[doc(hidden)]
pub use few_sms::more_blocks;
pub(in crate::analysis) use idle::{idle_advice, idle_meaning, session_actionable, session_advice};
#[doc(hidden)]
pub use memory_bound::MOVE_FEWER_BYTES;
pub(in crate::analysis) use sync::runtime_syncs;

/// The registry: every finding rule, in the order the analysis runs them
/// (findings are then ranked by cost, so the order only breaks ties of
/// the same cost and message).
pub static RULES: &[&Rule] = &[
    &host_idle::RULE,
    &copies::RULE,
    &sync::RULE,
    &dispatch::RULE,
    &waiting::RULE,
    &sms_idle::RULE,
    &allocator_churn::RULE,
    &uneven_devices::RULE,
    &devices_take_turns::RULE,
    &near_capacity::RULE,
    &memory_headroom::RULE,
    &busy_but_underused::RULE,
    &exposed_communication::RULE,
    &few_sms::RULE,
    &tail_wave::RULE,
    &occupancy_limit::RULE,
    &low_occupancy::RULE,
    &memory_bound::RULE,
    &uncoalesced_access::RULE,
    &bank_conflicts::RULE,
    &fp32_matmul::RULE,
    &fp32_matmul_named::RULE,
    &warp_stalls::RULE,
];

/// The idle causes that make findings, in the order the answer lists
/// them.
pub(in crate::analysis) static IDLE: [&idle::IdleCause; 5] =
    [&host_idle::CAUSE, &copies::CAUSE, &sync::CAUSE, &dispatch::CAUSE, &waiting::CAUSE];

/// One finding rule.
#[derive(Debug)]
pub struct Rule {
    /// The kind of its findings.
    pub kind: FindingKind,
    /// The verdict its findings explain (`None`: decided by the evidence).
    pub bound: Option<Bound>,
    /// The evidence it reads.
    pub reads: &'static str,
    /// When it fires, in one line: the concepts page's "when" column.
    pub when: &'static str,
    /// What a finding costs: the concepts page's "cost" column.
    pub cost: &'static str,
    /// Its findings, with how many smaller ones it left out.
    pub(super) find: fn(&Rule, &Input) -> Found,
}

/// What a rule reads.
pub(super) struct Input<'a> {
    pub e: &'a Evidence<'a>,
    pub ranges: &'a [RangeAnalysis],
    pub kernels: &'a [KernelAnalysis],
    pub peaks: Option<&'a Peaks>,
    /// The report's kernels' figures by name (their counters).
    pub stats: rustc_hash::FxHashMap<&'a str, &'a crate::report::KernelStats>,
}

/// A rule's findings, and how many smaller ones it left out.
pub(super) type Found = (Vec<Finding>, usize);

impl Rule {
    /// Its verdict, for rules with one.
    fn verdict(&self) -> Bound {
        self.bound.clone().unwrap_or(Bound::Unknown)
    }

    /// A finding of this rule about kernel `k`, costing `cost_ns`: of its
    /// verdict, or of the kernel's where the rule has none.
    fn kernel_finding(&self, k: &KernelAnalysis, cost_ns: u64, message: String, advice: String) -> Finding {
        let bound = match (&self.bound, &k.verdict) {
            (None, Some(v)) => v.bound.clone(),
            _ => self.verdict(),
        };
        Finding { kernel: Some(k.name.clone()), bound, cost_ns, ..self.finding(message, advice) }
    }

    /// A finding of this rule with no range or kernel, not costed.
    fn finding(&self, message: String, advice: String) -> Finding {
        Finding {
            kind: self.kind.clone(),
            bound: self.verdict(),
            range: None,
            kernel: None,
            cost_ns: 0,
            calls: 0,
            message,
            advice,
        }
    }
}

named_enum! {
    /// What kind of loss a finding is about, as the report writes it (see
    /// `docs/concepts/verdicts-and-findings.md`).
    pub enum FindingKind {
        /// GPU idle while the host ran code of its own.
        HostIdle = "host-idle",
        /// GPU idle during copies.
        Copies = "copies",
        /// GPU idle after host synchronisations.
        Sync = "sync",
        /// GPU idle while the host issued kernels one by one (launch gaps
        /// and dispatch idle).
        Dispatch = "dispatch",
        /// Queued work waiting behind a dependency.
        Waiting = "waiting",
        /// Communication kernels with no compute under them.
        ExposedCommunication = "exposed-communication",
        /// A kernel whose grid leaves most SMs idle.
        FewSms = "few-sms",
        /// A kernel whose last wave of blocks runs partly empty.
        TailWave = "tail-wave",
        /// A latency-bound kernel with few warps per SM.
        LowOccupancy = "low-occupancy",
        /// A memory-bound kernel.
        MemoryBound = "memory-bound",
        /// A kernel's global loads or stores fetch sectors whose bytes go
        /// unused.
        UncoalescedAccess = "uncoalesced-access",
        /// A kernel's shared-memory accesses serialised by bank conflicts.
        BankConflicts = "bank-conflicts",
        /// A latency-bound kernel held to few warps by registers, shared
        /// memory or block size.
        OccupancyLimit = "occupancy-limit",
        /// A matrix product on the FMA pipes, the tensor cores idle.
        Fp32Matmul = "fp32-matmul",
        /// A matrix product whose kernel name says FP32 on the FMA pipes,
        /// where no counters measured it.
        Fp32MatmulNamed = "fp32-matmul-named",
        /// What a kernel's warps wait for.
        WarpStalls = "warp-stalls",
        /// A range nvidia-smi calls busy whose SMs are underused.
        BusyButUnderused = "busy-but-underused",
        /// A range known from PM samples only whose SMs idle most of its
        /// wall time.
        SmsIdle = "sms-idle",
        /// Device memory released and allocated again in the steady state.
        AllocatorChurn = "allocator-churn",
        /// Device memory at its peak near the device's capacity.
        NearCapacity = "near-capacity",
        /// Device memory at its peak low enough for a larger batch.
        MemoryHeadroom = "memory-headroom",
        /// A process's GPUs working at the same time, unevenly.
        UnevenDevices = "uneven-devices",
        /// A process's GPUs working one after another.
        DevicesTakeTurns = "devices-take-turns",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finding_kinds_are_written_as_their_names_and_unknown_ones_read_back_as_written() {
        assert_eq!(serde_json::to_string(&FindingKind::FewSms).unwrap(), r#""few-sms""#);
        let later: FindingKind = serde_json::from_str(r#""pcie-copies""#).unwrap();
        assert_eq!(later, FindingKind::Other("pcie-copies".into()));
        assert_eq!(serde_json::to_string(&later).unwrap(), r#""pcie-copies""#);
        for k in FindingKind::ALL {
            assert_eq!(&FindingKind::from_name(k.as_str()), k);
        }
    }

    #[test]
    fn every_idle_cause_has_its_rule_with_the_same_verdict() {
        for c in IDLE {
            let rule = RULES.iter().find(|r| r.kind == c.kind).expect("a rule of the cause's kind");
            assert_eq!(rule.bound.as_ref(), Some(&c.bound), "{}", c.kind.as_str());
        }
    }
}
