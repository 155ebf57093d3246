//! Hardware metrics per kernel (metrics mode): which metrics ([`MetricSet`]),
//! which launches ([`Selection`]), and the range-profiler plumbing that
//! measures a selected launch while it runs.
//!
//! Selected launches are measured one range each: CUPTI's range profiler
//! runs in auto-range mode on the launch's context (user replay when the
//! metrics fit one pass, so nothing is replayed; kernel replay otherwise)
//! while selected launches follow each other, and the ranges are joined to
//! the launches' correlation ids in launch order (see [`collector`]).
//! Launches not selected run as in trace mode, unserialised.

pub(crate) mod collector;
pub(crate) mod rangeprof;

use crate::model::metrics::{
    ACHIEVED_OCCUPANCY, DRAM_READ, DRAM_WRITE, DURATION, FMA_OPS, ISSUE_ACTIVE, SM_CYCLES_ELAPSED, SM_EFFICIENCY,
    TENSOR_ACTIVE, TENSOR_OPS,
};

use crate::error::{Error, ErrorKind, Result};

/// The metrics collected for each profiled kernel. Always those of
/// [`MetricSet::default`]; `flops`, `tensor` and raw names add to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricSet {
    names: Vec<String>,
}

impl Default for MetricSet {
    /// Achieved occupancy, SM efficiency, duration, elapsed SM cycles, DRAM
    /// bytes, issue-slot and tensor-pipe activity: what tells compute-,
    /// memory- and latency-bound kernels apart. One replay pass on H100
    /// (measured: no slower per launch than the first four alone).
    fn default() -> Self {
        let names = [
            ACHIEVED_OCCUPANCY,
            SM_EFFICIENCY,
            DURATION,
            SM_CYCLES_ELAPSED,
            DRAM_READ,
            DRAM_WRITE,
            ISSUE_ACTIVE,
            TENSOR_ACTIVE,
        ];
        MetricSet { names: names.map(String::from).to_vec() }
    }
}

impl MetricSet {
    /// DRAM bytes read and written (part of the default set since schema
    /// 2; kept for callers that ask for them).
    pub fn with_dram(self) -> Self {
        [DRAM_READ, DRAM_WRITE].iter().fold(self, |s, m| s.with(m))
    }

    /// Adds FP32/FP64/FP16 instruction counts of the FMA pipes (FLOPs as
    /// ncu's roofline weighs them: add and mul 1, fma 2, half pairs twice).
    /// Needs a second replay pass.
    pub fn with_flops(self) -> Self {
        FMA_OPS.iter().fold(self, |s, (m, _, _)| s.with(m))
    }

    /// Adds tensor-core operations per input type (bf16, fp16, tf32, fp8,
    /// int8, fp64): hardware FLOPs for MFU. Six more replay passes on H100
    /// (about 80 ms per measured launch, measured).
    pub fn with_tensor(self) -> Self {
        TENSOR_OPS.iter().fold(self, |s, (m, _)| s.with(m))
    }

    /// Adds what the kernel checklist reads (`crate::model::metrics::CHECKLIST`):
    /// global-access coalescing, shared-memory bank conflicts, the FMA pipe
    /// and the warp stall reasons. Nine replay passes on H100 and
    /// H200 with the default set.
    pub fn with_checklist(self) -> Self {
        crate::model::metrics::CHECKLIST.iter().fold(self, |s, m| s.with(m))
    }

    /// Adds a raw metric name (checked against the GPU at session start).
    pub fn with(mut self, name: &str) -> Self {
        if !self.names.iter().any(|n| n == name) {
            self.names.push(name.to_string());
        }
        self
    }

    /// Parses `GPUSCOPE_METRICS`-style text: comma-separated `flops` (FMA
    /// pipe FLOPs), `tensor` (tensor-core FLOPs per type), `roofline` (both),
    /// `checklist` (the kernel checklist's counters), `dram`, or metric names (`unit__counter.rollup...`).
    pub fn parse(spec: &str) -> Result<Self> {
        let mut s = MetricSet::default();
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            s = match item {
                "default" => s,
                "dram" => s.with_dram(),
                "flops" => s.with_flops(),
                "tensor" => s.with_tensor(),
                "roofline" => s.with_flops().with_tensor(),
                "checklist" => s.with_checklist(),
                raw if raw.contains("__") && raw.chars().all(|c| c.is_ascii_alphanumeric() || "_.".contains(c)) => s.with(raw),
                other => {
                    return Err(Error::new(
                        ErrorKind::InvalidConfig,
                        format!("unknown metric set {other:?}; allowed: default, dram, flops, tensor, roofline, checklist, or a metric name like lts__t_bytes.sum"),
                    ))
                }
            };
        }
        Ok(s)
    }

    /// The metric names, in collection order.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

/// Which launches are measured. A launch passes the filters (kernel name
/// regex, NVTX path prefix); of those, per distinct kernel name, the first
/// `first` are measured, then every `every`-th (0: no more).
#[derive(Debug, Clone)]
pub struct Selection {
    kernel: Option<regex::Regex>,
    nvtx: Option<String>,
    first: u64,
    every: u64,
}

impl Default for Selection {
    /// The first 3 launches of each kernel.
    fn default() -> Self {
        Selection { kernel: None, nvtx: None, first: 3, every: 0 }
    }
}

impl Selection {
    /// Every launch (serialises the program: each is replayed).
    pub fn all() -> Self {
        Selection { kernel: None, nvtx: None, first: u64::MAX, every: 0 }
    }

