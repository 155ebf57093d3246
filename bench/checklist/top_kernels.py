#!/usr/bin/env python3
"""The top kernels of a gpuscope report by GPU time, with the checklist's
evidence for each, and (given ncu --set full output for the same kernels)
ncu's rules beside them.

    python3 bench/checklist/top_kernels.py REPORT.json N              # names, one a line (ncu regexes)
    python3 bench/checklist/top_kernels.py REPORT.json N NCU.txt...   # the table
"""
import json
import re
import sys

STALL = "smsp__average_warps_issue_stalled_"


def base(name):
    """The function's own name: what ncu's --kernel-name matches (template
    arguments, parameters, return type and namespaces dropped)."""
    out, depth = "", 0
    for ch in name:  # template arguments
        depth += ch == "<"
        if depth == 0:
            out += ch
        depth -= ch == ">"
    out = out.strip()
    if out.endswith(")"):  # the parameter list: from its matching "("
        depth = 0
        for i in range(len(out) - 1, -1, -1):
            depth += out[i] == ")"
            depth -= out[i] == "("
            if depth == 0:
                out = out[:i]
                break
    out = out.split("::")[-1].strip()
    return out.split()[-1] if out.split() else name


def ncu_rules(paths):
    """function name -> ncu's rule texts for its first profiled launch."""
    out, kernel, rule = {}, None, False
    for path in paths:
        for line in open(path, errors="replace"):
            m = re.match(r"  (\S.*?), Context \d+, Stream", line)
            if m:
                kernel = base(m.group(1).split(" (")[0])
                fresh = kernel not in out
                out.setdefault(kernel, [])
                continue
            if kernel is None or not fresh:
                continue
            if re.match(r"    (OPT|WRN|INF)", line):
                rule = not line.startswith("    INF")
                if rule:
                    out[kernel].append(line.strip())
            elif line.startswith("          ") and out[kernel] and rule:
                out[kernel][-1] += " " + line.strip()
            m = re.match(r"    (Compute \(SM\) Throughput|Memory Throughput)\s+%\s+([0-9.]+)", line)
            if m:
                out[kernel].append(f"SOL {m.group(1)} {m.group(2)}%")
                rule = False
    return out


def main():
    r = json.load(open(sys.argv[1]))
    n = int(sys.argv[2])
    top = sorted(r["kernels"], key=lambda k: -k["total_ns"])[:n]
    if len(sys.argv) == 3:
        for k in top:
            print(base(k["name"]))
        return
    ncu = ncu_rules(sys.argv[3:])
    findings = {}
    for f in r.get("findings", []):
        if f.get("kernel"):
            findings.setdefault(f["kernel"], []).append(f)
    total = sum(k["total_ns"] for k in r["kernels"])
    for k in top:
        a, c = k.get("analysis") or {}, k.get("counters", {})
        v = (a.get("verdict") or {}).get("bound", "-")
        stalls = sorted(((m[len(STALL):].split("_per_")[0], x) for m, x in c.items() if m.startswith(STALL)),
                        key=lambda s: -s[1])
        tot = sum(x for _, x in stalls) or 1
        print(f"\n## {base(k['name'])} ({100 * k['total_ns'] / total:.1f}% of GPU time, {k['launches']} launches)")
        print(f"   {k['name'][:150]}")
        print(f"   gpuscope: {v}; compute {a.get('compute_pct') or 0:.0f}%, DRAM {a.get('dram_pct') or 0:.0f}%, "
              f"tensor {c.get('sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active', 0):.1f}%, "
              f"FMA {c.get('sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active', 0):.0f}%, occupancy "
              f"{k.get('achieved_occupancy_pct') or 0:.0f}% of theoretical {k.get('theoretical_occupancy_pct') or 0:.0f}% "
              f"({k.get('occupancy_limiter')}); top stalls "
              + ", ".join(f"{s} {100 * x / tot:.0f}%" for s, x in stalls[:3]))
        for f in findings.get(k["name"], []):
            print(f"   gpuscope {f['kind']}: {f['message'][:200]}")
        for t in ncu.get(base(k["name"]), ["(ncu: not profiled)"]):
            print(f"   ncu: {t[:230]}")


if __name__ == "__main__":
    main()
