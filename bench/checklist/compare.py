#!/usr/bin/env python3
"""The kernel checklist against Nsight Compute on examples/cuda/checklist.cu:
per suite kernel, the cause planted in it, gpuscope's checklist findings
(from its report) and which of ncu's rules for the same causes fired (from
`ncu --set full` console output).

    python3 bench/checklist/compare.py GPUSCOPE_REPORT.json NCU_FULL.txt
"""
import json
import re
import sys

import fixture

# kernel -> the cause planted in it (None: a clean twin), for each of
# fixture.SUITE.
PLANTED = {
    "strided_copy": "uncoalesced-access",
    "coalesced_copy": None,
    "transpose_conflicted": "bank-conflicts",
    "transpose_padded": None,
    "registers_limited": "occupancy-limit",
    "registers_light": None,
    "sgemm_fma": "fp32-matmul",
    "cublas_tf32_gemm": None,
    "barrier_heavy": "warp-stalls",
    "barrier_free": None,
}
CHECKLIST = ["uncoalesced-access", "bank-conflicts", "occupancy-limit", "fp32-matmul", "warp-stalls"]
# ncu's rule texts for the same causes.
NCU = {
    "uncoalesced-access": r"uncoalesced global accesses|access pattern for global (loads|stores)",
    "bank-conflicts": r"bank conflict",
    "occupancy-limit": r"theoretical occupancy \([0-9.]+%\) is limited by",
    "fp32-matmul": r"tensor core",
    "warp-stalls": r"stalled waiting for sibling warps at a CTA barrier",
}
# ncu's stall rules name a reason; like gpuscope's, counted at 40% of the
# stalls or more (barriers at 30%).
STALL_SHARE = r"This stall type represents about ([0-9.]+)% of the total"


def short(name):
    """The suite's name for a kernel (fixture.py's), else its own."""
    return fixture.short(name) or re.split(r"[ (]", name.strip(), maxsplit=1)[0]


def ncu_rules(path):
    """kernel -> the rule texts ncu printed for it, one string each."""
    out, kernel, buf = {}, None, []
    for line in open(path, errors="replace"):
        m = re.match(r"  (\S.*?), Context \d+, Stream", line)
        if m:
            kernel = short(m.group(1))
            out.setdefault(kernel, [])
            continue
        if kernel is None:
            continue
        if re.match(r"    (OPT|WRN|INF)", line):
            out[kernel].append(line.strip())
        elif line.startswith("          ") and out[kernel]:
            out[kernel][-1] += " " + line.strip()
    return out


def main():
    report = json.load(open(sys.argv[1]))
    ncu = ncu_rules(sys.argv[2])
    found = {}
    for f in report.get("findings") or report.get("analysis", {}).get("findings", []):
        k = short(f.get("kernel") or "")
        if f["kind"] in CHECKLIST or f["kind"] in ("memory-bound", "low-occupancy"):
            found.setdefault(k, []).append(f)
    ok = True
    print(f"{'kernel':24} {'planted':19} {'gpuscope':34} {'ncu (same causes)':34} agree")
    for k, planted in PLANTED.items():
        kinds = [f["kind"] for f in found.get(k, []) if f["kind"] in CHECKLIST]
        rules = ncu.get(k, [])
        texts = " ".join(rules)
        ncu_kinds = [c for c, pat in NCU.items() if re.search(pat, texts, re.I)]
        stalled = any(float(m.group(1)) >= 40 for t in rules for m in [re.search(STALL_SHARE, t)] if m)
        if stalled and "warp-stalls" not in ncu_kinds:
            ncu_kinds.append("warp-stalls")
        # A twin may get what it is (a chain of loads waits on memory),
        # never a planted cause.
        exact = kinds == [planted] if planted else all(x == "warp-stalls" for x in kinds)
        agree = all(x in ncu_kinds for x in kinds + ([planted] if planted else []))
        ok &= exact
        print(f"{k:24} {str(planted):19} {','.join(kinds) or '-':34} {','.join(ncu_kinds) or '-':34} "
              f"{'yes' if agree else 'no'}{'' if exact else '  <- gpuscope: not exactly the planted cause'}")
    for k, fs in found.items():
        for f in fs:
            print(f"  {f['kind']:20} {f['message'][:160]}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
