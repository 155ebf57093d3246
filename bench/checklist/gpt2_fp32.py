"""A Hugging Face GPT-2 (6 layers, 768 wide, random weights from a config)
trained in fp32 with AdamW, as a script that never changed PyTorch's
default matmul precision is: the real program the kernel checklist is read
against ncu on (bench/checklist/real.sh).

    python3 gpt2_fp32.py [--steps 3] [--batch 8] [--seq 256] [--tf32]

`--tf32`: the same model with TF32 matmuls and convolutions allowed
(`torch.set_float32_matmul_precision("high")`), as the advice says.
"""
import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--tf32", action="store_true")
    a = p.parse_args()
    if a.tf32:
        torch.set_float32_matmul_precision("high")
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=a.seq, vocab_size=32000)
    model = GPT2LMHeadModel(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device="cuda")
    for _ in range(a.steps):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    print(f"gpt2_fp32: {a.steps} steps, loss {loss.item():.3f}")
