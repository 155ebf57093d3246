//! What the CLI tests share: where cargo (or a GPU bundle, `.gpu/`) put the
//! `gpuscope` binary and `libgpuscope.so`, and a scratch folder.

// Each test binary uses a part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder the test binary sits in has a sibling `bin/` and `lib/` in a
/// GPU bundle.
fn bundle_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The `gpuscope` binary: cargo's, or the bundle's `bin/gpuscope`.
pub fn gpuscope() -> Command {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_gpuscope"));
    Command::new(if built.exists() { built } else { bundle_dir().join("bin/gpuscope") })
}

/// libgpuscope.so as `cargo test --workspace` leaves it: in target/<profile>
/// or, when cargo does not copy it up (two workspace libraries are named
/// gpuscope), in target/<profile>/deps; or the bundle's `lib/`.
pub fn lib() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_gpuscope"));
    let dir = built.parent().unwrap_or(Path::new("."));
    let found = [dir.join("libgpuscope.so"), dir.join("deps/libgpuscope.so"), bundle_dir().join("lib/libgpuscope.so")]
        .into_iter()
        .find(|p| p.exists());
    found.unwrap_or_else(|| panic!("libgpuscope.so not in {}: run the tests with --workspace", dir.display()))
}

/// `name` in a scratch folder: cargo's, created if missing (a bundle run
/// elsewhere may not be able to), else the system's.
pub fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let d = if std::fs::create_dir_all(&d).is_ok() { d } else { std::env::temp_dir() };
    d.join(name)
}
