"""Tensor-pipe activity of a training step: gpuscope's sampled figure for
the `step` range against Nsight Compute's per-kernel figures over one whole
step, weighted by ncu's durations, by active cycles, and by the kernels'
time in a gpuscope trace of the same program (tensor_vs_ncu.sh runs it).

    python3 tensor_vs_ncu.py per-step TRACE.json STEPS      # kernels a step
    python3 tensor_vs_ncu.py compare NCU.csv SAMPLED.json TRACE.json
"""
import collections
import csv
import json
import sys

TENSOR = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"


def path(p):
    return "/".join(f["name"] for f in p["frames"])


def in_step(k):
    p = path(k["path"])
    return p == "step" or p.startswith("step/")


def key(name):
    """The function's own name: ncu and CUPTI demangle namespaces
    differently (`at::native::` and `(anonymous namespace)`)."""
    name = name.replace("(anonymous namespace)", "anon")
    name = name[5:] if name.startswith("void ") else name
    name = name.split("(")[0]
    depth, out = 0, ""
    for c in name:
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif depth == 0:
            out += c
    return out.split("::")[-1].strip()


def ncu_rows(file):
    lines = open(file).read().splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith('"ID"')):]
    num = lambda s: float(s.replace(",", "")) if s.strip() else 0.0  # noqa: E731
    for r in csv.DictReader(lines):
        if r["ID"].strip().isdigit():
            yield r["Kernel Name"], num(r[TENSOR]), num(r["gpu__time_duration.sum"]), num(r["sm__cycles_active.avg"])


def compare(ncu_csv, sampled_json, trace_json):
    per = collections.defaultdict(list)
    wd = d_sum = wa = a_sum = 0.0
    rows = list(ncu_rows(ncu_csv))
    for name, t, d, a in rows:
        per[key(name)].append((t, d))
        wd += t * d; d_sum += d; wa += t * a; a_sum += a
    print(f"ncu: {len(rows)} kernels, {d_sum / 1e6:.2f} ms; tensor by ncu's durations {wd / d_sum:.1f}%, "
          f"by active cycles {wa / a_sum:.1f}%")
    real = collections.defaultdict(float)
    for k in json.load(open(trace_json))["path_kernels"]:
        if in_step(k):
            real[key(k["name"])] += k["total_ns"]
    w = s = missing = 0.0
    for name, ns in real.items():
        v = per.get(name)
        if v and sum(d for _, d in v) > 0:
            w += ns * sum(t * d for t, d in v) / sum(d for _, d in v)
            s += ns
        else:
            missing += ns
    if s:
        print(f"ncu's per-kernel figures weighted by the trace's kernel time: {w / s:.1f}% "
              f"({100 * missing / (s + missing):.1f}% of the time not matched by name)")
    for r in json.load(open(sampled_json))["ranges"]:
        if path(r["path"]) == "step":
            print(f"gpuscope sampled, range step: {(r.get('sampled') or {}).get('tensor_active_pct')}%")


if __name__ == "__main__":
    if sys.argv[1] == "per-step":
        d = json.load(open(sys.argv[2]))
        print(round(sum(k["launches"] for k in d["path_kernels"] if in_step(k)) / int(sys.argv[3])))
    else:
        compare(*sys.argv[2:5])
