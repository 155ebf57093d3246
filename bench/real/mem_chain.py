"""An eager elementwise chain on a 1 GiB tensor (`x = x * 2` over and
over): every kernel streams the tensor through DRAM, so the GPU is always
busy and DRAM bandwidth bounds it. No NVTX ranges.

    python3 mem_chain.py [--seconds 1.0]
"""
import argparse
import json
import time

import torch

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=1.0)
    a = p.parse_args()
    x = torch.ones(256 << 20, device="cuda")  # 1 GiB of fp32
    for _ in range(3):
        x = x * 2
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    steps = 0
    while time.perf_counter() - t0 < a.seconds:
        for _ in range(10):
            x = x * 2
        torch.cuda.synchronize()
        steps += 10
    ms = 1e3 * (time.perf_counter() - t0) / steps
    print("SUITE " + json.dumps({"step_ms": round(ms, 4), "steps": steps}), flush=True)
