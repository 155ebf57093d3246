"""What the PyTorch cost benchmarks share: gpuscope's C ABI through ctypes
and a timed block of training steps."""
import ctypes
import gc
import os
import sys
import time

import torch


class Config(ctypes.Structure):
    """gpuscope_config of ffi/include/gpuscope.h."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("mode", ctypes.c_uint32), ("keep_trace", ctypes.c_uint32),
                ("launch_count", ctypes.c_uint32), ("metrics", ctypes.c_char_p), ("kernel_filter", ctypes.c_char_p),
                ("nvtx_filter", ctypes.c_char_p), ("sampling_interval_us", ctypes.c_uint32),
                ("trace_window_ms", ctypes.c_uint32), ("trace_period_ms", ctypes.c_uint32)]


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
    """The gpuscope_config for a configuration name (None: no session)."""
    kind, *args = name.split(":")
    if kind == "none":
        return None
    c = Config()
    gs.gpuscope_config_init(ctypes.byref(c))
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
