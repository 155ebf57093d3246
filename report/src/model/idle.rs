//! Why the GPU was idle: the causes gpuscope tells apart, and time per
//! cause. `aggregate::idle` decides the cause of each idle gap.

use serde::{Deserialize, Serialize};

/// GPU idle time by cause, ns. "Idle" means no kernel was running on any of
/// the process's GPUs (copies do not count as busy, as `nvidia-smi`'s
/// utilisation counts only kernels).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleSplit {
    /// The host had not launched the next kernel yet, and did not for long
    /// enough to be doing work of its own: data loading, Python, logging.
    pub host_ns: u64,
    /// Right after a host synchronisation (`cudaDeviceSynchronize`,
    /// `cudaStreamSynchronize`, an event wait; PyTorch's `.item()`,
    /// `.cpu()`): the host waited for the GPU to drain, so nothing was
    /// queued behind it.
    pub sync_ns: u64,
    /// During copies: a copy on the GPU, or the host blocked in a copy call
    /// (pageable memory makes every copy blocking).
    pub copy_ns: u64,
    /// Short gaps between back-to-back kernels: launch latency, or a host
    /// that launches slower than its kernels run (launch-bound).
    pub launch_ns: u64,
    /// Longer gaps while the program was issuing CUDA calls back to back
    /// (its previous call, on any thread, at most `DISPATCH_NS` before
    /// the launch that ended the gap): many small operations dispatched one
    /// by one, each costing more host time than its kernel runs.
    #[serde(default)]
    pub dispatch_ns: u64,
    /// Work was queued but did not start for a long time: a dependency on
    /// another stream, an event or a host function.
    pub other_ns: u64,
    /// gpuscope's own measurements (metrics mode) held the program.
    pub profiler_ns: u64,
}

/// A cause's index in [`IdleSplit::to_array`].
pub type Cause = usize;
/// See [`IdleSplit::host_ns`].
pub const HOST: Cause = 0;
/// See [`IdleSplit::sync_ns`].
pub const SYNC: Cause = 1;
/// See [`IdleSplit::copy_ns`].
pub const COPY: Cause = 2;
/// See [`IdleSplit::launch_ns`].
pub const LAUNCH: Cause = 3;
/// See [`IdleSplit::other_ns`].
pub const OTHER: Cause = 4;
/// See [`IdleSplit::profiler_ns`].
pub const PROFILER: Cause = 5;
/// See [`IdleSplit::dispatch_ns`].
pub const DISPATCH: Cause = 6;
/// How many causes there are.
pub const CAUSES: usize = 7;

/// Each cause's name, indexed by the cause constants: its
/// [`IdleSplit`] field without `_ns`.
pub const CAUSE_NAMES: [&str; CAUSES] = ["host", "sync", "copy", "launch", "other", "profiler", "dispatch"];

/// A program that launches again within this long of its previous CUDA
/// call is dispatching work, not doing host work of its own between
/// launches: a PyTorch eager op costs 10-30 us of host time, and the
/// framework's Python where a phase begins (the forward after `.item()`,
/// `backward()`'s entry, an optimizer's `step()`) a few hundred more. Data
/// loading, logging and checkpoints hold the host longer.
pub const DISPATCH_NS: u64 = 1_000_000;

impl IdleSplit {
    /// From time per cause, indexed by the cause constants.
    pub fn from_array(a: [u64; CAUSES]) -> Self {
        IdleSplit {
            dispatch_ns: a[DISPATCH],
            host_ns: a[HOST],
            sync_ns: a[SYNC],
            copy_ns: a[COPY],
            launch_ns: a[LAUNCH],
            other_ns: a[OTHER],
            profiler_ns: a[PROFILER],
        }
    }

    /// Time per cause, indexed by the cause constants.
    pub fn to_array(&self) -> [u64; CAUSES] {
        [self.host_ns, self.sync_ns, self.copy_ns, self.launch_ns, self.other_ns, self.profiler_ns, self.dispatch_ns]
    }

    /// All idle time.
    pub fn total(&self) -> u64 {
        self.to_array().iter().fold(0u64, |a, b| a.saturating_add(*b))
    }
}

/// Gaps no longer than this, from one kernel's end to the next one's start,
/// are launch overhead: a CUDA launch costs the host a few microseconds and
/// a PyTorch eager op 10-30 us of Python and dispatcher time, and kernels
/// start 2-5 us after their launch. These are the gaps CUDA graphs and
/// `torch.compile` remove; longer ones are the host doing other work.
pub const LAUNCH_GAP_NS: u64 = 50_000;
