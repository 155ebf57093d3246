"""gpuscope's per-launch hardware metrics against Nsight Compute's, launch
by launch, on the same deterministic program (the n-th launch of one is the
n-th of the other; base names are checked to agree).

    fidelity.py --ncu none=ncu_none.csv [--ncu flush=ncu_all.csv] \
        --ours batched=gs_batched.json [--ours alone=gs_alone.json] [--min-us 10]

ncu CSVs come from `ncu --csv --cache-control none|all --clock-control none
--metrics gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,
smsp__cycles_active.avg.pct_of_peak_sustained_elapsed`; gpuscope reports
from `gpuscope run --mode metrics --launch-count all --trace 1000000`.
Per kernel (launches of at least --min-us by ncu's first CSV): mean of each
source's achieved occupancy and SM efficiency, and the first ncu's
difference from each gpuscope run. Exits 1 if any kernel is off by more
than --tolerance points in the first gpuscope run.
"""
import argparse
import json
import os
import statistics as st
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
from ncu_csv import DUR, base, launches as ncu_launches  # noqa: E402

OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
EFF = "smsp__cycles_active.avg.pct_of_peak_sustained_elapsed"


def our_launches(path):
    r = json.load(open(path))
    shown = {k["name"]: k.get("display_name") or base(k["name"]) for k in r["kernels"]}
    out = []
    for k in sorted(r["trace"]["kernels"], key=lambda k: k["correlation_id"]):
        m = k.get("metrics") or {}
        out.append({"base": base(k["name"]), "name": shown.get(k["name"], k["name"]),
                    OCC: m.get("achieved_occupancy_pct"), EFF: m.get("sm_efficiency_pct")})
    return out, r.get("metrics")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ncu", action="append", required=True, help="LABEL=ncu.csv (the first is the reference)")
    ap.add_argument("--ours", action="append", required=True, help="LABEL=gpuscope.json")
    ap.add_argument("--min-us", type=float, default=10.0)
    ap.add_argument("--tolerance", type=float, default=2.0)
    a = ap.parse_args()
    ncu = [(l, ncu_launches(p)) for l, p in (x.split("=", 1) for x in a.ncu)]
    ours = [(l, *our_launches(p)) for l, p in (x.split("=", 1) for x in a.ours)]
    ref = ncu[0][1]
    for label, launches, status in ours:
        bad = sum(1 for x, y in zip(ref, launches) if x["base"] != y["base"])
        print(f"{label}: {len(launches)} launches, ncu {len(ref)}; {bad} pairs with different names; metrics {json.dumps(status)}")
    names = ours[0][1]
    per = defaultdict(lambda: defaultdict(list))
    for i, x in enumerate(ref):
        if x.get(DUR, 0) / 1e3 < a.min_us or i >= len(names) or names[i]["base"] != x["base"]:
            continue
        key = names[i]["name"]
        per[key]["dur"].append(x[DUR] / 1e3)
        for label, l in ncu:
            if i < len(l):
                per[key][f"{label}:occ"].append(l[i].get(OCC))
                per[key][f"{label}:eff"].append(l[i].get(EFF))
        for label, l, _ in ours:
            if i < len(l) and l[i]["base"] == x["base"] and l[i][OCC] is not None:
                per[key][f"{label}:occ"].append(l[i][OCC])
                per[key][f"{label}:eff"].append(l[i][EFF])
    mean = lambda v: st.mean([x for x in v if x is not None]) if any(x is not None for x in v) else float("nan")
    labels = [l for l, _ in ncu] + [l for l, _, _ in ours]
    hdr = f"{'kernel':<56}{'n':>4}{'us':>7} | " + " ".join(f"{l + ' occ':>11}" for l in labels) + " | " + \
        " ".join(f"{l + ' eff':>11}" for l in labels)
    print(hdr)
    print("-" * len(hdr))
    worst = []
    for key, v in sorted(per.items(), key=lambda kv: -sum(kv[1]["dur"])):
        occ = [mean(v[f"{l}:occ"]) for l in labels]
        eff = [mean(v[f"{l}:eff"]) for l in labels]
        print(f"{key[:56]:<56}{len(v['dur']):>4}{st.mean(v['dur']):>7.1f} | " + " ".join(f"{x:>11.2f}" for x in occ)
              + " | " + " ".join(f"{x:>11.2f}" for x in eff))
        d = (occ[len(ncu)] - occ[0], eff[len(ncu)] - eff[0])
        if abs(d[0]) > a.tolerance or abs(d[1]) > a.tolerance:
            worst.append((key, d))
    print(f"\nkernels of {a.min_us:g} us or more: {len(per)}; off by over {a.tolerance:g} points in {ours[0][0]}: {len(worst)}")
    for k, d in worst:
        print(f"  {k}: occ {d[0]:+.2f}, eff {d[1]:+.2f}")
    raise SystemExit(1 if worst else 0)


if __name__ == "__main__":
    main()
