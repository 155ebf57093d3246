//! The `gpuscope` command, without a GPU: reports render and compare, `run`
//! passes the program's exit code through and checks options first.

use gpuscope::occupancy::SmLimits;
use gpuscope::report::DeviceInfo;
use gpuscope::testing::{HostEvent, Replay};
use std::path::PathBuf;

mod common;
use common::{gpuscope, lib};

fn tmp(name: &str) -> PathBuf {
    common::scratch(name)
}

/// A report with one kernel in one range, of `ns` GPU time, saved as JSON.
fn saved_report(name: &str, ns: u64) -> PathBuf {
    saved_steps(name, 1, ns)
}

/// A report of `steps` calls of `step`, each running one kernel of `ns`
/// for its whole length, saved as JSON.
fn saved_steps(name: &str, steps: u32, ns: u64) -> PathBuf {
    let mut rp = Replay::new(vec![DeviceInfo::new(0, "NVIDIA H100 80GB HBM3", 132, SmLimits::SM_90)], 100);
    let p = rp.path(&["step"]);
    let mut bytes = Vec::new();
    for i in 0..steps {
        let (t, corr, instance) = (i as u64 * ns, 5 + i, 1 + i as u64);
        rp.host_event(HostEvent::Push { instance, parent: 0, path: p, tid: 1, ts: t });
        rp.host_event(HostEvent::Launch {
            correlation_id: corr,
            tid: 1,
            path: p,
            instance,
            graph: false,
            profiled: false,
            inherited: false,
            ts: t,
            cost_ns: 0,
            prev_call_ns: 0,
        });
        rp.host_event(HostEvent::Pop { instance, ts: t + ns });
        // SAFETY: all-zero is a valid CUpti_ActivityKernel10.
        let mut k: cupti_sys::CUpti_ActivityKernel10 = unsafe { std::mem::zeroed() };
        k.kind = cupti_sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.name = gpuscope::testing::kernel_name(c"gemm_kernel");
        k.correlationId = corr;
        (k.start, k.end) = (t, t + ns);
        (k.blockX, k.blockY, k.blockZ) = (256, 1, 1);
        k.registersPerThread = 32;
        // SAFETY: reading the bytes of a plain-data record.
        bytes.extend_from_slice(unsafe {
            std::slice::from_raw_parts(&k as *const _ as *const u8, std::mem::size_of_val(&k))
        });
    }
    rp.buffer(&bytes);
    let path = tmp(name);
    rp.finish(0, steps as u64 * ns).write(&path, gpuscope::Format::Json).unwrap();
    path
}

#[test]
fn runs_of_different_lengths_compare_per_step() {
    // The same step, 28 times and 15 times: nothing changed per step.
    let (a, b) = (saved_steps("long.json", 28, 20_000), saved_steps("short.json", 15, 20_000));
    let out = gpuscope().arg("report").arg(&a).arg(&b).output().unwrap();
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(t.contains("kernel time per call of step: 20.0 us -> 20.0 us (+0.0%)"), "{t}");
    assert!(t.contains("the runs differ in length (28 calls before, 15 after)"), "{t}");
    let row = t.lines().find(|l| l.starts_with("step · gemm_kernel")).unwrap_or_else(|| panic!("{t}"));
    assert!(row.contains("+0.0%"), "{row}");
}

#[test]
fn report_renders_every_format() {
    let f = saved_report("one.json", 5_000);
    let out = gpuscope().arg("report").arg(&f).output().unwrap();
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("step") && table.contains("gemm_kernel"), "{table}");
    let out = gpuscope().args(["report", "--format", "csv"]).arg(&f).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("nvtx_path,kernel,launches"));
    let chrome = tmp("one.chrome.json");
    let st = gpuscope().args(["report", "--format", "chrome", "-o"]).arg(&chrome).arg(&f).status().unwrap();
    assert!(st.success());
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&chrome).unwrap()).unwrap();
    assert!(v["traceEvents"].as_array().unwrap().iter().any(|e| e["name"] == "gemm_kernel"));
    let out = gpuscope().args(["report", "--format", "xml"]).arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("allowed: table, json, csv, chrome"));
}

