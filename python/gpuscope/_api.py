"""Sessions, ranges and reports."""

import ctypes
import functools
import json
import operator
import os
import tempfile
import sys
import threading
import warnings

from . import _native, _torch_ranges
from ._native import FORMATS, LAUNCH_COUNT_ALL, MODES, GpuscopeError, GpuscopeWarning, check, lib

#: Report file suffixes and their formats, for `output=` without `format=`.
SUFFIXES = {".json": "json", ".csv": "csv", ".txt": "table", ".prom": "openmetrics", ".om": "openmetrics"}

_lock = threading.Lock()
# Counts stopped sessions: the library keeps only the latest one's report.
_generation = 0


def version():
    """The version of gpuscope's library, e.g. "0.1.0"."""
    return lib().gpuscope_version().decode()


def _format_code(format):
    if format not in FORMATS:
        allowed = ", ".join(FORMATS)
        raise ValueError(f"format {format!r} is not one gpuscope writes; allowed: {allowed}")
    return FORMATS[format]


def _format_for(path, format):
    if format is not None:
        _format_code(format)
        return format
    name = os.fspath(path)
    if name.endswith(".chrome.json"):
        return "chrome"
    suffix = os.path.splitext(name)[1]
    if suffix not in SUFFIXES:
        allowed = ", ".join(sorted(SUFFIXES))
        raise ValueError(f"cannot tell the report format from {name!r}: pass format=, or end it in {allowed} or .chrome.json")
    return SUFFIXES[suffix]


def _render(format):
    """The latest stopped session's report in `format`, as text."""
    fd, path = tempfile.mkstemp(prefix="gpuscope-", suffix="." + format)
    os.close(fd)
    try:
        check(lib().gpuscope_write_report(path.encode(), _format_code(format)))
        with open(path, encoding="utf-8") as f:
            return f.read()
    finally:
        os.unlink(path)


class Report:
    """A session's report. The table and JSON are kept; CSV, Chrome trace
    and OpenMetrics are written by the library, which keeps only the latest
    session's report: write them before starting another session."""

    def __init__(self, table, json_text, generation):
        self._table = table
        self._json = json_text
        self._generation = generation
        #: The JSON report as Python objects (schema in the project README).
        self.data = json.loads(json_text)

    def table(self):
        """The terminal table (what `gpuscope run` prints)."""
        return self._table

    def to_json(self):
        """The JSON report as a string."""
        return self._json

    def write(self, path, format=None):
        """Writes the report to `path` in `format` ("table", "json", "csv",
        "chrome", "openmetrics"; default: from the file's suffix)."""
        format = _format_for(path, format)
        if format in ("table", "json"):
            with open(path, "w", encoding="utf-8") as f:
                f.write(self._table if format == "table" else self._json)
            return
        with _lock:
            if self._generation != _generation:
                raise GpuscopeError(
                    _native.ERR_STATE,
                    f"a later session or snapshot replaced this report in gpuscope's library; {format} can be "
                    "written only for the latest one (table and JSON always)",
                )
            check(lib().gpuscope_write_report(os.fsencode(path), _format_code(format)))

    def __repr__(self):
        seconds = (self.data.get("end_ns", 0) - self.data.get("start_ns", 0)) / 1e9
        return f"<gpuscope.Report {self.data.get('mode')} {seconds:.2f} s, {len(self.data.get('kernels', []))} kernels>"


