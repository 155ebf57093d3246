"""What one long gpuscope session costs a launch-bound PyTorch training
loop, in one process: blocks of plain steps, then the same number of blocks
under one session, then plain blocks again. The ratio is the median session
block over the median of the plain blocks around it.

overhead.py starts a session per block; sampling mode cannot (after CUPTI's
PM sampling no later session can start in the process) and its set-up cost
belongs to a session's start, not to its steps. Run each configuration in
its own process, several processes alternating (bench/pytorch/run.sh cost).

    NVTX_INJECTION64_PATH=libgpuscope.so python3 bench/pytorch/session_cost.py \\
        --gpuscope libgpuscope.so --config windows:100:100/1000 --blocks 8 --steps 40 --out r.json

Configurations:
  none                   no session (how much plain blocks drift)
  trace                  trace mode
  sampling[:US]          sampling mode, a PM sample every US microseconds
  windows[:US[:W/P]]     sampling mode with trace windows: kernel records
                         for the first W of every P milliseconds (default
                         100/1000; W 0: never)
  floor:KINDS:CALLBACKS  raw CUPTI (cupti_floor.c, --floor): activity kinds
                         and API callbacks by its bit masks, e.g. floor:0:3
                         (launch callbacks that only count, no records)

Loops (--loop): `gpt` (examples/python/gpt_train.py, --layers deep:
launch-bound, ~80 launches per layer and step) and `gemm` (eight bf16
4096^3 GEMMs with a ReLU each: GPU-bound), `vit` (bench/real/timm_vit.py: a
timm ViT-S from a loader of 4 workers, near the GPU's pace).

Each block's wall time and the main thread's CPU time are recorded; the
ratio is of wall times. Under the session every step's end is recorded too
(`session_steps`: per block, seconds since the session started), so that
steps inside and outside trace windows can be told apart in one process
(run.sh cost prints both).
"""
import argparse
import ctypes
import json
import os
import statistics as st
import sys
import time


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
sys.path.insert(0, os.path.dirname(__file__))
from gpt_train import build  # noqa: E402
from harness import config, load, start, timer  # noqa: E402


def gemm_loop():
    """A GPU-bound step: eight bf16 4096^3 GEMMs, a ReLU after each."""
    import torch
    torch.manual_seed(0)
    x0 = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    ws = [torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64 for _ in range(8)]

    def step():
        x = x0
        for w in ws:
            x = torch.relu(x @ w)
        return x
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuscope", required=True, help="libgpuscope.so")
    ap.add_argument("--floor", help="libcupti_floor.so (floor configurations)")
    ap.add_argument("--config", required=True)
    ap.add_argument("--blocks", type=int, default=8, help="blocks in each of the three phases")
    ap.add_argument("--steps", type=int, default=40, help="steps per block")
    ap.add_argument("--report", help="write the session's report here (JSON)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--loop", choices=("gpt", "gemm", "vit"), default="gpt")
    ap.add_argument("--layers", type=int, default=4, help="gpt: transformer layers")
    a = ap.parse_args()

    gs = load(a.gpuscope)
    if a.loop == "vit":
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "real"))
        import timm_vit
        step = timm_vit.build()
    else:
        step = build(layers=a.layers)[0] if a.loop == "gpt" else gemm_loop()

    wall = timer(step, a.steps)
    cpu = []
    session_marks = []

    def block(marks=None):
        t0 = time.thread_time()
        t = wall(marks)
        cpu.append(time.thread_time() - t0)
        return t

    for _ in range(20):
        step()
    floor = a.config.startswith("floor:")
    if floor:
        if not a.floor:
            sys.exit(f"configuration {a.config} needs --floor")
        fl = ctypes.CDLL(os.path.abspath(a.floor))
        kinds, cbs = (int(x) for x in a.config.split(":")[1:3])
        cfg = None
    else:
        cfg = config(gs, a.config)
    plain_marks = []

    def plain_block():
        plain_marks.append([])
        return block(plain_marks[-1])

    before = [plain_block() for _ in range(a.blocks)]
    t0 = t_start = time.perf_counter()
    if floor and fl.floor_start(kinds, cbs) != 0:
        sys.exit(f"floor_start({a.config}) failed")
    if cfg is not None:
        start(gs, cfg, a.config)
    started = time.perf_counter() - t0
    during = []
    for _ in range(a.blocks):
        session_marks.append([])
        during.append(block(session_marks[-1]))
    t0 = time.perf_counter()
    if floor:
        n = [ctypes.c_uint64() for _ in range(3)]
        fl.floor_stop(*(ctypes.byref(x) for x in n))
        # What the floor saw: shows its records and callbacks were on.
        floor_counts = dict(zip(("records", "driver_callbacks", "runtime_callbacks"), (x.value for x in n)))
    if cfg is not None:
        if gs.gpuscope_stop() != 0:
            sys.exit(f"gpuscope_stop: {gs.gpuscope_last_error().decode()}")
        if a.report:
            gs.gpuscope_write_report(a.report.encode(), 1)
    stopped = time.perf_counter() - t0
    after = [plain_block() for _ in range(a.blocks)]
    plain = st.median(before + after)
    k = a.blocks
    cpu_plain = st.median(cpu[:k] + cpu[2 * k:])
    out = {"config": a.config, "loop": a.loop, "layers": a.layers, "steps_per_block": a.steps, "plain_step_ms": 1e3 * plain / a.steps,
           "ratio": st.median(during) / plain, "drift": st.median(after) / st.median(before),
           "cpu_ratio": st.median(cpu[k:2 * k]) / cpu_plain, "cpu_share": cpu_plain / plain,
           "start_s": started, "stop_s": stopped, "before": before, "during": during, "after": after,
           "cpu": cpu}
    out["session_steps"] = [[m - t_start for m in b] for b in session_marks]
    # Step times of the plain blocks (ms, all but each block's first).
    out["plain_steps_ms"] = [1e3 * (t1 - t0) for b in plain_marks for t0, t1 in zip(b, b[1:])]
    if floor:
        out["floor_counts"] = floor_counts
    json.dump(out, open(a.out, "w"), indent=1)
    print(f"{a.config:<24} ratio {out['ratio']:.3f}  plain step {out['plain_step_ms']:.2f} ms  "
          f"cpu ratio {out['cpu_ratio']:.3f}  drift {out['drift']:.3f}  start {started:.2f} s  stop {stopped:.2f} s")


if __name__ == "__main__":
    main()
