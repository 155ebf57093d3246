#!/usr/bin/env bash
# The real-program suite: each program once plain (it prints its own step
# time) and once under `gpuscope run`, then a summary table of the plain
# figures beside gpuscope's answer. EXPECTED.md says what each should get.
#
#   bench/real/run.sh OUT [NAME...]
#
# Needs gpuscope (and its libgpuscope.so) on PATH, and python3 with torch,
# torchvision, transformers, lightning, jax and cupy; the zoo too when
# `zoo` (cargo's example) is on PATH. T: seconds allowed per run (300).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd); shift
declare -A CMD=(
  [llama]="hf_llama.py"
  [llama-ranges]="hf_llama.py --ranges"
  [resnet-w0]="resnet_loader.py --workers 0"
  [resnet-w8]="resnet_loader.py --workers 8 --warmup 25"
  [jax]="jax_mlp.py"
  [compile]="compile_train_infer.py"
  [lightning]="lightning_fit.py"
  [item-1]="item_loop.py --every 1"
  [item-50]="item_loop.py --every 50"
  [item-1-fused]="item_loop.py --every 1 --fused"
  [cupy]="cupy_few_blocks.py"
)
order=(llama llama-ranges resnet-w0 resnet-w8 jax compile lightning item-1 item-50 cupy zoo)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${order[@]}")
export COLUMNS=${COLUMNS:-120}
for n in "${names[@]}"; do
  start=$(date +%s)
  if [ "$n" = zoo ]; then
    command -v zoo >/dev/null && (cd "$out" && timeout "${T:-300}" zoo trace > zoo.txt 2>&1)
  else
    read -r -a cmd <<< "${CMD[$n]}"
    (cd "$out" && timeout "${T:-300}" python3 "$here/${cmd[0]}" "${cmd[@]:1}" > "$n.plain.txt" 2>&1)
    rm -f "$out/$n".*json
    (cd "$out" && timeout "${T:-300}" gpuscope run -o "$n.json" -- python3 "$here/${cmd[0]}" "${cmd[@]:1}" \
      > "$n.txt" 2> "$n.err")
  fi
  echo "$n: $(( $(date +%s) - start )) s"
done
python3 "$here/summary.py" "$out" "${names[@]}" | tee "$out/summary.md"
