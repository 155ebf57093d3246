//! The terminal table: a header and the answer (the main step's time, what
//! bounds it, what to change first), then the details: the NVTX tree with
//! the kernels launched directly under each range, the kernels by GPU time,
//! hardware metrics, memory, then the analysis, ending with the findings.
//! Every part is bounded (the longest ranges, the heaviest kernels), so the
//! report stays readable for any program; the JSON has everything.

use super::diagnosis;
use crate::analysis::Analysis;
use crate::model::path::{RangeFrame, RangePath};
use crate::model::units::{fmt_bytes, fmt_ns};
use crate::report::*;
use rustc_hash::FxHashMap as HashMap;
use std::fmt::Write;

/// `s` padded or cut to `w` columns. A cut keeps a trailing template
/// argument (`…_kernel<MulFunctor>`) or number (`k<T> #2`) whole where it
/// leaves room for the start: that is what tells instances apart.
pub(super) fn fit(s: &str, w: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= w {
        return format!("{s:<w$}");
    }
    let tail = chars.iter().rposition(|&c| c == '<').or_else(|| chars.iter().rposition(|&c| c == '#'));
    match tail {
        Some(t) if t > 0 && chars.len() - t + 6 <= w => {
            let tail_len = chars.len() - t;
            let head: String = chars[..w - 1 - tail_len].iter().collect();
            let tail: String = chars[t..].iter().collect();
            format!("{head}…{tail}")
        }
        _ => {
            let t: String = chars[..w.saturating_sub(1)].iter().collect();
            format!("{t}…")
        }
    }
}

pub(super) fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}%"))
}

/// Width of the columns after the name, separators included.
const COLS: usize = 55;
/// Ranges the NVTX tree shows at most (the longest, with the ranges around
/// them).
pub(super) const MAX_TREE_RANGES: usize = 20;
/// Kernels shown under each range of the tree at most.
pub(super) const MAX_TREE_KERNELS: usize = 3;
/// Kernels the kernel table shows at most.
pub(super) const MAX_KERNELS: usize = 20;

/// The name cell of a row: `name` padded to `w`; a longer name is written
/// whole on a line of its own first (cut only beyond `total`), and the
/// row's figures follow on the next line under a blank cell. So no name
/// is cut where the table has room for it, and no two rows look alike.
pub(super) fn name_cell(out: &mut String, name: &str, w: usize, total: usize) -> String {
    if name.chars().count() <= w {
        return format!("{name:<w$}");
    }
    let _ = writeln!(out, "{}", fit(name, total).trim_end());
    " ".repeat(w)
}

struct Cols {
    name: usize,
    width: usize,
}

