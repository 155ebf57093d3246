#!/usr/bin/env bash
# The always-on cost of two gpuscope builds against no session, on a GPU machine:
#   bench/pytorch/ab.sh OLD_LIB NEW_LIB OUTDIR SECONDS [CONFIG]
# One session_cost.py process per run, alternating none / OLD / NEW (CONFIG,
# default windows:1000:0/1000) until SECONDS have passed, pinned to cores
# 2-9; then ab_stats.py over OUTDIR.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
old=$(readlink -f "$1"); new=$(readlink -f "$2"); out=$3; until=$4; config=${5:-windows:1000:0/1000}
mkdir -p "$out"
CUDA=${CUDA:-/usr/local/cuda}
gcc -O2 -shared -fPIC -I"$CUDA/include" -I"$CUDA/extras/CUPTI/include" "$here/cupti_floor.c" \
  -L"$CUDA/lib64" -L"$CUDA/extras/CUPTI/lib64" -lcupti -o "$out/libcupti_floor.so" || exit 1
r=0
while [ "$SECONDS" -lt "$until" ]; do
  r=$((r + 1))
  for v in none old new; do
    case $v in none) lib=$new c=none ;; old) lib=$old c=$config ;; new) lib=$new c=$config ;; esac
    NVTX_INJECTION64_PATH=$lib taskset -c 2-9 python3 "$here/session_cost.py" --gpuscope "$lib" --config "$c" \
      --floor "$out/libcupti_floor.so" --blocks "${BLOCKS:-6}" --steps "${STEPS:-40}" \
      --report "$out/report-$v-$r.json" --out "$out/cost-$v-$r.json" 2>&1 | grep -v -i warn | tail -1
  done
done
python3 "$here/ab_stats.py" "$out" none old new | tee "$out/ab.txt"
