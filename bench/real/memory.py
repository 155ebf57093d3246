"""GPU memory: a Hugging Face Llama training loop whose peak gpuscope
reports against PyTorch's own figures, and the cost of allocation records
measured in one process.

    gpuscope run --torch-ranges -o r.json -- python3 memory.py train --batch 32
        prints PyTorch's max_memory_reserved / max_memory_allocated (or
        "oom") as JSON; compare with the report's peak and its
        memory-headroom prediction for twice the batch.
    python3 memory.py cost [loop]
        trace sessions with and without device memory records alternate
        in this process on a launch-bound loop (`mlp`) or one that frees
        and allocates every step (`churn`); median ms per step of each, wall
        and the loop thread's CPU time, and the paired ratios' quartiles.
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn as nn


def llama(batch, seq):
    from common import llama_model

    cfg, model, opt = llama_model()
    data = torch.utils.data.TensorDataset(torch.randint(0, cfg.vocab_size, (batch * 12, seq)))
    loader = torch.utils.data.DataLoader(data, batch_size=batch)
    return model, opt, loader


def train(a):
    model, opt, loader = llama(a.batch, a.seq)
    out = {"batch": a.batch, "seq": a.seq}
    try:
        t = None
        for i, (ids,) in enumerate(loader):
            if i == 2:
                torch.cuda.synchronize()
                t = time.perf_counter()
            ids = ids.cuda()
            model(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        out["step_ms"] = (time.perf_counter() - t) * 1e3 / (i - 1)
    except torch.OutOfMemoryError:
        out["oom"] = True
    out["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    out["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    out["total"] = torch.cuda.get_device_properties(0).total_memory
    print(json.dumps(out), flush=True)


def mlp_step(churn):
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(256, 256), nn.ReLU())]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(32, 256, device="cuda")

    def step():
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if churn:
            torch.cuda.empty_cache()

    return step


def cost(a):
    import gpuscope

    step = mlp_step(a.loop == "churn")
    for _ in range(20):
        step()

    def block(memory):
        with gpuscope.profile("trace", device_memory=memory):
            for _ in range(10):
                step()
            torch.cuda.synchronize()
            t, c = time.perf_counter(), time.thread_time()
            for _ in range(a.steps):
                step()
            torch.cuda.synchronize()
            return (time.perf_counter() - t) * 1e3 / a.steps, (time.thread_time() - c) * 1e3 / a.steps

    ms = {True: [], False: []}
    for r in range(a.rounds):
        for memory in ((True, False) if r % 2 == 0 else (False, True)):
            ms[memory].append(block(memory))
    out = {"loop": a.loop, "rounds": a.rounds, "steps": a.steps}
    for i, what in enumerate(("wall", "cpu")):
        on, off = [x[i] for x in ms[True]], [x[i] for x in ms[False]]
        ratios = sorted(x / y for x, y in zip(on, off))
        n = len(ratios)
        out[what] = {"ms_on": statistics.median(on), "ms_off": statistics.median(off),
                     "median_ratio": statistics.median(ratios), "q1": ratios[n // 4], "q3": ratios[3 * n // 4]}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["train", "cost"])
    p.add_argument("loop", nargs="?", default="mlp", choices=["mlp", "churn"])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rounds", type=int, default=8)
    a = p.parse_args()
    {"train": train, "cost": cost}[a.what](a)
    sys.exit(0)
