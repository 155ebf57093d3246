// A CUDA C++ program that knows nothing of gpuscope: runtime API kernels
// in nvtx3 ranges. Profile it without rebuilding:
//   nvcc -O2 examples/cuda/app.cu -o app -ldl
//   CUDA_INJECTION64_PATH=libgpuscope.so NVTX_INJECTION64_PATH=libgpuscope.so ./app
#include <cstdio>
#include <nvtx3/nvToolsExt.h>

__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

__global__ void add(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

int main() {
  const int n = 1 << 22;
  float *x, *y;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMemset(x, 0, n * sizeof(float));
  cudaMemset(y, 0, n * sizeof(float));
  nvtxDomainHandle_t io = nvtxDomainCreateA("io");
  nvtxRangePushA("app");
  for (int step = 0; step < 5; ++step) {
    nvtxRangePushA("step");
    nvtxRangePushA("scale");
    scale<<<(n + 255) / 256, 256>>>(x, 1.5f, n);
    nvtxRangePop();
    nvtxEventAttributes_t a = {};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "add";
    nvtxDomainRangePushEx(io, &a);
    add<<<(n + 255) / 256, 256>>>(x, y, n);
    nvtxDomainRangePop(io);
    nvtxRangePop();
  }
  nvtxRangePop();
  cudaDeviceSynchronize();
  printf("app done: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
