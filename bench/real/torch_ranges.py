"""PyTorch programs with no NVTX call, for gpuscope's automatic ranges.

    python3 torch_ranges.py train [--steps 30]
        A Hugging Face Llama (8 layers, hidden 1024, tied embeddings, bf16,
        fused AdamW) fed by a DataLoader; prints its own step time and the
        6 x params x tokens MFU. Run it under `gpuscope run --torch-ranges`.
    python3 torch_ranges.py overhead llama|mlp|tiny|resnet [--steps 30] [--rounds 8] [--always-on]
        In one process, ms per step in alternating blocks of steps: a trace
        session against none; in a trace session, module ranges from the
        Python stack against none and the hooks against none; with
        --always-on, the same two in an always-on session (sampling, trace
        windows 0/1000). Needs GPUSCOPE_LIB (the library) and gpuscope
        importable.
    python3 torch_ranges.py graphs --out DIR
        An annotated model captured into a CUDA graph by hand and replayed,
        and two compiled with mode="reduce-overhead" (a small one, a
        Llama): reports with the kernels' paths in DIR.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn as nn

H100_BF16_DENSE = 989e12


def llama(batch=8, seq=512):
    from common import llama_model

    cfg, model, opt = llama_model()
    data = torch.utils.data.TensorDataset(torch.randint(0, cfg.vocab_size, (batch * 400, seq)))
    loader = torch.utils.data.DataLoader(data, batch_size=batch, pin_memory=True, num_workers=2)

    def batches():
        while True:
            for (ids,) in loader:
                yield ids.cuda(non_blocking=True)

    it = batches()

    def step():
        ids = next(it)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    params = sum(p.numel() for p in model.parameters())
    step.model = model
    return step, params, batch * seq


def training_step(model, opt, loss_of):
    """A step: `loss_of()`'s backward, the optimizer's step, gradients
    cleared; its `model` attribute is `model`."""

    def step():
        loss = loss_of()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    step.model = model
    return step


def mlp(batch=32, width=256, layers=8):
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(width, width), nn.ReLU())]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(batch, width, device="cuda")

    step = training_step(model, opt, lambda: model(x).square().mean())
    return step, sum(p.numel() for p in model.parameters()), batch


def timed(step, n, cpu=None):
    """Seconds per step; `cpu`: a dict that gets the loop thread's CPU
    seconds per step under "cpu"."""
    torch.cuda.synchronize()
    t, c = time.perf_counter(), time.thread_time()
    for _ in range(n):
        loss = step()
    torch.cuda.synchronize()
    float(loss)
    if cpu is not None:
        cpu["cpu"] = (time.thread_time() - c) / n
    return (time.perf_counter() - t) / n


def median_step(step, n):
    """Milliseconds: the median of `n` steps' times, each from one step's
    return to the next (the GPU synchronised before and after only): in a
    loop bound by its launches, what each step costs the host; one slow
    step (a collection, a page fault) does not move it."""
    import statistics

    torch.cuda.synchronize()
    times = []
    t = time.perf_counter()
    for _ in range(n):
        loss = step()
        now = time.perf_counter()
        times.append(now - t)
        t = now
    torch.cuda.synchronize()
    float(loss)
    return statistics.median(times) * 1e3


def train(a):
    step, params, tokens = llama()
    for _ in range(a.warmup):
        step()
    s = timed(step, a.steps)
    mfu = 6 * params * tokens / s / H100_BF16_DENSE
    print(json.dumps({"params": params, "tokens_per_step": tokens, "step_ms": s * 1e3,
                      "mfu_6pt_pct": 100 * mfu, "max_memory_reserved": torch.cuda.max_memory_reserved(),
                      "max_memory_allocated": torch.cuda.max_memory_allocated()}), flush=True)


def tiny(vocab=256, hidden=64, layers=8, seq=16):
    """A Hugging Face Llama too small to keep the GPU busy, with a
    per-tensor AdamW: ~1,400 launches a step, bound by their dispatch."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=True,
                      attn_implementation="sdpa")
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    ids = torch.randint(0, vocab, (1, seq), device="cuda")

    step = training_step(model, opt, lambda: model(input_ids=ids, labels=ids).loss)
    return step, sum(p.numel() for p in model.parameters()), seq


