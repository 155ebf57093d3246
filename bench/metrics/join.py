"""Joins per-launch metrics of Nsight Compute and gpuscope, launch by launch.

    join.py --ncu LABEL=ncu.csv [--ncu ...] --ours LABEL=report.json [--ours ...]
            [--min-us 10] [--tolerance 2] [--kernel REGEX] [--launches] [--raw M1,M2]

A launch is keyed by its kernel's base name, grid and block, and its rank
among the launches with that key (the n-th launch of `k<<<320,512>>>` in
one run is the n-th in the other): launches are joined one to one, not
averaged by name. ncu CSVs come from `ncu --csv --metrics ...`; gpuscope
reports from `gpuscope run --mode metrics --launch-count all --trace N`
(a trace-mode report gives durations only). The first --ncu is the
reference and the first --ours is checked against it, on the launches of
--min-us or more (by the reference's duration): a kernel (name and grid)
is off when its mean difference on achieved occupancy or SM efficiency
exceeds --tolerance points. A second --ncu run of the same program is the
noise floor: how far ncu's own per-launch values move from run to run,
printed next to gpuscope's per-launch differences. Prints one row per
kernel and grid (the mean per source, the mean difference and the largest
per launch), then the kernels off; --launches prints every launch. --raw
lists further metric names (collected by both) to compare per kernel as
ratios. Exits 1 when a kernel is off, 2 on bad input.
"""
import argparse
import csv
import json
import re
import statistics as st
import sys
from collections import defaultdict

OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
EFF = "smsp__cycles_active.avg.pct_of_peak_sustained_elapsed"
DUR = "gpu__time_duration.sum"
UNIT = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}


def base(name):
    """A kernel's function name without namespaces, template arguments and
    parameters; ncu writes anonymous namespaces as `<unnamed>`, demanglers
    as `(anonymous namespace)`."""
    s = re.sub(r"\(anonymous namespace\)::|(?<![<\w])<unnamed>::|unnamed>::", "", name)
    s = re.sub(r"\(.*", "", s)
    s = re.sub(r"<.*", "", s)
    return s.split()[-1].split("::")[-1] if s.split() else s


def functor(name):
    """The template argument that tells instances of a generic kernel apart
    (`multi_tensor_apply_kernel<...BinaryOpScalarFunctor...>`), for display."""
    m = re.search(r"(\w+Functor\w*)(?:<[^<>]*(\w+Functor|Sqrt|Lerp\w*))?", name)
    if not m:
        return ""
    return m.group(1) + (f"<{m.group(2)}>" if m.group(2) else "")


def dims(text):
    """`(320, 1, 1)` -> (320, 1, 1)."""
    v = tuple(int(x) for x in re.findall(r"\d+", text))
    return v if len(v) == 3 else None


def ncu_launches(path):
    """One dict per profiled launch, in launch order: base, name, grid,
    block and each metric (durations in ns)."""
    with open(path, errors="replace") as f:
        rows = [r for r in csv.reader(f) if r]
    try:
        start = next(i for i, r in enumerate(rows) if r[0] == "ID")
    except StopIteration:
        raise SystemExit(f"join.py: {path}: no ncu CSV table (a line starting with \"ID\") found")
    head, rows = rows[start], rows[start + 1:]
    col = {c: i for i, c in enumerate(head)}
    for need in ("ID", "Kernel Name", "Metric Name", "Metric Value", "Grid Size", "Block Size"):
        if need not in col:
            raise SystemExit(f"join.py: {path}: ncu CSV lacks column {need!r}")
    by_id = {}
    for r in rows:
        if len(r) != len(head) or not r[col["ID"]].isdigit():
            continue
        name = r[col["Kernel Name"]]
        d = by_id.setdefault(int(r[col["ID"]]), {"base": base(name), "name": name, "grid": dims(r[col["Grid Size"]]),
                                                 "block": dims(r[col["Block Size"]]), "m": {}})
        try:
            x = float(r[col["Metric Value"]].replace(",", ""))
        except ValueError:
            continue
        unit = r[col["Metric Unit"]] if "Metric Unit" in col else ""
        if r[col["Metric Name"]] == DUR:
            x *= UNIT.get(unit, 1)
        d["m"][r[col["Metric Name"]]] = x
    return [by_id[i] for i in sorted(by_id)]


