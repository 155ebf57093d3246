//! `near-capacity`: device memory at its peak near the device's capacity.

use super::device_memory::{peaks, step_allocator};
use super::{FindingKind, Found, Input, Rule};
use crate::analysis::findings::NEAR_CAPACITY;
use crate::analysis::verdict::Bound;
use crate::model::units::fmt_bytes;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::NearCapacity,
    bound: Some(Bound::DeviceMemory),
    reads: "each device's memory peak (allocation records) and capacity, and PyTorch's allocator figures of the \
            `step` range",
    when: "a device memory peak of 90% of the device or more",
    cost: "not costed",
    find,
};

/// A larger input or fragmentation risks running out.
fn find(rule: &Rule, input: &Input) -> Found {
    let r = input.e.r;
    let step = step_allocator(r);
    let out = peaks(r)
        .into_iter()
        .filter(|p| p.share >= NEAR_CAPACITY)
        .map(|p| {
            let cached = step.as_ref().map_or(String::new(), |f| {
                format!(
                    "; PyTorch's allocator held {} at the end of a step, {} of it in tensors",
                    fmt_bytes(f.reserved_at_end_bytes),
                    fmt_bytes(f.allocated_at_end_bytes)
                )
            });
            rule.finding(format!("{}{cached}", p.text), ADVICE.into())
        })
        .collect();
    (out, 0)
}

const ADVICE: &str = "Little room is left: a longer sequence, a larger batch or fragmentation can run out of \
                      memory. Keep the peak down with activation checkpointing, a smaller micro-batch with \
                      gradient accumulation, or sharded optimizer state; \
                      PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets PyTorch's allocator reuse fragmented \
                      memory.";
