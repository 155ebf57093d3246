"""Where tracing's cost goes in a PyTorch loop, per launch, against what
gpuscope charges itself: in one process, plain blocks alternate with
blocks under each configuration (raw CUPTI through cupti_floor.c, and
gpuscope sessions with parts of their work off), on

  tiny    2000 (--tiny) `x.add_(1)` on a one-element tensor, then a sync (each op
          one launch; the host bounds it),
  err     100,000 cudaGetLastError() through ctypes (a runtime call that
          launches nothing; PyTorch makes one after every launch),
  dev     100,000 cudaGetDevice(),
  ctx     100,000 cuCtxGetCurrent() (a driver call),
  llama   8 steps of bench/real/hf_llama.py (about 1,455 launches a step),
  resnet  8 steps of ResNet-50 on one batch kept on the GPU (busy_truth.py's
          resnet-noloader, 894 launches a step, its host bound by two
          threads: the main one and the autograd engine's).

A gpuscope session's block includes its calibration at the first launch
(3-4 ms once): over 2000 launches that reads as 1.7-2.3 us a launch that
later launches do not pay; use --tiny 10000 or more for per-launch costs.

Times are per op (per launch for tiny, per call for the API loops, per
step for llama), the block over the mean of the plain blocks around it.
For gpuscope sessions the report's own estimate of its cost is printed
beside it (ProfilerCost.added_ns over the session's launches), and a
census configuration counts the runtime and driver calls each workload
makes.

    gcc -O2 -shared -fPIC -I$CUDA/include -I$CUDA/extras/CUPTI/include \\
        bench/pytorch/cupti_floor.c -L$CUDA/extras/CUPTI/lib64 -lcupti -lcuda -o libcupti_floor.so
    PYTHONPATH=python GPUSCOPE_LIB=libgpuscope.so python3 bench/pytorch/launch_split.py \\
        --floor libcupti_floor.so --rounds 3 --out split.json
"""
import argparse
import ctypes
import gc
import json
import os
import statistics as st
import sys
import time

import gpuscope  # before torch's first NVTX call
import torch

here = os.path.dirname(os.path.abspath(__file__))

# Raw CUPTI: (activity kinds, callbacks) bit masks of cupti_floor.c.
FLOORS = {"attached": (0, 0), "records": (1, 0), "records+cb": (1, 3), "cb": (0, 3),
          # Kernel, copy, set and synchronisation records: gpuscope's kinds.
          "records4": (15, 0), "records4+cb": (15, 3),
          # Kernel records and launch callbacks, the records enabled by
          # steps of gpuscope's calibration (cupti_floor.c's
          # floor_calibrate bits: 1 own thread, 2 launches before, 4
          # after, 8 on the default stream).
          "cal-enable": (1, 3, 1), "cal-same": (1, 3, 6), "cal-thread": (1, 3, 7),
          "cal-before": (1, 3, 3), "cal-after": (1, 3, 5), "cal-default": (1, 3, 15)}
# gpuscope sessions: profile() keywords.
SESSIONS = {
    "gpuscope": {},
    "gs-nocal": {"calibrate": False},
    "gs-noattr": {"launch_attribution": False},
    "gs-nosync": {"sync_records": False},
    # Kernel records and the launch callbacks only.
    "gs-kernels": {"sync_records": False, "memory_records": False, "device_memory": False,
                   "launch_attribution": False},
}


def loaded(name):
    """A library the process has loaded already (torch's own copy)."""
    for line in open("/proc/self/maps"):
        if name in line and line.rstrip().endswith(tuple("0123456789o")):
            return ctypes.CDLL(line.split()[-1])
    raise SystemExit(f"{name} is not loaded")


def workloads(llama_steps, tiny_n=2000):
    x = torch.zeros(1, device="cuda")
    rt = loaded("libcudart.so")
    drv = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()

    def tiny():
        for _ in range(tiny_n):
            x.add_(1)
        return tiny_n

    def err():
        f = rt.cudaGetLastError
        for _ in range(100_000):
            f()
        return 100_000

    def getdev():
        f, p = rt.cudaGetDevice, ctypes.byref(dev)
        for _ in range(100_000):
            f(p)
        return 100_000

    def getctx():
        f, p = drv.cuCtxGetCurrent, ctypes.byref(ctx)
        for _ in range(100_000):
            f(p)
        return 100_000

    sys.path.insert(0, os.path.join(here, "..", "real"))
    from hf_llama import build

    step, _ = build()

    def llama():
        for _ in range(llama_steps):
            step(torch.cuda.nvtx.range)
        return llama_steps

    from busy_truth import resnet_step

    rstep = resnet_step(loader=False)

    def resnet():
        for _ in range(llama_steps):
            rstep()
        return llama_steps

    return {"tiny": tiny, "err": err, "dev": getdev, "ctx": getctx, "llama": llama, "resnet": resnet}


def timed(f):
    """Seconds per op of one block of `f` (GPU work included), and its ops."""
    gc.collect()
    gc.disable()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    n = f()
    torch.cuda.synchronize()
    t = time.perf_counter() - t0
    gc.enable()
    return t / n, n


