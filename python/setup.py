"""Builds the wheel: cargo builds the shared library (C ABI and injection
shim) and the `gpuscope` command from this repository's workspace, and both
go into the package's `_bin/` folder. The Python code is pure; the wheel
is tagged for the platform because of the two native files."""

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

WORKSPACE = Path(__file__).resolve().parent.parent
NATIVE = ("libgpuscope.so", "gpuscope")


class BuildWithCargo(build_py):
    """Copies the Python sources, then builds and adds the native files."""

    def run(self):
        # A reused build folder must not carry files of an earlier build.
        shutil.rmtree(Path(self.build_lib) / "gpuscope", ignore_errors=True)
        super().run()
        target = Path(os.environ.get("GPUSCOPE_WHEEL_TARGET", WORKSPACE / "target" / "wheel"))
        env = dict(os.environ, CARGO_PROFILE_RELEASE_DEBUG="0", CARGO_PROFILE_RELEASE_STRIP="symbols")
        cmd = [os.environ.get("CARGO", "cargo"), "build", "--release", "--locked",
               "-p", "gpuscope-ffi", "-p", "gpuscope-cli", "--target-dir", str(target)]
        subprocess.run(cmd, cwd=WORKSPACE, env=env, check=True)
        dest = Path(self.build_lib) / "gpuscope" / "_bin"
        dest.mkdir(parents=True, exist_ok=True)
        for name in NATIVE:
            shutil.copy2(target / "release" / name, dest / name)


class PlatformWheel(bdist_wheel):
    """Any Python 3, but only this platform (the native files)."""

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


class NativeDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithCargo, "bdist_wheel": PlatformWheel}, distclass=NativeDistribution)
