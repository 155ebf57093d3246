//! Sampling mode's GPU test, in a process of its own: after CUPTI 13.0's
//! PM sampling, later sessions in the same process are refused (see
//! `Profiler::sampling`). Run as tests/gpu.rs is.

#[path = "zoo_session.rs"]
mod zoo_session;

use gpuscope::Profiler;
use zoo_session::{verdict, zoo, zoo_when};

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn sampled_figures_agree_with_metrics_mode_on_the_zoo() {
    // Every launch measured: range figures weigh all of a range's kernels.
    let (_, measured, _) =
        zoo(Profiler::new().metrics(gpuscope::MetricSet::default()).select(gpuscope::Selection::all()));
    // PM sampling takes its configurations in turn, the first for 0.5 s,
    // then each for 20 times as long as a switch took (~3 s on an H200).
    // The zoo (~0.7 s) waits until the first, which holds SM efficiency
    // and occupancy, is back: otherwise a switch can fall on its long
    // kernels and leave them without those figures.
    let back_on_first = |s: &gpuscope::Session| {
        s.snapshot().ok().and_then(|r| r.sampling).is_some_and(|st| {
            let configs = st.configs.len() as u64;
            st.disabled.is_some() || configs == 1 || (configs > 1 && st.switches > 0 && st.switches % configs == 0)
        })
    };
    let (_, sampled, a) = zoo_when(Profiler::new().sampling(std::time::Duration::from_micros(100)), &back_on_first);
    assert_eq!(sampled.mode, "sampling");
    // Kernel records on all the time: their cost measured, as in trace mode.
    let c = sampled.profiler_cost.calibration.as_ref();
    assert!(c.is_some_and(|c| c.plain_ns > 0), "calibrated: {:?}", sampled.profiler_cost);
    let st = sampled.sampling.as_ref().expect("sampling status");
    println!("{st:?}");
    assert!(st.disabled.is_none() && st.samples > 1000 && st.overflows == 0 && !st.tail_lost, "{st:?}");
    assert_eq!(st.devices, vec![0]);
    let mut failures = Vec::new();
    let mut compared = 0;
    let mut check = |what: String, m: (Option<f64>, Option<f64>), s: (Option<f64>, Option<f64>)| {
        let (Some(me), Some(mo), Some(se), Some(so)) = (m.0, m.1, s.0, s.1) else {
            failures.push(format!("{what}: missing figures measured {m:?} sampled {s:?}"));
            return;
        };
        println!("{what:<40} SM eff {me:6.2} ~{se:6.2} ({:+.2})   occ {mo:6.2} ~{so:6.2} ({:+.2})", se - me, so - mo);
        compared += 1;
        if (se - me).abs() > 3.0 || (so - mo).abs() > 3.0 {
            failures.push(format!("{what}: SM eff {me:.2} vs ~{se:.2}, occ {mo:.2} vs ~{so:.2}"));
        }
    };
    for k in sampled.kernels.iter().filter(|k| k.stats.mean_ns >= 1_000_000) {
        let m = measured.kernels.iter().find(|x| x.name == k.name).expect("the same kernel in metrics mode");
        let f = k.stats.sampled.as_ref();
        check(
            format!("kernel {}", k.display_name),
            (m.stats.sm_efficiency_pct, m.stats.achieved_occupancy_pct),
            (f.and_then(|f| f.sm_efficiency_pct), f.and_then(|f| f.achieved_occupancy_pct)),
        );
    }
    // Ranges of 10 ms or more: compared and shown. Only those whose kernel
    // time is mostly in kernels spanning several samples are held to 3
    // points; ranges of short kernels miss it (measured on an H100: `zoo`'s
    // root +16.5 points of SM efficiency, launch-bound +22 of occupancy).
    let long_kernels: std::collections::HashSet<&str> =
        sampled.kernels.iter().filter(|k| k.stats.sampled.is_some()).map(|k| k.name.as_str()).collect();
    for g in sampled.ranges.iter().filter(|g| g.wall_ns / g.count.max(1) >= 10_000_000) {
        let Some(m) = measured.ranges.iter().find(|x| x.path == g.path) else { continue };
        let (Some(me), Some(f)) = (m.sm_efficiency_pct, g.sampled.as_ref()) else { continue };
        let under: Vec<_> = sampled.path_kernels.iter().filter(|k| k.path.frames.starts_with(&g.path.frames)).collect();
        let total: u64 = under.iter().map(|k| k.stats.total_ns).sum();
        let long: u64 = under.iter().filter(|k| long_kernels.contains(k.name.as_str())).map(|k| k.stats.total_ns).sum();
        let held = total > 0 && long as f64 >= 0.9 * total as f64;
        let (se, so) = (f.sm_efficiency_pct, f.achieved_occupancy_pct);
        println!(
            "range {:<34} SM eff {me:6.2} ~{se:?}   occ {:?} ~{so:?}   {}",
            g.path.to_string(),
            m.achieved_occupancy_pct,
            if held { "(long kernels: held to 3 points)" } else { "(short kernels: shown only)" }
        );
        if held {
            check(format!("range {}", g.path), (Some(me), m.achieved_occupancy_pct), (se, so));
        }
    }
    assert!(compared >= 2, "kernels and ranges compared: {compared}; {failures:#?}; {st:?}");
    assert!(failures.is_empty(), "{failures:#?}");
    // The analysis reads sampled figures as it reads measured ones.
    let one = verdict(&a, "zoo/one block");
    assert!(one.sampled && one.sm_efficiency_pct.is_some_and(|e| e < 5.0), "{one:?}");
    // Counter tracks in the Chrome trace.
    let v: serde_json::Value = serde_json::from_str(&sampled.to_chrome_trace()).expect("chrome trace parses");
    assert!(v["traceEvents"].as_array().unwrap().iter().any(|e| e["name"] == "SM efficiency % (sampled)"));
    // A later session in this process is refused, with the reason.
    let e = Profiler::new().start().err().expect("refused after PM sampling");
    assert!(e.to_string().contains("sampling-mode session ran"), "{e}");
}
