// A CUDA C++ loop that knows nothing of gpuscope: each `step` (an NVTX
// range) launches 20 small kernels, waits for them, then does ~3 ms of
// host work. The GPU idles most of the step waiting for the host, and the
// launches are sparse (one every ~150 us): host-bound.
//   nvcc -O2 bench/real/cuda_steps.cu -o cuda_steps -ldl && ./cuda_steps [steps] [--no-ranges]
// `--no-ranges`: the same loop without its NVTX range, as most programs.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nvtx3/nvToolsExt.h>
#include <string>

__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + 1.0f;
}

static double host_work(double ms) {
  auto t0 = std::chrono::steady_clock::now();
  double acc = 0;
  while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < ms) {
    for (int i = 0; i < 1000; ++i) acc += i * 1e-9;
  }
  return acc;
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 300;
  const bool ranges = !(argc > 2 && std::string(argv[2]) == "--no-ranges");
  const int n = 1 << 20;
  float* x;
  cudaMalloc(&x, n * sizeof(float));
  cudaMemset(x, 0, n * sizeof(float));
  double sink = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    if (ranges) nvtxRangePushA("step");
    for (int k = 0; k < 20; ++k) scale<<<(n + 255) / 256, 256>>>(x, 0.999f, n);
    cudaDeviceSynchronize();
    sink += host_work(3.0);
    if (ranges) nvtxRangePop();
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
  printf("SUITE {\"step_ms\": %.4f, \"steps\": %d, \"sink\": %.1f}\n", ms, steps, sink);
  cudaFree(x);
  return 0;
}