def resnet(batch=4, size=64):
    """torchvision's ResNet-18 on small images with per-tensor SGD: bound
    by launches."""
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=False)
    x = torch.randn(batch, 3, size, size, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    loss_fn = nn.CrossEntropyLoss()

    step = training_step(model, opt, lambda: loss_fn(model(x), y))
    return step, sum(p.numel() for p in model.parameters()), batch


LOOPS = {"llama": lambda: llama(), "mlp": lambda: mlp(), "tiny": lambda: tiny(), "resnet": lambda: resnet()}


def overhead(a):
    """Module ranges' cost, paired: blocks of steps with and without them
    alternate in one process (which goes first alternates too); each block
    its median step, then the medians of the blocks and of the per-round
    ratios, with the ratios' quartiles. Pairs: a trace session against
    none (a session started and stopped around each block); in a trace
    session, the hooks (`TorchRanges`) against none, and modules from the
    Python stack (`StackModules`) against none; and, last, the same two in
    an always-on session (sampling, trace windows 0/1000)."""
    import statistics

    import gpuscope
    from gpuscope import _native, _torch_ranges

    step, _, _ = LOOPS[a.loop]()
    for _ in range(a.warmup):
        step()
    path = str(_native.library_path())
    hooks = _torch_ranges.TorchRanges(_torch_ranges.Library(path))
    out = {}

    def block(on, kind):
        undo = None
        if on and kind == "hooks":
            hooks.install(discover=False)
            hooks.annotate(step.model)
            undo = hooks.uninstall
        elif on and kind == "stack":
            mods = _torch_ranges.StackModules(path)
            mods._add_model(step.model)
            assert mods.error is None, mods.error
            undo = mods.uninstall
        elif on and kind == "session":
            session = gpuscope.profile(mode="trace", output=None).start()
            undo = session.stop
        try:
            for _ in range(3):
                step()
            return median_step(step, a.steps)
        finally:
            if undo is not None:
                undo()

    def paired(name, kind, rounds=a.rounds):
        without, with_, ratios = [], [], []
        for r in range(rounds):
            if r % 2:
                w = block(True, kind)
                o = block(False, kind)
            else:
                o = block(False, kind)
                w = block(True, kind)
            without.append(o)
            with_.append(w)
            ratios.append(w / o)
        q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
        out[name] = {"without_ms": round(statistics.median(without), 3),
                     "with_ms": round(statistics.median(with_), 3),
                     "median_ratio": round(statistics.median(ratios), 4),
                     "ratio_iqr": [round(q[0], 4), round(q[2], 4)],
                     "ratios": [round(x, 3) for x in ratios]}
        print(json.dumps({name: out[name]}), flush=True)

    def alternating(name, steps=a.alternate):
        """Stack modules on and off at every step (order alternating by
        pair), each step timed alone: drift of the machine cancels."""
        mods = _torch_ranges.StackModules(path)
        mods._add_model(step.model)
        assert mods.error is None, mods.error
        on, off = [], []
        try:
            for i in range(steps):
                for state in ((True, False) if i % 2 == 0 else (False, True)):
                    mods.pause(not state)
                    t = time.perf_counter()
                    step()
                    (on if state else off).append(time.perf_counter() - t)
        finally:
            mods.uninstall()
        torch.cuda.synchronize()
        ratios = [x / y for x, y in zip(on, off)]
        mean = statistics.fmean(ratios)
        half = 1.96 * statistics.stdev(ratios) / len(ratios) ** 0.5
        out[name] = {"pairs": len(ratios), "without_ms": round(statistics.median(off) * 1e3, 3),
                     "with_ms": round(statistics.median(on) * 1e3, 3),
                     "median_ratio": round(statistics.median(ratios), 4),
                     "mean_ratio": round(mean, 4), "mean_ratio_95ci": [round(mean - half, 4), round(mean + half, 4)],
                     "ratio_of_medians": round(statistics.median(on) / statistics.median(off), 4)}
        print(json.dumps({name: out[name]}), flush=True)

    if a.alternate:
        with gpuscope.profile(mode="trace", output=None):
            alternating("stack modules in trace, step by step")
        if a.only_alternate:
            print(json.dumps({"loop": a.loop, "overhead": out}), flush=True)
            return
    paired("trace session vs none", "session")
    paired("hooks, no session", "hooks")
    with gpuscope.profile(mode="trace", output=None):
        paired("stack modules in trace", "stack")
        paired("hooks in trace", "hooks")
    if a.always_on:
        # Last: after a sampling session no other can start in the process.
        with gpuscope.profile(mode="sampling", trace_windows=(0, 1000), output=None):
            paired("stack modules in always-on", "stack")
            paired("hooks in always-on", "hooks")
    print(json.dumps({"loop": a.loop, "steps_per_block": a.steps, "overhead": out}), flush=True)


class Small(nn.Module):
    def __init__(self, d=512, n=4):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(),
                                                  nn.Linear(4 * d, d)) for _ in range(n))
        self.head = nn.Linear(d, d)

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return self.head(x)


