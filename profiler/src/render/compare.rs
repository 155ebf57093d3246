//! Two reports side by side: per kernel and per NVTX path, GPU time, SM
//! efficiency and occupancy before and after, with the change.

use super::table::{fit, fmt_ns, pct, short_name};
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
    type Key = (String, String);
    let rows = |r: &Report| -> BTreeMap<Key, KernelStats> {
        r.path_kernels.iter().map(|p| ((p.path.to_string(), p.name.clone()), p.stats.clone())).collect()
    };
    let (a, b) = (rows(before), rows(after));
    let mut keys: Vec<&Key> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.sort_by_key(|k| std::cmp::Reverse(b.get(*k).or(a.get(*k)).map_or(0, |s| s.total_ns)));
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
        let label = format!("{} · {}", k.0, short_name(&k.1));
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
