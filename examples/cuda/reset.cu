// Not yet run on a GPU: checks that records survive cudaDeviceReset before exit
// (gpuscope flushes at context destruction only in metrics mode so far).
// Launches kernels and resets the device before exiting: the profiler must
// have the kernels' records out before the context is destroyed.
#include <cstdio>
__global__ void k(int* x) { x[threadIdx.x] += 1; }
int main() {
  int* x;
  cudaMalloc(&x, 256 * sizeof(int));
  for (int i = 0; i < 7; ++i) k<<<1, 256>>>(x);
  cudaDeviceSynchronize();
  cudaDeviceReset();
  printf("reset done\n");
  return 0;
}
