"""Training loops for checking gpuscope's per-kernel metrics against Nsight
Compute: models and optimizers as users write them, random weights, no
downloads, deterministic launch sequences (the n-th launch of a kernel with
a given grid is the same work in every run).

    loops.py LOOP [--warmup N] [--steps N] [--seconds S]

LOOP is one of:
  mha-adamw    4 layers of nn.MultiheadAttention + MLP (d=512, seq 256,
               batch 16), bf16 autocast, torch.optim.AdamW (foreach path)
  gpt2-fused   Hugging Face GPT-2 (4 layers, d=512, seq 256, batch 8), bf16
               autocast, AdamW(fused=True)
  resnet-sgd   torchvision ResNet-18 (batch 32, 3x128x128), bf16 autocast,
               SGD with momentum (foreach path)
  adamw-only   only the optimizer step of mha-adamw: its foreach AdamW over
               the same parameters, gradients fixed

--steps N runs N steps after --warmup; --seconds S runs steps until S
seconds have passed after warm-up (for cost runs). The last line is
`LOOP {"steps": N, "step_ms": X, "seconds": Y}` (synchronised timing).
"""
import argparse
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class MhaBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


def mha_model():
    torch.manual_seed(0)
    return nn.Sequential(*[MhaBlock(512, 8) for _ in range(4)], nn.LayerNorm(512), nn.Linear(512, 512)).cuda()


def build(loop):
    """(step function, model's optimizer) for `loop`."""
    if loop in ("mha-adamw", "adamw-only"):
        model = mha_model()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randn(16, 256, 512, device="cuda")
        if loop == "adamw-only":
            for p in model.parameters():
                p.grad = torch.randn_like(p) * 1e-3
            return opt.step

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step
    if loop == "gpt2-fused":
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(vocab_size=8192, n_positions=256, n_embd=512, n_layer=4, n_head=8,
                         attn_implementation="sdpa")
        torch.manual_seed(0)
        model = GPT2LMHeadModel(cfg).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        ids = torch.randint(0, cfg.vocab_size, (8, 256), device="cuda")

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step
    if loop == "resnet-sgd":
        import torchvision

        torch.manual_seed(0)
        model = torchvision.models.resnet18(num_classes=100).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = torch.randn(32, 3, 128, 128, device="cuda")
        y = torch.randint(0, 100, (32,), device="cuda")

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step
    raise SystemExit(f"loops.py: unknown loop {loop!r}; allowed: mha-adamw, gpt2-fused, resnet-sgd, adamw-only")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("loop")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=0.0)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = False
    step = build(a.loop)
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    n = 0
    while (n < a.steps) if a.seconds <= 0 else (time.perf_counter() - t0 < a.seconds):
        step()
        n += 1
        if a.seconds > 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    s = time.perf_counter() - t0
    print("LOOP " + json.dumps({"loop": a.loop, "steps": n, "step_ms": round(1e3 * s / max(n, 1), 3),
                                "seconds": round(s, 3)}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
