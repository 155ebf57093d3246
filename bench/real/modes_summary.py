"""One line per report of bench/real/modes.sh: the plain step time, and the
answer (main step, time per step, GPU busy and where it came from, verdict,
first action), with how PM sampling went.

Where the report has kernel records, the busy truth beside it: the GPU's
busy time per step that run measured (its busy share of the step with
gpuscope's own time taken out) over the plain run's step, and the
difference in points. Per-token steps of a `generate()` call are compared
with the plain call's time over its tokens. Where the plain run printed
every step's time (`walls_ms`) and gpuscope found steps, the plain step is
their median (the first left out), as gpuscope's is.

    python3 modes_summary.py OUT
"""
import glob
import json
import os
import re
import sys

out = sys.argv[1]
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    name = os.path.basename(f)
    try:
        r = json.load(open(f))
    except (OSError, ValueError) as e:
        print(f"{name}: unreadable: {e}")
        continue
    a = r.get("answer") or {}
    plain = os.path.join(out, name.split(".")[0] + ".plain.txt")
    step, plain_ms = "-", None
    if os.path.exists(plain):
        m = re.findall(r"SUITE (\{.*\})", open(plain).read())
        if m:
            suite = json.loads(m[-1])
            step = f"{suite.get('step_ms')} ms"
            plain_ms = suite.get("step_ms")
            walls = suite.get("walls_ms") or []
            if a.get("found_steps") and len(walls) > 3:
                # Every step's host time: the median of all but the first,
                # as gpuscope's steps found are taken, not the timed tail
                # (a finite loader's last batches come from its queue while
                # its workers no longer load the CPUs: faster steps).
                plain_ms = sorted(walls[1:])[(len(walls) - 1) // 2]
                step += f" (median {plain_ms:.2f})"
            per_token = suite.get("tokens_per_call")
            if plain_ms and per_token and a.get("per_step_ns", 0) < 0.5 * plain_ms * 1e6:
                plain_ms /= per_token
                step += f" ({plain_ms:.3f} a token)"
    first = (a.get("actions") or [{}])[0]
    action = f"{first.get('advice', '-')[:70]} ({first.get('saves_pct', 0):.0f}%)" if first else "-"
    print(
        f"{name:26} plain {step:>11} | {a.get('range') or 'steady state'}: "
        f"{a.get('per_step_ns', 0) / 1e6:.2f} ms, busy {a.get('gpu_busy_pct', 0):.0f}% "
        f"({a.get('busy_source', '-')}) [{(a.get('verdict') or {}).get('bound')}] {action}"
    )
    if plain_ms and a.get("busy_source") == "kernel records" and a.get("per_step_ns"):
        own = a.get("profiler_ns") or 0
        parts = {p["what"]: p["ns"] for p in a.get("parts", [])}
        busy_ns = parts.get("GPU busy", 0) + parts.get("communication", 0)
        if not busy_ns:
            busy_ns = a.get("gpu_busy_pct", 0) / 100 * max(a["per_step_ns"] - own, 0)
        busy_ms = busy_ns / 1e6
        truth = 100 * busy_ms / plain_ms
        diff = a.get("gpu_busy_pct", 0) - truth
        flag = "" if abs(diff) <= 5 else "  ** over 5 points"
        print(
            f"{'':26} busy truth {truth:.0f}% ({busy_ms:.3f} ms of GPU time a step over the plain "
            f"{plain_ms:.3f} ms); gpuscope {diff:+.1f} points; own time {own / 1e6:.2f} ms a step{flag}"
        )
    fs = a.get("found_steps")
    if fs:
        print(
            f"{'':26} steps found: {fs['kernels_per_step']} kernels a step, {fs['steps_seen']} seen, "
            f"median {fs['median_ns'] / 1e6:.3f} ms, p90 {fs['p90_ns'] / 1e6:.3f} ms, {fs['match_pct']:.1f}% matched"
        )
    s = r.get("sampling")
    if s:
        configs = [c["samples"] for c in s.get("configs", [])]
        print(
            f"{'':26} samples {s.get('samples')} per configuration {configs}, {s.get('switches', 0)} switches, "
            f"{s.get('exit_samples', 0)} decoded at exit, tail lost {s.get('tail_lost')}, off: {s.get('disabled')}"
        )
