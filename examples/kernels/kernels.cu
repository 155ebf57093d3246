// Kernels for the gpuscope examples and GPU tests.
//
// Compiled to PTX with clang (no CUDA toolkit needed) by gen-ptx.sh; the PTX
// is committed so the examples need only the NVIDIA driver to run.
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __device__ __attribute__((device))

typedef unsigned long long u64;

static __device__ inline unsigned tid() { return __nvvm_read_ptx_sreg_tid_x(); }
static __device__ inline unsigned ntid() { return __nvvm_read_ptx_sreg_ntid_x(); }
static __device__ inline unsigned ctaid() { return __nvvm_read_ptx_sreg_ctaid_x(); }
static __device__ inline unsigned nctaid() { return __nvvm_read_ptx_sreg_nctaid_x(); }
static __device__ inline void sync() { __nvvm_barrier_sync(0); }
static __device__ inline float fast_exp(float x) { return __nvvm_ex2_approx_f(x * 1.44269504f); }

// c = a + b, one element per thread.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = ctaid() * ntid() + tid();
  if (i < n) c[i] = a[i] + b[i];
}

// Naive softmax, pass 1 of 3: the maximum of each row (one thread per row).
extern "C" __global__ void softmax_row_max(const float* x, float* row_max, int rows, int cols) {
  int r = ctaid() * ntid() + tid();
  if (r >= rows) return;
  const float* p = x + (u64)r * cols;
  float m = -3.0e38f;
  for (int j = 0; j < cols; ++j) m = __nvvm_fmax_f(m, p[j]);
  row_max[r] = m;
}

// Naive softmax, pass 2 of 3: y = exp(x - max), and the sum of each row.
extern "C" __global__ void softmax_exp_sum(const float* x, const float* row_max, float* y,
                                           float* row_sum, int rows, int cols) {
  int r = ctaid() * ntid() + tid();
  if (r >= rows) return;
  const float* p = x + (u64)r * cols;
  float* q = y + (u64)r * cols;
  float m = row_max[r], s = 0.f;
  for (int j = 0; j < cols; ++j) { float e = fast_exp(p[j] - m); q[j] = e; s += e; }
  row_sum[r] = s;
}

// Naive softmax, pass 3 of 3: y /= sum, one element per thread.
extern "C" __global__ void softmax_normalize(float* y, const float* row_sum, int rows, int cols) {
  u64 i = (u64)ctaid() * ntid() + tid();
  if (i < (u64)rows * cols) y[i] = y[i] / row_sum[i / cols];
}

// Fused softmax: one block per row, the row cached in dynamic shared memory
// (cols * 4 bytes, over 48 KB for long rows) plus a block-wide reduction.
extern "C" __global__ void softmax_fused(const float* x, float* y, int cols) {
  extern __shared__ float smem[];  // [cols] row cache, then [ntid] reduction scratch
  float* red = smem + cols;
  const float* p = x + (u64)ctaid() * cols;
  float* q = y + (u64)ctaid() * cols;
  unsigned t = tid(), n = ntid();
  float m = -3.0e38f;
  for (int j = t; j < cols; j += n) { float v = p[j]; smem[j] = v; m = __nvvm_fmax_f(m, v); }
  red[t] = m; sync();
  for (unsigned s = n / 2; s > 0; s >>= 1) { if (t < s) red[t] = __nvvm_fmax_f(red[t], red[t + s]); sync(); }
  m = red[0]; sync();
  float sum = 0.f;
  for (int j = t; j < cols; j += n) { float e = fast_exp(smem[j] - m); smem[j] = e; sum += e; }
  red[t] = sum; sync();
  for (unsigned s = n / 2; s > 0; s >>= 1) { if (t < s) red[t] += red[t + s]; sync(); }
  float inv = 1.f / red[0];
  for (int j = t; j < cols; j += n) q[j] = smem[j] * inv;
}

