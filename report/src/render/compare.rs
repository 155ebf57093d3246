//! Two reports side by side: per NVTX range, wall time per call,
//! utilisation and what bounds it before and after (warm-up calls left
//! out); per kernel and NVTX path, GPU time per step of the main range (per
//! second of the session without one), SM efficiency and occupancy before
//! and after, with the change. Runs of different lengths compare alike.

use super::table::{fit, pct};
use crate::analysis::{analyze, Analysis, RangeAnalysis};
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

/// What kernel time is divided by to compare runs: the calls (warm-up
/// included, as kernel totals are) of the main range when both runs have
/// it, else the session's seconds.
struct Per {
    unit: String,
    before: f64,
    after: f64,
}

fn per(before: &Report, after: &Report, a: &Analysis, b: &Analysis) -> Per {
    let main = a.answer.as_ref().and_then(|x| x.range.clone());
    let calls = |an: &Analysis, p: &str| {
        an.ranges.iter().find(|g| g.path == p).map(|g| g.count.saturating_add(g.warmup_calls) as f64)
    };
    if let Some(p) = main {
        if let (Some(x), Some(y)) = (calls(a, &p), calls(b, &p)) {
            if x > 0.0 && y > 0.0 {
                return Per { unit: format!("per call of {p}"), before: x, after: y };
            }
        }
    }
    let secs = |r: &Report| (r.end_ns.saturating_sub(r.start_ns) as f64 / 1e9).max(1e-9);
    Per { unit: "per second of session".into(), before: secs(before), after: secs(after) }
}

fn scaled(ns: u64, by: f64) -> u64 {
    (ns as f64 / by) as u64
}

/// The comparison table, at most `width` columns.
pub(super) fn render(before: &Report, after: &Report, width: usize) -> String {
    let name_w = width.saturating_sub(66).max(20);
    let mut out = String::new();
    let (a, b) = (analyze(before), analyze(after));
    let p = per(before, after, &a, &b);
    let (kb, ka) = (scaled(before.total_kernel_ns(), p.before), scaled(after.total_kernel_ns(), p.after));
    let _ = writeln!(out, "kernel time {}: {} -> {} ({})", p.unit, fmt_ns(kb), fmt_ns(ka), change(kb, ka));
    if p.before.round() != p.after.round() {
        let what = if p.unit.starts_with("per call") { "calls" } else { "seconds" };
        let _ = writeln!(
            out,
            "the runs differ in length ({:.0} {what} before, {:.0} after): kernel times below are {}",
            p.before, p.after, p.unit
        );
    }
    ranges(&a, &b, width, &mut out);
    type Key = (String, String);
    let rows = |r: &Report, by: f64| -> BTreeMap<Key, KernelStats> {
        r.path_kernels
            .iter()
            .map(|k| {
                let mut s = k.stats.clone();
                s.total_ns = scaled(s.total_ns, by);
                ((k.path.to_string(), k.name.clone()), s)
            })
            .collect()
    };
    let (a, b) = (rows(before, p.before), rows(after, p.after));
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
        fit(&format!("NVTX path / kernel ({})", p.unit), name_w),
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

/// Ranges in both analyses: wall time per call, utilisation, GPU idle time
/// by cause and the verdict, before -> after.
fn ranges(a: &Analysis, b: &Analysis, width: usize, out: &mut String) {
    let by_path: std::collections::HashMap<&str, &RangeAnalysis> =
        b.ranges.iter().filter(|y| y.library.is_none()).map(|y| (y.path.as_str(), y)).collect();
    let pairs: Vec<(&RangeAnalysis, &RangeAnalysis)> = a
        .ranges
        .iter()
        .filter(|x| x.library.is_none())
        .filter_map(|x| by_path.get(x.path.as_str()).map(|y| (x, *y)))
        .collect();
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
        // Calls after warm-up, gpuscope's own time left out.
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
