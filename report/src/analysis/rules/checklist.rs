//! The kernel checklist's measurements (metrics mode with `--metrics
//! checklist`): what each of its rules reads from a kernel's counters and
//! what each cause costs, in one place, so that a kernel gets one cause:
//! the costliest of those that apply ([`chosen`]).
//! Thresholds follow Nsight Compute's rules where it has one (the
//! differences are in `docs/concepts/verdicts-and-findings.md`).

use super::{few_sms, tail_wave, FindingKind, Input};
use crate::analysis::peaks::{Peaks, FMA_FP32, TENSOR_TF32};
use crate::analysis::verdict::Bound;
use crate::analysis::KernelAnalysis;
use crate::model::metrics::{
    FMA_PIPE_ACTIVE, GLOBAL_LD_REQUESTS, GLOBAL_LD_SECTORS, GLOBAL_LD_USE, GLOBAL_ST_REQUESTS, GLOBAL_ST_SECTORS,
    GLOBAL_ST_USE, SHARED_LD_CONFLICTS, SHARED_LD_REQUESTS, SHARED_LD_WAVEFRONTS, SHARED_ST_CONFLICTS,
    SHARED_ST_REQUESTS, SHARED_ST_WAVEFRONTS, TENSOR_ACTIVE, WARP_STALLS,
};
use crate::model::occupancy::Limiter;
use crate::report::KernelStats;
use std::collections::BTreeMap;

/// Global accesses are uncoalesced when at most this share of the bytes
/// their sectors carry is used (ncu flagged 50% and 12.5% on the suite).
pub const COALESCED_USE_PCT: f64 = 60.0;
/// Without the instrumented share of used bytes the access width is unknown: a
/// warp's widest access (16 bytes a thread) needs 16 sectors, so only more
/// than this many per request is surely uncoalesced.
pub const WIDEST_SECTORS_PER_REQUEST: f64 = 16.0;
/// Shared-memory accesses conflict when each request takes at least one
/// extra pass through the banks on average (2-way), and the conflicts are
/// at least this share of the passes. ncu also flags milder conflicts
/// (1.1-way), which the H100's counters show in conflict-free code too.
pub const CONFLICT_SHARE_PCT: f64 = 25.0;
/// Theoretical occupancy at or under this, limited by a resource the
/// launch or the compiler sets, is a finding for a latency-bound kernel.
pub const LIMITED_OCCUPANCY_PCT: f64 = 50.0;
/// ... when the kernel reaches most of it (below, the gap is imbalance).
pub const REACHED_SHARE: f64 = 0.7;
/// A matrix product on the FMA pipes: tensor pipe at most this active, %.
pub const IDLE_TENSOR_PCT: f64 = 1.0;
/// ... with the FMA pipe at least this active, %.
pub const BUSY_FMA_PCT: f64 = 10.0;
/// A stall reason names a latency-bound kernel's cause at this share of
/// its stalls, %.
pub const DOMINANT_STALL_PCT: f64 = 40.0;
/// Warps waiting at barriers are a finding at this share of the stalls
/// whatever the verdict (ncu: sibling warps diverge before the barrier).
pub const BARRIER_STALL_PCT: f64 = 30.0;

/// A kernel of NVIDIA's libraries (cuBLAS, cuDNN, CUTLASS): its occupancy,
/// shared-memory layout and stalls are the library's design, not advice
/// for the program (its fp32 GEMMs still get `fp32-matmul`, whose fix is a
/// setting, and its coalescing the program's strides).
pub(super) fn vendor_library(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    const WORDS: [&str; 9] =
        ["xmma", "cutlass", "nvjet", "cublas", "cudnn", "gemv2", "gemmsn", "splitkreduce", "implicit_convolve"];
    const ARCHES: [&str; 10] =
        ["ampere_", "volta_", "turing_", "maxwell_", "sm75_", "sm80_", "sm86_", "sm89_", "sm90_", "sm100_"];
    WORDS.iter().any(|w| n.contains(w)) || ARCHES.iter().any(|a| n.starts_with(a))
}

