"""timm: ViT-S/16 trained with bf16 autocast and fused AdamW on 224x224
images from a DataLoader (4 workers, pinned), random weights, no NVTX
ranges.

    python3 timm_vit.py [--steps 100] [--warmup 15] [--batch 128] [--workers 4]
"""
import argparse

import timm
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from common import Timer


class Images(Dataset):
    """Fixed uint8 images (a decoded dataset's stand-in), labels."""

    def __init__(self, n):
        self.n = n
        self.img = torch.randint(0, 256, (3, 224, 224), dtype=torch.uint8)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.img, i % 1000


def trainer():
    """The model, its optimizer and one training step on a batch of uint8
    images and labels: `train(x, y)`."""
    model = timm.create_model("vit_small_patch16_224", pretrained=False).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    mean = torch.tensor([0.485, 0.456, 0.406], device="cuda").view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device="cuda").view(1, 3, 1, 1) * 255

    def train(x, y):
        x = (x.cuda(non_blocking=True).float() - mean) / std
        y = y.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return train


def build(batch=128, workers=4):
    """One training step a call, from an endless loader (for the in-process
    cost benchmark, bench/pytorch/overhead.py --model vit)."""
    torch.manual_seed(0)
    loader = DataLoader(Images(batch * 1000), batch_size=batch, num_workers=workers, pin_memory=True,
                        persistent_workers=workers > 0)
    train = trainer()
    it = iter(())

    def step():
        nonlocal it
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(loader)
            x, y = next(it)
        train(x, y)

    return step


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=15)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--workers", type=int, default=4)
    a = p.parse_args()
    torch.manual_seed(0)
    total = a.steps + a.warmup
    loader = DataLoader(Images(a.batch * total), batch_size=a.batch, num_workers=a.workers, pin_memory=True)
    train = trainer()
    timer = Timer()
    for i, (x, y) in enumerate(loader):
        if i == a.warmup:
            torch.cuda.synchronize()
            timer.mark()
        timer.tick()
        train(x, y)
    torch.cuda.synchronize()
    timer.done(a.steps)
