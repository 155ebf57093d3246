"""What tracing costs a launch-bound PyTorch training loop, decomposed, in
one process: blocks of plain steps alternate with blocks under each
configuration, and each configuration's ratio is its block time over the
mean of the plain blocks just before and after it (median over rounds;
configurations rotate so that drift hits all alike; the garbage collector
is off inside blocks).

    python3 bench/pytorch/overhead.py --gpuscope libgpuscope.so \
        --floor libcupti_floor.so --rounds 12 --steps 30 --out result.json

Configurations (the floor library is cupti_floor.c):
  cbonly        CUPTI's launch callbacks (empty, timing the launch calls), no
                records: the program's plain launch calls, timed
  floor         CUPTI with only kernel activity records, counted
  +driver       and driver launch callbacks (empty)
  +runtime      and runtime launch callbacks (empty)
  +sync         +runtime and synchronization records (gpuscope enabled
                them until it timed host waits from callbacks instead)
  +kinds        +runtime and what else gpuscope enables: memcpy and memset
                records, copy-call callbacks
  gpuscope      gpuscope's trace mode through its C ABI (gpuscope_start);
                gpuscope@NAME=VALUE,... with those settings
                (gpuscope@calibrate=off)
  sampling[:US] gpuscope's sampling mode, a PM sample every US microseconds
  torch         torch.profiler with CUDA activities (last: it stays attached)
Run with NVTX_INJECTION64_PATH=libgpuscope.so so that gpuscope sees the
loop's NVTX ranges (it does nothing while no session runs).
"""
import argparse
import ctypes
import json
import os
import statistics as st
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
sys.path.insert(0, os.path.dirname(__file__))
from gpt_train import build  # noqa: E402
from harness import config, load, timer  # noqa: E402
from harness import start as start_session  # noqa: E402