def graphs(a):
    import gpuscope

    x = torch.randn(64, 512, device="cuda")
    eager = gpuscope.annotate(Small().cuda().eval())
    compiled = Small().cuda().eval()
    gpuscope.annotate(compiled)
    compiled = torch.compile(compiled, mode="reduce-overhead")
    with torch.no_grad():
        # By hand: capture with the hooks firing, replay many times.
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                eager(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with gpuscope.profile(mode="trace") as p:
            with torch.cuda.graph(g):
                eager(x)
            for _ in range(20):
                g.replay()
            torch.cuda.synchronize()
        p.report.write(f"{a.out}/graphs-manual.json")
        # The graphs are captured inside the session: gpuscope names the
        # nodes of graphs it saw captured.
        with gpuscope.profile(mode="trace") as p:
            for _ in range(25):
                compiled(x)
            torch.cuda.synchronize()
        p.report.write(f"{a.out}/graphs-compiled.json")
    # A Hugging Face Llama compiled for inference, annotated by discovery
    # as under `gpuscope run --torch-ranges`.
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                      num_attention_heads=16, num_key_value_heads=16, tie_word_embeddings=True,
                      attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).to("cuda", dtype=torch.bfloat16).eval()
    gpuscope.annotate(model)
    llm = torch.compile(model, mode="reduce-overhead")
    ids = torch.randint(0, cfg.vocab_size, (4, 256), device="cuda")
    with torch.no_grad():
        with gpuscope.profile(mode="trace") as p:
            for _ in range(25):
                llm(input_ids=ids, use_cache=False)
            torch.cuda.synchronize()
        p.report.write(f"{a.out}/graphs-llama.json")
    from torch._dynamo.utils import counters

    print(json.dumps({"ok": True, "inductor": dict(counters["inductor"]),
                      "graph_breaks": dict(counters["graph_break"])}), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["train", "overhead", "graphs"])
    p.add_argument("loop", nargs="?", default="llama", choices=sorted(LOOPS))
    p.add_argument("--always-on", action="store_true")
    p.add_argument("--alternate", type=int, default=0, help="pairs of steps with stack modules on and off, one by one")
    p.add_argument("--only-alternate", action="store_true")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--out", default=".")
    a = p.parse_args()
    {"train": train, "overhead": overhead, "graphs": graphs}[a.what](a)
    sys.exit(0)
