//! The terminal table: a header, the NVTX tree with the kernels launched
//! directly under each range, the kernels by GPU time, memory, and drops.

use crate::model::path::RangePath;
use crate::report::*;
use std::collections::HashMap;
use std::fmt::Write;

/// `812 ns`, `12.3 us`, `4.56 ms`, `1.234 s`.
pub fn fmt_ns(ns: u64) -> String {
    let n = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} us", n / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", n / 1e6)
    } else {
        format!("{:.3} s", n / 1e9)
    }
}

fn fmt_bytes(b: u64) -> String {
    let n = b as f64;
    if b < 1 << 10 {
        format!("{b} B")
    } else if b < 1 << 20 {
        format!("{:.1} KiB", n / 1024.0)
    } else if b < 1 << 30 {
        format!("{:.1} MiB", n / 1048576.0)
    } else {
        format!("{:.2} GiB", n / 1073741824.0)
    }
}

/// A kernel's name without return type and parameter list:
/// `void matmul_tiled<16>(float const*, ...)` -> `matmul_tiled<16>`.
pub fn short_name(name: &str) -> &str {
    let mut s = name;
    // Cut the parameter list: the last top-level '(' ... ')'.
    if s.ends_with(')') {
        let mut depth = 0i32;
        for (i, c) in s.char_indices().rev() {
            match c {
                ')' => depth += 1,
                '(' => {
                    depth -= 1;
                    if depth == 0 {
                        s = &s[..i];
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    // Drop a return type: the text before the last top-level space.
    let mut depth = 0i32;
    let mut cut = 0;
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ' ' if depth == 0 => cut = i + 1,
            _ => {}
        }
    }
    &s[cut..]
}

pub(super) fn fit(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        format!("{s:<w$}")
    } else {
        let t: String = s.chars().take(w.saturating_sub(1)).collect();
        format!("{t}…")
    }
}

pub(super) fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}%"))
}

/// Width of the columns after the name, separators included.
const COLS: usize = 63;

struct Cols {
    name: usize,
}

