//! The job table: ranks side by side, stragglers named; and the job's
//! answer.

use super::table::fit;
use crate::analysis::job::{JobAnswer, Parallelism};
use crate::model::units::{fmt_bytes, fmt_ns};
use crate::report::JobReport;
use std::fmt::Write;

/// Messages from this size up have their bandwidth shown.
const BANDWIDTH_MIN_BYTES: u64 = 1 << 20;

/// Ranks shown in columns of their own; with more, the table gives the
/// fastest, median and slowest rank per range.
const RANK_COLUMNS: usize = 4;

/// The table, at most `width` columns (80 or more).
pub(super) fn render(j: &JobReport, width: usize) -> String {
    let width = width.max(80);
    let mut out = String::new();
    let _ = writeln!(out, "job: {} ranks", j.ranks.len());
    let name_w = j.ranks.iter().map(|r| r.name.chars().count()).max().unwrap_or(4).clamp(4, 30);
    let _ = writeln!(out, "  {:<name_w$} {:>12} {:>12} {:>10}", "rank", "session", "kernel time", "launches");
    for r in &j.ranks {
        let _ = writeln!(
            out,
            "  {:<name_w$} {:>12} {:>12} {:>10}",
            fit(&r.name, name_w),
            fmt_ns(r.session_ns),
            fmt_ns(r.kernel_ns),
            r.launches
        );
    }
    let _ = writeln!(out);
    if j.ranges.is_empty() {
        let _ = writeln!(out, "no NVTX range of the program's own on any rank (libraries' ranges, NCCL's, left out)");
        return out;
    }
    let by_columns = j.ranks.len() <= RANK_COLUMNS;
    let heads: Vec<String> = if by_columns {
        j.ranks.iter().map(|r| fit(&r.name, 11)).collect()
    } else {
        ["fastest", "median", "slowest"].iter().map(|s| s.to_string()).collect()
    };
    let cols = 12 * heads.len() + 26;
    let path_w = width.saturating_sub(cols).max(20);
    let mut head = format!("{:<path_w$}", "NVTX range: wall time per call");
    for h in &heads {
        let _ = write!(head, " {h:>11}");
    }
    let _ = writeln!(out, "{head} {:>25}", "slowest rank");
    let _ = writeln!(out, "{}", "-".repeat(width.min(path_w + cols)));
    for g in &j.ranges {
        let mut line = format!("{:<path_w$}", fit(&g.path.to_string(), path_w));
        let cell = |v: Option<u64>| v.map_or("-".to_string(), fmt_ns);
        if by_columns {
            for r in &g.per_rank {
                let _ = write!(line, " {:>11}", cell(r.as_ref().map(|r| r.wall_per_call_ns)));
            }
        } else {
            let mut walls: Vec<u64> = g.per_rank.iter().flatten().map(|r| r.wall_per_call_ns).collect();
            walls.sort_unstable();
            let median = walls.get(walls.len().saturating_sub(1) / 2).copied();
            for v in [walls.first().copied(), median, walls.last().copied()] {
                let _ = write!(line, " {:>11}", cell(v));
            }
        }
        let slowest = match g.slowest {
            Some(i) if g.per_rank.iter().flatten().count() > 1 => {
                format!("{} (+{:.1}%)", fit(&j.ranks[i].name, 14).trim_end(), g.slowest_over_median_pct)
            }
            _ => String::new(),
        };
        let _ = writeln!(out, "{line} {slowest:>25}");
    }
    // The ranks others wait for: outermost ranges first (the table's order
    // is by wall time), one line each.
    let waits: Vec<String> = j
        .ranges
        .iter()
        .filter_map(|g| {
            let i = g.last_to_arrive?;
            Some(format!(
                "{}: {} arrives last at the collectives: the others wait {} per call for it",
                g.path,
                j.ranks[i].name,
                fmt_ns(g.wait_per_call_ns)
            ))
        })
        .collect();
    if !waits.is_empty() {
        let _ = writeln!(out, "\nstragglers:");
        for w in waits {
            // Wrapped, not cut: the wait is the line's end.
            out.push_str(&super::diagnosis::wrap(&w, width, "  ", "    "));
        }
    }
    out
}

