"""What kernel records cost the GPU itself: the GPU time of a burst of
kernels queued back to back (launched while a sleep kernel holds the
stream, so that the host cannot pace them), with no session and under each
configuration, alternating in one process like overhead.py.

    python3 bench/pytorch/gpu_gap.py --gpuscope libgpuscope.so \
        --floor libcupti_floor.so --rounds 6 --out gpu_gap.json

Per kernel shape and configuration it prints the burst's GPU time per
kernel (cudaEvent elapsed time over the burst, median over rounds) and its
difference from the plain blocks around it. A burst whose launches took
longer on the host than the sleep ahead of it is not queued: counted and
left out.
"""
import argparse
import ctypes
import json
import os
import statistics as st
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from harness import config, load  # noqa: E402
from harness import start as start_session  # noqa: E402

FLOORS = {"floor": (1, 0), "+runtime": (1, 3), "+kinds": (7, 7)}


def shapes(dev):
    """Kernels of a few sizes: name -> a function launching one kernel."""
    tiny = torch.zeros(1, device=dev)
    mid = torch.ones(1 << 22, device=dev)
    a = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
    b = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
    c = torch.empty(2048, 2048, device=dev, dtype=torch.bfloat16)
    return {
        "tiny": lambda: tiny.add_(1),
        "mid": lambda: mid.mul_(1.0000001),
        "gemm": lambda: torch.mm(a, b, out=c),
    }


def burst(fn, n, sleep_cycles):
    """GPU seconds of `n` queued launches of `fn`, and whether they were
    queued (the host finished launching before the sleep ended)."""
    e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    torch.cuda.synchronize()
    e0.record()
    torch.cuda._sleep(sleep_cycles)
    e1.record()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    host = time.perf_counter() - t0
    e2.record()
    torch.cuda.synchronize()
    slept = e0.elapsed_time(e1) / 1e3
    return e1.elapsed_time(e2) / 1e3, host < 0.8 * slept


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuscope", required=True)
    ap.add_argument("--floor")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--n", type=int, default=1000, help="kernels a burst")
    ap.add_argument("--sleep-ms", type=float, default=60)
    ap.add_argument("--configs", default="floor,+kinds,gpuscope")
    ap.add_argument("--report", help="write the last gpuscope session's report here (JSON): its kernels' "
                    "recorded durations against the bursts' time tell a cost between kernels from one inside them")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    gs = load(a.gpuscope)
    fl = ctypes.CDLL(os.path.abspath(a.floor)) if a.floor else None
    dev = torch.device("cuda")
    ks = shapes(dev)
    # The sleep kernel's cycles for the wanted time, measured.
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        e0.record()
        torch.cuda._sleep(10_000_000)
        e1.record()
        torch.cuda.synchronize()
    per_ms = 10_000_000 / e0.elapsed_time(e1)
    cycles = int(per_ms * a.sleep_ms)
    for fn in ks.values():
        for _ in range(50):
            fn()
    torch.cuda.synchronize()

    def block():
        out = {}
        for name, fn in ks.items():
            t, queued = burst(fn, a.n, cycles)
            out[name] = (t / a.n, queued)
        return out

    def start(cfg):
        if cfg == "gpuscope":
            start_session(gs, config(gs, "trace"), cfg)
        else:
            kinds, cbs = FLOORS[cfg]
            if fl.floor_start(kinds, cbs) != 0:
                sys.exit(f"floor_start({cfg}) failed")

    def stop(cfg):
        if cfg == "gpuscope":
            gs.gpuscope_stop()
            if a.report:
                gs.gpuscope_write_report(a.report.encode(), 1)
        else:
            r, d, rt = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
            fl.floor_stop(ctypes.byref(r), ctypes.byref(d), ctypes.byref(rt))

    configs = a.configs.split(",")
    diffs = {c: {k: [] for k in ks} for c in configs}
    per = {c: {k: [] for k in ks} for c in configs + ["plain"]}
    not_queued = 0
    for r in range(a.rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        before = block()
        for cfg in order:
            start(cfg)
            block()  # the first traced bursts: CUPTI's buffers, calibration
            during = block()
            stop(cfg)
            after = block()
            for k in ks:
                ok = before[k][1] and during[k][1] and after[k][1]
                if not ok:
                    not_queued += 1
                    continue
                plain = (before[k][0] + after[k][0]) / 2
                per["plain"][k].append(plain)
                per[cfg][k].append(during[k][0])
                diffs[cfg][k].append(during[k][0] - plain)
            before = after
    print(f"sleep {a.sleep_ms} ms ahead of each burst of {a.n}; bursts not queued, left out: {not_queued}")
    print(f"{'config':<10} " + " ".join(f"{k + ' us/kernel':>22}" for k in ks))
    print(f"{'plain':<10} " + " ".join(f"{1e6 * st.median(per['plain'][k]):22.3f}" if per['plain'][k] else f"{'-':>22}"
                                       for k in ks))
    for c in configs:
        cells = []
        for k in ks:
            if diffs[c][k]:
                cells.append(f"{1e6 * st.median(per[c][k]):9.3f} ({1e6 * st.median(diffs[c][k]):+7.3f})")
            else:
                cells.append(f"{'-':>22}")
        print(f"{c:<10} " + " ".join(f"{x:>22}" for x in cells))
    json.dump({"per_kernel_s": per, "diff_s": diffs, "not_queued": not_queued, "n": a.n, "sleep_ms": a.sleep_ms},
              open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
