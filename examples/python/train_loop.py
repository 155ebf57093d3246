"""A small transformer training loop with NVTX ranges, written as a PyTorch
user would, knowing nothing of gpuscope. Profile it without changing it:

    LD_PRELOAD=libgpuscope.so GPUSCOPE_MODE=metrics python3 train_loop.py
"""
import contextlib
import os
import time

import torch
import torch.nn as nn

# STEPS: timed steps (after 3 warm-up steps); TORCH_PROFILER=1 runs the loop
# under torch.profiler with CUDA activities (for overhead comparisons).
STEPS = int(os.environ.get("STEPS", "8"))

torch.manual_seed(0)
dev = "cuda"
model = nn.TransformerEncoder(
    nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, batch_first=True), num_layers=2
).to(dev)
head = nn.Linear(256, 1000).to(dev)
opt = torch.optim.AdamW(list(model.parameters()) + list(head.parameters()), lr=1e-3)
x = torch.randn(32, 128, 256, device=dev)
target = torch.randint(0, 1000, (32, 128), device=dev)

def step_once():
    torch.cuda.nvtx.range_push("step")
    torch.cuda.nvtx.range_push("forward")
    logits = head(model(x))
    loss = nn.functional.cross_entropy(logits.reshape(-1, 1000), target.reshape(-1))
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("backward")
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("optimizer")
    opt.step()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_pop()
    return loss


for _ in range(3):
    step_once()
torch.cuda.synchronize()
prof = (
    torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
    if os.environ.get("TORCH_PROFILER") == "1"
    else contextlib.nullcontext()
)
with prof:
    t0 = time.perf_counter()
    for _ in range(STEPS):
        loss = step_once()
    torch.cuda.synchronize()
    loop_s = time.perf_counter() - t0
print(f"loss {loss.item():.4f} loop_s={loop_s:.4f}")
