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
    """`gpuscope_config`; `init_config` fills it, of its own size."""

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
        ("settings", ctypes.c_char_p),
    ]


def init_config(cfg):
    """Fills `cfg` (a `Config`) with the library's defaults, no byte past
    its own size (`gpuscope_config_init_sized`; a library before it has
    only `gpuscope_config_init`, which fills the same 0.1.0 layout)."""
    init = getattr(lib(), "gpuscope_config_init_sized", None)
    if init is None:
        return lib().gpuscope_config_init(ctypes.byref(cfg))
    return init(ctypes.byref(cfg), ctypes.sizeof(cfg))


def library_path():
    """The shared library: `GPUSCOPE_LIB`, else the one in this package."""
    env = os.environ.get("GPUSCOPE_LIB")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / "_bin" / "libgpuscope.so"


def python_sites():
    """This interpreter's site-packages folders (`GPUSCOPE_PYTHON_SITE`): the
    library looks in them for CUPTI from NVIDIA's wheels (`nvidia/cu13/lib`,
    `nvidia/cuda_cupti/lib`; PyTorch's CUDA wheels bring it) after the system's
    places, so that it is found in an environment that is not activated or
    in a user or system install too."""
    import site
    import sys

    found = []
    try:
        found.extend(site.getsitepackages())
    except AttributeError:  # virtualenv's old site.py
        pass
    user = getattr(site, "getusersitepackages", lambda: None)()
    if user:
        found.append(user)
    found.extend(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    unique = []
    for p in found:
        if p not in unique and os.path.isdir(p):
            unique.append(p)
    return os.pathsep.join(unique)


def native_env(env):
    """Sets in `env` (a mapping: `os.environ` or a child's) what the library
    needs from the package, unless the user set it."""
    if not env.get("GPUSCOPE_PYTHON_SITE"):
        sites = python_sites()
        if sites:
            env["GPUSCOPE_PYTHON_SITE"] = sites
    return env


def command_path():
    """The `gpuscope` program in this package."""
    return Path(__file__).resolve().parent / "_bin" / "gpuscope"


_lib = None


def lib():
    """The loaded library (loaded once); `GpuscopeError` if it cannot be."""
    global _lib
    if _lib is None:
        path = library_path()
        native_env(os.environ)
        try:
            handle = ctypes.CDLL(str(path))
        except OSError as e:
            raise GpuscopeError(ERR_INTERNAL, f"gpuscope's library could not be loaded from {path}: {e}") from None
        if hasattr(handle, "gpuscope_config_init_sized"):
            handle.gpuscope_config_init_sized.argtypes = [ctypes.POINTER(Config), ctypes.c_size_t]
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
