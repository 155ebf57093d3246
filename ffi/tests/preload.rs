//! The shim in processes without a GPU (CI): preloading it changes nothing
//! a program can see but the two injection variables; a bad setting is one
//! line on stderr; the driver's entry point returns and says why once.

mod common;

use common::{lib, scratch};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The probe program, compiled once for all tests.
fn probe() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let bin = scratch().join("envprobe");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/envprobe.c");
        let st = Command::new("cc")
            .args(["-std=c99", "-Wall", "-Werror"])
            .arg(&src)
            .arg("-o")
            .arg(&bin)
            .arg("-ldl")
            .status()
            .unwrap();
        assert!(st.success());
        bin
    })
    .clone()
}

/// A command without the variables the shim reads or sets; each test adds
/// its own afterwards.
fn clean(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for v in ["CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "GPUSCOPE_MODE", "LD_PRELOAD"] {
        cmd.env_remove(v);
    }
    cmd
}

fn run(cmd: &mut Command) -> (Output, String, String) {
    let out = cmd.output().unwrap();
    let (o, e) = (String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string());
    (out, o, e)
}

fn has_gpu() -> bool {
    Path::new("/dev/nvidiactl").exists()
}

#[test]
fn preloading_into_true_and_a_shell_changes_nothing() {
    let (out, o, e) = run(clean("/bin/true").env("LD_PRELOAD", lib()));
    assert_eq!((out.status.code(), o.as_str(), e.as_str()), (Some(0), "", ""));
    let (out, o, e) = run(clean("/bin/sh").args(["-c", "echo hi; exit 3"]).env("LD_PRELOAD", lib()));
    assert_eq!((out.status.code(), o.as_str(), e.as_str()), (Some(3), "hi\n", ""));
}

#[test]
fn preloading_arms_the_injection_variables_and_keeps_the_exit_code() {
    let l = lib().display().to_string();
    let (out, o, e) = run(clean(probe()).env("LD_PRELOAD", &l));
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(o, format!("cuda={l}\nnvtx={l}\n"));
    assert_eq!(e, "");
    // Without the preload nothing is set: the constructor acts only then.
    let (_, o, _) = run(&mut clean(probe()));
    assert_eq!(o, "cuda=(unset)\nnvtx=(unset)\n");
    // A variable the user set is left alone.
    let (_, o, _) = run(clean(probe()).env("LD_PRELOAD", &l).env("NVTX_INJECTION64_PATH", "/opt/other.so"));
    assert_eq!(o, format!("cuda={l}\nnvtx=/opt/other.so\n"));
}

#[test]
fn a_bad_setting_is_one_line_and_the_program_runs_unprofiled() {
    let (out, o, e) = run(clean(probe()).env("LD_PRELOAD", lib()).env("GPUSCOPE_MODE", "fast"));
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(o, "cuda=(unset)\nnvtx=(unset)\n", "not armed");
    assert_eq!(
        e,
        "gpuscope: GPUSCOPE_MODE=\"fast\" is not valid; allowed: trace, metrics, sampling. The program runs unprofiled.\n"
    );
}

#[test]
fn a_bad_setting_is_said_once_for_a_process_and_the_ones_it_starts() {
    // A shell that starts three more, all inheriting the preload (as
    // pyenv's shim and a launcher's workers do).
    let script = "/bin/sh -c true; /bin/sh -c true; /bin/sh -c 'exit 5'";
    let (out, _, e) = run(clean("/bin/sh").args(["-c", script]).env("LD_PRELOAD", lib()).env("GPUSCOPE_MODE", "fast"));
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(e.matches("GPUSCOPE_MODE=\"fast\" is not valid").count(), 1, "{e}");
    // A misspelt variable, once too, with the setting meant.
    let misspelt = format!("GPUSCOPE_{}", "MODEE");
    let (out, _, e) = run(clean("/bin/sh").args(["-c", script]).env("LD_PRELOAD", lib()).env(&misspelt, "metrics"));
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(e.matches("GPUSCOPE_MODEE is not a gpuscope variable").count(), 1, "{e}");
    assert!(e.contains("did you mean GPUSCOPE_MODE?"), "{e}");
}

#[test]
fn the_driver_entry_point_returns_and_says_why_once_without_a_gpu() {
    let (out, o, e) = run(clean(probe()).arg(lib()));
    assert_eq!(out.status.code(), Some(7));
    assert!(o.contains("InitializeInjection -> 1\nagain -> 1\n"), "{o}");
    if !has_gpu() {
        // One message, saying what is missing first: the driver, else CUPTI
        // (listing every place it looked, one per line, and the fix).
        assert_eq!(e.lines().filter(|l| l.starts_with("gpuscope:")).count(), 1, "one message: {e}");
        if Path::new("/proc/driver/nvidia").exists() {
            assert!(e.contains("GPUSCOPE_CUPTI_PATH"), "names the fix: {e}");
        } else {
            assert!(e.starts_with("gpuscope: no NVIDIA driver found (libcuda.so.1 is not loadable)"), "{e}");
        }
        assert!(e.trim_end().ends_with("The program runs unprofiled."), "{e}");
    }
}
