"""PyTorch Geometric: a GCN classifying small random graphs, mini-batches of
64 graphs of 20-40 nodes (a molecule-sized workload: every batch a
different number of nodes and edges), built on the CPU and moved to the GPU
each step; no NVTX ranges.

    python3 gnn_train.py [--steps 300] [--warmup 20]
"""
import argparse

import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GCNConv, global_mean_pool

from common import Timer


def graphs(n, g):
    out = []
    for _ in range(n):
        nodes = int(torch.randint(20, 41, (1,), generator=g))
        edges = torch.randint(0, nodes, (2, nodes * 3), generator=g)
        out.append(Data(x=torch.randn(nodes, 64, generator=g), edge_index=edges,
                        y=torch.randint(0, 10, (1,), generator=g)))
    return out


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = torch.nn.ModuleList([GCNConv(64, 256), GCNConv(256, 256), GCNConv(256, 256)])
        self.head = torch.nn.Linear(256, 10)

    def forward(self, x, edge_index, batch):
        for conv in self.convs:
            x = F.relu(conv(x, edge_index))
        return self.head(global_mean_pool(x, batch))


def build(batches=64, seed=0):
    """One training step a call, cycling over `batches` batches (for the
    in-process cost benchmark, bench/pytorch/overhead.py --model gnn)."""
    g = torch.Generator().manual_seed(seed)
    loader = DataLoader(graphs(64 * batches, g), batch_size=64, shuffle=True)
    model = Net().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    it = iter(())

    def step():
        nonlocal it
        try:
            batch = next(it)
        except StopIteration:
            it = iter(loader)
            batch = next(it)
        batch = batch.to("cuda", non_blocking=True)
        loss = F.cross_entropy(model(batch.x, batch.edge_index, batch.batch), batch.y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    a = p.parse_args()
    g = torch.Generator().manual_seed(0)
    total = a.steps + a.warmup
    loader = DataLoader(graphs(64 * total, g), batch_size=64, shuffle=True)
    model = Net().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    timer = Timer()
    for i, batch in enumerate(loader):
        if i == total:
            break
        if i == a.warmup:
            torch.cuda.synchronize()
            timer.mark()
        timer.tick()
        batch = batch.to("cuda", non_blocking=True)
        loss = F.cross_entropy(model(batch.x, batch.edge_index, batch.batch), batch.y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    timer.done(a.steps)
