// The kernel checklist's suite: kernels with one planted cause each, and a
// clean twin doing the same work without it. gpuscope's metrics mode with
// `--metrics checklist` should name each planted cause and no other, and
// Nsight Compute's rules should agree (tests/checklist.rs runs both).
//
//   nvcc -O3 -arch=sm_90 -o checklist examples/cuda/checklist.cu -lcublas
//   ./checklist [LAUNCHES]      (each kernel LAUNCHES times, default 4)
//
// The GEMM's twin is the change the advice names: the same fp32 product
// through cuBLAS on the tensor cores (TF32). Without cuBLAS
// (-DNO_CUBLAS) the suite has no twin for it.
//
// | planted                          | kernel                    | clean twin             |
// |----------------------------------|---------------------------|------------------------|
// | strided global loads (32 floats) | strided_copy              | coalesced_copy         |
// | shared-memory bank conflicts     | transpose_conflicted      | transpose_padded       |
// | occupancy limited by registers   | registers_limited         | registers_light        |
// | fp32 GEMM on the FMA pipes       | sgemm_fma                 | cuBLAS TF32 GEMM       |
// | warps waiting at barriers        | barrier_heavy             | barrier_free           |
#include <cuda_runtime.h>
#ifndef NO_CUBLAS
#include <cublas_v2.h>
#endif
#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t e = (x);                                                                \
    if (e != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

constexpr int N = 1 << 24;  // floats per buffer (64 MiB)
constexpr int STRIDE = 32;  // floats between neighbouring threads' loads

// Neighbouring threads read 128 bytes apart: 32 sectors per warp request
// where 4 would do. Each element is still read once (a permutation).
__global__ void strided_copy(const float* __restrict__ in, float* __restrict__ out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N) return;
  int rows = N / STRIDE;
  int src = (i % rows) * STRIDE + i / rows;
  out[i] = in[src] * 2.0f;
}

__global__ void coalesced_copy(const float* __restrict__ in, float* __restrict__ out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) out[i] = in[i] * 2.0f;
}

constexpr int TILE = 32;
constexpr int SIDE = 4096;  // SIDE x SIDE matrix: N floats

// The tile is read by column: the 32 threads of a warp hit one bank.
__global__ void transpose_conflicted(const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float tile[TILE][TILE];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += 8) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * SIDE + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += 8) out[(y + j) * SIDE + x] = tile[threadIdx.x][threadIdx.y + j];
}

// One padding column puts a column's elements in 32 different banks.
__global__ void transpose_padded(const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += 8) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * SIDE + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += 8) out[(y + j) * SIDE + x] = tile[threadIdx.x][threadIdx.y + j];
}

// Each thread follows a chain of dependent loads (held in L2) and folds
// every value it reaches into ACC accumulators: ACC registers live across
// the whole loop, so few warps fit an SM and the loads' latency shows.
// Every load is coalesced: the chain is the same for a warp's lanes, each
// reading its own word.
constexpr int ACC = 96;
constexpr int STEPS = 32;
constexpr int REG_THREADS = 256;
constexpr int CHAIN = (1 << 20) - 1;  // 4 MiB of ints: held in L2

__device__ __forceinline__ int follow(const int* __restrict__ next, int p) {
  return next[(p & (CHAIN ^ 31)) | (threadIdx.x & 31)];
}

// Four dependent loads a step: the chain's latency outweighs the step's
// multiply-adds.
__device__ __forceinline__ int step(const int* __restrict__ next, int p) {
  return follow(next, follow(next, follow(next, follow(next, p) + 4096) + 8192) + 12288);
}

__global__ void __launch_bounds__(REG_THREADS)
    registers_limited(const int* __restrict__ next, float* __restrict__ out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc[ACC];
#pragma unroll
  for (int k = 0; k < ACC; k++) acc[k] = (float)k;
  int p = (i / 32) * 32 * 977;
  for (int s = 0; s < STEPS; s++) {
    p = step(next, p + s * 32 * 131);
    float x = (float)(p & 1023) * 1e-3f;
#pragma unroll
    for (int k = 0; k < ACC; k++) acc[k] = acc[k] * x + (float)k;
  }
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < ACC; k++) sum += acc[k] * (float)(k + 1);
  out[i] = sum;
}

// The same chain and multiply-adds, folded into 8 accumulators: few
// registers, full occupancy.
__global__ void __launch_bounds__(REG_THREADS)
    registers_light(const int* __restrict__ next, float* __restrict__ out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc[8];
#pragma unroll
  for (int k = 0; k < 8; k++) acc[k] = (float)k;
  int p = (i / 32) * 32 * 977;
  for (int s = 0; s < STEPS; s++) {
    p = step(next, p + s * 32 * 131);
    float x = (float)(p & 1023) * 1e-3f;
#pragma unroll
    for (int k = 0; k < ACC; k++) acc[k & 7] = acc[k & 7] * x + (float)k;
  }
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < 8; k++) sum += acc[k] * (float)(k + 1);
  out[i] = sum;
}

