"""A training step whose input pipeline is slow the way real ones are: the
dataset preprocesses each sample in __getitem__ on the training thread (no
DataLoader workers), hands back pageable tensors, and the loop copies them
to the GPU with blocking copies. `--fixed` is the same loop fixed: the
preprocessing is done once, ahead of training, into pinned memory, and the
loop copies with non_blocking=True.

    gpuscope run -o before.json -- python3 input_pipeline.py
    gpuscope run -o after.json -- python3 input_pipeline.py --fixed
    gpuscope report before.json after.json

NVTX ranges: step, and inside it data, forward, backward, optimizer.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--fixed", action="store_true", help="preprocess ahead, pinned memory, non-blocking copies")
p.add_argument("--steps", type=int, default=10)
p.add_argument("--batch", type=int, default=2048)
args = p.parse_args()

FEATURES, HIDDEN, CLASSES = 4096, 16384, 1000


def augment(i):
    """Per-sample CPU work: what a real pipeline does to decode and augment."""
    x = np.random.default_rng(i).standard_normal(FEATURES, dtype=np.float32)
    return np.fft.irfft(np.fft.rfft(x) * 0.5, n=FEATURES).astype(np.float32)


class Samples(Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        return torch.from_numpy(augment(i)), i % CLASSES


dev = "cuda"
torch.manual_seed(0)
model = nn.Sequential(
    nn.Linear(FEATURES, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, CLASSES)
).to(dev)
params = sum(p.numel() for p in model.parameters())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
loss_fn = nn.CrossEntropyLoss()

if args.fixed:
    # Preprocessed once, ahead of the loop, into pinned host memory.
    loader = DataLoader(Samples(), batch_size=args.batch, num_workers=0)
    cached = [(x.pin_memory(), y.pin_memory()) for _, (x, y) in zip(range(4), loader)]
    batches = (cached[i % len(cached)] for i in range(1 << 30))
else:
    batches = iter(DataLoader(Samples(), batch_size=args.batch, num_workers=0))


def step(ranges):
    push = torch.cuda.nvtx.range_push if ranges else (lambda _: None)
    pop = torch.cuda.nvtx.range_pop if ranges else (lambda: None)
    push("step")
    push("data")
    x, y = next(batches)
    x, y = x.to(dev, non_blocking=args.fixed), y.to(dev, non_blocking=args.fixed)
    pop()
    push("forward")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    pop()
    push("backward")
    opt.zero_grad(set_to_none=True)
    loss.backward()
    pop()
    push("optimizer")
    opt.step()
    pop()
    pop()
    return loss


for _ in range(2):  # warm-up: cuBLAS picks its kernels, the allocator fills
    step(False)
torch.cuda.synchronize()
for _ in range(args.steps):
    loss = step(True)
torch.cuda.synchronize()
print(f"loss {loss.item():.4f} params {params} model_flops_per_step {6 * params * args.batch:.4e}")
