"""Shared by the real-program suite: NVTX ranges that cost nothing when
off, and the plain timing line the suite's summary reads."""
import contextlib
import json
import time


def ranges(on):
    """`rng("step")`: a torch.cuda.nvtx range when `on`, else nothing."""
    if not on:
        return lambda name: contextlib.nullcontext()
    import torch

    return torch.cuda.nvtx.range


class Timer:
    """Times steps after warm-up: `mark()` at the first timed step, `done(n)`
    after the last (with the device synchronised by the caller)."""

    def __init__(self):
        self.t0 = None
        self.ticks = []

    def mark(self):
        self.t0 = time.perf_counter()

    def tick(self):
        """At each step's start, warm-up included: `done` then prints every
        step's host time (`walls_ms`), the last one's up to `done`."""
        self.ticks.append(time.perf_counter())

    def done(self, steps, **extra):
        end = time.perf_counter()
        ms = 1e3 * (end - self.t0) / max(steps, 1)
        if self.ticks:
            t = self.ticks + [end]
            extra["walls_ms"] = [round(1e3 * (b - a), 2) for a, b in zip(t, t[1:])]
        print("SUITE " + json.dumps({"step_ms": round(ms, 4), "steps": steps, **extra}), flush=True)


def llama_model():
    """The suite's Hugging Face Llama (8 layers, d=1024, random weights),
    bf16 on the GPU, with fused AdamW: (config, model, optimizer)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                      num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=1024,
                      tie_word_embeddings=True, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to("cuda", dtype=torch.bfloat16)
    return cfg, model, torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
