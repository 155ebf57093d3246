"""torch.compile training of an MLP (NVTX range `train_step`), then
inference with torch.compile(mode="reduce-overhead"), CUDA graphs, on a
small batch (`infer_step`). The first calls of each compile and capture.

    python3 compile_train_infer.py [--train 30] [--infer 300]
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import ranges


def mlp(d=1024, hidden=4096, depth=3):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d)]
    return nn.Sequential(*layers)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--train", type=int, default=30)
    p.add_argument("--infer", type=int, default=300)
    a = p.parse_args()
    torch.manual_seed(0)
    rng = ranges(True)
    model = mlp().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train = torch.compile(model)
    x, y = torch.randn(512, 1024, device="cuda"), torch.randn(512, 1024, device="cuda")
    times = []
    for _ in range(a.train):
        t0 = time.perf_counter()
        with rng("train_step"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.mse_loss(train(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    model.eval()
    infer = torch.compile(model, mode="reduce-overhead")
    xs = torch.randn(8, 1024, device="cuda")
    warm = 10
    with torch.no_grad():
        for i in range(a.infer):
            if i == warm:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
            with rng("infer_step"):
                out = infer(xs)
        torch.cuda.synchronize()
        infer_ms = 1e3 * (time.perf_counter() - t0) / (a.infer - warm)
    train_ms = 1e3 * sorted(times)[len(times) // 2]
    import json

    print("SUITE " + json.dumps({"step_ms": round(infer_ms, 4), "steps": a.infer - warm,
                                 "train_step_ms_median_synced": round(train_ms, 3),
                                 "first_train_step_s": round(times[0], 2)}), flush=True)
