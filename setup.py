"""The wheel's native files, built by setuptools-rust: gpuscope's shared
library (the C ABI the package calls through ctypes, and the injection
shim) and the `gpuscope` program, both into the package's `_bin/` folder.
The Python code is pure: the wheel is for any Python 3, on this platform.

cargo is `CARGO` (default: the one on PATH) and builds for
`CARGO_BUILD_TARGET` (default: this machine) into `CARGO_TARGET_DIR`
(default: target/wheel, apart from the workspace's own builds); a release
points these at cargo-zigbuild and an old glibc (scripts/release.sh)."""

import os
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools_rust import Binding, RustExtension, build_rust

ROOT = Path(__file__).resolve().parent

# Release builds without debug info, stripped: the wheel ships them as is.
ENV = {"CARGO_PROFILE_RELEASE_DEBUG": "0", "CARGO_PROFILE_RELEASE_STRIP": "symbols"}
ENV.update(os.environ)
ENV.setdefault("CARGO_TARGET_DIR", str(ROOT / "target" / "wheel"))


class BuildRust(build_rust):
    def get_dylib_ext_path(self, ext, target_fname):
        # ctypes loads the library by its own name, not a Python module's
        # (libgpuscope.cpython-311-x86_64-linux-gnu.so).
        return str(Path(super().get_dylib_ext_path(ext, target_fname)).with_name("libgpuscope.so"))


class PlatformWheel(bdist_wheel):
    """Any Python 3, but only this platform (the native files)."""

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(
    rust_extensions=[
        RustExtension(
            "gpuscope._bin.libgpuscope",
            path="ffi/Cargo.toml",
            binding=Binding.NoBinding,
            args=["--locked"],
            env=ENV,
        ),
        # The program finds the library beside it: it need not carry a copy.
        RustExtension(
            "gpuscope._bin.gpuscope",
            path="cli/Cargo.toml",
            binding=Binding.Exec,
            args=["--locked", "--no-default-features"],
            env=ENV,
        ),
    ],
    cmdclass={"build_rust": BuildRust, "bdist_wheel": PlatformWheel},
)
