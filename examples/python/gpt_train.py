"""A small GPT trained the way most PyTorch users train: bf16 autocast,
AdamW, NVTX ranges `step/forward`, `step/backward`, `step/optimizer` pushed
on the main thread. The backward pass runs on autograd's worker thread, and
a step is ~9 ms of a few hundred short kernels on an H100: launch-bound,
where profilers hurt most. Profile it without changing it:

    gpuscope run -- python3 examples/python/gpt_train.py

STEPS (default 20) timed steps after WARMUP (default 5) warm-up steps; TORCH_PROFILER=1
runs the timed steps under torch.profiler (CUDA activities).
`bench/pytorch/overhead.py` imports `build` to time it in one process.
"""
import contextlib
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, block, d, layers, heads):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def build(batch=8, block=256, vocab=8192, d=384, layers=4, heads=6, device="cuda"):
    """The model, its optimizer and one training step (a callable)."""
    torch.manual_seed(0)
    model = GPT(vocab, block, d, layers, heads).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    x = torch.randint(0, vocab, (batch, block), device=device)
    y = torch.randint(0, vocab, (batch, block), device=device)
    nvtx = torch.cuda.nvtx

    def step():
        nvtx.range_push("step")
        nvtx.range_push("forward")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, vocab).float(), y.view(-1))
        nvtx.range_pop()
        nvtx.range_push("backward")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nvtx.range_pop()
        nvtx.range_push("optimizer")
        opt.step()
        nvtx.range_pop()
        nvtx.range_pop()
        return loss

    params = sum(p.numel() for p in model.parameters())
    return step, params, batch * block


if __name__ == "__main__":
    steps = int(os.environ.get("STEPS", "20"))
    step, params, tokens = build()
    for _ in range(int(os.environ.get("WARMUP", "5"))):
        step()
    torch.cuda.synchronize()
    prof = (
        torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
        if os.environ.get("TORCH_PROFILER") == "1"
        else contextlib.nullcontext()
    )
    with prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = step()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    print(f"loss {loss.item():.4f} steps={steps} step_ms={1e3 * dt / steps:.2f} params={params} "
          f"model_flops_per_step={6 * params * tokens:.3e}")
