"""A small MLP trained with AdamW, reading loss.item() every `--every`
steps (1: every step). NVTX range `step`. Tiny kernels: the host's dispatch
bounds it either way; the per-step read adds a synchronisation.

    python3 item_loop.py --every 1
    python3 item_loop.py --every 50
    python3 item_loop.py --every 1 --fused   # AdamW(fused=True)
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import Timer, ranges

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--every", type=int, default=1)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--fused", action="store_true", help="AdamW(fused=True) in place of the default foreach path")
    a = p.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=a.fused or None)
    x, y = torch.randn(64, 256, device="cuda"), torch.randint(0, 10, (64,), device="cuda")
    rng = ranges(True)
    t = Timer()
    total = 0.0
    for i in range(a.warmup + a.steps):
        if i == a.warmup:
            torch.cuda.synchronize()
            t.mark()
        with rng("step"):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if i % a.every == 0:
                total += loss.item()
    torch.cuda.synchronize()
    t.done(a.steps, every=a.every)
