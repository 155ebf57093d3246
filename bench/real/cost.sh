#!/usr/bin/env bash
# The cost table: cost_native.cu in PROCESSES processes per configuration,
# configurations alternating process by process, on a launch-bound and a
# GPU-bound loop; then cost_summary.py.
#   bench/real/cost.sh LIBGPUSCOPE OUT [PROCESSES] [BLOCKS] [CONFIGS...]
# Defaults: 10 processes, 10 blocks per phase, configurations none,
# always-on, sampling (LOOPS="launch" for one loop); every process, none included, has gpuscope as its
# NVTX tool (NVTX_INJECTION64_PATH), as under `gpuscope run`. Steps per block: LAUNCH_STEPS (50) and GPU_STEPS (60).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lib=$(readlink -f "$1"); out=$(mkdir -p "$2" && cd "$2" && pwd); procs=${3:-10}; blocks=${4:-10}
shift $(( $# < 4 ? $# : 4 ))
configs=("$@"); [ ${#configs[@]} -gt 0 ] || configs=(none always-on sampling)
nvcc -O2 -o "$out/cost_native" "$here/cost_native.cu" -ldl || exit 1
for r in $(seq "$procs"); do
  for loop in ${LOOPS:-launch gpu}; do
    steps=$([ $loop = launch ] && echo "${LAUNCH_STEPS:-50}" || echo "${GPU_STEPS:-60}")
    for c in "${configs[@]}"; do
      NVTX_INJECTION64_PATH=$lib GPUSCOPE_LIB=$lib "$out/cost_native" "$c" $loop "$blocks" "$steps" \
        "$out/cost-$loop-$c-$r.json" 2>&1 | grep -v -i warn
    done
  done
done
python3 "$here/cost_summary.py" "$out" | tee "$out/cost.txt"
