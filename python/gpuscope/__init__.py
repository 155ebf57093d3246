"""gpuscope: per-kernel, per-NVTX-range GPU profiling from hardware
counters, in-process.

    with gpuscope.profile(mode="trace") as p:
        with gpuscope.range("step"):
            train_step()
    print(p.report.table())

Importing gpuscope makes its library the process's NVTX tool
(`NVTX_INJECTION64_PATH`, unless set), so ranges pushed with
`torch.cuda.nvtx` after the import are attributed too."""

import os as _os

from ._api import Range, Report, annotate, declare_flops, declare_work, profile, version
from ._native import GpuscopeError, GpuscopeWarning, library_path

#: `gpuscope.range("name")`: a context manager and decorator (see `Range`).
range = Range

if "NVTX_INJECTION64_PATH" not in _os.environ and library_path().exists():
    _os.environ["NVTX_INJECTION64_PATH"] = str(library_path())

__version__ = "0.1.0"
__all__ = ["GpuscopeError", "GpuscopeWarning", "Range", "Report", "annotate", "declare_flops", "declare_work", "library_path",
           "profile", "range", "version"]
