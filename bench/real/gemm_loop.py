"""bf16 8192^3 GEMMs back to back for S seconds (default 8): one nvjet
kernel keeping the tensor cores busy, to check sampled tensor-pipe
activity against Nsight Compute's on the same kernel.

    python3 gemm_loop.py [SECONDS]
"""
import sys
import time

import torch

secs = float(sys.argv[1]) if len(sys.argv) > 1 else 8.0
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    c = a @ b
torch.cuda.synchronize()
t0 = time.perf_counter()
n = 0
while time.perf_counter() - t0 < secs:
    for _ in range(10):
        c = a @ b
    torch.cuda.synchronize()
    n += 10
print("gemm ms", 1e3 * (time.perf_counter() - t0) / n)
