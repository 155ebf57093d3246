//! The job table: ranks side by side, stragglers named.

use super::table::fit;
use crate::model::units::fmt_ns;
use crate::report::JobReport;
use std::fmt::Write;

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
