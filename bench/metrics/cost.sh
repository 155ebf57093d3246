#!/usr/bin/env bash
# What metrics mode costs, on a GPU machine with ncu, gpuscope, validate and
# python3 (with PyTorch) on PATH:
#
#   bench/metrics/cost.sh OUT [ROUNDS]
#
# 1. Per measured launch, against ncu: each program runs at two lengths
#    (the synthetic kernels at REPS_SHORT and REPS_LONG repetitions, the
#    mha-adamw loop at STEPS_SHORT and STEPS_LONG steps), plain, under
#    gpuscope measuring every launch, and under ncu. The cost per launch is
#    the slope: (wall time, long - short) / (launches, long - short), so
#    start-up costs cancel. Whole-process wall times, median of ROUNDS
#    interleaved rounds (default 3).
# 2. The default selection (first 3 launches of each kernel) on a training
#    loop of SECONDS (default 30) plain: mha-adamw runs for SECONDS to fix a
#    step count, then that many steps plain and under gpuscope, ROUNDS
#    times interleaved; the ratio of the loops' own time and of whole runs.
# PARTS (default "launch default") picks the parts. Results in OUT/cost.txt.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: cost.sh OUT [ROUNDS]}
rounds=${2:-3}
mkdir -p "$out"
metrics=gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__cycles_active.avg.pct_of_peak_sustained_elapsed
times=$out/times.txt
: > "$times"
# label, command...: whole-process wall seconds appended to times.txt
timed() {
  local label=$1 t0 t1
  shift
  t0=$(date +%s.%N)
  "$@" > "$out/last.out" 2>> "$out/stderr.log"
  t1=$(date +%s.%N)
  echo "$label|$(python3 -c "print($t1 - $t0)")|$(grep -o '"seconds": [0-9.]*' "$out/last.out" | grep -o '[0-9.]*$')" >> "$times"
}
gs_all() { gpuscope run -q --mode metrics --launch-count all --trace 0 -o "$out/all.json" -- "$@"; }
ncu_all() { ncu --cache-control none --clock-control none --metrics "$metrics" "$@"; }
rs=${REPS_SHORT:-2} rl=${REPS_LONG:-10} ss=${STEPS_SHORT:-1} sl=${STEPS_LONG:-4}
loop="python3 $here/loops.py mha-adamw --warmup 2"
# Warm the page cache and the driver's JIT cache.
validate --mode plain --reps 1 > /dev/null
$loop --steps 1 > /dev/null
parts=${PARTS:-launch default}
if [[ $parts == *launch* ]]; then
for r in $(seq "$rounds"); do
  for n in "$rs" "$rl"; do
    timed "synthetic plain $n" validate --mode plain --reps "$n"
    timed "synthetic gpuscope $n" gs_all validate --mode plain --reps "$n"
    timed "synthetic ncu $n" ncu_all validate --mode plain --reps "$n"
  done
  for n in "$ss" "$sl"; do
    timed "mha-adamw plain $n" $loop --steps "$n"
    timed "mha-adamw gpuscope $n" gs_all $loop --steps "$n"
    timed "mha-adamw ncu $n" ncu_all $loop --steps "$n"
  done
done
# Launches per program length, from gpuscope's own count of measured ones.
launches() { gpuscope run -q --mode trace --trace 0 -o "$out/count.json" -- "$@" > /dev/null 2>&1
  python3 -c "import json; r = json.load(open('$out/count.json')); print(sum(k['launches'] for k in r['kernels']))"; }
echo "launches synthetic $rs|$(launches validate --mode plain --reps "$rs")" >> "$times"
echo "launches synthetic $rl|$(launches validate --mode plain --reps "$rl")" >> "$times"
echo "launches mha-adamw $ss|$(launches $loop --steps "$ss")" >> "$times"
echo "launches mha-adamw $sl|$(launches $loop --steps "$sl")" >> "$times"
fi
# 2. Default selection on a SECONDS-long loop.
if [[ $parts == *default* ]]; then
secs=${SECONDS_LOOP:-30}
steps=$($loop --seconds "$secs" | grep -o '"steps": [0-9]*' | grep -o '[0-9]*$')
echo "steps|$steps" >> "$times"
for r in $(seq "$rounds"); do
  timed "default plain" $loop --steps "$steps"
  timed "default gpuscope" gpuscope run -q --mode metrics --trace 0 -o "$out/default-$r.json" -- $loop --steps "$steps"
done
fi
python3 - "$times" "$rs" "$rl" "$ss" "$sl" <<'PY' | tee "$out/cost.txt"
import statistics as st, sys
from collections import defaultdict
path, rs, rl, ss, sl = sys.argv[1:]
wall, loop, count, steps = defaultdict(list), defaultdict(list), {}, "?"
for line in open(path):
    f = line.rstrip("\n").split("|")
    if f[0].startswith("launches "):
        count[f[0][len("launches "):]] = int(f[1])
    elif f[0] == "steps":
        steps = f[1]
    else:
        wall[f[0]].append(float(f[1]))
        if f[2]:
            loop[f[0]].append(float(f[2]))
med = lambda v: st.median(v) if v else float("nan")
print(f"whole-process wall time, median of each configuration's rounds")
for prog, short, long_ in (("synthetic", rs, rl), ("mha-adamw", ss, sl)):
    if f"{prog} {long_}" not in count:
        continue
    n = count[f"{prog} {long_}"] - count[f"{prog} {short}"]
    per = {}
    for tool in ("plain", "gpuscope", "ncu"):
        a, b = med(wall[f"{prog} {tool} {short}"]), med(wall[f"{prog} {tool} {long_}"])
        per[tool] = (b - a) / n
        print(f"  {prog} {tool}: {a:.2f} s ({count[f'{prog} {short}']} launches), "
              f"{b:.2f} s ({count[f'{prog} {long_}']} launches)")
    g, c = per["gpuscope"] - per["plain"], per["ncu"] - per["plain"]
    print(f"  {prog}: per measured launch over plain: gpuscope {1e3 * g:.3f} ms, ncu {1e3 * c:.3f} ms: "
          f"ncu / gpuscope = {c / g:.1f}x")
    over = lambda t: med(wall[f"{prog} {t} {long_}"]) - med(wall[f"{prog} plain {long_}"])
    print(f"  {prog}: whole run of {count[f'{prog} {long_}']} launches, over plain: gpuscope {over('gpuscope'):.2f} s, "
          f"ncu {over('ncu'):.2f} s: {over('ncu') / over('gpuscope'):.1f}x")
if "default plain" not in wall:
    sys.exit()
p, g = wall["default plain"], wall["default gpuscope"]
lp, lg = loop["default plain"], loop["default gpuscope"]
print(f"default selection, mha-adamw, {steps} steps: loop {med(lp):.2f} s plain, {med(lg):.2f} s under gpuscope "
      f"({med(lg) / med(lp):.3f}x); whole run {med(p):.2f} s and {med(g):.2f} s ({med(g) / med(p):.3f}x)")
PY
