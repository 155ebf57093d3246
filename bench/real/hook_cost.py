"""What the PyTorch range hooks cost per step, by part, with a backend
that records nothing (Python only): a small Hugging Face Llama (compute
negligible) on the CPU and on the GPU. Variants: plain; forward ranges
only; forward and backward ranges; and FLOPs counting too. With them,
the cost the hooks report as gpuscope's own (`reported_us`) against what
they add.

    python3 hook_cost.py [--rounds 6] [--steps 30]
"""
import argparse
import json
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from gpuscope import _torch_ranges as tr


class Nothing:
    reported_ns = 0

    def enter(self, name, flags):
        pass

    def exit(self, flags):
        pass

    def flops(self, f):
        pass

    def cost(self, ns):
        Nothing.reported_ns += ns


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=30)
    a = p.parse_args()
    out = {}
    for device in ("cpu", "cuda"):
        cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=8,
                          num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=True,
                          attn_implementation="sdpa")
        torch.manual_seed(0)
        model = LlamaForCausalLM(cfg).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
        ids = torch.randint(0, 256, (1, 16), device=device)

        def step():
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        def block():
            for _ in range(3):
                step()
            if device == "cuda":
                torch.cuda.synchronize()
            t, c = time.perf_counter(), time.thread_time()
            for _ in range(a.steps):
                step()
            if device == "cuda":
                torch.cuda.synchronize()
            return (time.perf_counter() - t) / a.steps * 1e6, (time.thread_time() - c) / a.steps * 1e6

        # "forward": no autograd node is found, so no backward hook is set.
        first_tensor = tr._first_tensor
        variants = {"plain": None, "forward": dict(count_flops=False), "forward+backward": dict(count_flops=False),
                    "all": dict(count_flops=True)}
        res = {v: ([], []) for v in variants}
        reported = {}
        for r in range(a.rounds):
            for v, kw in variants.items():
                h = None
                if kw is not None:
                    tr._first_tensor = (lambda *x, **k: None) if v == "forward" else first_tensor
                    h = tr.TorchRanges(Nothing(), **kw).install(discover=False)
                    h.annotate(model)
                Nothing.reported_ns = 0
                try:
                    w, c = block()
                finally:
                    if h:
                        h.uninstall()
                    tr._first_tensor = first_tensor
                res[v][0].append(w)
                res[v][1].append(c)
                # Reported over the warm-up steps too: per step of all.
                reported.setdefault(v, []).append(Nothing.reported_ns / (a.steps + 3) / 1e3)
        base_w = statistics.median(res["plain"][0])
        base_c = statistics.median(res["plain"][1])
        out[device] = {v: {"wall_us": round(statistics.median(w)), "added_wall_us": round(statistics.median(w) - base_w),
                           "loop_cpu_us": round(statistics.median(c)),
                           "added_loop_cpu_us": round(statistics.median(c) - base_c),
                           "reported_us": round(statistics.median(reported[v]))}
                       for v, (w, c) in res.items()}
        print(json.dumps({device: out[device]}), flush=True)


if __name__ == "__main__":
    main()
