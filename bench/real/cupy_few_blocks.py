"""CuPy kernels on 2 blocks, launched back to back: the GPU is always busy
(nvidia-smi: 100%) while 2 of its SMs work.

    python3 cupy_few_blocks.py [--launches 300]
"""
import argparse
import json
import time

import cupy as cp

SPIN = cp.RawKernel(r"""
extern "C" __global__ void spin(float* out, int iters) {
    float v = threadIdx.x;
    for (int i = 0; i < iters; ++i) v = v * 0.999f + 1.0f;
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
""", "spin")

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--launches", type=int, default=300)
    a = p.parse_args()
    out = cp.zeros(2 * 256, dtype=cp.float32)
    SPIN((2,), (256,), (out, cp.int32(200_000)))
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(a.launches):
        SPIN((2,), (256,), (out, cp.int32(200_000)))
    cp.cuda.Device().synchronize()
    ms = 1e3 * (time.perf_counter() - t0) / a.launches
    print("SUITE " + json.dumps({"step_ms": round(ms, 4), "steps": a.launches}), flush=True)
