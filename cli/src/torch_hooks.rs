//! `run --torch-ranges`: PyTorch's automatic ranges in a program that does
//! not import gpuscope. A folder put first on `PYTHONPATH` holds the hooks
//! and a `sitecustomize` that installs them once the program has imported
//! torch (running the program's own `sitecustomize` too).

use std::path::PathBuf;

/// The hooks, the same file as the Python package's.
const HOOKS: &str = include_str!("../../python/gpuscope/_torch_ranges.py");

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

/// Writes the folder (one per `run`); the caller removes it.
pub(crate) fn write() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("gpuscope-torch-{}", std::process::id()));
    let files = [("sitecustomize.py", SITECUSTOMIZE), ("_gpuscope_torch_ranges.py", HOOKS)];
    std::fs::create_dir_all(&dir)
        .and_then(|()| files.iter().try_for_each(|(name, text)| std::fs::write(dir.join(name), text)))
        .map_err(|e| format!("--torch-ranges: cannot write the PyTorch hooks to {}: {e}", dir.display()))?;
    Ok(dir)
}
