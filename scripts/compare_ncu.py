#!/usr/bin/env python3
"""Joins gpuscope's per-launch metrics (report JSON with a trace) with ncu's
CSV, launch by launch: the n-th launch of a kernel in one is the n-th in the
other (both list launches in order). Prints the table and the cost ratios.

    compare_ncu.py gpuscope.json ncu_nocache.csv ncu_default.csv times.txt
"""
import json, os, sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(__file__))
import ncu_csv  # noqa: E402
from ncu_csv import DUR, base  # noqa: E402

OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
EFF = "smsp__cycles_active.avg.pct_of_peak_sustained_elapsed"


def ncu_launches(path):
    per = defaultdict(list)
    for d in ncu_csv.launches(path):
        per[d["base"]].append(d)
    return per


def main():
    ours_path, nocache_path, default_path, times_path = sys.argv[1:5]
    report = json.load(open(ours_path))
    ours = defaultdict(list)
    for k in sorted(report["trace"]["kernels"], key=lambda k: k["correlation_id"]):
        if k.get("metrics"):
            ours[base(k["name"])].append(k["metrics"])
    nc, nd = ncu_launches(nocache_path), ncu_launches(default_path)
    print("metrics status:", json.dumps(report.get("metrics")))
    hdr = f"{'kernel':<24}{'#':>3}{'dur us':>9} | {'occ ncu':>8}{'ours':>8}{'diff':>7} | {'eff ncu':>8}{'ours':>8}{'diff':>7} | {'occ/eff ncu flush':>18}"
    print(hdr)
    print("-" * len(hdr))
    worst = []
    for name in sorted(ours):
        for i, m in enumerate(ours[name]):
            a = nc.get(name, [])
            b = nd.get(name, [])
            if i >= len(a):
                worst.append((name, i, "ncu has no such launch"))
                continue
            x, y = a[i], (b[i] if i < len(b) else {})
            do, de = m["achieved_occupancy_pct"] - x[OCC], m["sm_efficiency_pct"] - x[EFF]
            dur = x.get(DUR, 0) / 1e3
            flag = " <-" if dur >= 10 and (abs(do) > 2 or abs(de) > 2) else ""
            print(f"{name:<24}{i:>3}{dur:>9.1f} | {x[OCC]:>8.2f}{m['achieved_occupancy_pct']:>8.2f}{do:>7.2f} | "
                  f"{x[EFF]:>8.2f}{m['sm_efficiency_pct']:>8.2f}{de:>7.2f} | {y.get(OCC, float('nan')):>8.2f}/{y.get(EFF, float('nan')):<8.2f}{flag}")
            if flag:
                worst.append((name, i, f"occ {do:+.2f} eff {de:+.2f}"))
    print()
    t = dict(l.split() for l in open(times_path))
    t = {k: float(v) for k, v in t.items()}
    print("process wall time, s: " + ", ".join(f"{k} {v:.2f}" for k, v in t.items()))
    if "ncu" in t and "gpuscope_all" in t:
        print(f"ncu / gpuscope(all launches) = {t['ncu'] / t['gpuscope_all']:.1f}x")
    if "gpuscope_default" in t and "plain" in t:
        print(f"gpuscope(default selection) / plain = {t['gpuscope_default'] / t['plain']:.2f}x")
        print(f"gpuscope(all launches) / plain = {t['gpuscope_all'] / t['plain']:.2f}x")
    print(f"launches of 10 us or more off by over 2 points (vs ncu --cache-control none): {len(worst)}")
    for w in worst[:40]:
        print("  ", *w)


if __name__ == "__main__":
    main()
