"""A Hugging Face Llama (~160M parameters from a config, random weights)
trained in bf16 with fused AdamW on a batch that lives on the GPU: no data
loader. `--ranges` adds NVTX ranges step/forward/backward/optimizer; without
them the program has none, as most training scripts.

    python3 hf_llama.py [--ranges] [--steps 40] [--warmup 5]
"""
import argparse

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from common import Timer, ranges


def build(batch=4, seq=512):
    """The model, its optimizer and one training step taking `rng`."""
    cfg = LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                      num_attention_heads=12, num_key_value_heads=12, max_position_embeddings=1024)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to("cuda", dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")

    def step(rng):
        with rng("step"):
            with rng("forward"):
                loss = model(input_ids=ids, labels=ids).loss
            with rng("backward"):
                loss.backward()
            with rng("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
        return loss

    return step, sum(p.numel() for p in model.parameters())


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--ranges", action="store_true")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    step, params = build()
    rng = ranges(a.ranges)
    for _ in range(a.warmup):
        step(rng)
    torch.cuda.synchronize()
    t = Timer()
    t.mark()
    for _ in range(a.steps):
        loss = step(rng)
    torch.cuda.synchronize()
    t.done(a.steps, params=params, loss=float(loss))
