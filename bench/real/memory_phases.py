"""Which phase of a PyTorch program allocates device memory outside
PyTorch's caching allocator: NVTX ranges around CUDA init, a bf16 matmul,
attention and a backward, and PyTorch's reserved bytes after each.

    gpuscope run -- python3 memory_phases.py
"""
import json

import torch
import torch.nn.functional as F

nvtx = torch.cuda.nvtx
out = {}


def phase(name, f):
    nvtx.range_push(name)
    f()
    torch.cuda.synchronize()
    nvtx.range_pop()
    out[name] = torch.cuda.memory_reserved()


phase("init", lambda: torch.zeros(1, device="cuda"))
a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
phase("matmul", lambda: a @ a)
q = torch.randn(4, 8, 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
phase("sdpa", lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True))
phase("backward", lambda: (F.scaled_dot_product_attention(q, q, q) @ q.transpose(-1, -2)).sum().backward())
print(json.dumps({"reserved_after": out, "max_memory_reserved": torch.cuda.max_memory_reserved()}), flush=True)
