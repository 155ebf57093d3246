//! `memory-headroom`: device memory at its peak low enough for a larger
//! batch, with what a batch adds to size it.

use super::device_memory::{peaks, step_allocator};
use super::{FindingKind, Found, Input, Rule};
use crate::analysis::findings::{HEADROOM_MAX, NEAR_CAPACITY};
use crate::analysis::verdict::Bound;
use crate::model::units::fmt_bytes as fmt;
use crate::report::Report;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::MemoryHeadroom,
    bound: Some(Bound::DeviceMemory),
    reads: "each device's memory peak and capacity, releases of memory allocated before the session, and \
            PyTorch's allocator figures of the `step` and `forward` ranges",
    when: "a peak of at most 60% of the device, with PyTorch's allocator figures: whether twice the batch fits",
    cost: "not costed",
    find,
};

fn find(rule: &Rule, input: &Input) -> Found {
    let r = input.e.r;
    let Some((a, what)) = per_batch_bytes(r) else { return (Vec::new(), 0) };
    let step = step_allocator(r);
    let mut out = Vec::new();
    for p in peaks(r).into_iter().filter(|p| p.share < NEAR_CAPACITY) {
        let (d, capacity) = (p.d, p.capacity);
        // Memory allocated before the session is not in its peak (a
        // session begun after the model was loaded): the free memory is
        // not known.
        let earlier =
            d.earlier_releases > 0 || step.as_ref().is_some_and(|f| f.reserved_at_end_bytes > d.peak_live_bytes);
        if earlier {
            continue;
        }
        let free = capacity - d.peak_live_bytes;
        let times = free as f64 / a as f64;
        let doubled = d.peak_live_bytes.saturating_add(a);
        let message = if doubled <= capacity {
            if p.share > HEADROOM_MAX {
                continue;
            }
            format!(
                "{}; {what} {}, and the {} free is about {times:.1}x that: by this estimate twice the batch peaks \
                 near {} and fits, and about {:.0}x the batch still fits",
                p.text,
                fmt(a),
                fmt(free),
                fmt(doubled),
                (1.0 + times).floor(),
            )
        } else {
            format!(
                "{}; {what} {}, more than the {} free: by this estimate twice the batch would need about {}, more \
                 than the device has",
                p.text,
                fmt(a),
                fmt(free),
                fmt(doubled),
            )
        };
        let advice = if doubled <= capacity {
            "Use the memory: a larger batch (scale the learning rate with it), or less activation checkpointing."
        } else {
            "A larger batch needs less memory per sample first: activation checkpointing, or gradient accumulation \
             over micro-batches of this size."
        };
        out.push(rule.finding(message, advice.into()));
    }
    (out, 0)
}

/// What a larger batch adds, per batch's worth: the device bytes one step
/// takes on top of what it starts with (activations, gradients and
/// temporaries), from the framework allocator's figures of the `step`
/// range (its peak inside above its bytes in use at the start, scaled by
/// the bytes it holds per byte in use), else the most a `forward` range
/// kept (activations only). With what it was measured from.
fn per_batch_bytes(r: &Report) -> Option<(u64, &'static str)> {
    let framework = |name: &'static str| {
        r.ranges
            .iter()
            .filter(move |g| g.path.frames.last().is_some_and(|f| f.name == name))
            .filter_map(|g| g.memory.as_ref()?.framework.as_ref())
    };
    let step = framework("step")
        .filter_map(|f| {
            let added = f.peak_inside_bytes?.checked_sub(f.allocated_at_start_bytes)?;
            let held_per_used = f.reserved_at_end_bytes as f64 / f.peak_allocated_bytes.max(1) as f64;
            Some((added as f64 * held_per_used.max(1.0)) as u64)
        })
        .max()
        .filter(|&b| b > 0);
    if let Some(b) = step {
        return Some((b, "a step takes on top of what it starts with (activations, gradients, temporaries)"));
    }
    framework("forward")
        .map(|f| f.max_growth_bytes)
        .max()
        .filter(|&b| b > 0)
        .map(|b| (b, "a forward pass keeps (activations)"))
}
