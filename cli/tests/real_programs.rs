//! `gpuscope run` on programs that were not written for gpuscope, on a GPU
//! machine with `nvcc` and PyTorch: a CUDA C++ program built here, one that
//! resets the device before it exits, a PyTorch training loop, and a
//! PyTorch process that forks. Each asserts kernel counts and NVTX paths in
//! the report the run wrote.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{gpuscope, scratch};

fn example(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples").join(rel)
}

/// Builds a CUDA example with nvcc (on PATH, or in /usr/local/cuda/bin).
fn nvcc(src: &str, out: &str) -> PathBuf {
    let exe = scratch(out);
    let nvcc = ["nvcc", "/usr/local/cuda/bin/nvcc"]
        .into_iter()
        .find(|n| Command::new(n).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("nvcc (CUDA toolkit) for this test");
    let st = Command::new(nvcc).args(["-O2", "-o"]).arg(&exe).arg(example(src)).arg("-ldl").status().unwrap();
    assert!(st.success(), "nvcc {src}");
    exe
}

/// Runs `gpuscope run ARGS -o REPORT -- CMD`, checks the exit code, and
/// returns the report.
fn run(report: &str, args: &[&str], cmd: &[&str]) -> Value {
    run_with(report, args, cmd, &[])
}

/// [`run`] with environment variables for the program.
fn run_with(report: &str, args: &[&str], cmd: &[&str], env: &[(&str, &str)]) -> Value {
    let out = scratch(report);
    let _ = std::fs::remove_file(&out);
    let o = gpuscope()
        .arg("run")
        .args(args)
        .arg("-o")
        .arg(&out)
        .arg("--")
        .args(cmd)
        .env("GPUSCOPE_QUIET", "1")
        .envs(env.iter().copied())
        .output()
        .expect("gpuscope runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    println!("{stdout}\n{stderr}");
    assert_eq!(o.status.code(), Some(0), "exit code passed through");
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display())))
        .expect("report parses")
}

/// "path frames joined by /" (domain ranges as `domain::name`).
fn path(p: &Value) -> String {
    let frames = p["path"]["frames"].as_array().cloned().unwrap_or_default();
    // `--torch-ranges`' own ranges (the gpuscope.hooks domain) are shown
    // without their domain's name, as the report renders them.
    let name = |f: &Value| match f["domain"].as_str() {
        Some(d) if !d.is_empty() && d != "gpuscope.hooks" => format!("{d}::{}", f["name"].as_str().unwrap_or("")),
        _ => f["name"].as_str().unwrap_or("").to_string(),
    };
    frames.iter().map(name).collect::<Vec<_>>().join("/")
}

