#!/usr/bin/env bash
# How the cost of metrics mode scales with program length, on a GPU machine:
# whole-process wall time of the validation program plain, under gpuscope
# (every launch measured; default selection) and under ncu (optional), for
# each REPS given. Separates gpuscope's one-time cost from its cost per
# measured launch.
#
#   [ROUNDS=5] scripts/cost-scaling.sh OUT_DIR "1 10 30" [NCU_REPS...]
set -euo pipefail
out=$1; reps=$2; shift 2
mkdir -p "$out"
metrics=sm__warps_active.avg.pct_of_peak_sustained_active,smsp__cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
now() { date +%s.%N; }
t() { local t0 t1; t0=$(now); "$@" > /dev/null 2>&1; t1=$(now); python3 -c "print(f'{$t1 - $t0:.3f}')"; }
validate --mode plain --reps 1 > /dev/null
rounds=${ROUNDS:-1}
echo "median of $rounds interleaved round(s)"
echo "reps launches plain_s all_s default_s all/plain default/plain"
for r in $reps; do
  ps=(); as=(); ds=()
  for _ in $(seq "$rounds"); do
    ps+=("$(t validate --mode plain --reps "$r")")
    as+=("$(t validate --mode all --reps "$r" --out "$out/all-$r.json")")
    ds+=("$(t validate --mode default --reps "$r" --out "$out/default-$r.json")")
  done
  python3 - "$r" "${ps[*]}" "${as[*]}" "${ds[*]}" <<'PY'
import statistics as st, sys
r = int(sys.argv[1])
p, a, d = (st.median(map(float, x.split())) for x in sys.argv[2:5])
print(r, r * 106, f"{p:.3f}", f"{a:.3f}", f"{d:.3f}", f"{a/p:.2f}", f"{d/p:.2f}",
      " (each: plain", sys.argv[2], "| all", sys.argv[3], "| default", sys.argv[4], ")")
PY
done
for r in "$@"; do
  echo "ncu reps $r: $(t ncu --clock-control none --cache-control none --metrics "$metrics" validate --mode plain --reps "$r") s"
done
python3 - "$out" <<'PY'
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    m = json.load(open(f)).get("metrics") or {}
    t = m.get("time_ns", {})
    print(f.split("/")[-1], "measured", m.get("profiled_launches"), "mismatches", m.get("mismatches"),
          "ms:", {k: round(v / 1e6, 1) for k, v in t.items()})
PY
