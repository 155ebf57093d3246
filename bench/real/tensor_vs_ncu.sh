#!/usr/bin/env bash
# Sampled tensor-pipe activity against Nsight Compute over one whole step
# of the Hugging Face Llama (tensor_step.py), on a GPU machine with gpuscope
# on PATH and ncu:  bash bench/real/tensor_vs_ncu.sh OUT
# ncu's NVTX filter keeps only kernels launched on the thread that pushed
# the range (PyTorch's backward runs on autograd's thread), so one step's
# kernels are chosen by count instead: K a step, from the trace.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); out=$1; mkdir -p "$out"
cd "$here"
gpuscope run --mode sampling -o "$out/sampled.json" -- python3 tensor_step.py 40 > "$out/sampled.log" 2>&1
gpuscope run -o "$out/trace.json" -- python3 tensor_step.py 40 > "$out/trace.log" 2>&1
k=$(python3 tensor_vs_ncu.py per-step "$out/trace.json" 40)
ncu --clock-control none --cache-control none --launch-skip $((6 * k)) --launch-count "$k" \
  --print-kernel-base demangled --csv --page raw \
  --metrics gpu__time_duration.sum,sm__cycles_active.avg,$(python3 -c 'import tensor_vs_ncu as t; print(t.TENSOR)') \
  python3 tensor_step.py 3 > "$out/ncu.csv" 2> "$out/ncu.err"
python3 tensor_vs_ncu.py compare "$out/ncu.csv" "$out/sampled.json" "$out/trace.json" | tee "$out/tensor.txt"
