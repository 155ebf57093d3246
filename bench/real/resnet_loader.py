"""torchvision ResNet-50 trained in bf16 autocast on images a Dataset makes
on the CPU (random pixels, converted and normalised per sample: the cost of
decoding and augmenting), fed by a DataLoader. NVTX ranges step/data and
step/compute.

    python3 resnet_loader.py --workers 0      # loading on the training thread
    python3 resnet_loader.py --workers 8      # 8 workers, pin_memory=True
"""
import argparse

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader, Dataset

from common import Timer, ranges

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


class Images(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        img = np.random.default_rng(i).integers(0, 256, (224, 224, 3), dtype=np.uint8)
        x = torch.from_numpy(img).permute(2, 0, 1).float().div_(255)
        return (x - MEAN) / STD, i % 1000


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--no-ranges", action="store_true", help="no NVTX ranges (as most training scripts)")
    a = p.parse_args()
    torch.manual_seed(0)
    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    pin = a.workers > 0
    loader = DataLoader(Images(a.batch * (a.steps + a.warmup)), batch_size=a.batch, num_workers=a.workers,
                        pin_memory=pin)
    rng = ranges(not a.no_ranges)
    t = Timer()
    it = iter(loader)
    for s in range(a.warmup + a.steps):
        if s == a.warmup:
            torch.cuda.synchronize()
            t.mark()
        t.tick()
        with rng("step"):
            with rng("data"):
                x, y = next(it)
                x = x.cuda(non_blocking=pin).to(memory_format=torch.channels_last)
                y = y.cuda(non_blocking=pin)
            with rng("compute"):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = F.cross_entropy(model(x), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    torch.cuda.synchronize()
    t.done(a.steps, workers=a.workers)
