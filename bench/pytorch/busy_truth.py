"""How busy the GPU is in a launch-bound training step, as gpuscope says it
(its own cost taken out) against the truth measured in the same process:
plain steps timed without any profiler, and the GPU time per step of the
profiled ones (kernels run as long traced as not).

    PYTHONPATH=python GPUSCOPE_LIB=libgpuscope.so python3 bench/pytorch/busy_truth.py --model gpt

Plain blocks and profiled sessions alternate (`--rounds`); each session is
one `gpuscope.profile()` over `--steps` steps with an NVTX range `step`, in
each of `--modes` (trace first: its kernels give the GPU time per step;
a sampling or always-on session last, one round: no session can start in
the process after one).
Prints one JSON line per session and a summary line per mode. Each
session's line has the host's figures a step of its block and of the plain
block after it: the main thread's CPU time and context switches, the
process's CPU time, gpuscope's threads' and the others'. `BT_PIN=1` puts
the main thread on one CPU (`BT_PIN_CPU`, the first allowed by default) and
every other thread off that CPU's core. `BT_WHERE=1` samples the main
thread every millisecond: on a CPU, or waiting, and where in the code.
"""
import argparse
import atexit
import json
import os
import resource
import statistics
import sys
import threading
import time

import gpuscope  # before torch's first NVTX call
import torch

here = os.path.dirname(os.path.abspath(__file__))


