//! Two reports side by side: per NVTX range, wall time, utilisation and
//! what bounds it before and after; per kernel and NVTX path, GPU time, SM
//! efficiency and occupancy before and after, with the change.

use super::table::{fit, pct};
use crate::analysis::{analyze, RangeAnalysis};
use crate::model::names::display_names;
use crate::model::units::fmt_ns;
use crate::report::{KernelStats, Report};
use std::collections::BTreeMap;
use std::fmt::Write;

fn delta_pct(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:+.1}", b - a),
        _ => "".into(),
    }
}

fn change(a: u64, b: u64) -> String {
    if a == 0 {
        return if b == 0 { "".into() } else { "new".into() };
    }
    format!("{:+.1}%", (b as f64 - a as f64) / a as f64 * 100.0)
}

/// The comparison table, at most `width` columns.
pub(super) fn render(before: &Report, after: &Report, width: usize) -> String {
    let name_w = width.saturating_sub(66).max(20);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kernel time: {} -> {} ({})",
        fmt_ns(before.total_kernel_ns()),
        fmt_ns(after.total_kernel_ns()),
        change(before.total_kernel_ns(), after.total_kernel_ns())
    );
    ranges(before, after, width, &mut out);
    type Key = (String, String);
    let rows = |r: &Report| -> BTreeMap<Key, KernelStats> {
        r.path_kernels.iter().map(|p| ((p.path.to_string(), p.name.clone()), p.stats.clone())).collect()
    };
    let (a, b) = (rows(before), rows(after));
    let mut keys: Vec<&Key> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.sort_by_key(|k| std::cmp::Reverse(b.get(*k).or(a.get(*k)).map_or(0, |s| s.total_ns)));
    // Unique over both runs: a kernel only one of them ran must not look
    // like another's.
    let shown = display_names(keys.iter().map(|k| k.1.as_str()));
    let _ = writeln!(
        out,
        "\n{} {:>10} {:>10} {:>8} {:>12} {:>12} {:>8}",
        fit("NVTX path / kernel", name_w),
        "before",
        "after",
        "change",
        "SM eff",
        "ach occ",
        "theo"
    );
    let _ = writeln!(out, "{}", "-".repeat(name_w + 66));
    for k in keys {
        let (x, y) = (a.get(k), b.get(k));
        let get = |s: Option<&KernelStats>, f: fn(&KernelStats) -> Option<f64>| s.and_then(f);
        let label = format!("{} · {}", k.0, shown.get(&k.1).map_or(k.1.as_str(), String::as_str));
        let _ = writeln!(
            out,
            "{} {:>10} {:>10} {:>8} {:>12} {:>12} {:>8}",
            fit(&label, name_w),
            x.map_or("-".into(), |s| fmt_ns(s.total_ns)),
            y.map_or("-".into(), |s| fmt_ns(s.total_ns)),
            change(x.map_or(0, |s| s.total_ns), y.map_or(0, |s| s.total_ns)),
            format!(
                "{} {}",
                pct(get(y, |s| s.sm_efficiency_pct)),
                delta_pct(get(x, |s| s.sm_efficiency_pct), get(y, |s| s.sm_efficiency_pct))
            ),
            format!(
                "{} {}",
                pct(get(y, |s| s.achieved_occupancy_pct)),
                delta_pct(get(x, |s| s.achieved_occupancy_pct), get(y, |s| s.achieved_occupancy_pct))
            ),
            pct(get(y, |s| s.theoretical_occupancy_pct)),
        );
    }
    out
}

/// Ranges in both reports: wall time per call, utilisation, GPU idle time
/// by cause and the verdict, before -> after.
fn ranges(before: &Report, after: &Report, width: usize, out: &mut String) {
    let (a, b) = (analyze(before), analyze(after));
    let pairs: Vec<(&RangeAnalysis, &RangeAnalysis)> =
        a.ranges.iter().filter_map(|x| b.ranges.iter().find(|y| y.path == x.path).map(|y| (x, y))).collect();
    if pairs.is_empty() {
        return;
    }
    let name_w = width.saturating_sub(72).max(16);
    let _ = writeln!(
        out,
        "\n{} {:>10} {:>10} {:>8} {:>9} {:>31}",
        fit("NVTX range (per call)", name_w),
        "before",
        "after",
        "change",
        "util",
        "bound"
    );
    let _ = writeln!(out, "{}", "-".repeat(name_w + 72));
    for (x, y) in pairs {
        let per = |g: &RangeAnalysis| g.active_ns / g.count.max(1);
        let bound = if x.verdict.bound == y.verdict.bound {
            format!("{} (same)", y.verdict.bound)
        } else {
            format!("{} -> {}", x.verdict.bound, y.verdict.bound)
        };
        let _ = writeln!(
            out,
            "{} {:>10} {:>10} {:>8} {:>9} {:>31}",
            fit(&x.path, name_w),
            fmt_ns(per(x)),
            fmt_ns(per(y)),
            change(per(x), per(y)),
            format!("{:.0}->{:.0}%", x.utilization_pct, y.utilization_pct),
            bound
        );
        if let (Some(i), Some(j)) = (x.idle, y.idle) {
            let host = |s: &crate::report::IdleSplit| s.host_ns.saturating_add(s.copy_ns) / x.count.max(1);
            let host_after = j.host_ns.saturating_add(j.copy_ns) / y.count.max(1);
            if host(&i) > 0 || host_after > 0 {
                let _ =
                    writeln!(out, "    host and copy idle per call: {} -> {}", fmt_ns(host(&i)), fmt_ns(host_after));
            }
        }
    }
}
