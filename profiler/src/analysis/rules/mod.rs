//! The finding rules: one file per finding kind, and the registry
//! [`RULES`] that the analysis runs in order.

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
}
