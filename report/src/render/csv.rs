//! CSV: one row per (NVTX path, kernel name).

use crate::report::Report;

/// Most GPU time first within a path; fields quoted where needed.
pub(super) fn render(r: &Report) -> String {
    fn q(s: &str) -> String {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    }
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.2}"));
    let mut out = String::from(
        "nvtx_path,kernel,launches,total_ns,mean_ns,min_ns,max_ns,theoretical_occupancy_pct,limiter,\
         profiled_launches,achieved_occupancy_pct,sm_efficiency_pct,display_name\n",
    );
    for k in &r.path_kernels {
        let s = &k.stats;
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            q(&k.path.to_string()),
            q(&k.name),
            s.launches,
            s.total_ns,
            s.mean_ns,
            s.min_ns,
            s.max_ns,
            opt(s.theoretical_occupancy_pct),
            s.occupancy_limiter.map_or("", |l| l.as_str()),
            s.profiled_launches,
            opt(s.achieved_occupancy_pct),
            opt(s.sm_efficiency_pct),
            q(&k.display_name),
        ));
    }
    out
}
