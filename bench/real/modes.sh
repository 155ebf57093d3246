#!/usr/bin/env bash
# The suite in each mode: every program once plain (it prints its own step
# time), then under `gpuscope run` in trace mode, sampling mode and
# always-on (sampling with trace windows of 0), then a table of each
# report's answer (modes_summary.py).
#
#   bench/real/modes.sh OUT NAME...       MODES="trace win0" to run fewer
#
# Modes: trace, sampling, win0 (always-on), win100 (kernel records 100 ms
# of every second), and for PyTorch programs stack
# (trace with --torch-ranges=stack) and hooks (trace with --torch-ranges);
# programs of other frameworks skip the last two.
#
# Needs gpuscope (and its libgpuscope.so) on PATH, python3 with the
# frameworks, nvcc for `cuda`. EXPECTED.md says what each should get.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd); shift
export COLUMNS=${COLUMNS:-120}
declare -A CMD=(
  [mem]="mem_chain.py --seconds 1"
  [cupy]="cupy_few_blocks.py --launches 2000"
  [cupyshort]="cupy_few_blocks.py"
  [llama]="hf_llama.py --steps 100"
  [llamar]="hf_llama.py --ranges --steps 200"
  [jax]="jax_mlp.py"
  [compile]="compile_train_infer.py"
  [resnet8]="resnet_loader.py --workers 8 --warmup 25"
  [cuda]="cuda_steps"
  [trainer]="hf_trainer.py"
  [generate]="hf_generate.py"
  [jaxsync]="jax_mlp.py --sync"
  [flax]="flax_cnn.py"
  [flaxsync]="flax_cnn.py --sync"
  [resnet8n]="resnet_loader.py --workers 8 --warmup 25 --no-ranges"
  [resnet1n]="resnet_loader.py --workers 1 --warmup 10 --steps 40 --no-ranges"
  [lightning]="lightning_fit.py"
  [gnn]="gnn_train.py"
  [vit]="timm_vit.py"
)
NOT_TORCH=" jax jaxsync flax flaxsync cuda cudan cupy cupyshort "
cd "$out"
for n in "$@"; do
  if [ "$n" = cuda ] || [ "$n" = cudan ]; then
    [ -x "$out/cuda_steps" ] || nvcc -O2 -o "$out/cuda_steps" "$here/cuda_steps.cu" -ldl || continue
    P=("$out/cuda_steps")
    [ "$n" = cudan ] && P+=(300 --no-ranges)
  else
    read -r -a c <<< "${CMD[$n]}"
    P=(python3 "$here/${c[0]}" "${c[@]:1}")
  fi
  t0=$(date +%s)
  timeout "${T:-200}" "${P[@]}" > "$n.plain.txt" 2>&1
  for m in ${MODES:-trace sampling win0}; do
    case $m in
      trace) a=();;
      sampling) a=(--mode sampling);;
      win0) a=(--mode sampling --trace-windows 0/1000);;
      win100) a=(--mode sampling --trace-windows 100/1000);;
      stack|hooks)
        [[ $NOT_TORCH == *" $n "* ]] && continue
        a=(--torch-ranges); [ "$m" = stack ] && a=(--torch-ranges=stack);;
      *) echo "unknown mode $m" >&2; exit 2;;
    esac
    timeout "${T:-200}" gpuscope run "${a[@]}" -o "$n.$m.json" -- "${P[@]}" > "$n.$m.txt" 2>&1
    echo "$n $m: exit $?"
  done
  echo "$n: $(( $(date +%s) - t0 )) s"
done
python3 "$here/modes_summary.py" "$out" | tee "$out/summary.txt"