class profile:
    """A profiling session for a `with` block (or `start()`/`stop()`).

    mode: "trace" (every kernel, timed and attributed to NVTX ranges),
    "metrics" (plus hardware counters on selected launches: `metrics`,
    `kernel_filter`, `nvtx_filter`, `launch_count` (or "all"), `every`) or
    "sampling" (plus device-wide counters sampled every
    `sampling_interval_us`; `trace_windows=(window_ms, period_ms)` traces
    kernels only part of the time; `(0, 1000)`: never, the cheapest setting
    to leave on). With `trace_windows`, `metrics` and the selection are
    what a metrics pass asked of the live process (`gpuscope trigger PID
    --metrics 5s`) measures; `metrics="checklist"` names why its heavy
    kernels are slow. `output`: also write the report there (format from
    `format` or the suffix). Without a GPU, driver or CUPTI, or when
    another profiler holds CUPTI, it warns (`GpuscopeWarning`) and the
    block runs unprofiled, or raises `GpuscopeError` with `strict=True`.
    Bad arguments always raise. `torch_ranges=True` (or a depth): PyTorch's
    automatic ranges while the block runs (see `annotate`); `"stack"` (or
    `("stack", depth)`): modules and the optimizer found on the Python stack
    at each launch, with no hook per call.
    `prometheus="HOST:PORT"` (or ":PORT"): the running figures served for
    Prometheus. The switches `device_memory`, `memory_records`,
    `sync_records`, `launch_attribution` and `cross_thread_ranges` and the
    bounds `keep_trace`, `buffer_size`, `max_buffers`, `host_queue` and
    `max_live_ranges` are those of every interface (unset: the library's
    defaults; docs/reference/configuration.md). Any other switch or count of
    that reference can be given by its name too (`**settings`, e.g.
    `sync_records=False`), checked by the library when the block starts.
    After the block, `report` holds the report (`None` if unprofiled)."""

    def __init__(self, mode="trace", output=None, format=None, *, metrics=None, kernel_filter=None,
                 nvtx_filter=None, launch_count=None, every=None, keep_trace=None, sampling_interval_us=None,
                 trace_windows=None, torch_ranges=None, device_memory=True, memory_records=True,
                 sync_records=True, launch_attribution=True, cross_thread_ranges=True, buffer_size=None,
                 max_buffers=None, host_queue=None, max_live_ranges=None, prometheus=None, strict=False,
                 **settings):
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not a gpuscope mode; allowed: {', '.join(MODES)}")
        self.mode = mode
        self.output = output
        self.format = _format_for(output, format) if output is not None else None
        self.strict = strict
        self._torch_ranges = None if torch_ranges in (None, False) else _torch_depth(torch_ranges)
        self._hooks = None
        self._own_hooks = False
        self._stack = None
        #: With `torch_ranges`, after the block: which calls' FLOPs were
        #: counted, in words.
        self.torch_flops = None
        if launch_count == "all":
            launch_count = LAUNCH_COUNT_ALL
        self._options = dict(metrics=metrics, kernel_filter=kernel_filter, nvtx_filter=nvtx_filter,
                             prometheus=prometheus, launch_count=launch_count, every=every, keep_trace=keep_trace,
                             sampling_interval_us=sampling_interval_us, buffer_size=buffer_size,
                             max_buffers=max_buffers, host_queue=host_queue, max_live_ranges=max_live_ranges,
                             trace_windows=trace_windows)
        self._switches = dict(device_memory=device_memory, memory_records=memory_records,
                              sync_records=sync_records, launch_attribution=launch_attribution,
                              cross_thread_ranges=cross_thread_ranges)
        for name, on in self._switches.items():
            if on not in (True, False):
                raise ValueError(f"{name}={on!r}; allowed: True or False")
        self.device_memory = device_memory
        self._settings = {}
        for name, value in settings.items():
            if isinstance(value, bool):
                value = "on" if value else "off"
            elif not isinstance(value, (int, str)) or "," in str(value) or "=" in str(value):
                raise ValueError(f"{name}={value!r} is not valid; allowed: True, False or a whole number")
            self._settings[name] = str(value)
        #: The report, after the session stopped (`None` when nothing was
        #: profiled: `reason` says why).
        self.report = None
        #: Why the block ran unprofiled (no GPU, driver or CUPTI; another
        #: profiler holds CUPTI), else `None`.
        self.reason = None
        #: Whether a session is (or was) running for this block.
        self.profiled = False
        self._running = False

    def _config(self):
        cfg = _native.Config()
        check(_native.init_config(cfg))
        if cfg.struct_size != ctypes.sizeof(_native.Config):
            raise GpuscopeError(_native.ERR_INTERNAL,
                                f"this gpuscope package and its library {_native.library_path()} disagree on the "
                                f"configuration ({ctypes.sizeof(_native.Config)} vs {cfg.struct_size} bytes): reinstall")
        o = self._options
        cfg.mode = MODES[self.mode]
        for name in ("metrics", "kernel_filter", "nvtx_filter", "prometheus"):
            if o[name] is not None:
                setattr(cfg, name, str(o[name]).encode())
        for name in ("launch_count", "every", "keep_trace", "sampling_interval_us", "buffer_size", "max_buffers",
                     "host_queue", "max_live_ranges"):
            if o[name] is not None:
                shown = "all" if name == "launch_count" and o[name] == LAUNCH_COUNT_ALL else o[name]
                allowed = "1 or more, or 'all'" if name == "launch_count" else f"0 to {2**32 - 1}"
                try:
                    # Whole numbers only: int() would round 2.5 down and
                    # take True for 1.
                    if isinstance(o[name], bool):
                        raise TypeError
                    value = operator.index(o[name])
                except TypeError:
                    raise ValueError(f"{name}={shown!r} is not valid; allowed: {allowed}") from None
                if not 0 <= value < 2**32 or (name == "launch_count" and value == 0):
                    raise ValueError(f"{name}={shown!r} is not valid; allowed: {allowed}")
                setattr(cfg, name, value)
        if o["trace_windows"] is not None:
            try:
                window, period = (int(x) for x in o["trace_windows"])
            except (TypeError, ValueError):
                raise ValueError(f"trace_windows={o['trace_windows']!r} is not (window_ms, period_ms)") from None
            cfg.trace_window_ms, cfg.trace_period_ms = window, period
        for name, on in self._switches.items():
            setattr(cfg, name, int(on))
        if self._settings:
            # Checked, with the nearest name for a misspelt one, by the
            # library's settings registry.
            cfg.settings = ",".join(f"{k}={v}" for k, v in self._settings.items()).encode()
        return cfg

    def start(self):
        """Starts the session (see the class)."""
        if self._running:
            raise GpuscopeError(_native.ERR_STATE, "this profile is already running")
        cfg = self._config()
        # The byte strings live in cfg's fields for the call.
        code = lib().gpuscope_start(ctypes.byref(cfg))
        if code == _native.OK:
            self.profiled = self._running = True
            try:
                self._install_torch_ranges()
            except BaseException:
                # No session may outlive a start that raised.
                self._running = False
                with _lock:
                    lib().gpuscope_stop()
                raise
        elif code in (_native.ERR_NO_GPU, _native.ERR_BUSY, _native.ERR_CUPTI) and not self.strict:
            message = (lib().gpuscope_last_error() or b"").decode("utf-8", "replace")
            self.reason = message
            warnings.warn(f"gpuscope: {message}. The program runs on unprofiled.", GpuscopeWarning, stacklevel=3)
        elif code == _native.ERR_INVALID and self._settings:
            message = (lib().gpuscope_last_error() or b"").decode("utf-8", "replace")
            # The keywords given by name went through the C settings string:
            # named as the caller typed them.
            raise GpuscopeError(code, message.replace("gpuscope_config.settings", "profile() keyword")
                                or f"gpuscope error {code}")
        else:
            check(code)
        return self

    def _install_torch_ranges(self):
        """`torch_ranges`' modules from the Python stack or hooks, for the
        block."""
        if isinstance(self._torch_ranges, tuple):
            env = getattr(sys.modules.get("_gpuscope_torch_ranges"), "ACTIVE", None)
            # (Modules `gpuscope run --torch-ranges=stack` registered stay.)
            if not getattr(env, "stack", False):
                depth = None if self._torch_ranges[1] == "auto" else self._torch_ranges[1]
                self._stack = _torch_ranges.StackModules(str(_native.library_path()), depth=depth).install()
        elif self._torch_ranges is not None:
            depth = None if self._torch_ranges == "auto" else self._torch_ranges
            self._hooks, self._own_hooks = _torch_hooks(depth)
            # For this block only: hooks installed before keep their own
            # setting after it.
            self._sample_memory_before = self._hooks.sample_memory
            self._hooks.sample_memory = self.device_memory

    def snapshot(self):
        """The report so far, the session running on (`None` if
        unprofiled): every record CUPTI holds, ranges with their closed
        instances, no per-kernel records. Its CSV, Chrome trace and
        OpenMetrics can be written until the next snapshot or stop."""
        global _generation
        if not self._running:
            if self.reason is not None:
                return None
            raise GpuscopeError(_native.ERR_STATE, "this profile is not running")
        with _lock:
            check(lib().gpuscope_snapshot())
            _generation += 1
            return Report(_render("table"), _render("json"), _generation)

    def stop(self):
        """Stops the session; returns its report (`None` if unprofiled)."""
        global _generation
        if not self._running:
            return self.report
        self._running = False
        if self._stack is not None:
            self._stack.uninstall()
            self._stack = None
        if self._hooks is not None:
            self.torch_flops = self._hooks.summary()
            self._hooks.sample_memory = self._sample_memory_before
            # Hooks installed for this block come off with it.
            if self._own_hooks:
                self._hooks.uninstall()
            else:
                self._hooks.close_step()
            self._hooks = None
        with _lock:
            check(lib().gpuscope_stop())
            _generation += 1
            self.report = Report(_render("table"), _render("json"), _generation)
        if self.output is not None:
            self.report.write(self.output, self.format)
        return self.report

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


