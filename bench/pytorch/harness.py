"""What the PyTorch cost benchmarks share: gpuscope's C ABI through ctypes
and a timed block of training steps."""
import ctypes
import gc
import os
import sys
import time

import torch


def _package_config():
    """gpuscope_config as the package keeps it (checked against the header
    by python/tests/test_header.py), loaded from its file alone (importing
    the package would make it the NVTX tool)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "gpuscope", "_native.py")
    spec = importlib.util.spec_from_file_location("_gpuscope_native", path)
    native = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(native)
    return native.Config


Config = _package_config()


def load(path):
    """libgpuscope.so, with its error string typed."""
    gs = ctypes.CDLL(os.path.abspath(path))
    gs.gpuscope_last_error.restype = ctypes.c_char_p
    return gs


def timer(step, steps):
    """A function timing `steps` calls of `step` (GPU work included, the
    garbage collector off inside), in seconds. Given a list, it appends the
    time.perf_counter() at the end of each step (host side: the GPU may
    still run the step's kernels)."""
    def block(marks=None):
        gc.collect()
        gc.disable()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
            if marks is not None:
                marks.append(time.perf_counter())
        torch.cuda.synchronize()
        t = time.perf_counter() - t0
        gc.enable()
        return t
    return block


def config(gs, name):
    """The gpuscope_config for a configuration name (None: no session);
    `@NAME=VALUE,...` after it sets more settings by name
    (`trace@calibrate=off`; `;` for `,` where commas separate
    configurations)."""
    name, _, settings = name.partition("@")
    kind, *args = name.split(":")
    if kind == "none":
        return None
    c = Config()
    init = getattr(gs, "gpuscope_config_init_sized", None)  # libraries before it: the legacy call
    if init is None:
        gs.gpuscope_config_init(ctypes.byref(c))
    else:
        init.argtypes = [ctypes.POINTER(Config), ctypes.c_size_t]
        init(ctypes.byref(c), ctypes.sizeof(c))
    if settings:
        # Kept alive with the config: ctypes holds only the pointer.
        c._settings = settings.replace(";", ",").encode()
        c.settings = c._settings
    if kind == "trace":
        return c
    if kind not in ("sampling", "windows"):
        sys.exit(f"unknown configuration {name!r}: none, trace, sampling[:US], windows[:US[:W/P]]")
    c.mode = 2
    if args and args[0]:
        c.sampling_interval_us = int(args[0])
    if kind == "windows":
        w, p = (args[1] if len(args) > 1 else "100/1000").split("/")
        c.trace_window_ms, c.trace_period_ms = int(w), int(p)
    return c


def start(gs, c, name):
    """Starts a gpuscope session with config `c` (named `name`), or exits
    saying why not."""
    if gs.gpuscope_start(ctypes.byref(c)) != 0:
        sys.exit(f"gpuscope_start({name}): {gs.gpuscope_last_error().decode()}")
