#!/usr/bin/env bash
# The shim on programs gpuscope did not build, on a GPU machine with nvcc and
# PyTorch. Usage: scripts/shim-demo.sh LIBGPUSCOPE OUT_DIR
set -euo pipefail
lib=$(readlink -f "$1"); out=$2; mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)

nvcc -O2 -o /tmp/gpuscope-app "$here/examples/cuda/app.cu" -ldl
echo "== CUDA C++ app via CUDA_INJECTION64_PATH"
GPUSCOPE_DEBUG=1 GPUSCOPE_OUTPUT="$out/cuda-app.json" CUDA_INJECTION64_PATH="$lib" NVTX_INJECTION64_PATH="$lib" timeout 60 /tmp/gpuscope-app
echo "== the same app via LD_PRELOAD, table format"
GPUSCOPE_OUTPUT="$out/cuda-app.txt" GPUSCOPE_FORMAT=table LD_PRELOAD="$lib" timeout 60 /tmp/gpuscope-app
echo "== PyTorch loop via LD_PRELOAD, metrics mode"
GPUSCOPE_MODE=metrics GPUSCOPE_OUTPUT="$out/torch.json" LD_PRELOAD="$lib" timeout 120 python3 "$here/examples/python/train_loop.py"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
r = json.load(open(f"{out}/cuda-app.json"))
got = {(p["path"]and "/".join((f.get("domain")+"::" if f.get("domain") else "")+f["name"] for f in p["path"]["frames"]), p["name"]): p["launches"] for p in r["path_kernels"]}
print("cuda app:", got)
assert got == {("app/step/scale", "scale(float*, float, int)"): 5, ("app/step/io::add", "add(float const*, float*, int)"): 5}, got
assert r["drops"]["unattributed_kernels"] == 0, r["drops"]
t = json.load(open(f"{out}/torch.json"))
paths = {}
for p in t["path_kernels"]:
    key = "/".join(f["name"] for f in p["path"]["frames"])
    paths.setdefault(key, [0, 0])
    paths[key][0] += p["launches"]
    paths[key][1] += p.get("profiled_launches", 0)
print("torch: launches (measured) per NVTX path:", paths)
for ph in ["step/forward", "step/backward", "step/optimizer"]:
    assert paths.get(ph, [0])[0] > 0, ph
assert sum(v[1] for v in paths.values()) > 0, "no kernel measured"
print("metrics status:", json.dumps(t.get("metrics")))
top = sorted(t["path_kernels"], key=lambda p: -p["total_ns"])[:8]
for p in top:
    print(f'  {"/".join(f["name"] for f in p["path"]["frames"]):<16} {p["name"][:60]:<60} n={p["launches"]:<4} '
          f'occ={p.get("achieved_occupancy_pct") or 0:.1f} eff={p.get("sm_efficiency_pct") or 0:.1f} theo={p.get("theoretical_occupancy_pct") or 0:.1f}')
PY
