"""A training loop that hands its memory back every step (or not):
gpuscope's allocator-churn finding should appear only with --empty-cache.

    python3 churn.py [--empty-cache] [--steps 200]
"""
import argparse
import json
import time

import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--empty-cache", action="store_true")
p.add_argument("--steps", type=int, default=200)
a = p.parse_args()
torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(6)]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(256, 2048, device="cuda")


def step():
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if a.empty_cache:
        torch.cuda.empty_cache()


for _ in range(10):
    step()
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(a.steps):
    step()
torch.cuda.synchronize()
print(json.dumps({"empty_cache": a.empty_cache, "step_ms": (time.perf_counter() - t) / a.steps * 1e3,
                  "max_memory_reserved": torch.cuda.max_memory_reserved()}), flush=True)
