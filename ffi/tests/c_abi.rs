//! The C ABI from C and C++: the committed header compiles in both
//! languages, the examples link against libgpuscope.so and run to the end.
//! Without a GPU (CI) they must report "no GPU" through the status code.

mod common;

use common::{lib_dir, scratch};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn build_and_run(compiler: &str, std: &str, src: &str, out: &str) -> String {
    let dir = scratch();
    let bin = dir.join(out);
    let lib = lib_dir();
    let st = Command::new(compiler)
        .args([std, "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg("-I")
        .arg(root().join("ffi/include"))
        .arg(root().join(src))
        .arg("-L")
        .arg(&lib)
        // As the examples' build lines say: the program finds the library
        // by its rpath, with no LD_LIBRARY_PATH.
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lgpuscope", "-o"])
        .arg(&bin)
        .status()
        .unwrap_or_else(|e| panic!("{compiler} not runnable: {e}"));
    assert!(st.success(), "{compiler} failed on {src}");
    let out = Command::new(&bin).env_remove("LD_LIBRARY_PATH").current_dir(&dir).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{src} exited {:?}: {stdout}{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(stdout.ends_with("done\n"), "{src} ran to the end: {stdout}");
    stdout
}

fn has_gpu() -> bool {
    Path::new("/dev/nvidiactl").exists()
}

#[test]
fn the_c_example_compiles_links_and_runs() {
    let out = build_and_run("cc", "-std=c99", "examples/c/main.c", "c_example");
    assert!(
        out.contains("bad declaration -> 3: declared FLOPs for range \"work\" = -1; allowed: a finite number above 0"),
        "{out}"
    );
    if !has_gpu() {
        assert!(out.contains("gpuscope: no GPU ("), "{out}");
        assert!(out.contains("libcupti.so.13 or libcupti.so.12 not found") || out.contains("libcuda"), "{out}");
    }
}

#[test]
fn the_cpp_example_compiles_links_and_runs() {
    // Rust needs a C compiler to link; a C++ one may be missing. CI
    // (GPUSCOPE_CI=1) has one, and there its absence fails the test.
    if Command::new("c++").arg("--version").output().is_err() && std::env::var("GPUSCOPE_CI").as_deref() != Ok("1") {
        eprintln!("no C++ compiler (c++): the C++ example is not built here; CI builds it");
        return;
    }
    let out = build_and_run("c++", "-std=c++17", "examples/cpp/main.cpp", "cpp_example");
    if !has_gpu() {
        assert!(out.contains("gpuscope: no GPU (1)"), "{out}");
    }
    assert!(out.contains("bad call -> 3: gpuscope_write_report: path is NULL"), "{out}");
}

#[test]
fn the_committed_header_matches_the_code() {
    let config = cbindgen::Config::from_file(root().join("ffi/cbindgen.toml")).expect("ffi/cbindgen.toml reads");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        // The source, not the crate: no `cargo metadata` (the tests also
        // run where cargo is not installed).
        .with_src(root().join("ffi/src/lib.rs"))
        .generate()
        .expect("cbindgen reads ffi/src")
        .write(&mut generated);
    let header = root().join("ffi/include/gpuscope.h");
    if std::env::var("GPUSCOPE_BLESS").as_deref() == Ok("1") {
        std::fs::write(&header, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(header).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&generated),
        committed,
        "ffi/include/gpuscope.h is stale: regenerate it (GPUSCOPE_BLESS=1 cargo test -p gpuscope-ffi --test c_abi header)"
    );
}
