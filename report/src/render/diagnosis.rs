//! The analysis as text: what bounds each range and heavy kernel, and the
//! findings, which end the terminal report.

use super::table::fit;
use crate::analysis::verdict::Shares;
use crate::analysis::{Analysis, Finding, RangeAnalysis};
use crate::model::idle::IdleSplit;
use crate::model::units::{fmt_ns, fmt_pct};
use std::fmt::Write;

/// Ranges shown in "what bounds each range" at most (the longest).
const MAX_RANGES: usize = 15;
/// Findings shown at most (the costliest).
const MAX_FINDINGS: usize = 8;

fn opt_pct(v: Option<f64>) -> String {
    v.map_or("-".into(), fmt_pct)
}

/// A hardware figure; `~` marks one from PM samples (sampling mode).
fn hw_pct(v: Option<f64>, sampled: bool) -> String {
    match v {
        Some(v) if sampled => format!("~{}", fmt_pct(v)),
        _ => opt_pct(v),
    }
}

/// Three significant digits and an SI prefix: `989 T`, `1.25 T`, `4.55 k`.
pub(super) fn si(v: f64) -> String {
    let (d, u) = match v.abs() {
        x if x >= 1e15 => (1e15, "P"),
        x if x >= 1e12 => (1e12, "T"),
        x if x >= 1e9 => (1e9, "G"),
        x if x >= 1e6 => (1e6, "M"),
        x if x >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    };
    let x = v / d;
    let digits = if x >= 100.0 {
        0
    } else if x >= 10.0 {
        1
    } else {
        2
    };
    let mut n = format!("{x:.digits$}");
    if n.contains('.') {
        n = n.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    format!("{n} {u}")
}

/// `text` wrapped to `width`, every line after the first indented.
pub(super) fn wrap(text: &str, width: usize, first: &str, rest: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > width {
            let _ = writeln!(out, "{line}");
            line = rest.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    let _ = writeln!(out, "{line}");
    out
}

/// "GPU idle 59%: host 52%, copies 6%" of a span of `wall_ns`, with
/// gpuscope's own measurement time named apart.
pub(super) fn idle_line(idle: &IdleSplit, wall_ns: u64) -> String {
    let mut s = Shares::of(wall_ns, idle).map_or_else(|| "GPU idle: no time".to_string(), |s| s.describe());
    if idle.profiler_ns > 0 {
        let _ = write!(s, " (and {} in gpuscope's measurements, left out)", fmt_ns(idle.profiler_ns));
    }
    s
}

fn extras(g: &RangeAnalysis) -> Vec<String> {
    let mut v = Vec::new();
    if let (Some(m), Some(pipe)) = (g.model_mfu_pct, g.model_mfu_pipe) {
        v.push(format!(
            "model MFU {m:.1}% ({}FLOP/s {}, against the {pipe} peak)",
            si(g.model_flops_per_s.unwrap_or(0.0)),
            if g.model_flops_counted { "counted from Linear/attention/conv shapes" } else { "declared" }
        ));
    }
    if let Some(t) = g.throughput_per_s {
        v.push(format!("{} {}/s", si(t).trim_end(), g.throughput_unit.as_deref().unwrap_or("items")));
    }
    if let (Some(ai), Some(ridge)) = (g.arithmetic_intensity, g.ridge_point) {
        v.push(format!("{ai:.1} FLOP/byte (ridge point {ridge:.0})"));
    }
    if g.flops.is_some() && g.measured_pct < 99.5 {
        v.push(format!("counters cover {:.0}% of its kernel time", g.measured_pct));
    }
    v
}

/// The analysis sections of the terminal report, `width` columns wide.
pub(super) fn render(a: &Analysis, width: usize, out: &mut String) {
    // What bounds each range.
    let shown: Vec<&RangeAnalysis> = a.ranges.iter().filter(|g| g.library.is_none()).collect();
    if !shown.is_empty() {
        let name_w = width.saturating_sub(66).max(14);
        let _ = writeln!(out);
        out.push_str(&wrap(
            "What bounds each range (util: share of its time with a kernel running, as nvidia-smi counts)",
            width,
            "",
            "  ",
        ));
        let _ = writeln!(
            out,
            "{} {:>9} {:>5} {:>6} {:>5} {:>7} {:>5} {:>6}  bound",
            fit("range", name_w),
            "wall",
            "util",
            "SM eff",
            "occ",
            "compute",
            "DRAM",
            "MFU",
        );
        let _ = writeln!(out, "{}", "-".repeat(width.min(name_w + 66)));
        let mut order: Vec<&RangeAnalysis> = shown;
        order.sort_by(|x, y| x.path.cmp(&y.path));
        let dropped = order.len().saturating_sub(MAX_RANGES);
        if dropped > 0 {
            // The longest ones, still in tree order.
            let mut by_wall: Vec<u64> = order.iter().map(|g| g.wall_ns).collect();
            by_wall.sort_unstable_by(|a, b| b.cmp(a));
            let cut = by_wall[MAX_RANGES - 1];
            order.retain(|g| g.wall_ns >= cut);
            order.truncate(MAX_RANGES);
        }
        // Each row under its nearest ancestor with a row, named by the
        // frames below it (see the NVTX table).
        let rows: rustc_hash::FxHashSet<&str> = order.iter().map(|g| g.path.as_str()).collect();
        let mut row_depth: rustc_hash::FxHashMap<&str, usize> = Default::default();
        for g in order {
            let parent = g.path.match_indices('/').rev().map(|(i, _)| &g.path[..i]).find(|p| rows.contains(p));
            let depth = parent.map_or(0, |p| row_depth.get(p).map_or(0, |d| d + 1));
            row_depth.insert(&g.path, depth);
            let leaf = parent.map_or(g.path.as_str(), |p| &g.path[p.len() + 1..]);
            let calls = match (g.count, g.warmup_calls) {
                (c, 0) if c > 1 => format!(" (x{c})"),
                (_, 0) => String::new(),
                (c, w) => format!(" (x{c} +{w} warm-up)"),
            };
            let line = format!(
                "{} {:>9} {:>5} {:>6} {:>5} {:>7} {:>5} {:>6}  {}",
                fit(&format!("{}{leaf}{calls}", "  ".repeat(depth)), name_w),
                fmt_ns(g.wall_ns),
                // Untraced: no kernel records to tell when kernels ran.
                if g.untraced { "-".to_string() } else { format!("{:.0}%", g.utilization_pct) },
                hw_pct(g.sm_efficiency_pct, g.sampled),
                hw_pct(g.achieved_occupancy_pct, g.sampled),
                hw_pct(g.compute_pct, g.sampled),
                hw_pct(g.dram_pct, g.sampled),
                opt_pct(g.hardware_mfu_pct),
                g.verdict.bound
            );
            let _ = writeln!(out, "{}", line.trim_end());
            let indent = format!("{}    ", "  ".repeat(depth));
            let mut evidence = g.verdict.evidence.clone();
            for e in extras(g) {
                evidence.push_str("; ");
                evidence.push_str(&e);
            }
            out.push_str(&wrap(&evidence, width, &indent, &indent));
        }
        if dropped > 0 {
            let _ = writeln!(out, "({dropped} shorter ranges not shown; the JSON report has every one)");
        }
    }
    blocks(a, width, out);
    // Heavy kernels.
    if !a.kernels.is_empty() {
        let name_w = width.saturating_sub(68).max(12);
        let _ = writeln!(out);
        let _ = writeln!(out, "Heavy kernels (at least {:.0}% of kernel time)", crate::analysis::HEAVY_KERNEL_PCT);
        let _ = writeln!(
            out,
            "{} {:>9} {:>5} {:>6} {:>5} {:>7} {:>5} {:>8}  bound",
            fit("kernel", name_w),
            "GPU time",
            "share",
            "SM eff",
            "occ",
            "compute",
            "DRAM",
            "FLOP/s",
        );
        let _ = writeln!(out, "{}", "-".repeat(width.min(name_w + 68)));
        for k in &a.kernels {
            let bound = k.verdict.as_ref().map_or("-", |v| v.bound.as_str());
            let line = format!(
                "{} {:>9} {:>5} {:>6} {:>5} {:>7} {:>5} {:>8}  {}",
                super::table::name_cell(out, &k.display_name, name_w, width),
                fmt_ns(k.gpu_ns),
                format!("{:.0}%", k.share_pct),
                hw_pct(k.sm_efficiency_pct, k.sampled),
                hw_pct(k.achieved_occupancy_pct, k.sampled),
                hw_pct(k.compute_pct, k.sampled),
                hw_pct(k.dram_pct, k.sampled),
                k.flops_per_s.map_or("-".into(), si),
                bound
            );
            let _ = writeln!(out, "{}", line.trim_end());
            if let Some(v) = &k.verdict {
                out.push_str(&wrap(&v.evidence, width, "    ", "    "));
            }
        }
    }
    if let Some(p) = &a.peaks {
        let bf16 = p
            .flops(crate::analysis::peaks::TENSOR_BF16)
            .map(|f| format!("bf16 tensor {}FLOP/s, ", si(f)))
            .unwrap_or_default();
        let line = format!("peaks: {bf16}DRAM {}B/s; {}", si(p.dram_bytes_per_s), p.source);
        out.push_str(&wrap(&line, width, "", "    "));
    }
    for n in &a.notes {
        out.push_str(&wrap(&format!("note: {n}"), width, "", "    "));
    }
    // Findings end the report: lost time, most first; then device memory,
    // which costs no time and is always shown.
    let _ = writeln!(out);
    let (memory, time): (Vec<&Finding>, Vec<&Finding>) =
        a.findings.iter().partition(|f| f.bound == crate::analysis::Bound::DeviceMemory);
    if time.is_empty() {
        let _ = writeln!(out, "Findings: none (no idle cause or kernel inefficiency above the thresholds)");
    } else {
        let _ = writeln!(out, "Findings, most GPU time first");
    }
    for (i, f) in time.iter().take(MAX_FINDINGS).enumerate() {
        let head = if f.cost_ns > 0 {
            format!("{:>2}. [{}] {} lost:", i + 1, f.bound, fmt_ns(f.cost_ns))
        } else {
            // A cause whose cost is not measured (allocator churn).
            format!("{:>2}. [{}] cost not measured:", i + 1, f.bound)
        };
        out.push_str(&wrap(&format!("{head} {}", f.message), width, "", "      "));
        out.push_str(&wrap(&format!("-> {}", f.advice), width, "      ", "         "));
    }
    if time.len() > MAX_FINDINGS {
        let _ = writeln!(out, "({} smaller findings in the JSON report)", time.len() - MAX_FINDINGS);
    }
    for f in memory {
        out.push_str(&wrap(&format!("Memory [{}]: {}", f.kind, f.message), width, "", "      "));
        out.push_str(&wrap(&format!("-> {}", f.advice), width, "      ", "         "));
    }
}

/// At most this many groups of repeated blocks are shown (the largest).
const MAX_BLOCK_GROUPS: usize = 16;

/// Repeated blocks summed: the section after the ranges' verdicts.
/// A range path padded or cut to `w` columns, cut at its start: its end
/// (the block and the range inside it) tells rows apart.
fn fit_path(path: &str, w: usize) -> String {
    let n = path.chars().count();
    if n <= w {
        return format!("{path:<w$}");
    }
    let tail: String = path.chars().skip(n + 1 - w.max(1)).collect();
    format!("…{tail}")
}

fn blocks(a: &Analysis, width: usize, out: &mut String) {
    if a.blocks.is_empty() {
        return;
    }
    let mut shown: Vec<&crate::analysis::blocks::BlockGroup> = a.blocks.iter().collect();
    if shown.len() > MAX_BLOCK_GROUPS {
        shown.sort_by_key(|g| std::cmp::Reverse(g.wall_ns));
        shown.truncate(MAX_BLOCK_GROUPS);
        shown.sort_by(|x, y| x.path.cmp(&y.path));
    }
    // The figures take 33 columns, the slowest member and its times 33.
    let name_w = width.saturating_sub(66).max(14);
    let _ = writeln!(out);
    out.push_str(&wrap(
        "Repeated blocks summed (ranges named NAME.0, NAME.1, ... or 0, 1, ..., and the ranges inside them, \
         taken together; wall time per call)",
        width,
        "",
        "  ",
    ));
    let _ = writeln!(
        out,
        "{} {:>6} {:>9} {:>6} {:>6}  slowest (median)",
        fit("ranges", name_w),
        "count",
        "per call",
        "share",
        "SM eff"
    );
    let _ = writeln!(out, "{}", "-".repeat(width.min(name_w + 66)));
    for g in shown {
        // The slowest member's name cut to the columns left for it.
        let times = format!(" {} ({})", fmt_ns(g.slowest.1), fmt_ns(g.median_wall_ns));
        let room = width.saturating_sub(name_w + 33 + times.chars().count()).max(8);
        let slowest = fit(&g.slowest.0, room);
        let line = format!(
            "{} {:>6} {:>9} {:>6} {:>6}  {}{times}",
            fit_path(&g.path, name_w),
            g.members,
            fmt_ns(g.wall_ns),
            g.share_of_parent_pct.map_or("-".to_string(), |p| format!("{p:.0}%")),
            g.sm_efficiency_pct.map_or("-".to_string(), |p| format!("{p:.0}%")),
            slowest.trim_end(),
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_paths_keep_their_end() {
        assert_eq!(fit_path("a/b", 5), "a/b  ");
        assert_eq!(fit_path("step/backward/layers.0-1/linear1", 20), "…/layers.0-1/linear1");
    }

    #[test]
    fn numbers_and_wrapping_read_well() {
        assert_eq!(si(989.4e12), "989 T");
        assert_eq!(si(1.25e12), "1.25 T");
        assert_eq!(si(4551.0), "4.55 k");
        assert_eq!(si(12.0), "12 ");
        let w = wrap("one two three four five six", 14, "", "  ");
        assert_eq!(w, "one two three\n  four five\n  six\n");
        let i = IdleSplit { host_ns: 520, copy_ns: 60, launch_ns: 10, profiler_ns: 1_000, ..Default::default() };
        assert_eq!(
            idle_line(&i, 2000),
            "GPU idle 59%: host 52%, copies 6.0%, launch gaps 1.0% (and 1.0 us in gpuscope's measurements, left out)"
        );
    }
}
