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

Kernel time differs between the two by definition: metrics mode (like ncu)
times a kernel with gpu__time_duration, which includes ~1.5 us of launch
processing per kernel on an H100; the activity records sampling mode shares
samples over do not. SM efficiency over the shorter time reads higher. For
each range the script also gives the sampled SM efficiency on metrics mode's
time basis (scaled by the ratio of the two kernel times per launch under the
range): the difference that remains is sampling's own. Occupancy is a share
of active cycles: a sample's is weighted by its active cycles, metrics
mode's range figure by kernel time. The script also gives metrics mode's
occupancy weighted by active cycles (kernel time x SM efficiency).
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

    def under(r, prefix):
        return [k for k in r["path_kernels"] if key(k)[:len(prefix)] == prefix
                and (len(key(k)) == len(prefix) or key(k)[len(prefix)] == "/")]

    def per_launch(r, prefix):
        ks = under(r, prefix)
        n = sum(k["launches"] for k in ks)
        return sum(k["total_ns"] for k in ks) / n if n else None

    def occupancy_by_cycles(r, prefix):
        ks = [k for k in under(r, prefix)
              if k.get("achieved_occupancy_pct") is not None and k.get("sm_efficiency_pct") is not None]
        w = sum(k["total_ns"] * k["sm_efficiency_pct"] for k in ks)
        return sum(k["achieved_occupancy_pct"] * k["total_ns"] * k["sm_efficiency_pct"] for k in ks) / w if w else None

    basis = []
    measured_ranges = {key(g): g for g in m["ranges"]}
    for g in s["ranges"]:
        if g["wall_ns"] / max(g["count"], 1) < a.range_ms * 1e6:
            continue
        mg = measured_ranges.get(key(g))
        if mg is None or mg.get("sm_efficiency_pct") is None:
            continue
        compare(f"range {key(g)}", mg, g.get("sampled"))
        tm, ts = per_launch(m, key(g)), per_launch(s, key(g))
        se = (g.get("sampled") or {}).get("sm_efficiency_pct")
        so = (g.get("sampled") or {}).get("achieved_occupancy_pct")
        mo = occupancy_by_cycles(m, key(g))
        if tm and ts and se is not None and so is not None and mo is not None:
            basis.append((key(g), tm, ts, mg["sm_efficiency_pct"], se * ts / tm, mo, so))

    print(f"{'':<60} {'SM efficiency':>22} {'achieved occupancy':>22}")
    print(f"{'':<60} {'measured':>8} {'sampled':>8} {'diff':>5} {'measured':>8} {'sampled':>8} {'diff':>5}")
    for what, me, se, mo, so in rows:
        print(f"{what[:60]:<60} {me:8.2f} {se:8.2f} {se - me:+5.1f} {mo:8.2f} {so:8.2f} {so - mo:+5.1f}")
    print(f"{len(rows)} compared, {len(bad)} outside {a.points} points or missing")
    for b in bad:
        print("  " + b)
    if basis:
        print("Like with like: SM efficiency on metrics mode's time basis (kernel time per launch: metrics mode /")
        print("records), occupancy of metrics mode weighted by active cycles:")
        for what, tm, ts, me, se, mo, so in basis:
            print(f"  range {what[:40]:<40} {tm / 1e3:6.2f} / {ts / 1e3:6.2f} us  SM eff {me:6.2f} vs {se:6.2f} "
                  f"({se - me:+.1f})  occ {mo:6.2f} vs {so:6.2f} ({so - mo:+.1f})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
