#!/usr/bin/env python3
"""Writes tests/data/checklist/suite.json from a gpuscope metrics-mode report
of examples/cuda/checklist.cu (`--metrics checklist --keep-trace 100000`): each
suite kernel's launch shape and resources (from its first kernel record) and
its counters per measured launch (the mean of its measured launches), which
tests/checklist.rs replays through the analysis.

    python3 bench/checklist/fixture.py REPORT.json [OUT.json]
"""
import json
import re
import sys

SUITE = ["strided_copy", "coalesced_copy", "transpose_conflicted", "transpose_padded", "registers_limited",
         "registers_light", "sgemm_fma", "cublas_tf32_gemm", "barrier_heavy", "barrier_free"]


def short(name):
    """The suite's name for a kernel (a report's name, or ncu's "name
    (grid)x(block)"): its function, or the twin's label for cuBLAS's TF32
    GEMM (named by cuBLAS); None for a kernel not of the suite."""
    f = re.split(r"[ (]", name.strip(), maxsplit=1)[0]
    if f in SUITE:
        return f
    low = name.lower()
    return "cublas_tf32_gemm" if "gemm" in low and "sgemm_fma" not in low else None


def main():
    report = json.load(open(sys.argv[1]))
    out = sys.argv[2] if len(sys.argv) > 2 else "tests/data/checklist/suite.json"
    mean_ns = {k["name"]: k["mean_ns"] for k in report["kernels"]}
    kernels = {}
    for rec in (report.get("trace") or {}).get("kernels", []):
        label = short(rec["name"])
        if label is None:
            continue
        k = kernels.setdefault(label, {
            "name": label,
            "kernel": rec["name"],
            "mean_ns": mean_ns[rec["name"]],
            "grid": rec["grid"][0] * rec["grid"][1] * rec["grid"][2],
            "block": rec["block"][0] * rec["block"][1] * rec["block"][2],
            "registers": rec["registers_per_thread"],
            "shared_bytes": rec["static_smem_bytes"] + rec["dynamic_smem_bytes"],
            "launches": [],
        })
        if rec.get("metrics") and rec["name"] == k["kernel"]:
            k["launches"].append(rec["metrics"]["values"])
    for k in kernels.values():
        runs = k.pop("launches")
        names = sorted({m for r in runs for m in r})
        k["values"] = {m: sum(r.get(m, 0.0) for r in runs) / max(len(runs), 1) for m in names}
        k["measured_launches"] = len(runs)
    ordered = [kernels[n] for n in SUITE if n in kernels]
    json.dump({"source": "bench/checklist/run.sh", "device": report["devices"][0]["name"], "kernels": ordered},
              open(out, "w"), indent=1, sort_keys=True)
    print(f"{out}: {len(ordered)} kernels, {sum(k['measured_launches'] for k in ordered)} measured launches")


if __name__ == "__main__":
    main()