// Tiled matmul C[n x n] = A * B with TILE x TILE tiles in static shared memory.
// A C++ template, so its name reaches gpuscope mangled and must be demangled.
template <int TILE>
__global__ void matmul_tiled(const float* a, const float* b, float* c, int n) {
  __shared__ float ta[TILE][TILE];
  __shared__ float tb[TILE][TILE];
  int tx = __nvvm_read_ptx_sreg_tid_x(), ty = __nvvm_read_ptx_sreg_tid_y();
  int row = __nvvm_read_ptx_sreg_ctaid_y() * TILE + ty;
  int col = __nvvm_read_ptx_sreg_ctaid_x() * TILE + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < n; k0 += TILE) {
    ta[ty][tx] = (row < n && k0 + tx < n) ? a[row * n + k0 + tx] : 0.f;
    tb[ty][tx] = (col < n && k0 + ty < n) ? b[(k0 + ty) * n + col] : 0.f;
    sync();
    for (int k = 0; k < TILE; ++k) acc += ta[ty][k] * tb[k][tx];
    sync();
  }
  if (row < n && col < n) c[row * n + col] = acc;
}
template __global__ void matmul_tiled<16>(const float*, const float*, float*, int);

// A launch that does almost nothing: the launch-bound worst case.
extern "C" __global__ void tiny(int* counter) {
  if (tid() == 0 && ctaid() == 0) counter[0] += 1;
}

// Spins for `cycles` SM clock cycles per block: a kernel of known duration.
extern "C" __global__ void spin(u64 cycles, int* sink) {
  u64 start = __nvvm_read_ptx_sreg_clock64();
  while (__nvvm_read_ptx_sreg_clock64() - start < cycles) {}
  if (tid() == 0 && cycles == 0) sink[ctaid()] = 1;
}

// ---- Validation kernels (examples/validate.rs): shapes whose SM efficiency
// and achieved occupancy are known in advance.

static __device__ inline void spin_for(u64 cycles) {
  u64 start = __nvvm_read_ptx_sreg_clock64();
  while (__nvvm_read_ptx_sreg_clock64() - start < cycles) {}
}

// One block on one SM for a long time: SM efficiency ~1/#SMs.
extern "C" __global__ void one_block_spin(u64 cycles) { spin_for(cycles); }

// Launched with enough dynamic shared memory that one block fits per SM,
// and a grid of 2 x #SMs + 1: the last wave runs on one SM alone.
extern "C" __global__ void tail_wave_spin(u64 cycles) {
  extern __shared__ float pad[];
  if (tid() == 0) pad[0] = 0.f;
  spin_for(cycles);
}

// One block per SM by shared memory (~200 KB), touching all of it.
extern "C" __global__ void smem_limited(float* out, int words, int iters) {
  extern __shared__ float buf[];
  for (int i = tid(); i < words; i += ntid()) buf[i] = (float)i;
  sync();
  float acc = 0.f;
  for (int k = 0; k < iters; ++k)
    for (int i = tid(); i < words; i += ntid()) acc += buf[(i * 33 + k) % words];
  out[ctaid() * ntid() + tid()] = acc;
}

// Streaming copy, grid-stride: memory-bound.
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
extern "C" __global__ void stream_copy(const float4* src, float4* dst, u64 n) {
  for (u64 i = (u64)ctaid() * ntid() + tid(); i < n; i += (u64)nctaid() * ntid()) dst[i] = src[i];
}

// Dependent FMAs per thread: compute-bound, all SMs busy.
extern "C" __global__ void fma_loop(float* out, int iters) {
  float a = tid() * 1e-3f, b = 1.0001f, c = 0.9999f;
  for (int k = 0; k < iters; ++k) { a = a * b + c; b = b * c + a * 1e-7f; }
  out[ctaid() * ntid() + tid()] = a + b;
}

// Streaming copy with four independent loads in flight per thread: enough
// memory-level parallelism to run DRAM near its peak (the memory-bound case
// of examples/bottlenecks.rs).
extern "C" __global__ void stream_copy4(const float4* src, float4* dst, u64 n) {
  u64 stride = (u64)nctaid() * ntid();
  u64 i = (u64)ctaid() * ntid() + tid();
  for (; i + 3 * stride < n; i += 4 * stride) {
    float4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}
