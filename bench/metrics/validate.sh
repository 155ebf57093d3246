#!/usr/bin/env bash
# gpuscope's per-launch metrics against Nsight Compute's, on a GPU machine
# with ncu, gpuscope and python3 (with PyTorch) on PATH:
#
#   bench/metrics/validate.sh OUT [PROGRAM...]
#
# PROGRAM: synthetic (the validation kernels, examples/validate.rs; needs
# `validate` on PATH), or a loop of bench/metrics/loops.py: mha-adamw,
# gpt2-fused, resnet-sgd, adamw-only. Default: all four of synthetic,
# mha-adamw, gpt2-fused, resnet-sgd.
#
# Each program runs three times: under ncu (the reference), under ncu again
# (its own run-to-run noise), and under gpuscope measuring every launch;
# bench/metrics/join.py joins the three launch by launch and writes
# OUT/PROGRAM.join.txt. Both tools measure kernels in place: ncu with
# --cache-control none --clock-control none. NCU_TWICE=0 skips the second
# ncu run. Exits 1 if a kernel of 10 us or more is off by over 2 points.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: validate.sh OUT [PROGRAM...]}
shift
progs=("$@")
[ ${#progs[@]} -gt 0 ] || progs=(synthetic mha-adamw gpt2-fused resnet-sgd)
mkdir -p "$out"
metrics=gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__cycles_active.avg.pct_of_peak_sustained_elapsed,sm__ctas_launched.sum
command_of() {
  case $1 in
    synthetic) echo "validate --mode plain --reps ${REPS:-3}" ;;
    mha-adamw|gpt2-fused|resnet-sgd|adamw-only) echo "python3 $here/loops.py $1 --warmup ${WARMUP:-2} --steps ${STEPS:-1}" ;;
    *) echo "validate.sh: unknown program '$1'; allowed: synthetic, mha-adamw, gpt2-fused, resnet-sgd, adamw-only" >&2; return 2 ;;
  esac
}
status=0
for p in "${progs[@]}"; do
  cmd=$(command_of "$p") || exit 2
  ncu --csv --cache-control none --clock-control none --metrics "$metrics" $cmd > "$out/$p.ncu.csv" 2> "$out/$p.ncu.log"
  refs=(--ncu "ncu=$out/$p.ncu.csv")
  if [ "${NCU_TWICE:-1}" != 0 ]; then
    ncu --csv --cache-control none --clock-control none --metrics "$metrics" $cmd > "$out/$p.ncu2.csv" 2> "$out/$p.ncu2.log"
    refs+=(--ncu "ncu_again=$out/$p.ncu2.csv")
  fi
  gpuscope run -q --mode metrics --launch-count all --trace 1000000 --metrics sm__ctas_launched.sum \
    -o "$out/$p.gpuscope.json" -- $cmd > "$out/$p.gpuscope.log" 2>&1
  python3 "$here/join.py" "${refs[@]}" --ours "gpuscope=$out/$p.gpuscope.json" --raw sm__ctas_launched.sum \
    > "$out/$p.join.txt" 2>&1
  rc=$?
  [ $rc = 0 ] || status=1
  echo "== $p"
  grep -E "^gpuscope:|^kernels|^  " "$out/$p.join.txt" | grep -v "sm__ctas" | head -20
done
exit $status
