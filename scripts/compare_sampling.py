#!/usr/bin/env python3
"""Sampling mode against metrics mode: two gpuscope JSON reports of the same
program, one run with --mode metrics (exact, per launch), one with --mode
sampling (PM samples joined by time).

Compares where sampling mode promises figures: kernels whose mean launch is
at least 1 ms (their own samples: KernelStats.sampled) and NVTX ranges whose
mean instance is at least 10 ms (the samples over their kernels' time:
RangeSummary.sampled), on SM efficiency and achieved occupancy.

  scripts/compare_sampling.py METRICS.json SAMPLING.json [--points 3]

Exit status 1 when a figure differs by more than --points.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("metrics")
    ap.add_argument("sampling")
    ap.add_argument("--points", type=float, default=3.0)
    ap.add_argument("--kernel-ms", type=float, default=1.0)
    ap.add_argument("--range-ms", type=float, default=10.0)
    a = ap.parse_args()
    m = json.load(open(a.metrics))
    s = json.load(open(a.sampling))
    if s.get("mode") != "sampling":
        sys.exit(f"{a.sampling}: mode {s.get('mode')!r}, not a sampling-mode report")
    st = s.get("sampling") or {}
    print(f"sampling: interval {st.get('interval_ns', 0) / 1e3:g} us, {st.get('samples')} samples, "
          f"{st.get('overflows')} overflows, {st.get('samples_expired')} expired, "
          f"{st.get('kernels_unsampled')} kernels unsampled, decode {st.get('decode_ns', 0) / 1e6:.1f} ms")
    rows, bad = [], []

    def compare(what, measured, sampled):
        me, mo = measured.get("sm_efficiency_pct"), measured.get("achieved_occupancy_pct")
        sampled = sampled or {}
        se, so = sampled.get("sm_efficiency_pct"), sampled.get("achieved_occupancy_pct")
        if None in (me, mo, se, so):
            bad.append(f"{what}: missing (measured {me}, {mo}; sampled {se}, {so})")
            return
        rows.append((what, me, se, mo, so))
        if abs(se - me) > a.points or abs(so - mo) > a.points:
            bad.append(f"{what}: SM eff {me:.2f} vs {se:.2f}, occupancy {mo:.2f} vs {so:.2f}")

    measured_kernels = {k["name"]: k for k in m["kernels"]}
    for k in s["kernels"]:
        if k["mean_ns"] < a.kernel_ms * 1e6:
            continue
        mk = measured_kernels.get(k["name"])
        if mk is None or not mk.get("profiled_launches"):
            bad.append(f"kernel {k.get('display_name') or k['name']}: not measured in the metrics report")
            continue
        compare(f"kernel {k.get('display_name') or k['name']}", mk, k.get("sampled"))

    def key(g):
        return "/".join(f["name"] for f in g["path"]["frames"])

    measured_ranges = {key(g): g for g in m["ranges"]}
    for g in s["ranges"]:
        if g["wall_ns"] / max(g["count"], 1) < a.range_ms * 1e6:
            continue
        mg = measured_ranges.get(key(g))
        if mg is None or mg.get("sm_efficiency_pct") is None:
            continue
        compare(f"range {key(g)}", mg, g.get("sampled"))

    print(f"{'':<60} {'SM efficiency':>22} {'achieved occupancy':>22}")
    print(f"{'':<60} {'measured':>8} {'sampled':>8} {'diff':>5} {'measured':>8} {'sampled':>8} {'diff':>5}")
    for what, me, se, mo, so in rows:
        print(f"{what[:60]:<60} {me:8.2f} {se:8.2f} {se - me:+5.1f} {mo:8.2f} {so:8.2f} {so - mo:+5.1f}")
    print(f"{len(rows)} compared, {len(bad)} outside {a.points} points or missing")
    for b in bad:
        print("  " + b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
