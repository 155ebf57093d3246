#!/usr/bin/env bash
# Metrics mode against Nsight Compute, and what each costs, on a GPU machine.
#
#   scripts/validate.sh [OUT_DIR] [REPS]   (validate and ncu on PATH; REPS
#   repetitions of the kernel set, default 3: longer runs show the cost of
#   measuring apart from the one-time setup)
#
# Runs the validation program plain, under gpuscope (every launch measured,
# then the default selection) and under ncu collecting the same metrics,
# timing each whole process; then joins gpuscope's and ncu's values launch
# by launch (scripts/compare_ncu.py). ncu runs twice: with its default cache
# flush before each replayed pass, and with --cache-control none, which is
# what gpuscope does (it measures kernels in place, caches warm).
set -euo pipefail
out=${1:-validate-out}
reps=${2:-3}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
metrics=sm__warps_active.avg.pct_of_peak_sustained_active,smsp__cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum

now() { date +%s.%N; }
timed() { # label, command...
  local label=$1; shift
  local t0; t0=$(now)
  "$@"
  local t1; t1=$(now)
  echo "$label $(python3 -c "print($t1 - $t0)")" >> "$out/times.txt"
}
: > "$out/times.txt"
validate --mode plain --reps 1 > /dev/null   # warm-up: driver, JIT cache
timed plain validate --mode plain --reps "$reps" > "$out/plain.txt"
timed gpuscope_all validate --mode all --reps "$reps" --out "$out/all.json" > "$out/all.txt" 2> "$out/all.table.txt"
timed gpuscope_default validate --mode default --reps "$reps" --out "$out/default.json" > "$out/default.txt" 2> "$out/default.table.txt"
timed ncu ncu --clock-control none --metrics "$metrics" --csv validate --mode plain --reps "$reps" > "$out/ncu.csv"
ncu --clock-control none --cache-control none --metrics "$metrics" --csv validate --mode plain --reps "$reps" > "$out/ncu_nocache.csv"
python3 "$here/compare_ncu.py" "$out/all.json" "$out/ncu_nocache.csv" "$out/ncu.csv" "$out/times.txt" | tee "$out/compare.txt"
