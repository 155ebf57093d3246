"""gpuscope's shared library through ctypes: where it is, its C ABI
(`gpuscope.h`), and its errors as Python exceptions."""

import ctypes
import os
from pathlib import Path

#: Return codes of the C ABI (`GPUSCOPE_OK`, `GPUSCOPE_ERR_*`).
OK, ERR_NO_GPU, ERR_BUSY, ERR_INVALID, ERR_STATE, ERR_IO, ERR_CUPTI, ERR_INTERNAL, ERR_UNSUPPORTED = range(9)
#: `GPUSCOPE_MODE_*`.
MODES = {"trace": 0, "metrics": 1, "sampling": 2}
#: `GPUSCOPE_FORMAT_*`.
FORMATS = {"table": 0, "json": 1, "csv": 2, "chrome": 3, "openmetrics": 4}
#: `GPUSCOPE_LAUNCH_COUNT_ALL`: every launch is measured.
LAUNCH_COUNT_ALL = 2**32 - 1


class GpuscopeError(Exception):
    """A gpuscope call failed; `code` is the C ABI's `GPUSCOPE_ERR_*`."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class GpuscopeWarning(UserWarning):
    """The program runs on unprofiled (no GPU, driver or CUPTI; another
    profiler holds CUPTI)."""


class Config(ctypes.Structure):
    """`gpuscope_config`; `gpuscope_config_init` checks its size."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("mode", ctypes.c_uint32),
        ("keep_trace", ctypes.c_uint32),
        ("launch_count", ctypes.c_uint32),
        ("metrics", ctypes.c_char_p),
        ("kernel_filter", ctypes.c_char_p),
        ("nvtx_filter", ctypes.c_char_p),
        ("sampling_interval_us", ctypes.c_uint32),
        ("trace_window_ms", ctypes.c_uint32),
        ("trace_period_ms", ctypes.c_uint32),
        ("device_memory", ctypes.c_uint32),
        ("every", ctypes.c_uint32),
        ("cross_thread_ranges", ctypes.c_uint32),
        ("sync_records", ctypes.c_uint32),
        ("memory_records", ctypes.c_uint32),
        ("launch_attribution", ctypes.c_uint32),
        ("buffer_size", ctypes.c_uint32),
        ("max_buffers", ctypes.c_uint32),
        ("host_queue", ctypes.c_uint32),
        ("max_live_ranges", ctypes.c_uint32),
        ("prometheus", ctypes.c_char_p),
    ]


def library_path():
    """The shared library: `GPUSCOPE_LIB`, else the one in this package."""
    env = os.environ.get("GPUSCOPE_LIB")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / "_bin" / "libgpuscope.so"


def command_path():
    """The `gpuscope` program in this package."""
    return Path(__file__).resolve().parent / "_bin" / "gpuscope"


_lib = None


def lib():
    """The loaded library (loaded once); `GpuscopeError` if it cannot be."""
    global _lib
    if _lib is None:
        path = library_path()
        try:
            handle = ctypes.CDLL(str(path))
        except OSError as e:
            raise GpuscopeError(ERR_INTERNAL, f"gpuscope's library could not be loaded from {path}: {e}") from None
        handle.gpuscope_config_init.argtypes = [ctypes.POINTER(Config)]
        handle.gpuscope_start.argtypes = [ctypes.POINTER(Config)]
        handle.gpuscope_write_report.argtypes = [ctypes.c_char_p, ctypes.c_int]
        handle.gpuscope_declare_flops.argtypes = [ctypes.c_char_p, ctypes.c_double]
        handle.gpuscope_declare_work.argtypes = [ctypes.c_char_p, ctypes.c_double, ctypes.c_char_p]
        handle.gpuscope_range_push.argtypes = [ctypes.c_char_p]
        for name in ("gpuscope_last_error", "gpuscope_version"):
            getattr(handle, name).restype = ctypes.c_char_p
        _lib = handle
    return _lib


def check(code):
    """Raises `GpuscopeError` with the library's message for a failed call."""
    if code != OK:
        message = (lib().gpuscope_last_error() or b"").decode("utf-8", "replace")
        raise GpuscopeError(code, message or f"gpuscope error {code}")