def resnet_step(loader=True):
    """ResNet-50 in bf16 fed by 8 DataLoader workers (pinned memory), as
    bench/real/resnet_loader.py, with a loader that never runs out; or,
    without `loader`, one batch kept on the GPU."""
    sys.path.insert(0, os.path.join(here, "..", "real"))
    import torch.nn.functional as F
    import torchvision
    from torch.utils.data import DataLoader
    from resnet_loader import Images

    net = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    if loader:
        it = iter(DataLoader(Images(10**7), batch_size=64, num_workers=8, pin_memory=True))
        # Workers stopped before the interpreter exits: left to its
        # shutdown, the pin-memory thread read from a closed worker
        # (ConnectionResetError).
        atexit.register(it._shutdown_workers)
    else:
        batch = next(iter(DataLoader(Images(64), batch_size=64)))

        def again():
            while True:
                yield batch
        it = again()

    def step():
        with torch.cuda.nvtx.range("step"):
            x, y = next(it)
            x = x.cuda(non_blocking=True).to(memory_format=torch.channels_last)
            y = y.cuda(non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(net(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    return step


def bert_step():
    """BERT-base fine-tuned for sequence classification as
    bench/real/hf_trainer.py's `Trainer` does it, its inner loop written
    out (2 DataLoader workers, pinned memory, bf16 autocast, gradient
    clipping at 1.0, AdamW with a linear schedule): the Trainer's own loop
    cannot be paused between plain blocks and sessions."""
    sys.path.insert(0, os.path.join(here, "..", "real"))
    from torch.utils.data import DataLoader
    from transformers import BertConfig, BertForSequenceClassification, default_data_collator
    from transformers.optimization import get_linear_schedule_with_warmup
    from hf_trainer import RandomTokens

    cfg = BertConfig(num_labels=2)
    torch.manual_seed(0)
    net = BertForSequenceClassification(cfg).cuda()
    opt = torch.optim.AdamW(net.parameters(), lr=5e-5)
    sched = get_linear_schedule_with_warmup(opt, 0, 10**6)
    data = RandomTokens(4096, 128, cfg.vocab_size)

    loader = DataLoader(data, batch_size=32, shuffle=True, num_workers=2, pin_memory=True,
                        collate_fn=default_data_collator, persistent_workers=True)

    def batches():
        while True:
            yield from loader
    it = batches()

    def step():
        with torch.cuda.nvtx.range("step"):
            b = {k: v.cuda(non_blocking=True) for k, v in next(it).items()}
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = net(**b).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
    return step


def model(name):
    """A training step taking no arguments, with NVTX ranges step/..."""
    if name == "bert":
        return bert_step()
    if name == "resnet":
        return resnet_step()
    if name == "resnet-noloader":
        return resnet_step(loader=False)
    if name == "gpt":
        sys.path.insert(0, os.path.join(here, "..", "..", "examples", "python"))
        from gpt_train import build

        step, _, _ = build()
        return step
    sys.path.insert(0, os.path.join(here, "..", "real"))
    from hf_llama import build

    step, _ = build()
    return lambda: step(torch.cuda.nvtx.range)


def threads_cpu():
    """CPU seconds of each of the process's threads, by name (the main
    thread as "main"), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = "main" if int(tid) == os.getpid() else stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def pin_apart():
    """BT_PIN=1: the main thread on one CPU, every other thread of the
    process off that CPU's core (its hyperthread siblings too)."""
    main = int(os.environ.get("BT_PIN_CPU", min(ALLOWED)))
    try:
        with open(f"/sys/devices/system/cpu/cpu{main}/topology/thread_siblings_list") as f:
            sib = f.read().strip()
    except OSError:
        sib = str(main)
    core = set()
    for part in sib.split(","):
        lo, _, hi = part.partition("-")
        core.update(range(int(lo), int(hi or lo) + 1))
    others = ALLOWED - core
    os.sched_setaffinity(0, {main})
    for tid in os.listdir("/proc/self/task"):
        if int(tid) != threading.get_native_id():
            try:
                os.sched_setaffinity(int(tid), others)
            except OSError:
                pass


ALLOWED = set(os.sched_getaffinity(0))

class Where:
    """BT_WHERE=1: every millisecond, whether the main thread is on a CPU
    (its state in /proc) and, when it is not, the innermost frame of the
    program's own code it waits in: where a step's off-CPU time goes."""

    def __init__(self):
        self.main = threading.main_thread().ident
        self.stat = f"/proc/self/task/{threading.get_native_id()}/stat"
        self.wchan = f"/proc/self/task/{threading.get_native_id()}/wchan"
        self.counts = {}
        threading.Thread(target=self.run, daemon=True, name="bt-where").start()

    def run(self):
        while True:
            time.sleep(0.001)
            try:
                with open(self.stat) as f:
                    st = f.read()
            except OSError:
                continue
            state = st[st.rindex(")") + 2]
            if state == "R":
                key = "on cpu"
            else:
                f = sys._current_frames().get(self.main)
                here = []
                while f is not None and len(here) < 3:
                    c = f.f_code
                    if "busy_truth" not in c.co_filename:
                        here.append(f"{os.path.basename(c.co_filename)}:{c.co_name}:{f.f_lineno}")
                    f = f.f_back
                try:
                    with open(self.wchan) as w:
                        state += " " + w.read().strip()
                except OSError:
                    pass
                key = f"{state} " + " < ".join(here)
            self.counts[key] = self.counts.get(key, 0) + 1

    def take(self, n):
        """Samples a step since the last take, the largest first."""
        c, self.counts = self.counts, {}
        total = sum(c.values()) or 1
        return {k: round(v / n, 1) for k, v in sorted(c.items(), key=lambda kv: -kv[1])[:6] if v / total > 0.02}


WHERE = None

# The last block's host figures a step: the main thread's CPU time and
# context switches, the whole process's CPU time and gpuscope's threads'.
LAST = {}


def block(step, n):
    torch.cuda.synchronize()
    if os.environ.get("BT_PIN"):
        pin_apart()
    r0 = resource.getrusage(resource.RUSAGE_THREAD)
    p0 = resource.getrusage(resource.RUSAGE_SELF)
    c0 = threads_cpu()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    r1 = resource.getrusage(resource.RUSAGE_THREAD)
    p1 = resource.getrusage(resource.RUSAGE_SELF)
    c1 = threads_cpu()
    ours = sum(v - c0.get(k, 0.0) for k, v in c1.items() if k.startswith("gpuscope"))
    busiest = sorted(((v - c0.get(k, 0.0), k) for k, v in c1.items() if k != "main"), reverse=True)[:4]
    LAST.clear()
    LAST.update({
        "main_cpu_ms": round(1e3 * (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / n, 3),
        "main_invol": round((r1.ru_nivcsw - r0.ru_nivcsw) / n, 1),
        "main_vol": round((r1.ru_nvcsw - r0.ru_nvcsw) / n, 1),
        "process_cpu_ms": round(1e3 * (p1.ru_utime + p1.ru_stime - p0.ru_utime - p0.ru_stime) / n, 3),
        "gpuscope_threads_cpu_ms": round(1e3 * ours / n, 3),
        "other_threads_cpu_ms": round(1e3 * sum(v - c0.get(k, 0.0) for k, v in c1.items()
                                                if k != "main" and not k.startswith("gpuscope")) / n, 3),
        "busiest_threads_cpu_ms": {k: round(1e3 * v / n, 2) for v, k in busiest if v > 0},
    })
    if WHERE is not None:
        LAST["main_where"] = WHERE.take(n)
    return 1e3 * (t1 - t0) / n


MODES = {
    "trace": dict(mode="trace"),
    "sampling": dict(mode="sampling"),
    "always-on": dict(mode="sampling", trace_windows=(0, 1000)),
    "stack": dict(mode="trace", torch_ranges="stack"),
    "hooks": dict(mode="trace", torch_ranges=True),
}


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="gpt", choices=["gpt", "llama", "resnet", "resnet-noloader", "bert"])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--modes", default="trace",
                   help="trace, or trace and one of sampling, always-on, stack, hooks (trace first: its kernels are the truth)")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if os.environ.get("BT_SWITCH"):
        # The interpreter's switch interval, s: how long a thread waiting
        # for the GIL may wait for one that holds it.
        sys.setswitchinterval(float(os.environ["BT_SWITCH"]))
    modes = a.modes.split(",")
    if modes[0] != "trace" or any(m not in MODES for m in modes) or len(modes) > 2:
        p.error(f"--modes {a.modes!r}: trace, then at most one of {', '.join(MODES)}")
    if len(modes) == 2 and modes[1] in ("sampling", "always-on") and a.rounds != 1:
        # CUPTI 13.0: after PM sampling no other session can start in the
        # process (kernel records would be on another clock).
        p.error("a sampling or always-on session must be the process's last: --rounds 1, and run more processes")
    step = model(a.model)
    if os.environ.get("BT_WHERE"):
        WHERE = Where()
    block(step, 10)
    plain = [block(step, a.steps)]
    rows = []
    for r in range(a.rounds):
        busy_ms = None
        for mode in modes:
            with gpuscope.profile(**MODES[mode]) as prof:
                profiled_ms = block(step, a.steps)
                host_profiled = dict(LAST)
            plain.append(block(step, a.steps))
            host_plain = dict(LAST)
            d = prof.report.data
            ans = d.get("answer") or {}
            plain_ms = statistics.mean(plain[-2:])
            row = {"model": a.model, "round": r, "mode": mode, "plain_step_ms": round(plain_ms, 3),
                   "profiled_step_ms": round(profiled_ms, 3),
                   "gpuscope_busy_pct": round(ans.get("gpu_busy_pct") or 0, 1),
                   "verdict": (ans.get("verdict") or {}).get("bound"),
                   "added_ms_measured": round(profiled_ms - statistics.mean(plain[-2:]), 3),
                   "added_ms_gpuscope": (ans.get("profiler_ns") or 0) / 1e6,
                   "first_action": ((ans.get("actions") or [{}])[0].get("advice") or "")[:60]}
            row["host_plain"] = host_plain
            row["host_profiled"] = host_profiled
            if mode == "trace":
                # Kernels run as long traced as not: their time per step
                # over the plain step is the truth for every mode.
                g = next(x for x in d["ranges"] if [f["name"] for f in x["path"]["frames"]] == ["step"])
                s = g.get("steady") or {}
                calls = s.get("calls") or g["count"]
                busy_ms = (s.get("in_window_ns") if s else g["gpu_busy_ns"]) / calls / 1e6
                cal = (d.get("profiler_cost") or {}).get("calibration") or {}
                threads = (d.get("profiler_cost") or {}).get("threads") or []
                row.update({
                    "gpu_busy_ms_per_step": round(busy_ms, 3),
                    "raw_busy_pct": round(100 * busy_ms / profiled_ms, 1),
                    "launches_per_step": round(s.get("launches", 0) / max(calls, 1), 1),
                    "warmup_calls": s.get("warmup_calls"),
                    "calibration": cal,
                    "launch_call_ns": [round(t["call_ns"] / max(t["calls_timed"], 1)) for t in threads[:3]],
                    "callback_ns": [round(t["callback_ns"] / max(t["launches"], 1)) for t in threads[:3]],
                })
            row["truth_busy_pct"] = round(100 * busy_ms / plain_ms, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    for mode in modes:
        diff = [r["gpuscope_busy_pct"] - r["truth_busy_pct"] for r in rows if r["mode"] == mode]
        print(json.dumps({"model": a.model, "mode": mode, "busy_points_off": diff,
                          "within_5": all(abs(x) <= 5 for x in diff)}))
    if a.out:
        json.dump(rows, open(a.out, "w"), indent=1)