/// A kernel's counters and launch figures, when it was measured.
pub(super) fn stats<'a>(input: &Input<'a>, k: &KernelAnalysis) -> Option<&'a KernelStats> {
    input.stats.get(k.name.as_str()).copied().filter(|s| s.profiled_launches > 0)
}

fn get(c: &BTreeMap<String, f64>, name: &str) -> Option<f64> {
    c.get(name).copied().filter(|v| v.is_finite())
}

/// Whether the instrumented share of used bytes was asked for and read 0
/// where global loads were counted (a pass asked of a live process).
pub(in crate::analysis) fn bytes_uncounted(s: &KernelStats) -> bool {
    let c = &s.counters;
    get(c, GLOBAL_LD_USE) == Some(0.0) && get(c, GLOBAL_LD_SECTORS).is_some_and(|x| x > 0.0)
}

/// Global loads or stores that fetch more sectors than their bytes need.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Uncoalesced {
    /// "loads" or "stores".
    pub what: &'static str,
    pub sectors_per_request: f64,
    /// Sectors a request needs for its bytes (`None`: bytes not counted).
    pub ideal: Option<f64>,
    /// Share of the fetched bytes used, %.
    pub used_pct: f64,
    /// Sectors fetched for nothing, as a share of all the kernel's global
    /// sectors (loads and stores).
    pub wasted_share: f64,
}

/// A memory-bound kernel whose uncoalesced access wastes at least this share
/// of its global sectors gets the coalescing finding instead of
/// `memory-bound`.
pub const MOSTLY_WASTED: f64 = 0.5;
/// A direction (loads or stores) is judged when it moves at least this
/// share of the kernel's global sectors: a GEMM's few output stores are
/// not its problem.
pub const MIN_SECTOR_SHARE: f64 = 0.1;

/// The worse of a kernel's global loads and stores, if uncoalesced.
pub(super) fn uncoalesced(s: &KernelStats) -> Option<Uncoalesced> {
    let c = &s.counters;
    let all = get(c, GLOBAL_LD_SECTORS).unwrap_or(0.0) + get(c, GLOBAL_ST_SECTORS).unwrap_or(0.0);
    let one = |what, sectors, requests, used| {
        let (sectors, requests) = (get(c, sectors)?, get(c, requests)?);
        if requests < 1.0 || sectors < requests || sectors < MIN_SECTOR_SHARE * all {
            return None;
        }
        let spr = sectors / requests;
        match get(c, used).filter(|u| *u > 0.0) {
            Some(u) => {
                let used_pct = u.min(100.0);
                let ideal = (spr * used_pct / 100.0).max(1.0);
                (used_pct <= COALESCED_USE_PCT).then_some(Uncoalesced {
                    what,
                    sectors_per_request: spr,
                    ideal: Some(ideal),
                    used_pct,
                    wasted_share: sectors * (1.0 - used_pct / 100.0) / all,
                })
            }
            None => (spr > WIDEST_SECTORS_PER_REQUEST).then(|| {
                let used_pct = 100.0 * WIDEST_SECTORS_PER_REQUEST / spr;
                Uncoalesced {
                    what,
                    sectors_per_request: spr,
                    ideal: None,
                    used_pct,
                    wasted_share: sectors * (1.0 - used_pct / 100.0) / all,
                }
            }),
        }
    };
    let ld = one("loads", GLOBAL_LD_SECTORS, GLOBAL_LD_REQUESTS, GLOBAL_LD_USE);
    let st = one("stores", GLOBAL_ST_SECTORS, GLOBAL_ST_REQUESTS, GLOBAL_ST_USE);
    [ld, st].into_iter().flatten().max_by(|a, b| a.wasted_share.total_cmp(&b.wasted_share))
}

