#!/usr/bin/env bash
# The PyTorch benchmarks on a GPU machine with CUDA 13, PyTorch and ncu:
#   bench/pytorch/run.sh overhead LIBGPUSCOPE OUTDIR [PROCESSES] [ROUNDS] [STEPS]
#   bench/pytorch/run.sh cost LIBGPUSCOPE OUTDIR ROUNDS CONFIG...
#   bench/pytorch/run.sh ab OLD_LIB NEW_LIB OUTDIR SECONDS [CONFIG]
# cost: one long session per process (session_cost.py), the configurations
# alternating process by process, ROUNDS times; in cost.txt the median of
# the processes' ratios and the pooled ratio (mean of all session blocks but
# each first over the mean of all plain blocks); REPORTS=1 keeps reports;
# LOOP_ARGS passes session_cost.py's --loop and --layers.
# ab: two builds against no session, one session_cost.py process per run,
# alternating none / OLD / NEW (CONFIG, default windows:1000:0/1000) until
# SECONDS have passed; ab_stats.py's three measures in ab.txt.
# overhead: tracing cost decomposed (see overhead.py), in PROCESSES
# processes. Metric agreement with ncu and metrics mode's cost: bench/metrics/.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
CUDA=${CUDA:-/usr/local/cuda}
# The raw-CUPTI floor library (cupti_floor.c) into folder $1.
build_floor() {
  gcc -O2 -shared -fPIC -I"$CUDA/include" -I"$CUDA/extras/CUPTI/include" "$here/cupti_floor.c" \
    -L"$CUDA/lib64" -L"$CUDA/extras/CUPTI/lib64" -lcupti -lcuda -o "$1/libcupti_floor.so"
}
case "${1:-}" in
  overhead)
    lib=$(readlink -f "$2"); out=$3; procs=${4:-2}; rounds=${5:-12}; steps=${6:-30}
    mkdir -p "$out"
    build_floor "$out" || exit 1
    for i in $(seq "$procs"); do
      NVTX_INJECTION64_PATH=$lib python3 "$here/overhead.py" --gpuscope "$lib" --floor "$out/libcupti_floor.so" \
        --rounds "$rounds" --steps "$steps" --out "$out/overhead$i.json" 2>&1 | grep -v -i "warn"
    done ;;
  cost)
    lib=$(readlink -f "$2"); out=$3; rounds=$4; shift 4
    mkdir -p "$out"
    build_floor "$out" || exit 1
    for r in $(seq "$rounds"); do
      for c in "$@"; do
        NVTX_INJECTION64_PATH=$lib python3 "$here/session_cost.py" --gpuscope "$lib" --config "$c" \
          --floor "$out/libcupti_floor.so" ${REPORTS:+--report "$out/report-${c//[:\/]/_}-$r.json"} \
          --blocks "${BLOCKS:-6}" --steps "${STEPS:-40}" ${LOOP_ARGS:-} --out "$out/cost-${c//[:\/]/_}-$r.json" 2>&1 | grep -v -i "warn"
      done
    done
    python3 - "$here" "$out" "$@" <<'PY' | tee "$out/cost.txt"
import glob, json, statistics as st, sys
sys.path.insert(0, sys.argv[1])
from ab_stats import pooled
out = sys.argv[2]
for c in sys.argv[3:]:
    rs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/cost-{c.replace(':', '_').replace('/', '_')}-*.json"))]
    if rs:
        ratios = [r["ratio"] for r in rs]
        cpu = [r["cpu_ratio"] for r in rs if "cpu_ratio" in r]
        print(f"{c:<24} median ratio {st.median(ratios):.3f} (of {len(rs)}: {' '.join(f'{x:.3f}' for x in ratios)})"
              + f"  pooled {pooled(rs):.3f}" + (f"  cpu {st.median(cpu):.3f}" if cpu else "")
              + f"  plain step {st.median(r['plain_step_ms'] for r in rs):.2f} ms  start {st.median(r['start_s'] for r in rs):.2f} s")
    # Trace windows: steps ending inside a window (records on) against the
    # rest of the session, in the same processes (the windows start with
    # the session: gpuscope's decoder switches them on its clock).
    if c.startswith("windows") and all("session_steps" in r for r in rs):
        parts = c.split(":")
        w, p = (int(x) / 1e3 for x in (parts[2] if len(parts) > 2 else "100/1000").split("/"))
        ins, outs = [], []
        for r in rs:
            for b in r["session_steps"][1:]:
                for t0, t1 in zip(b, b[1:]):
                    (ins if (t1 % p) < w else outs).append(t1 - t0)
        if ins and outs:
            print(f"{'':<24} steps in windows {1e3 * st.median(ins):.2f} ms ({len(ins)}), outside "
                  f"{1e3 * st.median(outs):.2f} ms ({len(outs)}): x{st.median(ins) / st.median(outs):.3f}")
PY
    ;;
  ab)
    old=$(readlink -f "$2"); new=$(readlink -f "$3"); out=$4; until=$5; config=${6:-windows:1000:0/1000}
    mkdir -p "$out"
    build_floor "$out" || exit 1
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
    python3 "$here/ab_stats.py" "$out" none old new | tee "$out/ab.txt" ;;
  *) sed -n 2,8p "$0"; exit 2 ;;
esac