class Floor:
    def __init__(self, path):
        self.lib = ctypes.CDLL(os.path.abspath(path))
        self.lib.floor_name.restype = ctypes.c_char_p

    def start(self, kinds, callbacks, how=None):
        """CUPTI with activity `kinds` and `callbacks`; with `how`, the
        kinds enabled by floor_calibrate's steps instead."""
        if self.lib.floor_start(0 if how is not None else kinds, callbacks) != 0:
            raise SystemExit("floor_start failed")
        if how is not None and self.lib.floor_calibrate(how, kinds) != 0:
            raise SystemExit("floor_calibrate failed")

    def stop(self):
        r, d, rt = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
        self.lib.floor_stop(ctypes.byref(r), ctypes.byref(d), ctypes.byref(rt))
        return {"records": r.value, "driver_callbacks": d.value, "runtime_callbacks": rt.value}

    def census(self):
        out = {}
        buf = (ctypes.c_uint64 * 4096)()
        for api, name in ((0, "runtime"), (1, "driver")):
            n = self.lib.floor_census(api, buf, 2048)
            out[name] = {self.lib.floor_name(api, int(buf[2 * i])).decode(): int(buf[2 * i + 1]) for i in range(n)}
        return out


def charged(d):
    """What the report says gpuscope cost, ns, and the launches it covers."""
    pc = d.get("profiler_cost") or {}
    cal = pc.get("calibration")
    launches = sum(t.get("launches", 0) for t in pc.get("threads", []))
    cb = sum(t.get("callback_ns", 0) for t in pc.get("threads", []))
    call = sum(t.get("call_ns", 0) for t in pc.get("threads", []))
    timed_calls = sum(t.get("calls_timed", 0) for t in pc.get("threads", []))
    hook = sum(t.get("hook_ns", 0) for t in pc.get("threads", []))
    if cal:
        records = cal["record_ns"] * launches + cb
        calls = (call // timed_calls - cal["plain_ns"]) * launches if timed_calls else 0
        added = max(records, calls) + hook
    else:
        added = cb + hook
    return {"launches": launches, "added_ns": added, "calibration": cal,
            "callback_ns_per_launch": cb / max(launches, 1),
            "call_ns_per_launch": call / max(timed_calls, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--floor", required=True, help="libcupti_floor.so")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--llama-steps", type=int, default=8)
    ap.add_argument("--tiny", type=int, default=2000, help="launches a block of `tiny`")
    ap.add_argument("--configs", default=",".join(list(FLOORS) + list(SESSIONS)))
    ap.add_argument("--work", default="tiny,err,dev,ctx,llama")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    fl = Floor(a.floor)
    work = workloads(a.llama_steps, a.tiny)
    names = a.work.split(",")
    for n in names:  # warm-up
        timed(work[n])
        timed(work[n])
    # The calls each workload makes, once, first (its callbacks cost).
    census = {}
    for n in names:
        fl.start(0, 8)
        timed(work[n])
        census[n] = fl.census()
        fl.stop()
    print(json.dumps({"census": census}), flush=True)
    configs = a.configs.split(",")
    rows = []
    for r in range(a.rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        for c in order:
            plain_before = {n: timed(work[n])[0] for n in names}
            extra = {}
            if c in FLOORS:
                fl.start(*FLOORS[c])
                t = {n: timed(work[n])[0] for n in names}
                extra = fl.stop()
                per = {}
            else:
                per = {}
                t = {}
                for n in names:
                    # One session per workload: its report's charge is that
                    # workload's.
                    with gpuscope.profile(mode="trace", **SESSIONS[c]) as prof:
                        t[n], ops = timed(work[n])
                    per[n] = charged(prof.report.data)
                    per[n]["charged_ns_per_op"] = round(per[n]["added_ns"] / ops)
            plain_after = {n: timed(work[n])[0] for n in names}
            for n in names:
                plain = (plain_before[n] + plain_after[n]) / 2
                row = {"round": r, "config": c, "work": n, "plain_ns": round(plain * 1e9),
                       "profiled_ns": round(t[n] * 1e9), "added_ns": round((t[n] - plain) * 1e9)}
                if n in per:
                    row["charged"] = per[n]
                row.update(extra)
                rows.append(row)
                print(json.dumps(row), flush=True)
    # Summary: median added ns per op (/ gpuscope's own charge per op),
    # per configuration and workload.
    print("config          " + "".join(f"{n:>18}" for n in names))
    for c in configs:
        line = f"{c:<16}"
        for n in names:
            rs = [x for x in rows if x["config"] == c and x["work"] == n]
            add = st.median(x["added_ns"] for x in rs)
            ch = [x["charged"]["charged_ns_per_op"] for x in rs if "charged" in x]
            line += f"{add:>10.0f}" + (f"/{st.median(ch):<7.0f}" if ch else " " * 8)
        print(line, flush=True)
    json.dump({"census": census, "rows": rows}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
