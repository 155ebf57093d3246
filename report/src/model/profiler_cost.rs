//! What gpuscope itself costs the program it profiles: CUPTI's per-launch
//! cost of kernel records, measured once per session, and gpuscope's own
//! launch-callback time, per launching thread.

use serde::{Deserialize, Serialize};

/// A launch call that took longer than this waited on something other than
/// the launch itself (a full launch queue, lazy module loading): it is not
/// counted as a timed launch call.
pub const MAX_TIMED_CALL_NS: u64 = 50_000;

/// CUPTI's kernel records, timed at the session's first launch: the same
/// empty kernel launched back to back before records were enabled and
/// after, median host time per launch call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calibration {
    /// What records add to each launch call, ns (traced minus plain).
    pub record_ns: u32,
    /// A launch call without records, ns.
    pub plain_ns: u32,
    /// With records, ns.
    pub traced_ns: u32,
}

/// One launching thread's launches and what gpuscope cost it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadCost {
    /// OS thread id (0: threads beyond the report's limit, together).
    pub tid: u32,
    /// Its kernel launch calls.
    pub launches: u64,
    /// Time gpuscope's launch callbacks took on them, ns.
    pub callback_ns: u64,
    /// Time its launch calls took, entry to exit (CUPTI's and gpuscope's
    /// work included), over the calls that were timed, ns.
    pub call_ns: u64,
    /// See `call_ns`.
    pub calls_timed: u64,
    /// Time a framework integration's hooks took on it (PyTorch's automatic
    /// ranges), outside launch calls, ns.
    #[serde(default)]
    pub hook_ns: u64,
}

impl ThreadCost {
    /// Time spent in instrumentation of gpuscope's own outside a launch
    /// (a framework integration's hooks).
    pub fn add_own(&mut self, ns: u64) {
        self.hook_ns = self.hook_ns.saturating_add(ns);
    }

    /// One more launch.
    pub fn add(&mut self, callback_ns: u64, prev_call_ns: u64) {
        self.launches += 1;
        self.callback_ns = self.callback_ns.saturating_add(callback_ns);
        if prev_call_ns > 0 {
            self.call_ns = self.call_ns.saturating_add(prev_call_ns);
            self.calls_timed += 1;
        }
    }
}
