"""gpuscope's build backend: setuptools' own (setup.py has setuptools-rust
build the native files), after one check. Building a wheel from source
needs cargo; without it the build stops before anything runs, with one line
that says how to get it, rather than deep in setuptools' output."""

import os
import shutil

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (every other hook, as is)


def _require_cargo():
    cargo = os.environ.get("CARGO") or "cargo"
    if shutil.which(cargo) is None:
        raise SystemExit(
            f"gpuscope: building from source needs Rust's cargo, and {cargo!r} is not on PATH. "
            "Install Rust with rustup (https://rustup.rs) and retry, or install a prebuilt wheel."
        )


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _require_cargo()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _require_cargo()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