impl Cols {
    fn row(&self, out: &mut String, name: &str, c: [&str; 6]) {
        let cell = name_cell(out, name, self.name, self.width);
        let line = format!("{} {:>8} {:>9} {:>9} {:>7} {:>6} {:<10}", cell, c[0], c[1], c[2], c[3], c[4], c[5]);
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// How the counters were taken in turn, and what the chip could not give.
fn configs_note(sm: &crate::report::SamplingStatus) -> String {
    let mut out = String::new();
    if sm.configs.len() > 1 {
        let each: Vec<String> = sm.configs.iter().map(|c| format!("{} samples", c.samples)).collect();
        out.push_str(&format!(
            "; the counters do not fit one pass: {} configurations taken in turn ({}; {} switches, {} unsampled), \
             each figure from the samples that held it",
            sm.configs.len(),
            each.join(", "),
            sm.switches,
            fmt_ns(sm.switch_ns)
        ));
        if sm.failed_switches > 0 {
            out.push_str(&format!(
                "; {} tries to switch were refused by CUPTI (retried, or the configuration kept)",
                sm.failed_switches
            ));
        }
    }
    if !sm.figures_missing.is_empty() {
        out.push_str(&format!("; not collected on this GPU: {} (shown as -)", sm.figures_missing.join(", ")));
    }
    out
}

/// Sampling paused for metrics passes on demand.
fn paused_note(sm: &crate::report::SamplingStatus) -> String {
    if sm.paused_ns == 0 {
        return String::new();
    }
    format!("; paused {} for metrics passes on demand (no sample covers it)", fmt_ns(sm.paused_ns))
}

/// What became of the last samples at exit.
fn exit_note(sm: &crate::report::SamplingStatus) -> String {
    match (sm.tail_lost, sm.exit_samples) {
        (true, 0) => "; the session ended at exit before gpuscope's exit handler could decode: the samples not \
                      yet decoded were lost"
            .to_string(),
        (true, n) => format!(
            "; at exit {n} samples were decoded in {} and the rest lost (bound {})",
            fmt_ns(sm.exit_decode_ns),
            fmt_ns(crate::model::sampled::EXIT_DECODE_BOUND.as_nanos() as u64)
        ),
        (false, n) if n > 0 => format!("; the last {n} samples were decoded at exit ({})", fmt_ns(sm.exit_decode_ns)),
        _ => String::new(),
    }
}

/// Renders the report and its analysis at most `width` columns wide (at
/// least 80).
pub fn render(r: &Report, a: &Analysis, width: usize) -> String {
    let width = width.max(80);
    // As wide as the longest name needs (with a tree's indent), no wider.
    let longest = r.kernels.iter().map(|k| k.display_name.chars().count() + 8).max().unwrap_or(0);
    let cols = Cols { name: longest.clamp(80 - COLS, width - COLS), width };
    let mut out = String::new();
    let launches = crate::model::units::saturating_sum(r.kernels.iter().map(|k| k.stats.launches));
    let devices: Vec<String> =
        r.devices.iter().map(|d| format!("GPU {} {} ({} SMs)", d.id, d.name, d.sm_count)).collect();
    // Launches counted between trace windows (`None`: none, or a report of
    // an older gpuscope).
    let counted = r.sampling.as_ref().and_then(|s| s.trace_windows.as_ref()).and_then(|w| w.untraced_launches);
    let session = fmt_ns(r.end_ns.saturating_sub(r.start_ns));
    let head = match counted {
        // Trace windows of 0: counted, never recorded; kernel time unknown.
        Some(n) if r.kernels.is_empty() => format!(
            "gpuscope {}: {session} session, {n} kernel launches counted without kernel records (no kernel time)",
            r.mode
        ),
        _ => format!(
            "gpuscope {}: {session} session, {} kernel launches ({} distinct{}), kernel time {}",
            r.mode,
            launches,
            r.kernels.len(),
            counted.map_or(String::new(), |n| format!("; {n} more counted between trace windows")),
            fmt_ns(r.total_kernel_ns())
        ),
    };
    out.push_str(&diagnosis::wrap(&head, width, "", "  "));
    if !a.devices.is_empty() {
        // A process that drove several GPUs: each one's own busy time.
        let _ = writeln!(out, "devices:");
        for u in &a.devices {
            let sms = r.devices.iter().find(|d| d.id == u.device).map(|d| format!(" ({} SMs)", d.sm_count));
            let head = format!("  GPU {} {}{}: ", u.device, u.name.as_deref().unwrap_or("?"), sms.unwrap_or_default());
            let _ = write!(out, "{}", diagnosis::wrap(&u.describe(), width, &head, "    "));
        }
    } else if !devices.is_empty() {
        let _ = writeln!(out, "devices: {}", devices.join(", "));
    }
    let _ = writeln!(out, "{}", drops_line(&r.drops));
    if let Some(ans) = &a.answer {
        super::answer::render(ans, width, &mut out);
    }
    let _ = writeln!(out, "\n== Details");
    let x = &r.cross_thread;
    if x.kernels > 0 {
        let text = format!(
            "{} kernels ({} of GPU time) were launched on threads with no NVTX range of their own and are shown \
             under the ranges of the thread that waited for them (--cross-thread-ranges off keeps them apart)",
            x.kernels,
            fmt_ns(x.kernel_ns)
        );
        let _ = writeln!(out, "{}", diagnosis::wrap(&text, width, "threads: ", "  "));
    }
    if let Some(sm) = &r.sampling {
        let text = match &sm.disabled {
            Some(why) if sm.samples == 0 => format!("off ({why})"),
            _ => format!(
                "GPU busy, SM efficiency, occupancy, compute and DRAM figures marked ~ come from PM samples every {} \
                 on {} device(s) ({} samples, {} overflows, {} expired; decoding took {} on gpuscope's thread); \
                 kernels spanning fewer than {} samples have range-level figures only{}{}{}{}",
                fmt_ns(sm.interval_ns),
                sm.devices.len(),
                sm.samples,
                sm.overflows,
                sm.samples_expired,
                fmt_ns(sm.decode_ns),
                sm.min_kernel_samples,
                configs_note(sm),
                paused_note(sm),
                sm.disabled.as_ref().map_or(String::new(), |w| format!("; stopped early: {w}")),
                exit_note(sm),
            ),
        };
        let _ = writeln!(out, "{}", diagnosis::wrap(&text, width, "sampled: ", "  "));
        if let Some(w) = &sm.trace_windows {
            let untraced = crate::model::units::saturating_sum(r.ranges.iter().map(|g| g.untraced_count));
            let from = match w.untraced_launches {
                Some(n) => format!("PM samples over their wall time and launch counts ({n} launches counted untraced)"),
                None => "PM samples over their wall time only".to_string(),
            };
            let text = if w.window_ns == 0 && w.on_demand == 0 {
                format!(
                    "no kernel records (trace windows of 0): no kernel table, GPU time or idle time; the {untraced} \
                     range instances have figures from {from}"
                )
            } else if w.window_ns == 0 {
                format!(
                    "kernel records only in {} window(s) asked for while the process ran ({} of {} traced): kernel \
                     tables, GPU time and idle time are of those windows; {untraced} range instances touched \
                     untraced time and count apart (+N untraced), with figures from {from}",
                    w.on_demand,
                    fmt_ns(w.traced_ns),
                    fmt_ns(w.traced_ns.saturating_add(w.untraced_ns))
                )
            } else {
                format!(
                    "kernel records only in the first {} of every {} ({} windows{}, {} of {} traced): kernel tables, \
                     GPU time and idle time are of the traced windows; {} range instances touched untraced time and \
                     count apart (+N untraced), with figures from {from}",
                    fmt_ns(w.window_ns),
                    fmt_ns(w.period_ns),
                    w.windows,
                    if w.on_demand > 0 { format!(", {} asked for on demand", w.on_demand) } else { String::new() },
                    fmt_ns(w.traced_ns),
                    fmt_ns(w.traced_ns.saturating_add(w.untraced_ns)),
                    untraced
                )
            };
            let _ = writeln!(out, "{}", diagnosis::wrap(&text, width, "traced: ", "  "));
        }
        if let Some(why) = &sm.trace_windows_off {
            let _ = writeln!(out, "{}", diagnosis::wrap(&format!("every kernel: {why}"), width, "traced: ", "  "));
        }
    }
    if let Some(idle) = &r.idle {
        // With periodic trace windows the idle time is the windows', and
        // only between kernels that fell in one.
        let periodic = r.sampling.as_ref().and_then(|m| m.trace_windows.as_ref()).filter(|w| w.periodic());
        let line = match periodic {
            Some(w) => format!(
                "in the trace windows (gaps across a window's edge not classified): {}",
                diagnosis::idle_line(idle, w.traced_ns)
            ),
            None => format!("session: {}", diagnosis::idle_line(idle, r.timeline_ns())),
        };
        out.push_str(&diagnosis::wrap(&line, width, "", "  "));
    }
    // A range's utilisation as nvidia-smi would show it: any kernel of the
    // process counts (schema 2), not only the range's own. Analyses are in
    // the report's range order.
    let aligned = a.ranges.len() == r.ranges.len();
    let util = |i: usize| a.ranges.get(i).filter(|_| aligned);

    // The NVTX tree: the program's own ranges, libraries' and frameworks'
    // folded into the range around them.
    let own: Vec<(usize, &RangeSummary)> = r.ranges.iter().enumerate().filter(|(_, g)| g.library.is_none()).collect();
    let folded = r.ranges.len() - own.len();
    if !own.is_empty() || r.path_kernels.iter().any(|p| !p.path.is_empty()) {
        let _ = writeln!(out);
        cols.row(&mut out, "NVTX range / kernel", ["launches", "GPU time", "wall", "util", "occ", "limiter"]);
        let _ = writeln!(out, "{}", "-".repeat(width.min(cols.name + COLS)));
        // Looked up by path, not searched: a program with a range per step
        // has thousands of paths.
        let mut by_path: HashMap<&[RangeFrame], &RangeSummary> =
            HashMap::with_capacity_and_hasher(own.len(), Default::default());
        by_path.extend(own.iter().map(|(_, g)| (&g.path.frames[..], *g)));
        let shown = tree_shown(&own, &by_path);
        let shown_frames: rustc_hash::FxHashSet<&[RangeFrame]> = shown.iter().map(|p| &p.frames[..]).collect();
        // Kernels by the program's range they ran under: only for the rows
        // the table has (shown ranges, kernels outside any range, and under
        // paths with no range of their own).
        let mut under: HashMap<&[RangeFrame], Vec<(&str, KernelStats)>> = HashMap::default();
        for k in &r.path_kernels {
            let at = k.path.user_frames();
            if !(at.is_empty() || shown_frames.contains(at) || !by_path.contains_key(at)) {
                continue;
            }
            let list = under.entry(at).or_default();
            match list.iter_mut().find(|(n, _)| *n == k.display_name) {
                Some((_, s)) => {
                    s.launches = s.launches.saturating_add(k.stats.launches);
                    s.total_ns = s.total_ns.saturating_add(k.stats.total_ns);
                }
                None => list.push((&k.display_name, k.stats.clone())),
            }
        }
        let mut order: Vec<(usize, &RangeSummary)> =
            own.iter().copied().filter(|(_, g)| shown.contains(&&g.path)).collect();
        order.sort_by_cached_key(|(_, g)| tree_key(&by_path, &g.path));
        // Rows' indentation by path (ancestors print first, in tree order).
        let mut row_depth: rustc_hash::FxHashMap<&[RangeFrame], usize> = Default::default();
        for (i, g) in order {
            let frames = &g.path.frames[..];
            // Under its nearest ancestor with a row: the frames below that
            // one make its name (all of them where no ancestor has a row),
            // so a row never reads as nested in the row printed before it.
            let parent = (1..frames.len()).rev().find(|&n| shown_frames.contains(&frames[..n]));
            let depth = parent.map_or(0, |n| row_depth.get(&frames[..n]).map_or(n, |d| d + 1));
            row_depth.insert(frames, depth);
            let leaf = frames[parent.unwrap_or(0)..].iter().map(RangeFrame::to_string).collect::<Vec<_>>().join("/");
            let calls = match (g.count, g.untraced_count) {
                (c, 0) if c > 1 => format!(" (x{c})"),
                (_, 0) => String::new(),
                (0, u) => format!(" (x{u} untraced)"),
                (c, u) => format!(" (x{c} +{u} untraced)"),
            };
            let name = format!("{}{}{}", "  ".repeat(depth), leaf, calls);
            let columns = if g.count == 0 && g.untraced_count > 0 {
                // Never traced: its counted launches and wall time; GPU
                // time and utilisation need kernel records.
                let launches = if counted.is_some() { g.untraced_launches.to_string() } else { "-".to_string() };
                [launches, "-".to_string(), fmt_ns(g.untraced_wall_ns), "-".to_string()]
            } else {
                let util = util(i).map_or(g.gpu_utilization_pct, |x| x.utilization_pct);
                [g.kernel_launches.to_string(), fmt_ns(g.gpu_busy_ns), fmt_ns(g.wall_ns), format!("{util:.0}%")]
            };
            let [launches, gpu, wall, util] = &columns;
            cols.row(&mut out, &name, [launches, gpu, wall, util, "", ""]);
            kernel_rows(&cols, &mut out, &"  ".repeat(depth + 1), &sorted(under.get(&g.path.frames[..])));
        }
        let hidden = own.len() - shown.len();
        if hidden > 0 {
            let _ = writeln!(out, "({hidden} shorter ranges not shown; the JSON report has every one)");
        }
        if folded > 0 {
            let text = format!(
                "{folded} ranges of libraries' and frameworks' NVTX domains (cuBLAS, CCCL, XLA's TSL, ...) are folded \
                 into the ranges around them"
            );
            out.push_str(&diagnosis::wrap(&text, width, "", "  "));
        }
        let mut orphans: Vec<&[RangeFrame]> =
            under.keys().copied().filter(|p| !p.is_empty() && !by_path.contains_key(p)).collect();
        orphans.sort();
        for p in orphans.into_iter().take(MAX_TREE_RANGES) {
            cols.row(&mut out, &RangePath { frames: p.to_vec() }.to_string(), ["", "", "", "", "", ""]);
            kernel_rows(&cols, &mut out, "  ", &sorted(under.get(p)));
        }
        if let Some(outside) = under.get(&[][..]) {
            cols.row(&mut out, "(no range)", ["", "", "", "", "", ""]);
            kernel_rows(&cols, &mut out, "  ", &sorted(Some(outside)));
        }
    }

    // Kernels by GPU time.
    let _ = writeln!(out);
    cols.row(&mut out, "kernel", ["launches", "GPU time", "mean", "max", "occ", "limiter"]);
    let _ = writeln!(out, "{}", "-".repeat(width.min(cols.name + COLS)));
    for k in r.kernels.iter().take(MAX_KERNELS) {
        let s = &k.stats;
        cols.row(
            &mut out,
            &k.display_name,
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
    if r.kernels.len() > MAX_KERNELS {
        let rest = &r.kernels[MAX_KERNELS..];
        let ns = crate::model::units::saturating_sum(rest.iter().map(|k| k.stats.total_ns));
        let _ = writeln!(out, "({} more kernels, {} of GPU time, in the JSON report)", rest.len(), fmt_ns(ns));
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
            let _ = write!(line, ", {} discarded (the ranges CUPTI decoded did not match the launches measured; GPUSCOPE_DEBUG=1 says how)", ms.mismatches);
        }
        if ms.skipped_graph_launches > 0 {
            let _ = write!(line, ", {} graph launches not measured", ms.skipped_graph_launches);
        }
        out.push_str(&diagnosis::wrap(&line, width, "", "  "));
        let t = &ms.time_ns;
        if ms.profiled_launches > 0 {
            let line = format!(
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
            out.push_str(&diagnosis::wrap(&line, width, "", "  "));
        }
        if r.profiler_kernels > 0 {
            let line = format!(
                "CUPTI ran {} kernels of its own for these measurements ({} of GPU time), left out of the tables",
                r.profiler_kernels,
                fmt_ns(r.profiler_kernel_ns)
            );
            out.push_str(&diagnosis::wrap(&line, width, "", "  "));
        }
        if let Some(why) = &ms.disabled {
            out.push_str(&diagnosis::wrap(&format!("metrics missing: {why}"), width, "", "  "));
        }
        let measured: Vec<&KernelSummary> = r.kernels.iter().filter(|k| k.stats.profiled_launches > 0).collect();
        if !measured.is_empty() {
            cols.row(&mut out, "kernel", ["measured", "GPU time", "SM eff", "ach occ", "theo", "limiter"]);
            let _ = writeln!(out, "{}", "-".repeat(width.min(cols.name + COLS)));
            for k in measured {
                let s = &k.stats;
                cols.row(
                    &mut out,
                    &k.display_name,
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
        let main = match (m.main_thread_synchronizations, m.main_thread_synchronization_ns) {
            (Some(n), Some(ns)) if n < m.synchronizations => {
                format!(" ({n} on the main thread, {}; the rest on other threads)", fmt_ns(ns))
            }
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "host waits: {} synchronizations, {}{main}",
            m.synchronizations,
            fmt_ns(m.synchronization_ns)
        );
    }
    for d in &m.devices {
        let total = r.devices.iter().find(|x| x.id == d.device).and_then(|x| x.memory_bytes);
        let of = match total {
            Some(t) if t > 0 => format!(" of {} ({:.0}%)", fmt_bytes(t), 100.0 * d.peak_live_bytes as f64 / t as f64),
            _ => String::new(),
        };
        let at = fmt_ns(d.peak_ns.saturating_sub(r.start_ns));
        let statics = if d.static_peak_bytes > 0 {
            format!(" ({} of it static: loaded modules' variables)", fmt_bytes(d.static_peak_bytes))
        } else {
            String::new()
        };
        let earlier = if d.earlier_releases > 0 {
            format!("; {} releases of memory allocated before the session", d.earlier_releases)
        } else {
            String::new()
        };
        let line = format!(
            "GPU {} memory: peak {}{of} allocated at {at}{statics}; {} allocations ({}), {} releases; {} live at the \
             end{earlier}",
            d.device,
            fmt_bytes(d.peak_live_bytes),
            d.allocations,
            fmt_bytes(d.allocated_bytes),
            d.releases,
            fmt_bytes(d.live_at_end_bytes),
        );
        out.push_str(&diagnosis::wrap(&line, width, "", "  "));
        if !d.held_at_peak.is_empty() {
            let held: Vec<String> = d
                .held_at_peak
                .iter()
                .map(|h| {
                    let p = if h.path.is_empty() { "(no range)" } else { h.path.as_str() };
                    format!("{p} {}", fmt_bytes(h.bytes))
                })
                .collect();
            let line = format!("  held at the peak by the ranges that allocated it: {}", held.join(", "));
            out.push_str(&diagnosis::wrap(&line, width, "", "    "));
        }
        if !d.held_at_peak_by_library.is_empty() {
            let held: Vec<String> =
                d.held_at_peak_by_library.iter().map(|h| format!("{} {}", h.library, fmt_bytes(h.bytes))).collect();
            let line = format!("  and by the library that allocated it: {}", held.join(", "));
            out.push_str(&diagnosis::wrap(&line, width, "", "    "));
        }
    }
    range_memory(r, width, &mut out);
    diagnosis::render(a, width, &mut out);
    out
}

/// Ranges shown in the device memory section at most (the outermost
/// first).
const MAX_MEMORY_RANGES: usize = 12;

/// Device memory per range: the outer ranges' peaks, what their calls
/// allocated and released, and a framework allocator's figures.
fn range_memory(r: &Report, width: usize, out: &mut String) {
    let mut rows: Vec<&RangeSummary> =
        r.ranges.iter().filter(|g| g.memory.is_some() && g.library.is_none() && g.path.frames.len() <= 2).collect();
    if rows.is_empty() {
        return;
    }
    rows.sort_by(|a, b| a.path.frames.len().cmp(&b.path.frames.len()).then(a.path.cmp(&b.path)));
    out.push_str(&diagnosis::wrap(
        "device memory by range (peak live while open; allocated / released by its calls):",
        width,
        "",
        "  ",
    ));
    for g in rows.into_iter().take(MAX_MEMORY_RANGES) {
        let Some(m) = &g.memory else { continue };
        let name: Vec<&str> = g.path.frames.iter().map(|f| f.name.as_str()).collect();
        let mut line = format!(
            "  {}: peak {}, {} at the end; {} allocated, {} released",
            name.join("/"),
            fmt_bytes(m.peak_live_bytes),
            fmt_bytes(m.live_at_end_bytes),
            fmt_bytes(m.allocated_bytes),
            fmt_bytes(m.released_bytes)
        );
        if let Some(f) = &m.framework {
            let inside = f.peak_inside_bytes.map_or_else(
                || format!("under the high-water mark {}", fmt_bytes(f.peak_allocated_bytes)),
                |p| format!("peak {} reached inside", fmt_bytes(p)),
            );
            line.push_str(&format!(
                "; PyTorch: {} in tensors at the end (+{} most over a call), {inside}, {} held",
                fmt_bytes(f.allocated_at_end_bytes),
                fmt_bytes(f.max_growth_bytes),
                fmt_bytes(f.reserved_at_end_bytes)
            ));
        }
        out.push_str(&diagnosis::wrap(&line, width, "", "    "));
    }
}

/// The heaviest kernels of a range, and one line for the rest.
fn kernel_rows(cols: &Cols, out: &mut String, indent: &str, kernels: &[(&str, KernelStats)]) {
    for (name, s) in kernels.iter().take(MAX_TREE_KERNELS) {
        cols.row(
            out,
            &format!("{indent}· {name}"),
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
    if kernels.len() > MAX_TREE_KERNELS {
        let rest = &kernels[MAX_TREE_KERNELS..];
        let (n, ns) = rest
            .iter()
            .fold((0u64, 0u64), |(n, t), (_, s)| (u64::saturating_add(n, s.launches), t.saturating_add(s.total_ns)));
        let line = format!("{indent}· ({} more kernels)", rest.len());
        cols.row(out, &line, [&n.to_string(), &fmt_ns(ns), "", "", "", ""]);
    }
}

/// The ranges the tree shows: the longest [`MAX_TREE_RANGES`] and the
/// ranges around them.
fn tree_shown<'a>(
    own: &[(usize, &'a RangeSummary)],
    by_path: &HashMap<&[RangeFrame], &'a RangeSummary>,
) -> rustc_hash::FxHashSet<&'a RangePath> {
    let mut by_wall: Vec<&RangeSummary> = own.iter().map(|(_, g)| *g).collect();
    by_wall.sort_by_key(|g| std::cmp::Reverse(g.wall_ns.saturating_add(g.untraced_wall_ns)));
    let mut shown = rustc_hash::FxHashSet::default();
    for g in by_wall {
        if shown.len() >= MAX_TREE_RANGES {
            break;
        }
        shown.insert(&g.path);
        for n in 1..g.path.frames.len() {
            if let Some(p) = by_path.get(&g.path.frames[..n]) {
                shown.insert(&p.path);
            }
        }
    }
    shown
}

/// Sort key putting children after parents, siblings by GPU time (widest
/// first).
fn tree_key(by_path: &HashMap<&[RangeFrame], &RangeSummary>, p: &RangePath) -> Vec<(std::cmp::Reverse<u64>, String)> {
    (1..=p.frames.len())
        .map(|n| {
            let busy = by_path.get(&p.frames[..n]).map_or(0, |g| g.gpu_busy_ns);
            (std::cmp::Reverse(busy), p.frames[n - 1].name.clone())
        })
        .collect()
}

/// A range's kernels, most GPU time first (sorted only for the ranges
/// shown).
fn sorted<'a>(list: Option<&Vec<(&'a str, KernelStats)>>) -> Vec<(&'a str, KernelStats)> {
    let mut v = list.cloned().unwrap_or_default();
    v.sort_by_key(|k| std::cmp::Reverse(k.1.total_ns));
    v
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
    add(d.late_kernels, "kernels later than their idle time was decided");
    add(d.ranges_over_path_cap, "ranges past the path cap (as one range)");
    add(d.callback_panics, "panics caught in gpuscope's callbacks");
    add(d.graph_nodes_over_cap, "CUDA graph nodes past the table cap (kernels kept at their launch's ranges)");
    add(d.comm_messages_unmatched, "NCCL calls whose message size reached no kernel (no bandwidth for them)");
    add(d.live_allocations_over_cap, "device allocations past the live table cap (not in the live bytes)");
    add(d.range_memory_partial, "range calls whose device memory peak missed changes dropped for room");
    add(d.devices_over_cap, "kernels of GPUs past the 64th (no per-device figures)");
    add(
        d.window_cut_graph_kernels,
        "CUDA graph kernels launched before a trace window closed that ran past it (no true end)",
    );
    format!("dropped: {}", parts.join(", "))
}
