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
* ``--uneven``: a stack of transformer encoder layers (bf16 autocast, DDP's
  default buckets) where rank 1 gets sequences twice as long as the other
  ranks', as length-bucketed data gives: the other ranks finish their
  backward early and wait for rank 1 in the all-reduces;
* ``--straggler-rank R --sleep-ms M``: rank R sleeps M ms on the host before
  each step's forward, so the other ranks wait for it in the all-reduce.

Each iteration is an NVTX range ``step`` (``torch.cuda.nvtx.range_push``)
unless ``--no-ranges`` (then the program has no annotations), and each rank
prints its per-step time, then one line ``SUITE {"rank": r, "step_ms": m,
"steps": n}``: the median over the steps after ``--warmup``.

``--one-gpu`` puts every rank on GPU 0 and all-reduces by gloo (a machine of
one GPU; with ``--uneven``, ``--width 256`` keeps gloo's host copies small).
Two processes then share the GPU: PM sampling goes to the first.

``--alone-rank R`` runs without torchrun: no process group and no DDP, rank
R's model and batch on cuda:0, the same per-step lines. Against a job's
step time it tells what the job adds to rank R's own work (its waits and
exposed communication)::

    python3 bench/multi_gpu/ddp.py --uneven --alone-rank 0

Weights and data are random: nothing is downloaded.
"""

import argparse
import os
import time

import suite
import torch
import torch.nn as nn


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--exposed", action="store_true", help="one large gradient bucket after a short backward")
    mode.add_argument("--uneven", action="store_true", help="rank 1 gets sequences twice as long as the others'")
    p.add_argument("--steps", type=int, default=50, help="training steps, warm-up included")
    p.add_argument("--warmup", type=int, default=5, help="first steps left out of the SUITE median")
    p.add_argument("--straggler-rank", type=int, default=-1, help="the rank that sleeps before each step")
    p.add_argument("--sleep-ms", type=float, default=0.0, help="how long the straggler sleeps, ms")
    p.add_argument("--batch", type=int, default=0, help="rows per step (--uneven: sequences per step) (default: by mode)")
    p.add_argument("--seq", type=int, default=1024, help="--uneven: the sequence length of ranks other than 1")
    p.add_argument("--no-ranges", action="store_true", help="no NVTX range `step`: a program without annotations")
    p.add_argument("--width", type=int, default=1024, help="--uneven: the layers' width (1024: ~150 M parameters)")
    p.add_argument("--one-gpu", action="store_true",
                   help="every rank on GPU 0, all-reduced by gloo (a job's ranks on a machine of one GPU)")
    p.add_argument("--alone-rank", type=int, default=-1, metavar="R",
                   help="no torchrun, no process group, no DDP: rank R's work alone on cuda:0")
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


def uneven_model(width: int) -> tuple[nn.Module, int, int]:
    """12 pre-norm encoder layers (~150 M parameters at width 1024), the
    width and the default sequences per step."""
    layers = [
        nn.TransformerEncoderLayer(
            width, 16, 4 * width, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        for _ in range(12)
    ]
    return nn.Sequential(*layers), width, 4


def main():
    args = parse_args()
    alone = args.alone_rank >= 0
    if alone:
        dist = None
        rank = args.alone_rank
        local = 0
    else:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("gloo" if args.one_gpu else "nccl")
        rank = dist.get_rank()
        local = 0 if args.one_gpu else int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    torch.manual_seed(rank)
    if args.uneven:
        model, width, batch = uneven_model(args.width)
    else:
        model, width, batch = model_for(args.exposed)
    batch = args.batch or batch
    model = model.cuda()
    if not alone:
        ddp_kwargs = {"gradient_as_bucket_view": True}
        if args.exposed:
            ddp_kwargs["bucket_cap_mb"] = 1 << 20
        model = DDP(model, device_ids=[local], **ddp_kwargs)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    if args.uneven:
        # Length-bucketed data: rank 1's bucket holds sequences twice as
        # long as the others' (the same number of them).
        seq = args.seq * (2 if rank == 1 else 1)
        x = torch.randn(batch, seq, width, device="cuda")
        target = None
    else:
        x = torch.randn(batch, width, device="cuda")
        target = torch.randn(batch, width, device="cuda")
    straggler = rank == args.straggler_rank and args.sleep_ms > 0
    ranges = not args.no_ranges
    times = []
    for step in range(args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if ranges:
            torch.cuda.nvtx.range_push("step")
        if straggler:
            time.sleep(args.sleep_ms / 1e3)
        if args.uneven:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = model(x)
            loss = y.float().pow(2).mean()
        else:
            loss = nn.functional.mse_loss(model(x), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if ranges:
            torch.cuda.nvtx.range_pop()
        suite.record(rank, step, t0, times)
    suite.finish(rank, times, args.warmup, dist)


if __name__ == "__main__":
    main()