class Range:
    """An NVTX range on the calling thread: `with gpuscope.range("step"):`
    or `@gpuscope.range("forward")`. Other NVTX tools see it too; ranges
    pushed with `torch.cuda.nvtx` nest with it."""

    def __init__(self, name):
        self.name = str(name)
        self._name = self.name.encode()

    def __enter__(self):
        check(lib().gpuscope_range_push(self._name))
        return self

    def __exit__(self, *exc):
        check(lib().gpuscope_range_pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return wrapper


def _torch_depth(value):
    if value is True:
        return "auto"
    if value == "stack":
        return ("stack", "auto")
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "stack":
        depth = value[1]
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise ValueError(f"torch_ranges={value!r}: (\"stack\", N) takes a depth of 1 or more")
        return ("stack", depth)
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(f"torch_ranges={value!r}: a depth of 1 or more, or True")
        return value
    raise ValueError(f"torch_ranges={value!r}: allowed: True (default depth), a depth of 1 or more, \"stack\" or "
                     "(\"stack\", N) (modules from the Python stack, no hooks), None")


def _torch_hooks(depth, discover=True):
    """The process's PyTorch hooks and whether this call installed them:
    those of `gpuscope run --torch-ranges`, else the package's (installed at
    the first use; a later use with `discover` turns model discovery on)."""
    env = getattr(sys.modules.get("_gpuscope_torch_ranges"), "ACTIVE", None)
    if env is not None and not getattr(env, "stack", False):
        return env, False
    hooks = _torch_ranges.ACTIVE
    if hooks is not None and hooks.installed:
        if discover:
            hooks.discover()
        return hooks, False
    hooks = _torch_ranges.TorchRanges(_torch_ranges.Library(str(_native.library_path())), depth=depth)
    _torch_ranges.ACTIVE = hooks.install(discover=discover)
    return hooks, True


def annotate(model, depth=None):
    """Ranges for a PyTorch model with no change to its code: its forward
    (`forward/<module>/...`) and backward per module by qualified name to
    `depth` levels (default: one level inside its repeated blocks, such as
    decoder layers), plus `step` (one per optimizer step), `data`
    (DataLoader waits), `backward` and `optimizer`; model FLOPs counted
    from the shapes of `F.linear`, convolution and
    `scaled_dot_product_attention` calls give MFU without `declare_flops`.
    Returns `model`."""
    if depth is not None:
        _torch_depth(depth)
    hooks, _ = _torch_hooks(None, discover=False)
    return hooks.annotate(model, depth=depth)


def declare_flops(range, flops_per_call):
    """The model FLOPs one call of NVTX range `range` performs (e.g.
    6 * parameters * tokens per training step): the report gives its MFU."""
    check(lib().gpuscope_declare_flops(str(range).encode(), float(flops_per_call)))


def declare_work(range, amount_per_call, unit=None):
    """The work one call of `range` processes (e.g. 4096 "tokens"): the
    report gives its throughput."""
    check(lib().gpuscope_declare_work(str(range).encode(), float(amount_per_call),
                                      None if unit is None else str(unit).encode()))


__all__ = ["GpuscopeError", "GpuscopeWarning", "Range", "Report", "annotate", "declare_flops", "declare_work", "profile", "version"]
