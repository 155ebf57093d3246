"""Shared by the real-program suite: NVTX ranges that cost nothing when
off, and the plain timing line the suite's summary reads."""
import contextlib
import json
import time


def ranges(on):
    """`rng("step")`: a torch.cuda.nvtx range when `on`, else nothing."""
    if not on:
        return lambda name: contextlib.nullcontext()
    import torch

    return torch.cuda.nvtx.range


class Timer:
    """Times steps after warm-up: `mark()` at the first timed step, `done(n)`
    after the last (with the device synchronised by the caller)."""

    def __init__(self):
        self.t0 = None

    def mark(self):
        self.t0 = time.perf_counter()

    def done(self, steps, **extra):
        ms = 1e3 * (time.perf_counter() - self.t0) / max(steps, 1)
        print("SUITE " + json.dumps({"step_ms": round(ms, 4), "steps": steps, **extra}), flush=True)
