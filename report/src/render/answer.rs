//! The screen a terminal report opens with: the main step's time, how busy
//! the GPU was, where the time went and what to change first.

use super::diagnosis::wrap;
use crate::analysis::answer::{Answer, BUSY_UNKNOWN};
use crate::model::units::{fmt_ns, fmt_pct};
use std::fmt::Write;

/// Writes the answer, `width` columns wide.
pub(super) fn render(a: &Answer, width: usize, out: &mut String) {
    let busy = if a.busy_source == BUSY_UNKNOWN { "-".to_string() } else { fmt_pct(a.gpu_busy_pct) };
    let head = match &a.range {
        Some(path) => {
            let p90 = a.p90_ns.map(|p| format!(", p90 {}", fmt_ns(p))).unwrap_or_default();
            format!(
                "{path}: {} per step ({} of {} step{}{p90}), GPU busy {busy} [{}]",
                fmt_ns(a.per_step_ns),
                if a.per_step_mean { "mean" } else { "median" },
                a.calls,
                if a.calls == 1 { "" } else { "s" },
                a.verdict.bound
            )
        }
        None => match &a.found_steps {
            Some(f) => {
                let (one, many) = if f.from_launches { ("launch", "launches") } else { ("kernel", "kernels") };
                let by = if f.by_mean() {
                    format!("mean of {}, median {}", f.steps_seen, fmt_ns(f.median_ns))
                } else {
                    format!("median of {}", f.steps_seen)
                };
                format!(
                    "no range of the program's own; steps found from its {many} ({} {} repeat{}{}): {} per \
                     step ({by}, p90 {}), GPU busy {busy} [{}]",
                    f.kernels_per_step,
                    if f.kernels_per_step == 1 { one } else { many },
                    if f.kernels_per_step == 1 { "s" } else { "" },
                    if f.by_family { ", the variants a library picks by size counted as one kernel" } else { "" },
                    fmt_ns(a.per_step_ns),
                    fmt_ns(f.p90_ns),
                    a.verdict.bound
                )
            }
            None => format!(
                "no range of the program's own: its steady state, {}, GPU busy {busy} [{}]",
                fmt_ns(a.per_step_ns),
                a.verdict.bound
            ),
        },
    };
    let _ = writeln!(out);
    out.push_str(&wrap(&format!("== Answer: {head}"), width, "", "   "));
    let mut note = |s: String| out.push_str(&wrap(&s, width, "   ", "     "));
    for n in &a.notes {
        note(n.clone());
    }
    if a.range.is_some() && a.warmup_calls > 0 {
        note(format!(
            "warm-up left out: the first {} step{}, {} (set-up, autotuning, compilation, graph capture)",
            a.warmup_calls,
            if a.warmup_calls == 1 { "" } else { "s" },
            fmt_ns(a.warmup_ns)
        ));
    } else if a.range.is_none() && a.warmup_ns > 0 {
        let why = if let Some(f) = &a.found_steps {
            if f.from_launches {
                "steps found from the launches that repeat; an NVTX range around the step"
            } else {
                "steps found from the kernels that repeat; an NVTX range around the step"
            }
        } else {
            "no NVTX ranges: add some around the step"
        };
        note(format!(
            "start-up and shutdown left out: {} ({why}, e.g. {}, gives per-step figures by name)",
            fmt_ns(a.warmup_ns),
            a.nvtx_example
        ));
    }
    if a.compile_ns > 0 {
        note(format!(
            "compilation ranges of the framework (XLA's): {} summed over the threads that compiled, not in the figures \
             here",
            fmt_ns(a.compile_ns)
        ));
    }
    if let (Some(ns), Some(pct)) = (a.profiler_ns, a.profiler_pct) {
        let per = if a.range.is_some() || a.found_steps.is_some() { " per step" } else { "" };
        note(format!(
            "gpuscope's own cost: ~{}{per} ({} of the measured time), taken out of the figures here",
            fmt_ns(ns),
            fmt_pct(pct)
        ));
    }
    for o in &a.others {
        note(format!(
            "also repeated: {}: {} per call (median of {}), GPU busy {} [{}]",
            o.range,
            fmt_ns(o.per_call_ns),
            o.calls,
            fmt_pct(o.gpu_busy_pct),
            o.bound
        ));
    }
    let per = if a.range.is_some() || a.found_steps.is_some() { "a step's" } else { "the steady state's" };
    let _ = writeln!(out, "   where {per} time goes:");
    let what_w = a.parts.iter().map(|p| p.what.len()).max().unwrap_or(0).max(10);
    for p in &a.parts {
        let cells = format!("     {:<what_w$} {:>10} {:>5}   ", p.what, fmt_ns(p.ns), fmt_pct(p.pct));
        if p.detail.is_empty() {
            let _ = writeln!(out, "{}", cells.trim_end());
        } else {
            out.push_str(&wrap(&p.detail, width, &cells, &" ".repeat(cells.len())));
        }
    }
    let why = a.verdict.evidence.clone();
    out.push_str(&wrap(&format!("why {}: {why}", a.verdict.bound), width, "   ", "     "));
    if a.actions.is_empty() {
        let _ = writeln!(out, "   what to change: nothing above the thresholds");
        return;
    }
    let _ = writeln!(out, "   what to change, most time saved first:");
    let per = if a.range.is_some() { " per step" } else { "" };
    for (i, act) in a.actions.iter().enumerate() {
        let text = format!("saves up to {}{per} ({}): {}", fmt_ns(act.saves_ns), fmt_pct(act.saves_pct), act.advice);
        out.push_str(&wrap(&text, width, &format!("     {}. ", i + 1), "        "));
        out.push_str(&wrap(&format!("seen: {}", act.why), width, "        ", "          "));
    }
}
