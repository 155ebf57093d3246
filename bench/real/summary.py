"""The suite's table: per program, the plain run's step time, the GPU
time per step gpuscope measured (kernels do not slow down under tracing),
the busy share those make of the plain step (what the answer should say),
and gpuscope's answer: its step, busy share, verdict and first action.

    python3 summary.py OUT NAME...
"""
import glob
import json
import os
import re
import sys

# Steps each program runs in all (warm-up included), for programs whose
# answer is the session rather than a range.
TOTAL_STEPS = {"llama": 45, "jax": 310, "lightning": 300, "cupy": 301}


def plain(out, name):
    try:
        text = open(os.path.join(out, f"{name}.plain.txt")).read()
    except OSError:
        return None
    m = re.findall(r"^SUITE (\{.*\})$", text, re.M)
    return json.loads(m[-1]) if m else None


def report(out, name):
    files = sorted(glob.glob(os.path.join(out, f"{name}.json")) + glob.glob(os.path.join(out, f"{name}.[0-9]*.json")))
    reports = []
    for f in files:
        try:
            reports.append(json.load(open(f)))
        except (OSError, ValueError):
            pass
    used = [r for r in reports if r.get("kernels")]
    return used, len(files)


def lines(out, name):
    try:
        text = open(os.path.join(out, f"{name}.txt")).read()
    except OSError:
        return 0, 0
    body = text.split("\n== Details")[0]
    answer = body.split("== Answer")[-1] if "== Answer" in body else ""
    return len(answer.splitlines()), len(text.splitlines())


def row(out, name):
    p = plain(out, name)
    used, files = report(out, name)
    if not used:
        return f"| {name} | {p and p['step_ms']} ms | - | - | no report ({files} files) | | |"
    r = used[0]
    a = r.get("answer") or {}
    step_ms = p["step_ms"] if p else None
    busy_per_step = None
    if a.get("range"):
        g = next((g for g in r["ranges"] if "/".join(f["name"] for f in g["path"]["frames"]) == a["range"]), None)
        s = (g or {}).get("steady")
        if s and s["calls"]:
            busy_per_step = s["in_window_ns"] / s["calls"] / 1e6
    elif name in TOTAL_STEPS:
        busy_per_step = sum(k["total_ns"] for k in r["kernels"]) / TOTAL_STEPS[name] / 1e6
    expected = f"{100 * busy_per_step / step_ms:.0f}%" if busy_per_step and step_ms else "-"
    act = (a.get("actions") or [{}])[0].get("advice", "-")[:90]
    ans_lines, all_lines = lines(out, name)
    prof = a.get("profiler_ns")
    return (f"| {name} | {step_ms} ms | {busy_per_step and round(busy_per_step, 3)} ms | {expected} | "
            f"{a.get('range') or 'session'}: {a.get('per_step_ns', 0) / 1e6:.3f} ms, busy {a.get('gpu_busy_pct', 0):.0f}%, "
            f"warm-up {a.get('warmup_calls', 0)} ({a.get('warmup_ns', 0) / 1e9:.2f} s), "
            f"own cost {prof and round(prof / 1e6, 3)} ms | {(a.get('verdict') or {}).get('bound')} | {act} | "
            f"{ans_lines}/{all_lines} lines, {len(used)}/{files} reports |")


if __name__ == "__main__":
    out = sys.argv[1]
    print("| program | plain step | GPU busy per step (gpuscope) | expected busy | gpuscope's answer | verdict | "
          "first action | lines (answer/all), reports |")
    print("|---|---|---|---|---|---|---|---|")
    for name in sys.argv[2:]:
        if name != "zoo":
            print(row(out, name))
