//! Where `gpuscope run` finds libgpuscope.so, the library it injects.
//!
//! In order: `--lib`, else `GPUSCOPE_LIB`; else the copy this program
//! carries (release builds with the `embed-lib` feature, which is what
//! `cargo install` makes: build.rs), written once to a cache folder; else a
//! library installed beside the program (the Python wheel's `_bin/`, a
//! workspace's `target/<profile>/`, or `../lib`).

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The library to inject, or why there is none.
pub fn find(flag: Option<PathBuf>) -> Result<PathBuf, String> {
    if let Some(p) = flag {
        return given(p, "--lib ");
    }
    if let Some(p) = std::env::var_os("GPUSCOPE_LIB").filter(|p| !p.is_empty()) {
        return given(PathBuf::from(p), "GPUSCOPE_LIB=");
    }
    #[cfg(gpuscope_embedded_lib)]
    return carried();
    #[cfg(not(gpuscope_embedded_lib))]
    beside_the_program()
}

fn given(p: PathBuf, how: &str) -> Result<PathBuf, String> {
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!("{how}{}: no such file (the path of libgpuscope.so is expected)", p.display()))
    }
}

#[cfg(not(gpuscope_embedded_lib))]
fn beside_the_program() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot tell where this program is: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let tried = [dir.join("libgpuscope.so"), dir.join("../lib/libgpuscope.so"), dir.join("../lib64/libgpuscope.so")];
    tried.iter().find(|p| p.is_file()).map(|p| p.canonicalize().unwrap_or(p.clone())).ok_or_else(|| {
        let places: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
        format!(
            "libgpuscope.so not found (looked in {}). This gpuscope does not carry it (a debug build, or one \
             without the embed-lib feature): build gpuscope-ffi's library with the same profile (`cargo build -p \
             gpuscope-ffi`, with --release for a release build), or pass --lib or set GPUSCOPE_LIB",
            places.join(", ")
        )
    })
}

/// The library this program carries, written out once per build.
#[cfg(gpuscope_embedded_lib)]
fn carried() -> Result<PathBuf, String> {
    const BYTES: &[u8] = include_bytes!(env!("GPUSCOPE_EMBEDDED_LIB"));
    // Tells builds of one version apart (a checkout's commits).
    const TAG: &str = concat!(env!("CARGO_PKG_VERSION"), "-", env!("GPUSCOPE_EMBEDDED_LIB_HASH"));
    let mut failed = Vec::new();
    for base in cache_folders() {
        match write_once(&base, BYTES, TAG) {
            Ok(p) => return Ok(p),
            Err(e) => failed.push(e),
        }
    }
    Err(format!(
        "cannot write out the libgpuscope.so this program carries ({}); set XDG_CACHE_HOME to a folder of yours \
         that is writable, or pass --lib or set GPUSCOPE_LIB",
        failed.join("; ")
    ))
}

/// `$XDG_CACHE_HOME/gpuscope`, `~/.cache/gpuscope`, then a folder of this
/// user's in the temporary folder.
#[cfg(gpuscope_embedded_lib)]
fn cache_folders() -> Vec<PathBuf> {
    let var = |k: &str| std::env::var_os(k).map(PathBuf::from).filter(|p| p.is_absolute());
    let mut dirs = Vec::new();
    dirs.extend(var("XDG_CACHE_HOME").map(|d| d.join("gpuscope")));
    dirs.extend(var("HOME").map(|d| d.join(".cache/gpuscope")));
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    dirs.push(std::env::temp_dir().join(format!("gpuscope-{uid}")));
    dirs
}

/// `base/lib-TAG/libgpuscope.so` holding `bytes`: the file already there if
/// it holds them, else written. `base` and the folder must be this user's
/// and writable by no one else, since whoever can write the library runs
/// code in every profiled program.
#[cfg_attr(not(gpuscope_embedded_lib), allow(dead_code))]
fn write_once(base: &Path, bytes: &[u8], tag: &str) -> Result<PathBuf, String> {
    let dir = base.join(format!("lib-{tag}"));
    let path = dir.join("libgpuscope.so");
    let fail = |p: &Path, e: &dyn std::fmt::Display| format!("{}: {e}", p.display());
    fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(|e| fail(&dir, &e))?;
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    for d in [base, &dir] {
        let m = fs::metadata(d).map_err(|e| fail(d, &e))?;
        if m.uid() != uid || m.mode() & 0o022 != 0 {
            return Err(fail(d, &"not private to this user (another user owns it or may write to it)"));
        }
    }
    if fs::read(&path).is_ok_and(|b| b == bytes) {
        return Ok(path);
    }
    // A whole file or none: a program started meanwhile (another `gpuscope
    // run`) never loads half of one.
    let tmp = dir.join(format!(".libgpuscope.so.{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o755).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, &path)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        fail(&path, &e)
    })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpuscope-library-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_missing_library_is_refused_naming_what_was_given() {
        let e = find(Some(PathBuf::from("/nonexistent/libgpuscope.so"))).unwrap_err();
        assert!(e.starts_with("--lib /nonexistent/libgpuscope.so: no such file"), "{e}");
    }

    #[test]
    fn the_library_is_written_once_then_reused_and_rewritten_when_it_differs() {
        let base = scratch("once");
        let path = write_once(&base, b"first", "0.1.0-aa").unwrap();
        assert_eq!(path, base.join("lib-0.1.0-aa/libgpuscope.so"));
        assert_eq!(fs::read(&path).unwrap(), b"first");
        assert_eq!(fs::metadata(base.join("lib-0.1.0-aa")).unwrap().mode() & 0o777, 0o700);
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o755);
        let written = fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        write_once(&base, b"first", "0.1.0-aa").unwrap();
        assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), written, "the same bytes are not written again");
        fs::write(&path, b"damaged").unwrap();
        write_once(&base, b"first", "0.1.0-aa").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"first");
        let others: Vec<_> =
            fs::read_dir(base.join("lib-0.1.0-aa")).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(others, ["libgpuscope.so"], "no temporary file is left");
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_folder_others_may_write_to_is_refused() {
        let base = scratch("shared");
        fs::create_dir_all(&base).unwrap();
        fs::set_permissions(&base, fs::Permissions::from_mode(0o777)).unwrap();
        let e = write_once(&base, b"lib", "0.1.0-bb").unwrap_err();
        assert!(e.contains("not private to this user"), "{e}");
        assert!(!base.join("lib-0.1.0-bb/libgpuscope.so").exists());
        fs::remove_dir_all(&base).unwrap();
    }
}
