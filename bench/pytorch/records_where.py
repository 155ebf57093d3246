"""Where CUPTI's kernel records cost the host, by part of a step: in one
process, plain blocks alternate with blocks under raw CUPTI kernel records
(cupti_floor.c) and under a gpuscope trace session, on

  resnet  ResNet-50 on one batch kept on the CPU (busy_truth.py's
          resnet-noloader; its pageable copy waits for the GPU), each step
          timed in parts: the copy, the forward pass, the backward pass
          (launched by the autograd engine's thread while the main one
          waits), the optimizer; then, after a sleep that lets the GPU
          finish, a synchronisation alone;
  tiny    2000 `x.add_(1)` (one launch each), then the same sleep and
          synchronisation.

A part that grows by about the calibration's per-launch record cost times
its launches is charged right; growth outside launches (at the
synchronisation, say) is what a report's own-cost estimate misses.

    PYTHONPATH=python:bench/pytorch GPUSCOPE_LIB=libgpuscope.so \\
        python3 bench/pytorch/records_where.py --floor libcupti_floor.so --out where.json
"""
import argparse
import gc
import json
import os
import statistics as st
import sys
import time

import gpuscope  # before torch's first NVTX call
import torch

from launch_split import Floor, charged

SLEEP = 0.03


def resnet_parts():
    import torch.nn.functional as F
    import torchvision
    from torch.utils.data import DataLoader
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "real"))
    from resnet_loader import Images

    net = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    x0, y0 = next(iter(DataLoader(Images(64), batch_size=64)))

    def step():
        t = [time.perf_counter()]
        x = x0.cuda(non_blocking=True).to(memory_format=torch.channels_last)
        y = y0.cuda(non_blocking=True)
        t.append(time.perf_counter())
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(net(x), y)
        t.append(time.perf_counter())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t.append(time.perf_counter())
        opt.step()
        t.append(time.perf_counter())
        time.sleep(SLEEP)
        t.append(time.perf_counter())
        torch.cuda.synchronize()
        t.append(time.perf_counter())
        return {"copy": t[1] - t[0], "forward": t[2] - t[1], "backward": t[3] - t[2], "optimizer": t[4] - t[3],
                "sync": t[6] - t[5], "step": (t[4] - t[0]) + (t[6] - t[5])}

    return step


def tiny_parts():
    x = torch.zeros(1, device="cuda")

    def step():
        t0 = time.perf_counter()
        for _ in range(2000):
            x.add_(1)
        t1 = time.perf_counter()
        time.sleep(SLEEP)
        t2 = time.perf_counter()
        torch.cuda.synchronize()
        t3 = time.perf_counter()
        return {"launches": t1 - t0, "sync": t3 - t2, "step": (t1 - t0) + (t3 - t2)}

    return step


def block(step, n):
    """Median of each part over `n` steps, after two untimed ones, us."""
    step()
    step()
    gc.collect()
    gc.disable()
    rows = [step() for _ in range(n)]
    gc.enable()
    return {k: st.median(r[k] for r in rows) * 1e6 for k in rows[0]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--floor", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    fl = Floor(a.floor)
    work = {"resnet": resnet_parts(), "tiny": tiny_parts()}
    for w in work.values():
        block(w, 3)
    configs = ["records", "records4", "gpuscope"]
    rows = []
    for r in range(a.rounds):
        for c in configs[r % 3:] + configs[:r % 3]:
            for name, w in work.items():
                before = block(w, a.steps)
                extra = {}
                if c == "gpuscope":
                    with gpuscope.profile(mode="trace") as prof:
                        traced = block(w, a.steps)
                    ch = charged(prof.report.data)
                    extra = {"calibration": ch["calibration"], "launches": ch["launches"],
                             "charged_us_per_step": ch["added_ns"] / 1e3 / (a.steps + 2)}
                else:
                    fl.start(1 if c == "records" else 15, 0)
                    traced = block(w, a.steps)
                    extra = fl.stop()
                after = block(w, a.steps)
                row = {"round": r, "config": c, "work": name,
                       "added_us": {k: round(traced[k] - (before[k] + after[k]) / 2, 1) for k in traced},
                       "plain_us": {k: round((before[k] + after[k]) / 2, 1) for k in traced}, **extra}
                rows.append(row)
                print(json.dumps(row), flush=True)
    for name in work:
        print(f"== {name}: median added us per step part (plain us)")
        for c in configs:
            rs = [x for x in rows if x["config"] == c and x["work"] == name]
            parts = rs[0]["added_us"].keys()
            print(f"{c:<10}" + "  ".join(
                f"{k} {st.median(x['added_us'][k] for x in rs):+.0f} ({st.median(x['plain_us'][k] for x in rs):.0f})"
                for k in parts), flush=True)
            if c == "gpuscope":
                print("  charged us/step", [round(x["charged_us_per_step"]) for x in rs],
                      "calibration", rs[0]["calibration"], flush=True)
    json.dump(rows, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
