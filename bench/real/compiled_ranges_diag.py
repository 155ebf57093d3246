"""Diagnosis: do gpuscope's range operators change what torch.compile
(mode="reduce-overhead") captures? Per-call time, CUDA graph partitions
and operator calls with and without the hooks."""
import json, os, sys, time
import torch, torch.nn as nn
sys.path.insert(0, os.path.dirname(__file__))
from torch_ranges import Small
from gpuscope import _torch_ranges as tr

calls = {"enter": 0, "exit": 0}
class Counting:
    def enter(self, name, flags): calls["enter"] += 1
    def exit(self, flags): calls["exit"] += 1
    def flops(self, f): pass
    def cost(self, ns): pass

def run(annotated):
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = Small().cuda().eval()
    h = None
    if annotated:
        h = tr.TorchRanges(Counting()).install(discover=False)
        h.annotate(m)
    c = torch.compile(m, mode="reduce-overhead")
    x = torch.randn(64, 512, device="cuda")
    with torch.no_grad():
        for _ in range(5): c(x)
        torch.cuda.synchronize()
        before = dict(calls)
        t = time.perf_counter()
        for _ in range(200): c(x)
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t) / 200 * 1e6
    if h: h.uninstall()
    from torch._dynamo.utils import counters
    return {"us_per_call": round(dt, 1), "op_calls_steady": {k: calls[k] - before[k] for k in calls},
            "inductor": {k: v for k, v in counters["inductor"].items() if "cudagraph" in k or "partition" in k}}

print(json.dumps({"graph_partition": torch._inductor.config.graph_partition,
                  "plain": run(False), "annotated": run(True), "plain2": run(False)}), flush=True)
