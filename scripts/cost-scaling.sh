#!/usr/bin/env bash
# How the cost of metrics mode scales with program length, on a GPU machine:
# whole-process wall time of the validation program plain, traced only,
# under gpuscope metrics mode (every launch measured; default selection)
# and under ncu (optional), for each REPS given. Separates gpuscope's
# one-time cost from its cost per measured launch.
#
#   [ROUNDS=5] [ALL_MAX_REPS=40] scripts/cost-scaling.sh OUT_DIR "1 10 30" [NCU_REPS...]
#
# Every-launch runs are skipped above ALL_MAX_REPS (they take ~1.3 ms per
# launch, 106 launches per rep). gpuscope's runs write their JSON report
# without per-launch records (--trace-records 0, GPUSCOPE_TRACE's default):
# at 400 reps those would be a 55 MB file, timed as part of the run.
set -euo pipefail
out=$1; reps=$2; shift 2
mkdir -p "$out"
metrics=sm__warps_active.avg.pct_of_peak_sustained_active,smsp__cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
now() { date +%s.%N; }
t() { local t0 t1; t0=$(now); "$@" > /dev/null 2>&1; t1=$(now); python3 -c "print(f'{$t1 - $t0:.3f}')"; }
validate --mode plain --reps 1 > /dev/null
rounds=${ROUNDS:-1}
all_max=${ALL_MAX_REPS:-40}
echo "median of $rounds interleaved round(s)"
echo "reps launches plain_s trace_s all_s default_s trace/plain all/plain default/plain"
for r in $reps; do
  ps=(); ts=(); as=(); ds=()
  for _ in $(seq "$rounds"); do
    ps+=("$(t validate --mode plain --reps "$r")")
    ts+=("$(t validate --mode trace --reps "$r" --trace-records 0 --out "$out/trace-$r.json")")
    if [ "$r" -le "$all_max" ]; then
      as+=("$(t validate --mode all --reps "$r" --trace-records 0 --out "$out/all-$r.json")")
    fi
    ds+=("$(t validate --mode default --reps "$r" --trace-records 0 --out "$out/default-$r.json")")
  done
  python3 - "$r" "${ps[*]}" "${ts[*]}" "${as[*]:-}" "${ds[*]}" <<'PY'
import statistics as st, sys
r = int(sys.argv[1])
med = lambda x: st.median(map(float, x.split())) if x.strip() else None
p, t, a, d = (med(x) for x in sys.argv[2:6])
f = lambda v: "-" if v is None else f"{v:.3f}"
ratio = lambda v: "-" if v is None else f"{v / p:.2f}"
print(r, r * 106, f(p), f(t), f(a), f(d), ratio(t), ratio(a), ratio(d),
      " (each: plain", sys.argv[2], "| trace", sys.argv[3], "| all", sys.argv[4] or "-", "| default", sys.argv[5], ")")
PY
done
for r in "$@"; do
  echo "ncu reps $r: $(t ncu --clock-control none --cache-control none --metrics "$metrics" validate --mode plain --reps "$r") s"
done
python3 - "$out" <<'PY'
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    m = json.load(open(f)).get("metrics")
    if not m:
        continue
    t = m.get("time_ns", {})
    print(f.split("/")[-1], "measured", m.get("profiled_launches"), "mismatches", m.get("mismatches"),
          "ms:", {k: round(v / 1e6, 1) for k, v in t.items()})
PY
