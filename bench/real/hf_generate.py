"""GPT-2 small (random weights from its config) generating 128 new tokens per
call with the KV cache, greedy, batch 8, in fp16: `generate()` with no NVTX
ranges. Each timed call is one step; the suite line gives the plain time per
call and per token.

    python3 hf_generate.py [--calls 12] [--warmup 2] [--tokens 128]
"""
import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from common import Timer

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--tokens", type=int, default=128)
    a = p.parse_args()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).to("cuda", dtype=torch.float16).eval()
    prompt = torch.randint(0, 50257, (8, 32), device="cuda")
    kw = dict(max_new_tokens=a.tokens, min_new_tokens=a.tokens, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        for _ in range(a.warmup):
            model.generate(prompt, **kw)
        torch.cuda.synchronize()
        t = Timer()
        t.mark()
        for _ in range(a.calls):
            out = model.generate(prompt, **kw)
        torch.cuda.synchronize()
    t.done(a.calls, tokens_per_call=a.tokens, new_tokens=int(out.shape[1] - prompt.shape[1]))