# Floor configurations: (activity kinds, callbacks) bit masks of cupti_floor.c.
FLOORS = {"floor": (1, 0), "+driver": (1, 1), "+runtime": (1, 3), "+kinds": (7, 7),
          # The launch callbacks of +runtime with no records: the program's
          # plain launch calls timed as +runtime times its traced ones.
          "cbonly": (0, 3),
          # One more thing each on top of +runtime, to find what +kinds costs.
          "+memcpy": (3, 3), "+memset": (5, 3), "+sync": (9, 3), "+copycb": (1, 7)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuscope", required=True, help="libgpuscope.so")
    ap.add_argument("--floor", help="libcupti_floor.so (for the floor configurations)")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--steps", type=int, default=30, help="steps per block")
    ap.add_argument("--configs", default="floor,+runtime,+sync,+kinds,gpuscope")
    ap.add_argument("--torch-rounds", type=int, default=4)
    ap.add_argument("--report", help="write each gpuscope session's report (JSON) here, numbered: "
                    "REPORT.CONFIG.N.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="gpt", choices=["gpt", "gnn", "vit", "tiny"],
                    help="gpt: examples/python/gpt_train.py; gnn: bench/real/gnn_train.py (PyG, batches collated "
                         "on the loop's thread); vit: bench/real/timm_vit.py (4 loader workers); tiny: 200 "
                         "one-element adds a step (launches and nothing else)")
    a = ap.parse_args()

    gs = load(a.gpuscope)
    fl = ctypes.CDLL(os.path.abspath(a.floor)) if a.floor else None
    if a.model in ("gnn", "vit"):
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "real"))
        step = __import__({"gnn": "gnn_train", "vit": "timm_vit"}[a.model]).build()
    elif a.model == "tiny":
        one = torch.zeros(1, device="cuda")

        def step():
            for _ in range(200):
                one.add_(1)
    else:
        step, _, _ = build()

    block = timer(step, a.steps)

    counts = {}
    calls = {}
    reports = [0]

    def start(cfg):
        if cfg.startswith("gpuscope") or cfg.startswith("sampling"):
            # sampling[:US]: sampling mode, a PM sample every US microseconds;
            # gpuscope@NAME=VALUE,...: trace mode with those settings.
            start_session(gs, config(gs, cfg.replace("gpuscope", "trace", 1)), cfg)
        else:
            if fl is None:
                sys.exit(f"configuration {cfg} needs --floor")
            kinds, cbs = FLOORS[cfg]
            if fl.floor_start(kinds, cbs) != 0:
                sys.exit(f"floor_start({cfg}) failed")

    def stop(cfg):
        if cfg.startswith("gpuscope") or cfg.startswith("sampling"):
            if gs.gpuscope_stop() != 0:
                sys.exit(f"gpuscope_stop: {gs.gpuscope_last_error().decode()}")
            if a.report:
                # One report a session, numbered: what each block charged.
                reports[0] += 1
                tag = "".join(ch if ch.isalnum() or ch in "+-" else "_" for ch in cfg)
                path = a.report.replace(".json", "") + f".{tag}.{reports[0]}.json"
                gs.gpuscope_write_report(path.encode(), 1)
        else:
            r, d, rt = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
            ns, n = ctypes.c_uint64(), ctypes.c_uint64()
            fl.floor_calls(ctypes.byref(ns), ctypes.byref(n))
            fl.floor_stop(ctypes.byref(r), ctypes.byref(d), ctypes.byref(rt))
            counts[cfg] = {"records": r.value, "driver_callbacks": d.value, "runtime_callbacks": rt.value,
                           "steps": a.steps}
            if n.value:
                # Launch calls timed in the callbacks, all blocks of it.
                c = calls.setdefault(cfg, [0, 0])
                c[0] += ns.value
                c[1] += n.value

    for _ in range(10):
        step()
    configs = a.configs.split(",")
    blocks = {c: [] for c in configs + ["plain", "torch"]}
    ratios = {c: [] for c in configs + ["torch"]}
    for r in range(a.rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        before = block()
        blocks["plain"].append(before)
        for cfg in order:
            start(cfg)
            t = block()
            stop(cfg)
            after = block()
            blocks["plain"].append(after)
            blocks[cfg].append(t)
            ratios[cfg].append(t / ((before + after) / 2))
            before = after
    # torch.profiler last: after it, CUPTI may stay attached.
    for _ in range(a.torch_rounds):
        plain = block()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
            t = block()
        blocks["torch"].append(t)
        ratios["torch"].append(t / plain)
    plain_ms = 1e3 * st.median(blocks["plain"]) / a.steps
    summary = {c: {"median_ratio": st.median(v), "min": min(v), "max": max(v), "n": len(v)}
               for c, v in ratios.items() if v}
    floor = summary.get("floor", {}).get("median_ratio")
    for c, s in summary.items():
        if floor:
            s["over_floor"] = s["median_ratio"] / floor
    out = {"plain_step_ms": plain_ms, "steps_per_block": a.steps, "rounds": a.rounds, "summary": summary,
           "ratios": ratios, "blocks": blocks, "floor_counts": counts,
           "launch_call_us": {c: v[0] / v[1] / 1e3 for c, v in calls.items()}}
    json.dump(out, open(a.out, "w"), indent=1)
    print(f"plain step {plain_ms:.2f} ms ({a.steps} steps per block, {a.rounds} rounds)")
    print(f"{'config':<10} {'ratio':>7} {'min':>6} {'max':>6} {'/floor':>7}")
    for c, s in summary.items():
        print(f"{c:<10} {s['median_ratio']:7.3f} {s['min']:6.3f} {s['max']:6.3f} {s.get('over_floor', float('nan')):7.3f}")
    for c, n in counts.items():
        print(f"{c}: {n}")
    for c, us in out["launch_call_us"].items():
        print(f"{c}: launch calls {us:.2f} us (timed in the callbacks)")


if __name__ == "__main__":
    main()
