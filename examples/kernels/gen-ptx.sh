#!/usr/bin/env bash
# Regenerates kernels.ptx from kernels.cu with clang's NVPTX back end.
# Needs clang (Debian: apt-get install clang; CLANG=clang-14 picks a
# version), no CUDA toolkit. The driver JIT-compiles the sm_80 PTX for the
# GPU it runs on (sm_90 on H100/H200).
set -euo pipefail
cd "$(dirname "$0")"
"${CLANG:-clang}" -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=sm_80 -O3 -Xclang -target-feature -Xclang +ptx70 -S \
  kernels.cu -o kernels.ptx