/// The job's answer, at most `width` columns (80 or more).
pub(super) fn render_answer(a: &JobAnswer, width: usize) -> String {
    let width = width.max(80);
    let mut out = String::new();
    let head = match (&a.step, a.per_second) {
        (Some(s), false) => format!("`{s}`, {} per step", fmt_ns(a.step_ns)),
        (None, false) => format!("steps found in what each rank repeats, {} per step", fmt_ns(a.step_ns)),
        _ => "each rank's steady state, figures per second of it".to_string(),
    };
    let _ = writeln!(out, "== Answer for the job: {} ranks, {head}", a.ranks.len());
    let how = match a.parallelism {
        Parallelism::DataParallel => "data parallel (gradients all-reduced)",
        Parallelism::Sharded => "sharded (parameters all-gathered, gradients reduce-scattered)",
        Parallelism::Unknown => "no collective seen",
    };
    out.push_str(&super::diagnosis::wrap(&format!("pace set by {}; {how}", a.pace), width, "   ", "     "));
    for n in &a.notes {
        out.push_str(&super::diagnosis::wrap(n, width, "   ", "     "));
    }
    let name_w = a.ranks.iter().map(|r| r.name.chars().count()).max().unwrap_or(4).clamp(4, 24);
    let _ = writeln!(
        out,
        "   {:<name_w$} {:>10} {:>10} {:>12} {:>10} {:>10} {:>10}  verdict",
        "rank",
        if a.per_second { "steady" } else { "step" },
        "compute",
        "exposed comm",
        "waiting",
        "host",
        "gpuscope"
    );
    let opt = |v: Option<u64>| v.map_or("-".to_string(), fmt_ns);
    for (i, r) in a.ranks.iter().enumerate() {
        let mark = if a.straggler == Some(i) { "  (the others wait for it)" } else { "" };
        let _ = writeln!(
            out,
            "   {:<name_w$} {:>10} {:>10} {:>12} {:>10} {:>10} {:>10}  {}{mark}",
            fit(&r.name, name_w),
            fmt_ns(r.step_ns),
            fmt_ns(r.compute_ns),
            opt(r.exposed_comm_ns),
            opt(r.wait_ns),
            fmt_ns(r.host_ns),
            opt(r.profiler_ns),
            r.verdict
        );
    }
    if let Some(w) = &a.aligned {
        let each: Vec<String> = a
            .ranks
            .iter()
            .zip(w.wait_ns.iter().zip(&w.last))
            .map(|(r, (&wait, &last))| {
                format!("{} waits {} a call, arrives last at {last}", r.name, fmt_ns(wait / w.calls.max(1)))
            })
            .collect();
        let offsets = w.offset_ns.iter().map(|o| format!("{:+.3} ms", *o as f64 / 1e6)).collect::<Vec<_>>();
        let text = format!(
            "at the collectives, from kernel starts aligned by their common ends ({} calls matched over {}; clock \
             offsets {}): {}",
            w.calls,
            fmt_ns(w.span_ns),
            offsets.join(", "),
            each.join("; ")
        );
        out.push_str(&super::diagnosis::wrap(&text, width, "   ", "     "));
        // Smaller messages are bound by latency, not bandwidth.
        for b in w.bandwidth.iter().filter(|b| b.message_bytes >= BANDWIDTH_MIN_BYTES) {
            let of_peak = match (w.link, b.link_pct) {
                (Some(l), Some(pct)) => format!("{pct:.0}% of {}'s {:.0} GB/s; ", l.link, l.gb_per_s),
                _ => String::new(),
            };
            let text = format!(
                "{}: {} calls of {}: bus bandwidth {:.0} GB/s ({of_peak}algorithm {:.0} GB/s), each timed on the \
                 rank that arrived last",
                b.collective,
                b.calls,
                fmt_bytes(b.message_bytes),
                b.bus_gb_per_s,
                b.algorithm_gb_per_s
            );
            out.push_str(&super::diagnosis::wrap(&text, width, "   ", "     "));
        }
    }
    if !a.actions.is_empty() {
        let per = if a.per_second { "per second" } else { "per step" };
        let _ = writeln!(out, "   what to change, most time saved {per} first:");
        for (k, x) in a.actions.iter().enumerate() {
            let text = format!("{}. saves up to {} ({:.0}%): {}", k + 1, fmt_ns(x.saves_ns), x.saves_pct, x.advice);
            out.push_str(&super::diagnosis::wrap(&text, width, "     ", "        "));
        }
    }
    out
}
