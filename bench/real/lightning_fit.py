"""PyTorch Lightning: Trainer.fit of an MLP on a CPU dataset through a
DataLoader with 2 workers; no NVTX ranges (Lightning emits none).

    python3 lightning_fit.py [--steps 300]
"""
import argparse
import json
import time

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(),
                                 nn.Linear(4096, 10))

    def training_step(self, batch, _):
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4)


class Clock(L.Callback):
    """Plain step time: from the 20th batch to the last, synchronised."""

    def __init__(self, start=20):
        self.start, self.t0, self.n = start, None, 0

    def on_train_batch_start(self, trainer, module, batch, i):
        if i == self.start:
            torch.cuda.synchronize()
            self.t0 = time.perf_counter()

    def on_train_end(self, trainer, module):
        torch.cuda.synchronize()
        steps = trainer.global_step - self.start
        ms = 1e3 * (time.perf_counter() - self.t0) / max(steps, 1)
        print("SUITE " + json.dumps({"step_ms": round(ms, 4), "steps": steps}), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    a = p.parse_args()
    torch.manual_seed(0)
    n = 256 * (a.steps + 10)
    ds = TensorDataset(torch.randn(n, 1024), torch.randint(0, 10, (n,)))
    loader = DataLoader(ds, batch_size=256, num_workers=2, shuffle=True)
    trainer = L.Trainer(max_steps=a.steps, accelerator="gpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[Clock()])
    trainer.fit(Model(), loader)
