//! Release builds with the `embed-lib` feature (the default, and what
//! `cargo install` makes) carry libgpuscope.so, the library `gpuscope run`
//! injects: `cargo install` installs programs only, so the program brings
//! its library along and writes it out on first use (src/library.rs).
//!
//! The library is gpuscope-ffi's cdylib, built here by a second cargo into
//! OUT_DIR: the dependency of this package's own manifest, so the same
//! sources and versions whether this package is a checkout's (the
//! workspace's lock) or crates.io's (its packaged lock). Debug builds skip
//! this: the workspace's tests find the library beside the program and pay
//! for no second build.

use std::collections::BTreeSet;
use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(gpuscope_embedded_lib)");
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    if env::var_os("CARGO_FEATURE_EMBED_LIB").is_none() || !release {
        return;
    }
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target = env::var("TARGET").expect("cargo sets TARGET");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());

    let mut build = Command::new(cargo);
    build
        .args(["rustc", "--package", "gpuscope-ffi", "--lib", "--crate-type", "cdylib", "--release"])
        .args(["--message-format=json-render-diagnostics", "--target", &target])
        .arg("--manifest-path")
        .arg(manifest_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(out.join("target"))
        // `cargo clippy` wraps rustc for the outer build's own packages only.
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .stderr(Stdio::inherit());
    // The carried copy is a payload, not a build to debug (a workspace's
    // release profile keeps debug info): without it, it is several times smaller.
    if env::var_os("CARGO_PROFILE_RELEASE_DEBUG").is_none() {
        build.env("CARGO_PROFILE_RELEASE_DEBUG", "false");
    }
    // An offline build stays offline inside.
    if env::var("CARGO_NET_OFFLINE").is_ok_and(|v| v == "true") {
        build.arg("--offline");
    }
    let output = build.output().unwrap_or_else(|e| panic!("cannot run cargo to build libgpuscope.so: {e}"));
    if !output.status.success() {
        panic!("building libgpuscope.so (gpuscope-ffi) failed: cargo's messages are above");
    }

    let mut lib = None;
    let mut watched = BTreeSet::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        if !line.contains(r#""reason":"compiler-artifact""#) {
            continue;
        }
        // The sources of path packages (a checkout's workspace) can change
        // between builds; a registry's cannot. Watched relative to this
        // package where they are its neighbours, so that a moved workspace
        // is watched where it now is.
        if let (Some(id), Some(manifest)) = (string_field(line, "package_id"), string_field(line, "manifest_path")) {
            if let (true, Some(dir)) = (id.contains("path+file://"), Path::new(manifest).parent()) {
                watched.insert(neighbour(&manifest_dir, dir));
            }
        }
        if line.contains(r#""cdylib""#) {
            lib = lib.or_else(|| filenames(line).into_iter().find(|f| f.ends_with(".so")));
        }
    }
    // This package's lock (crates.io's), or its workspace's.
    let dirs = [Some(manifest_dir.as_path()), manifest_dir.parent()];
    for lock in dirs.into_iter().flatten().map(|d| d.join("Cargo.lock")).filter(|lock| lock.exists()) {
        watched.insert(neighbour(&manifest_dir, &lock));
    }
    for path in watched {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    let lib = lib.expect("cargo reported no cdylib for gpuscope-ffi");
    let bytes = std::fs::read(&lib).unwrap_or_else(|e| panic!("{lib}: {e}"));
    println!("cargo::rustc-env=GPUSCOPE_EMBEDDED_LIB={lib}");
    println!("cargo::rustc-env=GPUSCOPE_EMBEDDED_LIB_HASH={:016x}", fnv1a(&bytes));
    println!("cargo::rustc-cfg=gpuscope_embedded_lib");
}

/// `path` as `../NAME` when it is a sibling of `dir` (or below one), else as
/// it is.
fn neighbour(dir: &Path, path: &Path) -> PathBuf {
    match dir.parent().and_then(|parent| path.strip_prefix(parent).ok()) {
        Some(rest) => Path::new("..").join(rest),
        None => path.to_path_buf(),
    }
}

/// The string value of `"key":"..."` in one line of cargo's JSON messages.
fn string_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!(r#""{key}":""#))? + key.len() + 4;
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

/// The paths of a compiler-artifact message's `"filenames":[...]`.
fn filenames(line: &str) -> Vec<String> {
    let Some(start) = line.find(r#""filenames":["#) else { return Vec::new() };
    let rest = &line[start + r#""filenames":["#.len()..];
    let list = &rest[..rest.find(']').unwrap_or(rest.len())];
    list.split(',').map(|s| s.trim_matches('"').to_string()).filter(|s| !s.is_empty()).collect()
}

/// FNV-1a, 64 bits: names the cache folder of this build's library.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}