/// Shared-memory loads or stores serialised by bank conflicts.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Conflicted {
    /// "loads" or "stores".
    pub what: &'static str,
    /// Conflicting accesses per request, counted as ncu does: 1 + the
    /// conflicts per request (1: none; a 16-byte access's 4 wavefronts
    /// are not conflicts).
    pub ways: f64,
    /// Share of the passes that were conflicts, %.
    pub conflict_pct: f64,
}

/// The worse of a kernel's shared loads and stores, if conflicted.
pub(super) fn conflicted(k: &KernelAnalysis, s: &KernelStats) -> Option<Conflicted> {
    if vendor_library(&k.name) {
        return None;
    }
    let c = &s.counters;
    let one = |what, requests, wavefronts, conflicts| {
        let (r, w, k) = (get(c, requests)?, get(c, wavefronts)?, get(c, conflicts)?);
        if r < 1.0 || w <= 0.0 {
            return None;
        }
        let conflict_pct = 100.0 * (k / w).min(1.0);
        (k / r >= 1.0 && conflict_pct >= CONFLICT_SHARE_PCT).then_some(Conflicted {
            what,
            ways: 1.0 + k / r,
            conflict_pct,
        })
    };
    let ld = one("loads", SHARED_LD_REQUESTS, SHARED_LD_WAVEFRONTS, SHARED_LD_CONFLICTS);
    let st = one("stores", SHARED_ST_REQUESTS, SHARED_ST_WAVEFRONTS, SHARED_ST_CONFLICTS);
    [ld, st].into_iter().flatten().max_by(|a, b| a.conflict_pct.total_cmp(&b.conflict_pct))
}

/// A latency-bound kernel held to a low theoretical occupancy by a limit
/// its launch or compilation sets: the limiter and the occupancy.
pub(super) fn limited(k: &KernelAnalysis, s: &KernelStats) -> Option<(Limiter, f64)> {
    // A grid too small for the GPU is its own cause (few-sms, tail-wave).
    if vendor_library(&k.name) || few_sms::used(k).is_some() || tail_wave::filled(k).is_some() {
        return None;
    }
    let limiter = s.occupancy_limiter.filter(|l| *l != Limiter::Warps)?;
    let theoretical = s.theoretical_occupancy_pct.filter(|t| *t <= LIMITED_OCCUPANCY_PCT)?;
    let achieved = k.achieved_occupancy_pct?;
    let latency = k.verdict.as_ref().is_some_and(|v| v.bound == Bound::Latency);
    (latency && achieved >= REACHED_SHARE * theoretical).then_some((limiter, theoretical))
}

/// A matrix product (by its name) run on the FMA pipes with the tensor
/// cores idle: the FMA pipe's and the tensor pipe's activity, %.
pub(super) fn fp32_matmul(k: &KernelAnalysis, s: &KernelStats) -> Option<(f64, f64)> {
    if !maybe_fp32_product(&k.name.to_ascii_lowercase()) {
        return None;
    }
    let c = &s.counters;
    let tensor = get(c, TENSOR_ACTIVE)?;
    let fma = get(c, FMA_PIPE_ACTIVE)?;
    (tensor <= IDLE_TENSOR_PCT && fma >= BUSY_FMA_PCT).then_some((fma, tensor))
}

/// Whether `s` has the counters [`fp32_matmul`] judges a product by.
pub(super) fn pipes_measured(s: &KernelStats) -> bool {
    get(&s.counters, TENSOR_ACTIVE).is_some() && get(&s.counters, FMA_PIPE_ACTIVE).is_some()
}