def our_launches(path):
    """One dict per traced launch of a gpuscope report, in launch order."""
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"join.py: {path}: {e}")
    ks = (r.get("trace") or {}).get("kernels") or []
    if not ks:
        raise SystemExit(f"join.py: {path}: the report has no per-launch records (run with --trace N)")
    out = []
    for k in sorted(ks, key=lambda k: k["correlation_id"]):
        m = k.get("metrics")
        vals = dict(m.get("values") or {}) if m else {}
        if m:
            vals[OCC] = m.get("achieved_occupancy_pct")
            vals[EFF] = m.get("sm_efficiency_pct")
            vals[DUR] = m.get("duration_ns")
        else:
            vals["trace_ns"] = k["end_ns"] - k["start_ns"]
        out.append({"base": base(k["name"]), "name": k["name"], "grid": tuple(k["grid"]), "block": tuple(k["block"]),
                    "m": vals, "measured": bool(m)})
    return out, r.get("metrics") or {}


def keyed(launches):
    """{(base, grid, block, rank): launch}."""
    seen = defaultdict(int)
    out = {}
    for x in launches:
        k = (x["base"], x["grid"], x["block"])
        out[k + (seen[k],)] = x
        seen[k] += 1
    return out


def fmt(v, w=7, p=1):
    return f"{v:>{w}.{p}f}" if isinstance(v, (int, float)) and v == v else f"{'-':>{w}}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ncu", action="append", required=True, help="LABEL=ncu.csv (the first is the reference)")
    ap.add_argument("--ours", action="append", required=True, help="LABEL=gpuscope.json (the first is checked)")
    ap.add_argument("--min-us", type=float, default=10.0)
    ap.add_argument("--tolerance", type=float, default=2.0)
    ap.add_argument("--kernel", default="", help="only kernels whose name matches this regex")
    ap.add_argument("--launches", action="store_true", help="print every joined launch")
    ap.add_argument("--raw", default="", help="comma-separated metric names to compare as ratios")
    a = ap.parse_args()

    def labelled(xs, what):
        out = []
        for x in xs:
            if "=" not in x:
                ap.error(f"--{what} {x!r}: expected LABEL=FILE")
            out.append(tuple(x.split("=", 1)))
        return out

    ncu = [(label, keyed(ncu_launches(p))) for label, p in labelled(a.ncu, "ncu")]
    ours = []
    for label, p in labelled(a.ours, "ours"):
        ls, status = our_launches(p)
        ours.append((label, keyed(ls), status))
    ref_label, ref = ncu[0]
    chk_label, chk, _ = ours[0]
    kre = re.compile(a.kernel) if a.kernel else None
    raw = [m for m in a.raw.split(",") if m]

    for label, ls, status in ours:
        joined = sum(1 for k in ls if k in ref)
        measured = sum(1 for x in ls.values() if x["measured"])
        print(f"{label}: {len(ls)} launches ({measured} measured), {joined} joined with {ref_label}'s {len(ref)}; "
              f"metrics status: profiled {status.get('profiled_launches')}, mismatches {status.get('mismatches')}, "
              f"skipped busy {status.get('skipped_busy')}")
    for label, ls in ncu[1:]:
        print(f"{label}: {len(ls)} launches, {sum(1 for k in ls if k in ref)} joined with {ref_label}")

    sources = [(label, ls) for label, ls in ncu] + [(label, ls) for label, ls, _ in ours]
    groups = defaultdict(list)
    for k, x in ref.items():
        if kre and not kre.search(x["name"]):
            continue
        if x["m"].get(DUR, 0) / 1e3 < a.min_us or k not in chk or not chk[k]["measured"]:
            continue
        groups[(k[0], functor(x["name"]), k[1], k[2])].append(k)
    off = []
    launches_off = defaultdict(int)
    labels = [s for s, _ in sources]
    print(f"\nlaunches of {a.min_us:g} us or more in {ref_label}, joined with {chk_label}; "
          f"occ = achieved occupancy %, eff = SM efficiency %; d = {chk_label} - {ref_label} "
          f"(mean, and the largest per launch)")
    w = max(11, 2 + max(len(s) for s in labels))
    hdr = (f"{'kernel':<44}{'grid':>8}{'n':>4}{'us':>10} | "
           + "".join(f"{'occ ' + s:>{w + 4}}" for s in labels[:1]) + "".join(f"{s:>{w}}" for s in labels[1:])
           + f"{'d mean':>8}{'d max':>8} | "
           + "".join(f"{'eff ' + s:>{w + 4}}" for s in labels[:1]) + "".join(f"{s:>{w}}" for s in labels[1:])
           + f"{'d mean':>8}{'d max':>8}")
    print(hdr)
    print("-" * len(hdr))
    mean = lambda v: st.mean(v) if v else float("nan")
    for g, keys in sorted(groups.items(), key=lambda kv: -sum(ref[k]["m"][DUR] for k in kv[1])):
        name = (g[0] + (f"<{g[1]}>" if g[1] else ""))[:43]
        row = f"{name:<44}{g[2][0]:>8}{len(keys):>4}{mean([ref[k]['m'][DUR] / 1e3 for k in keys]):>10.1f} | "
        for metric in (OCC, EFF):
            vals = []
            for _, ls in sources:
                v = [ls[k]["m"].get(metric) for k in keys if k in ls and ls[k]["m"].get(metric) is not None]
                vals.append(mean(v))
            diffs = [chk[k]["m"][metric] - ref[k]["m"][metric] for k in keys]
            worst = max(diffs, key=abs)
            row += fmt(vals[0], w + 4, 2) + "".join(fmt(v, w, 2) for v in vals[1:])
            row += fmt(mean(diffs), 8, 2) + fmt(worst, 8, 2)
            row += " | " if metric == OCC else ""
        print(row)
        for k in keys:
            do = chk[k]["m"][OCC] - ref[k]["m"][OCC]
            de = chk[k]["m"][EFF] - ref[k]["m"][EFF]
            if abs(do) > a.tolerance or abs(de) > a.tolerance:
                launches_off[chk_label] += 1
            for label, ls in ncu[1:]:
                if k in ls and (abs(ls[k]["m"][OCC] - ref[k]["m"][OCC]) > a.tolerance
                                or abs(ls[k]["m"][EFF] - ref[k]["m"][EFF]) > a.tolerance):
                    launches_off[label] += 1
        means = [mean([chk[k]["m"][m] - ref[k]["m"][m] for k in keys]) for m in (OCC, EFF)]
        if any(abs(d) > a.tolerance for d in means):
            floor = ""
            for label, ls in ncu[1:]:
                ks = [k for k in keys if k in ls]
                if ks:
                    nd = [mean([ls[k]["m"][m] - ref[k]["m"][m] for k in ks]) for m in (OCC, EFF)]
                    floor += f"; {label} - {ref_label}: occ {nd[0]:+.2f}, eff {nd[1]:+.2f}"
            off.append((name, g[2], len(keys), means, floor))
    if a.launches:
        print("\nevery joined launch: key, then per source occ/eff/us")
        for g, keys in groups.items():
            for k in keys:
                cells = []
                for s, ls in sources:
                    m = ls.get(k, {}).get("m", {})
                    us = (m.get(DUR) or m.get("trace_ns") or float("nan")) / 1e3
                    cells.append(f"{s} {fmt(m.get(OCC), 6)}/{fmt(m.get(EFF), 6)}/{fmt(us, 7)}")
                print(f"  {k[0][:30]} {g[1][:28]} g{k[1][0]} #{k[3]}: " + "  ".join(cells))
    if raw:
        print("\nraw metrics, per kernel: mean over joined launches of each source / " + ref_label)
        for g, keys in groups.items():
            name = (g[0] + (f"<{g[1]}>" if g[1] else ""))[:43]
            cells = []
            for m in raw:
                for s, ls in sources[1:]:
                    pairs = [(ls[k]["m"].get(m), ref[k]["m"].get(m)) for k in keys if k in ls]
                    pairs = [(x, y) for x, y in pairs if x is not None and y]
                    if pairs:
                        cells.append(f"{m.split('.')[0]} {s} {mean([x / y for x, y in pairs]):.3f}")
            print(f"  {name:<44}{g[2][0]:>6}  " + "  ".join(cells))
    joined = sum(len(k) for k in groups.values())
    print(f"\nkernels (name and grid): {len(groups)}, {joined} launches; per launch over {a.tolerance:g} points: "
          + ", ".join(f"{label} {launches_off[label]}" for label in [chk_label] + [l for l, _ in ncu[1:]]))
    print(f"kernels off by over {a.tolerance:g} points on the mean: {len(off)}")
    for name, grid, n, (do, de), floor in off:
        print(f"  {name} grid {grid[0]} ({n} launches): {chk_label} - {ref_label}: occ {do:+.2f}, eff {de:+.2f}{floor}")
    return 1 if off else 0


if __name__ == "__main__":
    sys.exit(main())
