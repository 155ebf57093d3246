"""What a session costs the steps right after it starts, in one process:
a small MLP training step (forward, backward, AdamW) timed over STEPS
plain steps, then STEPS steps right after `gpuscope.profile(mode=MODE)`
starts (each step synchronised). Prints the per-step medians, the first
profiled step, and the ratio of the profiled steps' total to the plain
steps'. One mode per process: a sampling session leaves the process unable
to start another.

    python3 bench/real/first_steps.py trace|sampling|metrics [STEPS]
"""

import statistics
import sys
import time

import torch

import gpuscope

mode = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.GELU()) for _ in range(8)]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(256, 2048, device="cuda")


def step():
    opt.zero_grad(set_to_none=True)
    model(x).float().pow(2).mean().backward()
    opt.step()


def timed(n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t)
    return out


timed(20)  # warm-up: cuBLAS handles, allocator, kernels loaded
plain = timed(steps)
with gpuscope.profile(mode=mode, strict=True) as p:
    profiled = timed(steps)
ms = lambda v: f"{v * 1e3:.2f} ms"
print(f"first_steps {mode}: plain median {ms(statistics.median(plain))}, profiled median "
      f"{ms(statistics.median(profiled))}, first profiled step {ms(profiled[0])} (plain first {ms(plain[0])}); "
      f"{steps} profiled steps / {steps} plain steps = {sum(profiled) / sum(plain):.2f}x")
print(p.report.table().splitlines()[0] if p.report else "no report")