constexpr int M = 2048;  // M x M x M GEMMs

// A textbook shared-memory tiled SGEMM: every multiply-add on the FMA pipe.
__global__ void sgemm_fma(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c) {
  __shared__ float as[TILE][TILE], bs[TILE][TILE + 1];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < M; k0 += TILE) {
    as[threadIdx.y][threadIdx.x] = a[row * M + k0 + threadIdx.x];
    bs[threadIdx.y][threadIdx.x] = b[(k0 + threadIdx.y) * M + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; k++) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
    __syncthreads();
  }
  c[row * M + col] = acc;
}

constexpr int ROUNDS = 256;

// Every round the block's first warp works 8x longer than the others, and
// all wait for it at a barrier.
__global__ void barrier_heavy(const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float s[256];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  float x = in[i];
  for (int r = 0; r < ROUNDS; r++) {
    int work = t < 32 ? 64 : 8;
    for (int k = 0; k < work; k++) x = x * 0.999f + 0.001f;
    s[t] = x;
    __syncthreads();
    x += s[(t + 1) & 255] * 1e-3f;
    __syncthreads();
  }
  out[i] = x;
}

// The same arithmetic per thread (the first warp's share spread evenly),
// neighbours' values through warp shuffles: no barrier.
__global__ void barrier_free(const float* __restrict__ in, float* __restrict__ out) {
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  float x = in[i];
  for (int r = 0; r < ROUNDS; r++) {
    for (int k = 0; k < 15; k++) x = x * 0.999f + 0.001f;
    x += __shfl_down_sync(0xffffffffu, x, 1) * 1e-3f;
  }
  out[i] = x;
}

__global__ void fill(float* p, int n, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v * (float)(i % 97);
}

// A warp-uniform chain: every lane of a 32-word group points to the same
// next group.
__global__ void fill_chain(int* next) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j <= CHAIN) next[j] = (int)((((unsigned)(j >> 5) * 7919u + 13u) & (CHAIN >> 5)) << 5);
}

int main(int argc, char** argv) {
  int launches = argc > 1 ? atoi(argv[1]) : 4;
  float *in, *out, *a, *b, *c;
  int* next;
  CHECK(cudaMalloc(&in, N * sizeof(float)));
  CHECK(cudaMalloc(&out, N * sizeof(float)));
  CHECK(cudaMalloc(&a, M * M * sizeof(float)));
  CHECK(cudaMalloc(&b, M * M * sizeof(float)));
  CHECK(cudaMalloc(&c, M * M * sizeof(float)));
  CHECK(cudaMalloc(&next, (CHAIN + 1) * sizeof(int)));
  fill<<<N / 256, 256>>>(in, N, 1.0f);
  fill<<<M * M / 256, 256>>>(a, M * M, 0.01f);
  fill<<<M * M / 256, 256>>>(b, M * M, 0.02f);
  fill_chain<<<(CHAIN + 1) / 256, 256>>>(next);
  CHECK(cudaDeviceSynchronize());
  // Enough blocks to fill every SM several times over.
  int reg_blocks = 132 * 16;
  dim3 tgrid(SIDE / TILE, SIDE / TILE), tblock(TILE, 8);
  dim3 ggrid(M / TILE, M / TILE), gblock(TILE, TILE);
#ifndef NO_CUBLAS
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "cublasCreate failed\n");
    return 1;
  }
  const float one = 1.f, zero = 0.f;
#endif
  for (int l = 0; l < launches; l++) {
    strided_copy<<<N / 256, 256>>>(in, out);
    coalesced_copy<<<N / 256, 256>>>(in, out);
    transpose_conflicted<<<tgrid, tblock>>>(in, out);
    transpose_padded<<<tgrid, tblock>>>(in, out);
    registers_limited<<<reg_blocks, REG_THREADS>>>(next, out);
    registers_light<<<reg_blocks, REG_THREADS>>>(next, out);
    sgemm_fma<<<ggrid, gblock>>>(a, b, c);
#ifndef NO_CUBLAS
    // Column-major C = B A is the row-major C = A B of sgemm_fma.
    if (cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, M, M, M, &one, b, CUDA_R_32F, M, a, CUDA_R_32F, M, &zero, c,
                     CUDA_R_32F, M, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
      fprintf(stderr, "cublasGemmEx failed\n");
      return 1;
    }
#endif
    barrier_heavy<<<132 * 8, 256>>>(in, out);
    barrier_free<<<132 * 8, 256>>>(in, out);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaDeviceSynchronize());
  printf("checklist: %d launches of each kernel\n", launches);
  return 0;
}