impl Cols {
    fn row(&self, out: &mut String, name: &str, c: [&str; 6]) {
        let line = format!(
            "{} {:>9} {:>10} {:>10} {:>10} {:>6} {:<10}",
            fit(name, self.name),
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            c[5]
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// Renders the report at most `width` columns wide (at least 80).
pub fn render(r: &Report, width: usize) -> String {
    let width = width.max(80);
    let cols = Cols { name: width - COLS };
    let mut out = String::new();
    let launches: u64 = r.kernels.iter().map(|k| k.stats.launches).sum();
    let devices: Vec<String> =
        r.devices.iter().map(|d| format!("GPU {} {} ({} SMs)", d.id, d.name, d.sm_count)).collect();
    let _ = writeln!(
        out,
        "gpuscope {}: {} session, {} kernel launches ({} distinct), kernel time {}",
        r.mode,
        fmt_ns(r.end_ns.saturating_sub(r.start_ns)),
        launches,
        r.kernels.len(),
        fmt_ns(r.total_kernel_ns())
    );
    if !devices.is_empty() {
        let _ = writeln!(out, "devices: {}", devices.join(", "));
    }
    let _ = writeln!(out, "{}", drops_line(&r.drops));

    // The NVTX tree.
    if !r.ranges.is_empty() || r.path_kernels.iter().any(|p| !p.path.is_empty()) {
        let _ = writeln!(out);
        cols.row(&mut out, "NVTX range / kernel", ["launches", "GPU time", "wall", "util", "occ", "limiter"]);
        let _ = writeln!(out, "{}", "-".repeat(width.min(cols.name + COLS)));
        // Looked up by path, not searched: a program with a range per step
        // has thousands of paths.
        let busy: HashMap<&RangePath, u64> = r.ranges.iter().map(|g| (&g.path, g.gpu_busy_ns)).collect();
        let mut under: HashMap<&RangePath, Vec<&PathKernelSummary>> = HashMap::new();
        for k in &r.path_kernels {
            under.entry(&k.path).or_default().push(k);
        }
        let mut order: Vec<&RangeSummary> = r.ranges.iter().collect();
        order.sort_by_cached_key(|g| tree_key(&busy, &g.path));
        for g in order {
            let depth = g.path.frames.len() - 1;
            let leaf = g.path.frames.last().map(|f| match &f.domain {
                Some(d) => format!("{d}::{}", f.name),
                None => f.name.clone(),
            });
            let calls = if g.count > 1 { format!(" (x{})", g.count) } else { String::new() };
            let name = format!("{}{}{}", "  ".repeat(depth), leaf.unwrap_or_default(), calls);
            cols.row(
                &mut out,
                &name,
                [
                    &g.kernel_launches.to_string(),
                    &fmt_ns(g.gpu_busy_ns),
                    &fmt_ns(g.wall_ns),
                    &format!("{:.0}%", g.gpu_utilization_pct),
                    "",
                    "",
                ],
            );
            for k in under.get(&g.path).into_iter().flatten() {
                kernel_row(&cols, &mut out, &format!("{}· {}", "  ".repeat(depth + 1), short_name(&k.name)), &k.stats);
            }
        }
        let orphans: Vec<&PathKernelSummary> =
            r.path_kernels.iter().filter(|k| !k.path.is_empty() && !busy.contains_key(&k.path)).collect();
        for k in orphans {
            kernel_row(&cols, &mut out, &format!("{} · {}", k.path, short_name(&k.name)), &k.stats);
        }
        let outside: Vec<&PathKernelSummary> = r.path_kernels.iter().filter(|k| k.path.is_empty()).collect();
        if !outside.is_empty() {
            cols.row(&mut out, "(no range)", ["", "", "", "", "", ""]);
            for k in outside {
                kernel_row(&cols, &mut out, &format!("  · {}", short_name(&k.name)), &k.stats);
            }
        }
    }

    // Kernels by GPU time.
    let _ = writeln!(out);
    cols.row(&mut out, "kernel", ["launches", "GPU time", "mean", "max", "occ", "limiter"]);
    let _ = writeln!(out, "{}", "-".repeat(width.min(cols.name + COLS)));
    for k in &r.kernels {
        let s = &k.stats;
        cols.row(
            &mut out,
            short_name(&k.name),
            [
                &s.launches.to_string(),
                &fmt_ns(s.total_ns),
                &fmt_ns(s.mean_ns),
                &fmt_ns(s.max_ns),
                &pct(s.theoretical_occupancy_pct).replace(".0%", "%"),
                s.occupancy_limiter.map_or("-", |l| l.as_str()),
            ],
        );
    }

    // Hardware metrics.
    if let Some(ms) = &r.metrics {
        let _ = writeln!(out);
        let mut line = format!(
            "hardware metrics: {} launches measured ({} replay pass{} each)",
            ms.profiled_launches,
            ms.passes,
            if ms.passes == 1 { "" } else { "es" }
        );
        if ms.mismatches > 0 {
            let _ = write!(line, ", {} discarded (another kernel ran meanwhile)", ms.mismatches);
        }
        if ms.skipped_graph_launches > 0 {
            let _ = write!(line, ", {} graph launches not measured", ms.skipped_graph_launches);
        }
        let _ = writeln!(out, "{line}");
        let t = &ms.time_ns;
        if ms.profiled_launches > 0 {
            let _ = writeln!(
                out,
                "time in the range profiler: metric configuration {}, context setup {}, start {}, measured launches {}, stop {}, decode {}, evaluate {}, re-arm {}; launches waited {} for gpuscope",
                fmt_ns(t.setup_host),
                fmt_ns(t.setup),
                fmt_ns(t.start),
                fmt_ns(t.launch),
                fmt_ns(t.stop),
                fmt_ns(t.decode),
                fmt_ns(t.evaluate),
                fmt_ns(t.rearm),
                fmt_ns(t.launch_waits)
            );
        }
        if r.profiler_kernels > 0 {
            let _ = writeln!(
                out,
                "CUPTI ran {} kernels of its own for these measurements ({} of GPU time), left out of the tables",
                r.profiler_kernels,
                fmt_ns(r.profiler_kernel_ns)
            );
        }
        if let Some(why) = &ms.disabled {
            let _ = writeln!(out, "metrics missing: {why}");
        }
        let measured: Vec<&KernelSummary> = r.kernels.iter().filter(|k| k.stats.profiled_launches > 0).collect();
        if !measured.is_empty() {
            cols.row(&mut out, "kernel", ["measured", "GPU time", "SM eff", "ach occ", "theo", "limiter"]);
            let _ = writeln!(out, "{}", "-".repeat(width.min(cols.name + COLS)));
            for k in measured {
                let s = &k.stats;
                cols.row(
                    &mut out,
                    short_name(&k.name),
                    [
                        &format!("{}/{}", s.profiled_launches, s.launches),
                        &fmt_ns(s.total_ns),
                        &pct(s.sm_efficiency_pct),
                        &pct(s.achieved_occupancy_pct),
                        &pct(s.theoretical_occupancy_pct).replace(".0%", "%"),
                        s.occupancy_limiter.map_or("-", |l| l.as_str()),
                    ],
                );
            }
        }
    }

    // The case nvidia-smi hides.
    let flagged: Vec<&RangeSummary> = r.ranges.iter().filter(|g| g.busy_but_underused).collect();
    if !flagged.is_empty() {
        let _ = writeln!(
            out,
            "busy but underused (GPU utilisation >= {BUSY_PCT:.0}% while SM efficiency < {LOW_SM_EFFICIENCY_PCT:.0}% \
             or achieved occupancy < {LOW_OCCUPANCY_PCT:.0}%):"
        );
        for g in flagged {
            let _ = writeln!(
                out,
                "  {}: utilisation {:.0}%, SM efficiency {}, achieved occupancy {}",
                g.path,
                g.gpu_utilization_pct,
                pct(g.sm_efficiency_pct),
                pct(g.achieved_occupancy_pct)
            );
        }
    }

    // Memory.
    let m = &r.memory;
    if !m.memcpy.is_empty() || m.memset.count > 0 {
        let _ = writeln!(out);
        for c in m.memcpy.iter().chain(std::iter::once(&m.memset).filter(|s| s.count > 0)) {
            let pageable = if c.pageable > 0 { format!(", {} pageable", c.pageable) } else { String::new() };
            let _ = writeln!(
                out,
                "{:<8} {:>7} ops {:>11} {:>10}{}",
                c.kind,
                c.count,
                fmt_bytes(c.bytes),
                fmt_ns(c.total_ns),
                pageable
            );
        }
    }
    if m.synchronizations > 0 {
        let _ = writeln!(out, "host waits: {} synchronizations, {}", m.synchronizations, fmt_ns(m.synchronization_ns));
    }
    out
}

fn kernel_row(cols: &Cols, out: &mut String, name: &str, s: &KernelStats) {
    cols.row(
        out,
        name,
        [
            &s.launches.to_string(),
            &fmt_ns(s.total_ns),
            "",
            "",
            &pct(s.theoretical_occupancy_pct).replace(".0%", "%"),
            s.occupancy_limiter.map_or("-", |l| l.as_str()),
        ],
    );
}

/// Sort key putting children after parents, siblings by GPU time (widest
/// first).
fn tree_key(busy: &HashMap<&RangePath, u64>, p: &RangePath) -> Vec<(std::cmp::Reverse<u64>, String)> {
    (1..=p.frames.len())
        .map(|n| {
            let prefix = RangePath { frames: p.frames[..n].to_vec() };
            (std::cmp::Reverse(busy.get(&prefix).copied().unwrap_or(0)), p.frames[n - 1].name.clone())
        })
        .collect()
}

fn drops_line(d: &Drops) -> String {
    if d.is_empty() {
        return "dropped: nothing".into();
    }
    let mut parts = Vec::new();
    let mut add = |n: u64, what: &str| {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    };
    add(d.cupti_records, "CUPTI records (raise buffer size/count)");
    add(d.buffer_requests_refused, "buffer requests refused");
    add(d.host_events, "NVTX/launch events (queue full)");
    add(d.unattributed_kernels, "kernels with no launch seen");
    add(d.undecodable_records, "undecodable records");
    add(d.trace_kernels_over_cap, "kernels over the trace cap");
    add(d.unbalanced_pops, "unbalanced NVTX pops");
    add(d.ranges_evicted, "ranges summarised early");
    add(d.kernels_missing_metrics, "profiled kernels without metrics");
    format!("dropped: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_drop_return_type_and_parameters() {
        assert_eq!(short_name("void matmul_tiled<16>(float const*, float const*, float*, int)"), "matmul_tiled<16>");
        assert_eq!(short_name("vector_add"), "vector_add");
        assert_eq!(short_name("void at::native::f<(int)4, float>(int, float)"), "at::native::f<(int)4, float>");
    }

    #[test]
    fn durations_pick_a_unit() {
        assert_eq!(fmt_ns(999), "999 ns");
        assert_eq!(fmt_ns(12_345), "12.3 us");
        assert_eq!(fmt_ns(4_560_000), "4.56 ms");
        assert_eq!(fmt_ns(1_234_000_000), "1.234 s");
    }
}
