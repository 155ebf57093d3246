//! `run --torch-ranges`: PyTorch's automatic ranges in a program that does
//! not import gpuscope. A folder put first on `PYTHONPATH` holds the hooks
//! and a `sitecustomize` that installs them once the program has imported
//! torch (running the program's own `sitecustomize` too).

use std::path::PathBuf;

/// The hooks, the same file as the Python package's (`torch_ranges.py` is a
/// link to it, which `cargo package` copies into the published crate).
const HOOKS: &str = include_str!("torch_ranges.py");

const SITECUSTOMIZE: &str = r#"# Written by `gpuscope run --torch-ranges`: installs gpuscope's PyTorch
# ranges once the program has imported torch.
import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _shadowed():
    # The sitecustomize this one hides, if any, runs too.
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _install():
    try:
        import _gpuscope_torch_ranges as hooks
        hooks.ACTIVE = hooks.install_from_environment()
    except Exception as e:  # the program runs on without the ranges
        print(f"gpuscope: PyTorch ranges not installed: {e!r}", file=sys.stderr)


class _AfterTorch:
    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_install(module):
            exec_module(module)
            _install()

        spec.loader.exec_module = exec_then_install
        return spec


try:
    _shadowed()
finally:
    if "torch" in sys.modules:
        _install()
    else:
        sys.meta_path.insert(0, _AfterTorch())
"#;

/// Writes the folder (one per `run`); the caller removes it. The folder is
/// new, made by this call with a name no one can guess (a folder or link
/// planted in the temporary directory is never written through), and only
/// its owner may enter it.
pub(crate) fn write() -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let files = [("sitecustomize.py", SITECUSTOMIZE), ("_gpuscope_torch_ranges.py", HOOKS)];
    let mut last = None;
    for _ in 0..16 {
        let dir = std::env::temp_dir().join(format!("gpuscope-torch-{}-{:016x}", std::process::id(), unguessable()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {
                return files
                    .iter()
                    .try_for_each(|(name, text)| std::fs::write(dir.join(name), text))
                    .map(|()| dir.clone())
                    .map_err(|e| format!("--torch-ranges: cannot write the PyTorch hooks to {}: {e}", dir.display()));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(format!("--torch-ranges: cannot make a folder in {}: {e}", dir.display())),
        }
    }
    Err(format!("--torch-ranges: no new folder could be made in {}: {last:?}", std::env::temp_dir().display()))
}

/// 64 bits no other user can predict: the standard library's per-process
/// random hash keys, mixed with the time.
fn unguessable() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn each_run_gets_a_new_folder_of_its_own() {
        let (a, b) = (super::write().expect("a folder"), super::write().expect("another"));
        assert_ne!(a, b, "never the same folder twice");
        for d in [&a, &b] {
            assert!(d.join("sitecustomize.py").is_file() && d.join("_gpuscope_torch_ranges.py").is_file());
            assert_eq!(std::fs::metadata(d).expect("made").permissions().mode() & 0o777, 0o700);
            std::fs::remove_dir_all(d).expect("removed");
        }
    }
}
