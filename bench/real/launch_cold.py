"""Summarises launch_cold.cu's output: per configuration and KiB touched
between launches, the median time tracing added to a launch, and for
gpuscope's sessions what the session's report charged itself a launch
(ProfilerCost.added_ns over its launches).

    python3 bench/real/launch_cold.py OUTDIR/launch_cold.txt OUTDIR
"""
import json
import os
import statistics as st
import sys


def charged(path):
    d = json.load(open(path))
    pc = d.get("profiler_cost") or {}
    th = pc.get("threads") or []
    launches = sum(t["launches"] for t in th)
    cb = sum(t["callback_ns"] for t in th)
    call = sum(t["call_ns"] for t in th)
    timed = sum(t["calls_timed"] for t in th)
    cal = pc.get("calibration")
    if cal:
        added = max(cal["record_ns"] * launches + cb, (call // timed - cal["plain_ns"]) * launches if timed else 0)
    else:
        added = cb
    return added / max(launches, 1), cal, call / max(timed, 1)


rows = [line.split() for line in open(sys.argv[1]) if line[:1].isdigit()]
out = {}
for r, c, kib, plain, prof, added in rows:
    key = (c, int(kib))
    e = out.setdefault(key, {"added": [], "plain": [], "charged": [], "cal": [], "call": []})
    e["added"].append(float(added))
    e["plain"].append(float(plain))
    p = os.path.join(sys.argv[2], f"{c}-{kib}-{r}.json")
    if os.path.exists(p):
        ch, cal, call = charged(p)
        e["charged"].append(ch)
        e["call"].append(call)
        if cal:
            e["cal"].append((cal["plain_ns"], cal["record_ns"]))
print(f"{'config':<10} {'KiB':>5} {'plain ns':>9} {'added ns (median, all)':<40} {'charged':>8} {'call ns':>8}  calibration (plain, record)")
for (c, kib), e in sorted(out.items(), key=lambda x: (x[0][1], x[0][0])):
    print(f"{c:<10} {kib:>5} {st.median(e['plain']):>9.0f} {st.median(e['added']):>7.0f} {str([round(x) for x in e['added']]):<32} "
          f"{st.median(e['charged']) if e['charged'] else 0:>8.0f} {st.median(e['call']) if e['call'] else 0:>8.0f}  {e['cal'][:4]}")