fn launches_by_path_and_kernel(r: &Value) -> Vec<(String, String, u64)> {
    let mut v: Vec<_> = r["path_kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (path(p), p["name"].as_str().unwrap().to_string(), p["launches"].as_u64().unwrap()))
        .collect();
    v.sort();
    v
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_cuda_cpp_program_is_profiled_through_injection_with_its_nvtx3_ranges() {
    let app = nvcc("cuda/app.cu", "gpuscope-app");
    let r = run("cuda-app.json", &[], &[app.to_str().unwrap()]);
    assert_eq!(
        launches_by_path_and_kernel(&r),
        vec![
            ("app/step/io::add".into(), "add(float const*, float*, int)".into(), 5),
            ("app/step/scale".into(), "scale(float*, float, int)".into(), 5),
        ]
    );
    assert_eq!(r["drops"]["unattributed_kernels"], 0, "{}", r["drops"]);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn records_are_taken_out_before_cuda_device_reset_destroys_the_context() {
    let app = nvcc("cuda/reset.cu", "gpuscope-reset");
    for mode in ["trace", "metrics"] {
        let r = run(&format!("reset-{mode}.json"), &["--mode", mode], &[app.to_str().unwrap()]);
        let launches = launches_by_path_and_kernel(&r);
        assert_eq!(launches, vec![("".into(), "k(int*)".into(), 7)], "mode {mode}");
        if mode == "metrics" {
            let measured: u64 = r["path_kernels"][0]["profiled_launches"].as_u64().unwrap_or(0);
            assert_eq!(measured, 3, "default selection: the first 3 launches, decoded before the reset");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_pytorch_training_loop_gets_measured_kernels_under_its_nvtx_ranges() {
    let script = example("python/train_loop.py");
    let r = run("torch.json", &["--mode", "metrics"], &["python3", script.to_str().unwrap()]);
    let m = &r["metrics"];
    println!("metrics status: {m}");
    assert!(m["disabled"].is_null(), "metrics were switched off: {}", m["disabled"]);
    assert_eq!(m["mismatches"], 0);
    let mut launches = std::collections::BTreeMap::<String, (u64, u64)>::new();
    for p in r["path_kernels"].as_array().unwrap() {
        let e = launches.entry(path(p)).or_default();
        e.0 += p["launches"].as_u64().unwrap();
        e.1 += p["profiled_launches"].as_u64().unwrap_or(0);
        if p["profiled_launches"].as_u64().unwrap_or(0) > 0 {
            let occ = p["achieved_occupancy_pct"].as_f64().expect("measured kernels have achieved occupancy");
            let eff = p["sm_efficiency_pct"].as_f64().expect("and SM efficiency");
            assert!((0.0..=100.5).contains(&occ) && (0.0..=100.5).contains(&eff), "{p}");
        }
    }
    println!("launches (measured) per NVTX path: {launches:?}");
    // Backward kernels run on PyTorch's autograd thread and are attributed
    // to the main thread's "step/backward" (cross-thread attribution).
    for ph in ["step/forward", "step/backward", "step/optimizer"] {
        let (n, measured) = launches.get(ph).copied().unwrap_or_default();
        assert!(n > 0 && measured > 0, "{ph}: {n} launches, {measured} measured");
    }
    // cuBLAS GEMMs (the linear layers) are among the measured kernels.
    let gemm = r["path_kernels"].as_array().unwrap().iter().any(|p| {
        let n = p["name"].as_str().unwrap_or("").to_lowercase();
        (n.contains("gemm") || n.contains("cutlass") || n.contains("sm90")) && p["profiled_launches"].as_u64() > Some(0)
    });
    assert!(gemm, "no measured GEMM kernel");
}

/// GPU time of the kernels under a path prefix (`""`: outside every range).
fn gpu_ns_under(r: &Value, prefix: &str) -> u64 {
    r["path_kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            let q = path(p);
            if prefix.is_empty() {
                q.is_empty()
            } else {
                q == prefix || q.starts_with(&format!("{prefix}/"))
            }
        })
        .map(|p| p["total_ns"].as_u64().unwrap())
        .sum()
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_pytorch_loop_under_trace_windows_is_traced_part_of_the_time_and_sampled_all_of_it() {
    let script = example("python/gpt_train.py");
    let cmd = ["python3", script.to_str().unwrap()];
    let (warmup, steps) = (5u64, 300u64);
    let env = [("STEPS", "300"), ("WARMUP", "5")];
    let r = run_with("gpt-windows.json", &["--mode", "sampling", "--trace-windows", "100/500"], &cmd, &env);
    let st = &r["sampling"];
    let w = &st["trace_windows"];
    println!("sampling {st}");
    if let Some(why) = st["trace_windows_off"].as_str() {
        // CUPTI 12: windows refused, every kernel traced, the report says why.
        assert!(why.contains("CUPTI 13") && w.is_null(), "{st}");
        let step = r["ranges"].as_array().unwrap().iter().find(|g| path(g) == "step").expect("the step range");
        assert_eq!(step["count"].as_u64(), Some(warmup + steps), "every step traced: {step}");
        return;
    }
    let (traced, untraced) = (w["traced_ns"].as_u64().unwrap(), w["untraced_ns"].as_u64().unwrap());
    let share = traced as f64 / (traced + untraced) as f64;
    assert!(w["windows"].as_u64().unwrap() >= 4, "{w}");
    assert!((0.12..=0.35).contains(&share), "traced {share:.3} of the session, asked 100 of 500 ms");
    // Trace windows sample every 1 ms unless told.
    assert_eq!(st["interval_ns"], 1_000_000, "{st}");
    assert!(st["overflows"] == 0, "{st}");
    let step = r["ranges"].as_array().unwrap().iter().find(|g| path(g) == "step").expect("the step range");
    let (n, nu) = (step["count"].as_u64().unwrap(), step["untraced_count"].as_u64().unwrap_or(0));
    // Sampled all the time: the steps' wall time, traced or not, is
    // covered by samples (the session's start, before the first launch,
    // is not: sampling begins there).
    let steps_wall = step["wall_ns"].as_u64().unwrap() + step["untraced_wall_ns"].as_u64().unwrap_or(0);
    let samples = st["samples"].as_u64().unwrap();
    assert!(samples as f64 >= 0.9 * steps_wall as f64 / 1e6, "{samples} samples over {steps_wall} ns of steps");
    println!("step: {n} traced + {nu} untraced instances; sampled over wall {}", step["sampled_wall"]);
    assert_eq!(n + nu, warmup + steps, "every step is counted, traced or not");
    assert!(n >= 20 && nu >= steps / 2, "{n} traced, {nu} untraced");
    let covered = step["sampled_wall"]["covered_ns"].as_u64().unwrap();
    assert!(covered as f64 >= 0.9 * steps_wall as f64, "{covered} of {steps_wall} ns of steps sampled");
    // Per traced step, the launches of a full trace (~261); none were
    // attributed to steps that were not traced.
    let per_step = step["kernel_launches"].as_u64().unwrap() as f64 / n as f64;
    assert!((200.0..=330.0).contains(&per_step), "{per_step} launches per traced step");
    // Untraced steps' launches are counted too: per step, traced or not,
    // the same ~261.
    let all = step["kernel_launches"].as_u64().unwrap() + step["untraced_launches"].as_u64().unwrap_or(0);
    let per_any_step = all as f64 / (n + nu) as f64;
    assert!((200.0..=330.0).contains(&per_any_step), "{per_any_step} launches per step, traced or not");
    let launches: u64 = r["kernels"].as_array().unwrap().iter().map(|k| k["launches"].as_u64().unwrap()).sum();
    assert!(launches as f64 <= 0.5 * 261.0 * (warmup + steps) as f64, "{launches} kernels recorded");
    assert!(r["drops"]["unattributed_kernels"].as_u64().unwrap() * 100 <= launches, "{}", r["drops"]);
    // Untraced time is not called idle: busy and idle fit the traced time.
    let idle: u64 = ["host_ns", "launch_ns", "sync_ns", "copy_ns", "profiler_ns", "other_ns"]
        .iter()
        .map(|k| r["idle"][k].as_u64().unwrap_or(0))
        .sum();
    assert!(idle <= traced, "idle {idle} ns of {traced} ns traced");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_pytorch_loop_under_windows_of_zero_has_no_kernel_records_and_sampled_ranges() {
    let script = example("python/gpt_train.py");
    let cmd = ["python3", script.to_str().unwrap()];
    let (warmup, steps) = (5u64, 100u64);
    let env = [("STEPS", "100"), ("WARMUP", "5")];
    let r = run_with("gpt-windows-0.json", &["--mode", "sampling", "--trace-windows", "0/1000"], &cmd, &env);
    let st = &r["sampling"];
    let w = &st["trace_windows"];
    println!("sampling {st}");
    assert_eq!((w["window_ns"].as_u64(), w["windows"].as_u64(), w["traced_ns"].as_u64()), (Some(0), Some(0), Some(0)));
    assert!(st["overflows"] == 0 && st["interval_ns"] == 1_000_000, "{st}");
    // Kernel records were never on: no kernel, nothing dropped for them.
    assert_eq!(r["kernels"].as_array().map(Vec::len), Some(0), "{}", r["kernels"]);
    assert_eq!(r["drops"]["cupti_records"], 0, "{}", r["drops"]);
    let step = r["ranges"].as_array().unwrap().iter().find(|g| path(g) == "step").expect("the step range");
    println!("step {step}");
    assert_eq!(step["count"], 0, "no step was traced");
    assert_eq!(step["untraced_count"].as_u64(), Some(warmup + steps), "every step counted");
    let wall = step["untraced_wall_ns"].as_u64().unwrap();
    let f = &step["sampled_wall"];
    assert!(f["covered_ns"].as_u64().unwrap() as f64 >= 0.9 * wall as f64, "{f} over {wall} ns");
    let eff = f["sm_efficiency_pct"].as_f64().unwrap();
    assert!(eff > 0.0 && eff <= 100.0, "{f}");
    // Launches are counted without records: ~261 per step, as a full
    // trace records, and the session's count holds every step's.
    let per_step = step["untraced_launches"].as_u64().unwrap() as f64 / (warmup + steps) as f64;
    assert!((200.0..=330.0).contains(&per_step), "{per_step} launches per step");
    let counted = w["untraced_launches"].as_u64().expect("launches counted between windows");
    assert!(counted >= step["untraced_launches"].as_u64().unwrap(), "{w}");
    assert_eq!(r["drops"]["host_events"], 0, "{}", r["drops"]);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_backward_pass_launched_by_autograds_thread_is_under_the_loops_backward_range() {
    let script = example("python/gpt_train.py");
    let cmd = ["python3", script.to_str().unwrap()];
    let strict = run("gpt-strict.json", &["--cross-thread-ranges", "off"], &cmd);
    let r = run("gpt.json", &[], &cmd);
    let total: u64 = r["kernels"].as_array().unwrap().iter().map(|k| k["total_ns"].as_u64().unwrap()).sum();
    let (backward, outside) = (gpu_ns_under(&r, "step/backward"), gpu_ns_under(&r, ""));
    // Strictly per thread, the backward pass is outside every range: its
    // GPU time is what "(no range)" gains there.
    let strict_backward = gpu_ns_under(&strict, "step/backward");
    let strict_outside = gpu_ns_under(&strict, "");
    let strict_total: u64 = strict["kernels"].as_array().unwrap().iter().map(|k| k["total_ns"].as_u64().unwrap()).sum();
    let backward_share_strict = (strict_backward + strict_outside) as f64 / strict_total as f64;
    println!(
        "inherit: backward {:.1}% of GPU time, (no range) {:.2}%, cross-thread {}; strict: backward {:.1}%, (no range) {:.1}%",
        100.0 * backward as f64 / total as f64,
        100.0 * outside as f64 / total as f64,
        r["cross_thread"],
        100.0 * strict_backward as f64 / strict_total as f64,
        100.0 * strict_outside as f64 / strict_total as f64
    );
    assert!(strict_outside as f64 > 0.3 * strict_total as f64, "strict mode leaves the backward pass outside");
    assert!(outside as f64 <= 0.02 * total as f64, "(no range) holds {outside} of {total} ns");
    assert!(
        backward as f64 >= 0.95 * backward_share_strict * total as f64,
        "step/backward holds {backward} ns of {total}; the backward pass is {:.1}% of GPU time",
        100.0 * backward_share_strict
    );
    assert!(r["cross_thread"]["kernels"].as_u64().unwrap() > 0 && r["cross_thread"]["inherit"] == true);
    // Library ranges opened on the worker (CCCL's) sit under step/backward.
    for p in r["path_kernels"].as_array().unwrap() {
        let q = path(p);
        assert!(!q.starts_with("CCCL::"), "a library range became a root: {q}");
    }
    // Display names: no two alike, none of them a bare namespace.
    let shown: std::collections::HashSet<&str> =
        r["kernels"].as_array().unwrap().iter().map(|k| k["display_name"].as_str().unwrap()).collect();
    assert_eq!(shown.len(), r["kernels"].as_array().unwrap().len());
    assert!(shown.iter().all(|s| !s.is_empty() && !s.contains("::")), "{shown:?}");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_process_that_forks_after_cuda_init_writes_one_report() {
    let dir = scratch("fork");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = example("python/fork_after_cuda.py");
    let template = dir.join("r-{pid}.json");
    let o = gpuscope()
        .args(["run", "-q", "-o"])
        .arg(&template)
        .args(["--", "timeout", "120", "python3"])
        .arg(&script)
        .output()
        .unwrap();
    println!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "no hang (timeout exits 124), no changed exit code");
    assert!(String::from_utf8_lossy(&o.stdout).contains("parent sum 2048"));
    let reports: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(reports.len(), 1, "only the parent writes: {reports:?}");
}

/// The analysis the report carries for the range at `p`.
fn analysis<'a>(r: &'a Value, p: &str) -> &'a Value {
    let g = r["ranges"].as_array().unwrap().iter().find(|g| path(g) == p).unwrap_or_else(|| panic!("range {p}"));
    &g["analysis"]
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_slow_pytorch_input_pipeline_is_called_host_bound_with_the_copy_advice_and_the_fixed_one_is_not() {
    let script = example("python/input_pipeline.py");
    let script = script.to_str().unwrap();
    // Model FLOPs per step, 6 x parameters x samples, and samples per step.
    let params: u64 = 4096 * 16384 + 16384 + 16384 * 16384 + 16384 + 16384 * 1000 + 1000;
    let flops = format!("step={}", 6 * params * 2048);
    let declare = ["--flops", flops.as_str(), "--work", "step=2048:samples"];
    let before = run("pipeline-before.json", &declare, &["python3", script]);
    let after = run("pipeline-after.json", &declare, &["python3", script, "--fixed"]);
    for (name, r) in [("before", &before), ("after", &after)] {
        let a = analysis(r, "step");
        println!(
            "{name}: step {} ({}); model MFU {}, {} samples/s",
            a["verdict"]["bound"], a["verdict"]["evidence"], a["model_mfu_pct"], a["throughput_per_s"]
        );
        assert!(a["model_mfu_pct"].as_f64().is_some_and(|m| m > 0.0), "{name}: model MFU from the declared FLOPs: {a}");
    }
    assert_eq!(analysis(&before, "step")["verdict"]["bound"], "host-bound");
    // The pinning advice reaches the user: in a "copies" finding when the
    // copies cost at least 1% of the range, else in the host-idle finding
    // (they cost 0.98-1.0% of `step/data` on the H100: both happen).
    let findings = before["findings"].as_array().unwrap();
    let pin = findings.iter().find(|f| {
        ["copies", "host-idle"].contains(&f["kind"].as_str().unwrap_or(""))
            && f["range"].as_str().is_some_and(|r| r.starts_with("step"))
            && f["advice"].as_str().unwrap_or("").contains("pin_memory")
    });
    assert!(pin.is_some(), "a finding on step advises pinned memory: {findings:?}");
    assert_ne!(analysis(&after, "step")["verdict"]["bound"], "host-bound");
    let faster = analysis(&after, "step")["throughput_per_s"].as_f64().unwrap()
        > 2.0 * analysis(&before, "step")["throughput_per_s"].as_f64().unwrap();
    assert!(faster, "the fixed loop is more than twice as fast");
    let o = gpuscope()
        .arg("report")
        .arg(scratch("pipeline-before.json"))
        .arg(scratch("pipeline-after.json"))
        .output()
        .unwrap();
    let cmp = String::from_utf8_lossy(&o.stdout);
    println!("{cmp}");
    assert!(o.status.success());
    let line = cmp.lines().find(|l| l.starts_with("step ")).unwrap_or_else(|| panic!("a step row in:\n{cmp}"));
    assert!(line.contains("host-bound ->"), "{line}");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_hugging_face_llama_with_no_ranges_gets_steps_modules_and_counted_flops_from_torch_ranges() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/real/torch_ranges.py");
    let out = scratch("llama-torch-ranges.json");
    let _ = std::fs::remove_file(&out);
    let o = gpuscope()
        .args(["run", "--torch-ranges", "--mode", "sampling", "-o"])
        .arg(&out)
        .args(["--", "python3"])
        .arg(&script)
        .args(["train", "--steps", "12", "--warmup", "3"])
        .output()
        .expect("gpuscope runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    println!("{stdout}\n{stderr}");
    assert_eq!(o.status.code(), Some(0));
    let own: Value =
        serde_json::from_str(stdout.lines().rfind(|l| l.starts_with('{')).expect("the script's figures")).unwrap();
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let ranges = r["ranges"].as_array().unwrap();
    let find = |p: &str| ranges.iter().find(|g| path(g) == p).unwrap_or_else(|| panic!("no range {p}"));
    // The data range waits on the DataLoader: no kernel, no samples.
    assert!(find("step/data")["count"].as_u64().unwrap() >= 12);
    for p in [
        "step/forward/model/layers.0/self_attn",
        "step/forward/model/layers.7/mlp",
        "step/forward/lm_head",
        "step/backward/model/layers.0/self_attn",
        "step/backward/model/layers.7/mlp",
        "step/optimizer",
    ] {
        let g = find(p);
        assert!(g["count"].as_u64().unwrap() >= 12, "{p}: {}", g["count"]);
        // PM samples over it: on GPUs whose counters take two configurations
        // in turn (H100, H200), a run this short may see only one of them,
        // so either one's SM figures.
        let sampled = &g["sampled"];
        let sm = ["sm_efficiency_pct", "issue_active_pct"].iter().any(|k| sampled[k].as_f64().is_some());
        assert!(sampled["samples"].as_u64().unwrap_or(0) > 0 && sm, "{p} sampled: {sampled}");
    }
    assert!(stderr.contains("gpuscope: model FLOPs counted from"), "which calls were counted is said");
    // One step per optimizer step: 3 warm-up and 12 timed.
    let step = find("step");
    assert_eq!(step["count"].as_u64(), Some(15), "{}", step["count"]);
    // The GPU's work sits under the steps.
    let total: u64 = r["path_kernels"].as_array().unwrap().iter().map(|p| p["total_ns"].as_u64().unwrap()).sum();
    let under = gpu_ns_under(&r, "step");
    assert!(under as f64 >= 0.95 * total as f64, "{under} of {total} ns of kernel time under step");
    // Counted FLOPs per steady step against 6 x params x tokens (attention
    // adds a few %, which 6PT leaves out).
    let steady = &step["steady"];
    let per_step = steady["counted_flops"].as_f64().unwrap() / steady["calls"].as_f64().unwrap();
    let six_pt = 6.0 * own["params"].as_f64().unwrap() * own["tokens_per_step"].as_f64().unwrap();
    let ratio = per_step / six_pt;
    assert!((1.0..=1.1).contains(&ratio), "counted {per_step:.4e} per step, 6PT {six_pt:.4e}");
}
