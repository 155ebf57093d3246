"""All-reduce bus bandwidth, timed directly: the truth gpuscope's job answer
is compared with (its "bus bandwidth" line for the same calls).

    torchrun --standalone --nproc_per_node N bench/multi_gpu/busbw.py [--mib 1024] [--iters 20]
    gpuscope run -o bw-{rank}.json -- torchrun ... bench/multi_gpu/busbw.py
    gpuscope report --merge bw-*.json

Each timed call starts after a barrier and a device sync, so the ranks enter
it together and its CUDA-event time is the transfer. Bus bandwidth as
nccl-tests defines it: bytes x 2(n-1)/n over the time. Each rank prints one
line ``SUITE {"rank": r, "median_ms": t, "busbw_gb_s": b, ...}``.
"""
import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=1024, help="message size, MiB (fp32)")
    p.add_argument("--iters", type=int, default=20, help="timed calls after 5 warm-up calls")
    args = p.parse_args()
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    x = torch.ones(args.mib * (1 << 20) // 4, device="cuda")
    for _ in range(5):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(args.iters):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dist.all_reduce(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    med = statistics.median(times)
    nbytes = x.numel() * 4
    busbw = nbytes * 2 * (n - 1) / n / (med * 1e-3) / 1e9
    print("SUITE " + json.dumps({"rank": rank, "ranks": n, "bytes": nbytes, "median_ms": round(med, 4),
                                 "min_ms": round(min(times), 4), "busbw_gb_s": round(busbw, 1)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
