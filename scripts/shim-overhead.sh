#!/usr/bin/env bash
# Overhead of the shim (trace mode) on a PyTorch training loop, against the
# same loop unprofiled and under torch.profiler (CUDA activities), in one
# call. Usage: scripts/shim-overhead.sh LIBGPUSCOPE [STEPS] [ROUNDS]
set -euo pipefail
lib=$(readlink -f "$1"); steps=${2:-40}; rounds=${3:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
loop="$here/examples/python/train_loop.py"
t() { sed -n 's/.*loop_s=\([0-9.]*\).*/\1/p'; }
: > /tmp/overhead.txt
for r in $(seq "$rounds"); do
  echo "plain $(STEPS=$steps python3 "$loop" | t)" >> /tmp/overhead.txt
  echo "gpuscope $(STEPS=$steps GPUSCOPE_QUIET=1 GPUSCOPE_OUTPUT=/tmp/ovh-{pid}.json LD_PRELOAD="$lib" python3 "$loop" | t)" >> /tmp/overhead.txt
  echo "torch_profiler $(STEPS=$steps TORCH_PROFILER=1 python3 "$loop" 2>/dev/null | t)" >> /tmp/overhead.txt
done
cat /tmp/overhead.txt
python3 - <<'PY'
import statistics as st
rows = [l.split() for l in open("/tmp/overhead.txt") if len(l.split()) == 2]
m = {k: st.median(float(v) for kk, v in rows if kk == k) for k in {r[0] for r in rows}}
print({k: round(v, 4) for k, v in m.items()})
print(f"gpuscope trace / plain = {m['gpuscope'] / m['plain']:.3f}")
print(f"torch.profiler / plain = {m['torch_profiler'] / m['plain']:.3f}")
print(f"gpuscope / torch.profiler = {m['gpuscope'] / m['torch_profiler']:.3f}")
PY