/// Whether a kernel named `name` (lower case) may be an FP32 matrix
/// product: its name says a product (not a matrix-vector one) and no
/// narrower type, FP64 or complex numbers.
pub(super) fn maybe_fp32_product(name: &str) -> bool {
    // Not "conv" alone: Inductor's kernels convert element types.
    const PRODUCTS: [&str; 9] = ["gemm", "matmul", "convolve", "conv1d", "conv2d", "conv3d", "fprop", "dgrad", "wgrad"];
    let product = PRODUCTS.iter().any(|w| name.contains(w)) && !name.contains("gemv");
    // Names that say a narrower type or FP64 are other advice.
    let other_type =
        ["tf32", "bf16", "f16", "fp16", "half", "int8", "i8", "fp8", "e4m3", "dgemm", "f64", "double", "complex"]
            .iter()
            .any(|w| name.contains(w));
    product && !other_type
}

/// How far from any limit the kernel runs: 1 - its busier of compute and
/// DRAM throughput (what more warps or fewer stalls could use).
pub(super) fn idle_share(k: &KernelAnalysis) -> f64 {
    1.0 - k.compute_pct.unwrap_or(0.0).max(k.dram_pct.unwrap_or(0.0)).clamp(0.0, 100.0) / 100.0
}

/// What uncoalesced access costs: the kernel's time times the share of its
/// global sectors fetched for nothing; nothing where memory does not bound
/// it (a compute-bound kernel's waste is not its time).
fn uncoalesced_cost(k: &KernelAnalysis, u: &Uncoalesced) -> u64 {
    let compute = k.verdict.as_ref().is_some_and(|v| v.bound == Bound::Compute);
    if compute {
        return 0;
    }
    (k.gpu_ns as f64 * u.wasted_share.clamp(0.0, 1.0)) as u64
}

/// What an fp32 product on the FMA pipes costs: its time less what the
/// TF32 tensor cores' peak would take (half its time without peaks).
pub(super) fn matmul_cost(k: &KernelAnalysis, peaks: Option<&Peaks>) -> u64 {
    let speedup =
        peaks.and_then(|p| Some(p.flops(TENSOR_TF32)? / p.flops(FMA_FP32)?)).filter(|r| *r > 1.0).unwrap_or(2.0);
    (k.gpu_ns as f64 * (1.0 - 1.0 / speedup)) as u64
}

/// The one checklist cause a measured kernel gets, of the four that name a
/// change (a stall reason is named only without any of them): the
/// costliest that applies, with its cost.
pub(super) fn chosen(input: &Input, k: &KernelAnalysis) -> Option<(FindingKind, u64)> {
    let s = stats(input, k)?;
    let causes = [
        uncoalesced(s).map(|u| (FindingKind::UncoalescedAccess, uncoalesced_cost(k, &u))),
        // Conflicts: their share of the wavefronts; a binding limit: the
        // time not spent near any limit.
        conflicted(k, s).map(|c| (FindingKind::BankConflicts, (k.gpu_ns as f64 * c.conflict_pct / 100.0) as u64)),
        limited(k, s).map(|_| (FindingKind::OccupancyLimit, (k.gpu_ns as f64 * idle_share(k)) as u64)),
        fp32_matmul(k, s).map(|_| (FindingKind::Fp32Matmul, matmul_cost(k, input.peaks))),
    ];
    // The first of equal costs: the order above.
    causes.into_iter().flatten().filter(|(_, cost)| *cost > 0).fold(None, |best, c| match best {
        Some(b) if b.1 >= c.1 => Some(b),
        _ => Some(c),
    })
}

/// The kernel's stall reasons, largest first, as shares of its stalls, %
/// (the issuing warp's own "selected" cycle left out).
pub(super) fn stalls(s: &KernelStats) -> Vec<(&'static str, f64)> {
    let mut v: Vec<(&'static str, f64)> = WARP_STALLS
        .iter()
        .filter_map(|(reason, metric)| Some((*reason, get(&s.counters, metric)?)))
        .filter(|(_, x)| *x > 0.0)
        .collect();
    let total: f64 = v.iter().map(|(_, x)| x).sum();
    if total <= 0.0 {
        return Vec::new();
    }
    v.iter_mut().for_each(|(_, x)| *x = 100.0 * *x / total);
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v
}
