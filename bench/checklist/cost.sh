#!/usr/bin/env bash
# What the checklist's cause pass costs per measured launch against ncu, by
# the slope method: the suite at two lengths (L1 and L2 launches of each
# kernel), every launch measured, so start-up cancels.
#   bench/checklist/cost.sh OUT [L1] [L2]     (needs the suite built by run.sh in OUT)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd); out=$(cd "$1" && pwd); l1=${2:-2}; l2=${3:-4}
exe="$out/checklist"; [ -x "$exe" ] || { echo "no $exe: run run.sh OUT first"; exit 1; }
# t CMD...: CMD's seconds, or "failed" (a failed run is no figure).
t() { if /usr/bin/time -f %e -o "$out/.t" "$@" > /dev/null 2>&1; then cat "$out/.t"; else echo failed; fi; }
same=$(python3 -c "import json,sys; print(','.join(json.load(open(sys.argv[1]))['metrics']['metrics']))" "$out/gpuscope.json")
for l in $l1 $l2; do
  echo "$l plain $(t "$exe" $l)"
  echo "$l gpuscope $(t gpuscope run --mode metrics --metrics checklist --launch-count all -o "$out/cost-$l.json" -- "$exe" $l)"
  echo "$l ncu-same $(t ncu --clock-control none --metrics "$same" --kernel-name 'regex:^(?!fill)' "$exe" $l)"
  echo "$l ncu-full $(t ncu --clock-control none --set full --kernel-name 'regex:^(?!fill)' "$exe" $l)"
done | tee "$out/cost.txt"
python3 - "$out" "$l1" "$l2" <<'PY'
import json, sys
out, l1, l2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = {}
for line in open(f"{out}/cost.txt"):
    l, tool, s = line.split()
    if s == "failed":
        sys.exit(f"{tool} at {l} launches failed: no figure")
    t[(int(l), tool)] = float(s)
# Launches measured at each length: gpuscope's from its report (fills
# included), ncu's the suite's 10 a round (9 kernels and cuBLAS's GEMM).
g = {l: json.load(open(f"{out}/cost-{l}.json"))["metrics"]["profiled_launches"] for l in (l1, l2)}
n = {l: 10 * l for l in (l1, l2)}
plain = (t[(l2, "plain")] - t[(l1, "plain")])
gs = (t[(l2, "gpuscope")] - t[(l1, "gpuscope")] - plain) / (g[l2] - g[l1])
for tool in ("ncu-same", "ncu-full"):
    per = (t[(l2, tool)] - t[(l1, tool)] - plain) / (n[l2] - n[l1])
    print(f"per measured launch: gpuscope checklist {1e3 * gs:.1f} ms, {tool} {1e3 * per:.1f} ms: {per / gs:.1f}x")
PY
