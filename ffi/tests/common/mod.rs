//! What the ffi tests share: where cargo (or a GPU bundle) put the library,
//! and a scratch folder.

// Each test binary uses a part of this module.
#![allow(dead_code)]

use std::path::PathBuf;

/// The folder holding libgpuscope.so: target/<profile>, its deps/ (cargo
/// does not always copy it up: two workspace libraries are named gpuscope),
/// or the lib/ folder beside the test binaries in a GPU bundle (.gpu/).
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let up = exe.parent().unwrap().parent().unwrap();
    // The newest: target/<profile>'s copy can be stale beside deps/.
    let modified = |d: &PathBuf| std::fs::metadata(d.join("libgpuscope.so")).and_then(|m| m.modified()).ok();
    let found = [up.to_path_buf(), up.join("deps"), up.join("lib")]
        .into_iter()
        .filter_map(|d| Some((modified(&d)?, d)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, d)| d);
    found.unwrap_or_else(|| panic!("libgpuscope.so not built under {}", up.display()))
}

/// libgpuscope.so, canonical path.
pub fn lib() -> PathBuf {
    std::fs::canonicalize(lib_dir().join("libgpuscope.so")).unwrap()
}

/// A scratch folder: cargo's, created if missing (a bundle run elsewhere
/// lacks it), else the system's.
pub fn scratch() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if std::fs::create_dir_all(&d).is_ok() {
        d
    } else {
        std::env::temp_dir()
    }
}