#[test]
fn report_compares_two_runs() {
    let (a, b) = (saved_report("before.json", 4_000), saved_report("after.json", 3_000));
    let out = gpuscope().arg("report").arg(&a).arg(&b).output().unwrap();
    assert!(out.status.success());
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("kernel time per call of step: 4.0 us -> 3.0 us (-25.0%)"), "{t}");
    assert!(t.contains("step · gemm_kernel") && t.contains("-25.0%"), "{t}");
    // Each range: time per call before and after, utilisation, verdict.
    let row = t.lines().find(|l| l.starts_with("step ")).unwrap_or_else(|| panic!("a step row: {t}"));
    assert!(row.contains("4.0 us") && row.contains("3.0 us") && row.contains("gpu-bound (same)"), "{row}");
    let bad = gpuscope().arg("report").arg(&a).arg(tmp("missing.json")).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("missing.json"));
}

#[test]
fn report_merges_ranks_and_names_the_straggler() {
    let dir = tmp("job");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (rank, ns) in [("rank0", 4_000), ("rank1", 9_000), ("rank2", 4_200)] {
        std::fs::rename(saved_report(&format!("{rank}.json"), ns), dir.join(format!("{rank}.json"))).unwrap();
    }
    let out = gpuscope().args(["report", "--merge"]).arg(&dir).output().unwrap();
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(t.contains("job: 3 ranks"), "{t}");
    // One answer for the job first, each rank's step in it.
    assert!(t.starts_with("== Answer for the job: 3 ranks, `step`"), "{t}");
    assert!(t.lines().any(|l| l.trim_start().starts_with("rank1 ") && l.contains("9.0 us")), "{t}");
    let row = t.lines().find(|l| l.starts_with("step ")).unwrap_or_else(|| panic!("a step row: {t}"));
    // Per rank, then the slowest: rank1, 9.0 us against the median 4.2 us.
    assert!(row.contains("4.0 us") && row.contains("9.0 us") && row.contains("rank1 (+114.3%)"), "{row}");
    let json = gpuscope()
        .args(["report", "--merge", "--format", "json"])
        .arg(dir.join("rank0.json"))
        .arg(dir.join("rank1.json"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(v["ranges"][0]["slowest"], 1);
    assert_eq!(v["ranks"][1]["name"], "rank1");
    assert_eq!(v["answer"]["ranks"].as_array().map(Vec::len), Some(2), "{v}");
    // The merged document read back as a report: told what it is.
    let merged = dir.join("merged.json");
    std::fs::write(&merged, &json.stdout).unwrap();
    let back = gpuscope().arg("report").arg(&merged).output().unwrap();
    let e = String::from_utf8_lossy(&back.stderr);
    assert!(!back.status.success() && e.contains("a job's merged document"), "{e}");
    std::fs::remove_file(&merged).unwrap();
    // Three reports without --merge: told what to do.
    let three = gpuscope()
        .arg("report")
        .arg(dir.join("rank0.json"))
        .arg(dir.join("rank1.json"))
        .arg(dir.join("rank2.json"))
        .output()
        .unwrap();
    assert_eq!(three.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&three.stderr).contains("more need --merge"));
    // A library's ranges (NCCL's own calls) are not the job's.
    for rank in ["rank0", "rank1"] {
        let f = dir.join(format!("{rank}.json"));
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        for g in v["ranges"].as_array_mut().unwrap() {
            g["library"] = "NCCL".into();
        }
        std::fs::write(dir.join(format!("nccl-{rank}.json")), v.to_string()).unwrap();
    }
    let out = gpuscope()
        .args(["report", "--merge"])
        .arg(dir.join("nccl-rank0.json"))
        .arg(dir.join("nccl-rank1.json"))
        .output();
    let t = String::from_utf8_lossy(&out.as_ref().unwrap().stdout).to_string();
    assert!(t.contains("no NVTX range of the program's own on any rank (libraries' ranges, NCCL's, left out)"), "{t}");
    assert!(!t.lines().any(|l| l.starts_with("step ")), "{t}");
}

#[test]
fn run_passes_the_exit_code_and_output_through() {
    let out = gpuscope()
        .args(["run", "--lib"])
        .arg(lib())
        .args(["-o"])
        .arg(tmp("run-{pid}.json"))
        .args(["--", "/bin/sh", "-c", "echo from-the-program; exit 3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let (o, e) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(o, "from-the-program\n");
    // Why there is no report: no driver (CI), or the program used no CUDA.
    assert!(e.contains("no report was written") || e.contains("no NVIDIA driver found"), "{e}");
}

#[test]
fn run_of_a_job_prints_one_answer_for_its_ranks() {
    // A "launcher" whose two ranks each wrote a report (copied into place:
    // no GPU here), as torchrun's would under gpuscope run.
    let dir = tmp("run-job");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (saved_steps("job-a.json", 4, 4_000), saved_steps("job-b.json", 4, 6_000));
    let script =
        format!("cp {} {}/run-0.json && cp {} {}/run-1.json", a.display(), dir.display(), b.display(), dir.display());
    let out = gpuscope()
        .args(["run", "--lib"])
        .arg(lib())
        .args(["-o"])
        .arg(dir.join("run-{rank}.json"))
        .args(["--", "/bin/sh", "-c", &script])
        .output()
        .unwrap();
    let (o, e) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{e}");
    assert!(o.starts_with("== Answer for the job: 2 ranks, `step`"), "{o}\n{e}");
    assert!(o.contains("job: 2 ranks"), "the ranks side by side: {o}");
    assert!(e.contains("2 processes used the GPU") && e.contains("run-1.json"), "{e}");
}

#[test]
fn run_says_which_gpuscope_variables_are_misspelt_and_reads_files_it_can_name() {
    let out = gpuscope()
        .args(["run", "--lib"])
        .arg(lib())
        .env("GPUSCOPE_MODEE", "metrics")
        .args(["--", "/bin/sh", "-c", "exit 0"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{e}");
    assert_eq!(e.matches("GPUSCOPE_MODEE is not a gpuscope variable").count(), 1, "{e}");
    assert!(e.contains("did you mean GPUSCOPE_MODE?"), "{e}");
    // The program comes after gpuscope's options, with or without `--`.
    let bare = gpuscope().args(["run", "--lib"]).arg(lib()).args(["/bin/sh", "-c", "exit 4"]).output().unwrap();
    assert_eq!(bare.status.code(), Some(4), "{}", String::from_utf8_lossy(&bare.stderr));
    // Files that are not reports, and widths out of range, are named.
    let gz = tmp("report.json.gz");
    std::fs::write(&gz, [0x1f, 0x8b, 8, 0, 1, 2, 3]).unwrap();
    let arr = tmp("array.json");
    std::fs::write(&arr, "[1,2,3]").unwrap();
    for (f, says) in [(&gz, "gzip-compressed (gunzip it first)"), (&arr, "a report is a JSON object")] {
        let o = gpuscope().arg("report").arg(f).output().unwrap();
        assert_eq!(o.status.code(), Some(2));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("not a gpuscope report") && e.contains(says), "{e}");
    }
    // A flag whose value may be left out, given none before the program,
    // takes the program's name: the error says to put `--` before it.
    let marker = tmp("swallowed-should-not-exist");
    let swallowed =
        gpuscope().args(["run", "--lib"]).arg(lib()).args(["--torch-ranges", "touch"]).arg(&marker).output().unwrap();
    let e = String::from_utf8_lossy(&swallowed.stderr);
    assert_eq!(swallowed.status.code(), Some(2), "{e}");
    assert!(!marker.exists());
    assert!(e.contains("put -- before the program: gpuscope run --torch-ranges -- touch ..."), "{e}");
    // An empty variable is the default: no hooks, reports found where the
    // default output puts them.
    let (code, env, _) = child_env(&[("GPUSCOPE_TORCH_RANGES", ""), ("GPUSCOPE_OUTPUT", "")], &[]);
    assert_eq!(code, Some(0));
    assert!(!env.contains("gpuscope-torch"), "no hooks for an empty GPUSCOPE_TORCH_RANGES: {env}");
    let narrow = gpuscope().arg("report").arg(saved_report("narrow.json", 1_000)).args(["--width", "0"]).output();
    let narrow = narrow.unwrap();
    assert_eq!(narrow.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&narrow.stderr).contains("allowed: 80 to 400 columns"));
}

#[test]
fn run_checks_options_before_running_anything() {
    let marker = tmp("should-not-exist");
    let _ = std::fs::remove_file(&marker);
    // Refused with exit code 2 and `says` on stderr; the program never ran.
    let refused = |args: &[&str], says: &str| {
        let out = gpuscope()
            .arg("run")
            .args(args)
            .arg("--lib")
            .arg(lib())
            .args(["--", "touch"])
            .arg(&marker)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!marker.exists(), "the program must not run: {args:?}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(says), "{args:?}: {e}");
    };
    // Errors name the flag the user typed, not the variable it sets.
    refused(&["--mode", "metrics", "--launch-count", "-1"], "--launch-count \"-1\" is not valid");
    refused(&["--mode", "fast"], "--mode \"fast\" is not valid; allowed: trace, metrics, sampling");
    refused(
        &["--mode", "metrics", "--launch-count", "0"],
        "--launch-count \"0\" is not valid; allowed: 1 or more, or all",
    );
    refused(&["--device-memory", "maybe"], "--device-memory \"maybe\" is not valid; allowed: on, off");
    refused(&["--max-buffers", "0"], "--max-buffers \"0\" is not valid; allowed: buffers, 1 to 1024");
    refused(&["--mode", "sampling", "--sampling-interval", "0"], "--sampling-interval \"0\" is not valid");
    refused(&["--mode", "sampling", "--trace-windows", "5/1000"], "--trace-windows \"5/1000\" is not valid");
    refused(&["--flops", "garbage"], "--flops \"garbage\" is not valid");
    refused(&["--trace-windows", "100/1000"], "--trace-windows \"100/1000\" needs sampling mode (--mode sampling)");
    refused(
        &["--kernel-filter", "gemm"],
        "--kernel-filter \"gemm\" needs metrics mode (--mode metrics), or trace windows (--trace-windows 0/1000, in \
         sampling mode) for the passes asked of a live process; the mode is trace",
    );
    refused(&["--keep-trace", "lots"], "--keep-trace \"lots\" is not valid");
    // An older name, named as typed.
    refused(&["--trace", "lots"], "--trace \"lots\" is not valid");
    refused(&["--keep-trace", "1", "--trace", "2"], "cannot be used with");
}

/// The variables the program sees under `gpuscope run`, with `env` set in
/// `run`'s own environment.
fn child_env(env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String, String) {
    let mut c = gpuscope();
    c.arg("run").args(args).arg("--lib").arg(lib()).args(["--", "env"]);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_keeps_the_user_s_variables_under_its_flags_and_checks_them_all() {
    let var = |out: &str, k: &str| out.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).map(str::to_string);
    // A variable the user set is kept where no flag says otherwise.
    let (code, out, _) = child_env(&[("GPUSCOPE_MODE", "metrics"), ("GPUSCOPE_TRACE", "7")], &[]);
    assert_eq!(code, Some(0));
    assert_eq!(var(&out, "GPUSCOPE_MODE").as_deref(), Some("metrics"));
    assert_eq!(var(&out, "GPUSCOPE_TRACE").as_deref(), Some("7"));
    // A flag wins over the variable.
    let (_, out, _) = child_env(&[("GPUSCOPE_MODE", "metrics")], &["--mode", "sampling"]);
    assert_eq!(var(&out, "GPUSCOPE_MODE").as_deref(), Some("sampling"));
    // A flag wins over every name of its setting.
    let (_, out, _) = child_env(&[("GPUSCOPE_TRACE", "7")], &["--keep-trace", "5"]);
    assert_eq!(var(&out, "GPUSCOPE_KEEP_TRACE").as_deref(), Some("5"));
    assert_eq!(var(&out, "GPUSCOPE_TRACE"), None);
    let (_, out, _) = child_env(&[("GPUSCOPE_KEEP_TRACE", "7")], &["--trace", "5"]);
    assert_eq!((var(&out, "GPUSCOPE_KEEP_TRACE"), var(&out, "GPUSCOPE_TRACE").as_deref()), (None, Some("5")));
    // A switch alone is on.
    let (_, out, _) = child_env(&[], &["-q", "--sync-records", "off", "--mode", "metrics", "--every", "4"]);
    assert_eq!(var(&out, "GPUSCOPE_QUIET").as_deref(), Some("on"));
    assert_eq!(var(&out, "GPUSCOPE_SYNC_RECORDS").as_deref(), Some("off"));
    assert_eq!(var(&out, "GPUSCOPE_EVERY").as_deref(), Some("4"));
    // Neither: nothing set; the shim's defaults are run's.
    let (_, out, _) = child_env(&[], &[]);
    assert_eq!(var(&out, "GPUSCOPE_MODE"), None);
    assert_eq!(var(&out, "GPUSCOPE_KEEP_TRACE"), None);
    // An invalid variable of the user's stops run as it stops the shim,
    // named as the user typed it.
    let (code, out, err) = child_env(&[("GPUSCOPE_MODE", "bogus")], &[]);
    assert_eq!(code, Some(2), "{out}");
    assert!(err.contains("GPUSCOPE_MODE=\"bogus\" is not valid"), "{err}");
    let (code, _, err) = child_env(&[("GPUSCOPE_FORMAT", "csv")], &[]);
    assert_eq!(code, Some(2));
    assert!(err.contains("GPUSCOPE_FORMAT=\"csv\"") && err.contains("gpuscope report FILE --format csv"), "{err}");
}

#[test]
fn a_reader_that_stops_early_ends_normally_and_widths_are_checked() {
    use std::io::Read;
    let f = saved_steps("pipe.json", 2000, 5_000);
    // `| head -c 10`: the reader closes its end after 10 bytes.
    let mut child = gpuscope()
        .args(["report", "--format", "json"])
        .arg(&f)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    // Widths out of range are refused, saying what is allowed; the
    // terminal's own width is taken as it comes (kept within range).
    for width in ["70000", "0"] {
        let out = gpuscope().args(["report", "--width", width]).arg(&f).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "--width {width}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("allowed: 80 to 400 columns"));
    }
    let out = gpuscope().args(["report"]).arg(&f).env("COLUMNS", "70000").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn report_takes_declared_flops_and_work_and_explains_the_range() {
    // One range of 5 us, one kernel filling it.
    let f = saved_report("declared.json", 5_000);
    let out = gpuscope()
        .args(["report", "--format", "json", "--flops", "step=5e9", "--work", "step=100:tokens"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let a = &v["ranges"][0]["analysis"];
    // 5e9 FLOPs in 5 us = 1e15 FLOP/s against the H100's 989.4e12 bf16 peak.
    assert!((a["model_mfu_pct"].as_f64().unwrap() - 101.07).abs() < 0.01, "{a}");
    assert!((a["throughput_per_s"].as_f64().unwrap() - 2e7).abs() < 1.0, "{a}");
    assert_eq!(a["throughput_unit"], "tokens");
    let t = gpuscope().args(["report", "--flops", "step=5e9"]).arg(&f).output().unwrap();
    let t = String::from_utf8_lossy(&t.stdout);
    assert!(t.contains("model") && t.contains("MFU 101.1%") && t.contains("Findings"), "{t}");
    let bad = gpuscope().args(["report", "--flops", "step=lots"]).arg(&f).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--flops \"step=lots\" is not valid"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn reports_written_by_schema_1_still_render_with_their_analysis() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data");
    for name in ["schema1-trace.json", "schema1-metrics.json"] {
        let out = gpuscope().arg("report").arg(data.join(name)).output().unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let t = String::from_utf8_lossy(&out.stdout);
        assert!(t.contains("What bounds each range") && t.contains("schema-1 report"), "{name}: {t}");
    }
}

/// `gpuscope trigger PID --trace 5s` asks the process's control socket and
/// prints its answer; a refusal or no session is exit 1 with the reason.
#[test]
fn trigger_asks_the_process_s_control_socket_and_prints_the_answer() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::fs::DirBuilderExt;
    // A process id no process has: its socket is this test's.
    let pid = 4_000_000_000u32 - std::process::id() % 1000;
    let path = gpuscope::control::socket_path(pid);
    let dir = path.parent().unwrap().to_path_buf();
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).expect("a socket");
    let server = std::thread::spawn(move || {
        let mut asked = Vec::new();
        for reply in ["ok: kernel records on for 5.00 s", "refused: a trace window asked for is open"] {
            let (conn, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(&conn).read_line(&mut line).unwrap();
            asked.push(line.trim().to_string());
            writeln!(&conn, "{reply}").unwrap();
        }
        asked
    });
    let ok = gpuscope().args(["trigger", &pid.to_string(), "--trace", "5s"]).output().unwrap();
    let out = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success() && out.contains("kernel records on for 5.00 s"), "{out}");
    let busy = gpuscope().args(["trigger", &pid.to_string(), "--trace", "500ms"]).output().unwrap();
    let err = String::from_utf8_lossy(&busy.stderr);
    assert_eq!(busy.status.code(), Some(1), "{err}");
    assert!(err.contains("a trace window asked for is open"), "{err}");
    assert_eq!(server.join().unwrap(), ["trace 5", "trace 0.5"]);
    let _ = std::fs::remove_file(&path);
    // No session there now.
    let none = gpuscope().args(["trigger", &pid.to_string(), "--trace", "5"]).output().unwrap();
    assert_eq!(none.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&none.stderr).contains("--trace-windows"));
    let bad = gpuscope().args(["trigger", &pid.to_string(), "--trace", "1h"]).output().unwrap();
    assert!(String::from_utf8_lossy(&bad.stderr).contains("10 ms to 600 s"));
}
