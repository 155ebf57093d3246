"""A DDP training loop on random data, for gpuscope's communication figures.

Run under torchrun, one process per GPU, with NVLink multicast off (the
lent machines require it)::

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
      gpuscope run -o ddp-{rank}.json -- \
      torchrun --nproc_per_node=2 bench/multi_gpu/ddp.py --steps 50

Modes:

* default: a larger model with DDP's default 25 MB gradient buckets, whose
  all-reduces start during backward and run under it (well overlapped);
* ``--exposed``: a small, wide model whose backward is short, with one
  gradient bucket for all of it (``bucket_cap_mb`` huge): the single
  all-reduce can only start once backward is done, so it is exposed;
* ``--straggler-rank R --sleep-ms M``: rank R sleeps M ms on the host before
  each step's forward, so the other ranks wait for it in the all-reduce.

Each iteration is an NVTX range ``step`` (``torch.cuda.nvtx.range_push``),
and each rank prints its per-step time. Weights and data are random: nothing
is downloaded.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--exposed", action="store_true", help="one large gradient bucket after a short backward")
    p.add_argument("--steps", type=int, default=50, help="training steps")
    p.add_argument("--straggler-rank", type=int, default=-1, help="the rank that sleeps before each step")
    p.add_argument("--sleep-ms", type=float, default=0.0, help="how long the straggler sleeps, ms")
    p.add_argument("--batch", type=int, default=0, help="rows per step (default: by mode)")
    return p.parse_args()


def model_for(exposed: bool) -> tuple[nn.Module, int, int]:
    """The model, its input width and the default batch."""
    if exposed:
        # ~268 M parameters in two wide layers and a tiny batch: backward
        # takes little time, all-reducing 1 GB of fp32 gradients a lot.
        width = 8192
        return nn.Sequential(nn.Linear(width, 4 * width), nn.ReLU(), nn.Linear(4 * width, width)), width, 8
    # ~100 M parameters in 24 layers and a batch large enough that backward
    # is long: DDP's buckets all-reduce under the layers still to go.
    width = 2048
    layers = []
    for _ in range(12):
        layers += [nn.Linear(width, width), nn.GELU(), nn.Linear(width, width), nn.LayerNorm(width)]
    return nn.Sequential(*layers), width, 8192


def main():
    args = parse_args()
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    torch.manual_seed(rank)
    model, width, batch = model_for(args.exposed)
    batch = args.batch or batch
    model = model.cuda()
    ddp_kwargs = {"gradient_as_bucket_view": True}
    if args.exposed:
        ddp_kwargs["bucket_cap_mb"] = 1 << 20
    model = DDP(model, device_ids=[local], **ddp_kwargs)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(batch, width, device="cuda")
    target = torch.randn(batch, width, device="cuda")
    straggler = rank == args.straggler_rank and args.sleep_ms > 0
    for step in range(args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.cuda.nvtx.range_push("step")
        if straggler:
            time.sleep(args.sleep_ms / 1e3)
        loss = nn.functional.mse_loss(model(x), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        print(f"rank {rank} step {step} {1e3 * (time.perf_counter() - t0):.2f} ms", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
