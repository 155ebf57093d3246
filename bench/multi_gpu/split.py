"""A model split over two GPUs of one process, for gpuscope's per-device figures.

The first N0 layers run on GPU 0, the next N1 on GPU 1, one after the other
(no micro-batches), so each GPU works its share of the step and idles the
rest::

    gpuscope run -o split.json -- python3 bench/multi_gpu/split.py --split 3:1

With ``--split 3:1`` GPU 0 holds three quarters of the work and should be
busy about three times as long as GPU 1 (an uneven split); with ``2:2`` the
two should be busy about as long as each other. Each layer is a bf16
Linear(d, d) + GELU on a batch of ``--batch`` rows; SGD updates each GPU's
layers on that GPU. Each step is an NVTX range ``step``; the script prints
the median step time. Weights and data are random: nothing is downloaded.
"""

import argparse
import statistics
import time

import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--split", default="3:1", help="layers on GPU 0 and on GPU 1, as N0:N1")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--d", type=int, default=4096)
    p.add_argument("--batch", type=int, default=8192)
    a = p.parse_args()
    n0, n1 = (int(n) for n in a.split.split(":"))
    if torch.cuda.device_count() < 2:
        raise SystemExit("split.py needs two GPUs")

    def stack(n, device):
        layers = [nn.Sequential(nn.Linear(a.d, a.d), nn.GELU()) for _ in range(n)]
        return nn.Sequential(*layers).to(device=device, dtype=torch.bfloat16)

    first, second = stack(n0, "cuda:0"), stack(n1, "cuda:1")
    opt = torch.optim.SGD(list(first.parameters()) + list(second.parameters()), lr=1e-4)
    x = torch.randn(a.batch, a.d, device="cuda:0", dtype=torch.bfloat16)
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        torch.cuda.nvtx.range_push("step")
        y = second(first(x).to("cuda:1"))
        y.float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize("cuda:0")
        torch.cuda.synchronize("cuda:1")
        torch.cuda.nvtx.range_pop()
        times.append(time.perf_counter() - t0)
    steady = times[len(times) // 4 :]
    print(f"split {a.split}: median step {statistics.median(steady) * 1e3:.2f} ms over {len(steady)} steps")


if __name__ == "__main__":
    main()
