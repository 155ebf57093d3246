#!/usr/bin/env bash
# The kernel checklist against Nsight Compute on the planted suite
# (examples/cuda/checklist.cu): builds it, times it plain, runs it under
# `gpuscope run --mode metrics --metrics checklist` and under `ncu --set
# full`, then compares (compare.py) and writes the fixture the CPU test
# replays (fixture.py).
#   bench/checklist/run.sh OUT [LAUNCHES]
# NCU=0 skips ncu (compare.py then reads NCU_FULL, an earlier run's output).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd); launches=${2:-4}
src="$root/examples/cuda/checklist.cu"
nvcc -O3 -arch=sm_90 -lineinfo -Xptxas -v -o "$out/checklist" "$src" -lcublas > "$out/nvcc.txt" 2>&1 \
  || nvcc -O3 -arch=sm_90 -lineinfo -Xptxas -v -DNO_CUBLAS -o "$out/checklist" "$src" > "$out/nvcc.txt" 2>&1 \
  || { cat "$out/nvcc.txt"; exit 1; }
grep -E "Function properties|Used" "$out/nvcc.txt"
# t LOG CMD...: runs CMD with its output in LOG, prints its seconds.
t() { local log=$1; shift; if /usr/bin/time -f %e -o "$out/.t" "$@" > "$log" 2>&1; then cat "$out/.t"; else echo "failed (see $log)"; fi; }
echo "plain: $(t /dev/null "$out/checklist" "$launches") s, $(t /dev/null "$out/checklist" "$launches") s" | tee "$out/times.txt"
echo "gpuscope checklist: $(t "$out/gpuscope.txt" gpuscope run --mode metrics --metrics checklist --keep-trace 100000 -o "$out/gpuscope.json" -- "$out/checklist" "$launches") s" | tee -a "$out/times.txt"
echo "gpuscope default metrics: $(t /dev/null gpuscope run --mode metrics --quiet -o "$out/gpuscope-default.json" -- "$out/checklist" "$launches") s" | tee -a "$out/times.txt"
# ncu measures the same launches gpuscope does (the first 3 of each kernel).
[ "${NCU:-1}" = 0 ] || echo "ncu --set full: $(t "$out/ncu_full.txt" ncu --clock-control none --set full --kernel-name 'regex:^(?!fill)' --launch-count 30 "$out/checklist" "$launches") s" | tee -a "$out/times.txt"
[ "${NCU:-1}" = 0 ] || echo "ncu default set: $(t /dev/null ncu --clock-control none --kernel-name 'regex:^(?!fill)' --launch-count 30 "$out/checklist" "$launches") s" | tee -a "$out/times.txt"
# ncu on the same counters gpuscope measured (its report lists them).
[ "${NCU:-1}" = 0 ] || same=$(python3 -c "import json,sys; print(','.join(json.load(open(sys.argv[1]))['metrics']['metrics']))" "$out/gpuscope.json")
[ "${NCU:-1}" = 0 ] || echo "ncu, gpuscope's counters: $(t "$out/ncu_same.csv" ncu --clock-control none --metrics "$same" --csv --kernel-name 'regex:^(?!fill)' --launch-count 30 "$out/checklist" "$launches") s" | tee -a "$out/times.txt"
python3 "$here/compare.py" "$out/gpuscope.json" "${NCU_FULL:-$out/ncu_full.txt}" | tee "$out/compare.txt"
python3 "$here/fixture.py" "$out/gpuscope.json" "$out/checklist-suite.json"