    /// Only kernels whose demangled name matches `regex`.
    pub fn kernels(mut self, regex: &str) -> Result<Self> {
        self.kernel = Some(regex::Regex::new(regex).map_err(|e| {
            Error::new(ErrorKind::InvalidConfig, format!("kernel filter {regex:?} is not a valid regex: {e}"))
        })?);
        Ok(self)
    }

    /// Only kernels launched inside the NVTX path `prefix` (`outer/inner`;
    /// deeper ranges included).
    pub fn nvtx(mut self, prefix: &str) -> Self {
        self.nvtx = Some(prefix.trim_matches('/').to_string());
        self
    }

    /// The first `n` launches of each kernel.
    pub fn first(mut self, n: u64) -> Self {
        self.first = n;
        self
    }

    /// After the first ones, every `k`-th launch (0: none).
    pub fn every(mut self, k: u64) -> Self {
        self.every = k;
        self
    }

    /// Whether a launch passes the name and path filters.
    pub fn matches(&self, kernel: &str, path: &str) -> bool {
        self.matches_kernel(kernel) && self.matches_path(path)
    }

    /// Whether a kernel name passes the name filter.
    pub(crate) fn matches_kernel(&self, kernel: &str) -> bool {
        self.kernel.as_ref().map_or(true, |r| r.is_match(kernel))
    }

    /// Whether an NVTX path passes the path filter.
    pub(crate) fn matches_path(&self, path: &str) -> bool {
        match &self.nvtx {
            Some(p) => path == p || (path.starts_with(p.as_str()) && path[p.len()..].starts_with('/')),
            None => true,
        }
    }

    /// Whether the filter looks at NVTX paths at all.
    pub(crate) fn filters_paths(&self) -> bool {
        self.nvtx.is_some()
    }

    /// How many launches of each kernel are measured first.
    pub fn first_launches(&self) -> u64 {
        self.first
    }

    /// Whether the `nth` (0-based) matching launch of a kernel is measured.
    pub fn picks(&self, nth: u64) -> bool {
        nth < self.first || (self.every > 0 && (nth - self.first + 1) % self.every == 0)
    }
}

/// Levenshtein distance, for suggesting metric names.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The `n` names of `known` closest to `name`.
pub(crate) fn closest(name: &str, known: &[String], n: usize) -> Vec<String> {
    let mut v: Vec<(usize, &String)> = known.iter().map(|k| (distance(name, k), k)).collect();
    v.sort();
    v.into_iter().take(n).map(|(_, k)| k.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_metric_names_get_close_suggestions() {
        let known: Vec<String> = ["sm__warps_active", "sm__cycles_active", "dram__bytes_read", "smsp__cycles_active"]
            .map(String::from)
            .to_vec();
        assert_eq!(closest("sm__warp_active", &known, 1), vec!["sm__warps_active"]);
        assert_eq!(closest("dram__byte_read", &known, 2)[0], "dram__bytes_read");
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    #[test]
    fn the_permission_error_names_the_fix() {
        let e = crate::collect::cupti::no_permission("cuptiRangeProfilerEnable");
        assert_eq!(e.kind(), ErrorKind::NoPermission);
        let m = e.message();
        assert!(m.contains("NVreg_RestrictProfilingToAdminUsers=0") && m.contains("CAP_SYS_ADMIN"), "{m}");
        assert!(m.starts_with("cuptiRangeProfilerEnable"), "{m}");
    }

    #[test]
    fn selection_takes_the_first_n_then_every_kth() {
        let s = Selection::default().first(2).every(3);
        let picked: Vec<u64> = (0..12).filter(|&i| s.picks(i)).collect();
        assert_eq!(picked, vec![0, 1, 4, 7, 10]);
        assert_eq!((0..100).filter(|&i| Selection::default().picks(i)).count(), 3);
        assert!((0..1000).all(|i| Selection::all().picks(i)));
    }

    #[test]
    fn filters_match_names_and_path_prefixes() {
        let s = Selection::default().kernels("^softmax_").unwrap().nvtx("/train/fwd/");
        assert!(s.matches("softmax_fused", "train/fwd"));
        assert!(s.matches("softmax_fused", "train/fwd/attn"));
        assert!(!s.matches("softmax_fused", "train/fwdx"), "a prefix ends at a range boundary");
        assert!(!s.matches("softmax_fused", "train"));
        assert!(!s.matches("vector_add", "train/fwd"));
        let e = Selection::default().kernels("(").unwrap_err();
        assert!(e.message().contains("\"(\""), "{e}");
    }

    #[test]
    fn metric_sets_parse_and_name_what_is_allowed() {
        let s = MetricSet::parse("dram, flops,lts__t_bytes.sum").unwrap();
        assert_eq!(s.names()[..8], MetricSet::default().names()[..]);
        assert!(s.names().iter().any(|n| n == "dram__bytes_write.sum"));
        assert!(s.names().iter().any(|n| n == "lts__t_bytes.sum"));
        assert_eq!(s.names().len(), 8 + 9 + 1, "dram is in the default set already");
        let r = MetricSet::parse("roofline").unwrap();
        assert_eq!(r.names().len(), 8 + 9 + 6);
        assert!(r.names().iter().any(|n| n == "sm__ops_path_tensor_src_bf16_dst_fp32.sum"));
        let e = MetricSet::parse("dram,tensors").unwrap_err();
        assert!(e.message().contains("\"tensors\"") && e.message().contains("allowed"), "{e}");
    }
}
