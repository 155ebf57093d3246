// What tracing adds to a launch when the host does other work between
// launches (its caches no longer hold CUPTI's and the driver's launch
// path), against a launch loop that does nothing else, as gpuscope's
// calibration times it. In one process: for each amount of memory the
// host touches between launches (POLLUTE, KiB, e.g. 0,256,4096), blocks of
// launches alternate between no tracer and each configuration:
//
//   records    raw CUPTI, kernel records only (cupti_floor.c)
//   gpuscope   gpuscope's trace mode (C ABI)
//   gs-nocal   the same with calibrate=off
//   gs-noattr  the same with launch_attribution=off
//
// Each gpuscope block is its own session; its report is written to
// OUTDIR/CONFIG-KIB-ROUND.json so that what gpuscope charged itself can be
// read beside what the block took (launch_cold.py summarises).
//
//   nvcc -O2 -o launch_cold bench/real/launch_cold.cu -ldl
//   GPUSCOPE_LIB=libgpuscope.so FLOOR_LIB=libcupti_floor.so ./launch_cold ROUNDS LAUNCHES KIB,KIB OUTDIR
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <vector>

#include "../../ffi/include/gpuscope.h"

__global__ void small(float* a, const float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += b[i];
}

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

typedef int (*init_fn)(gpuscope_config*, size_t);
typedef int (*start_fn)(const gpuscope_config*);
typedef int (*void_fn)(void);
typedef int (*write_fn)(const char*, int);
typedef const char* (*err_fn)(void);
typedef int (*floor_start_fn)(unsigned, unsigned);
typedef int (*floor_stop_fn)(uint64_t*, uint64_t*, uint64_t*);

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s ROUNDS LAUNCHES KIB[,KIB...] OUTDIR\n", argv[0]);
    return 2;
  }
  int rounds = atoi(argv[1]), launches = atoi(argv[2]);
  std::vector<int> kibs;
  for (char* p = strtok(argv[3], ","); p; p = strtok(nullptr, ",")) kibs.push_back(atoi(p));
  std::string outdir = argv[4];

  void* g = dlopen(getenv("GPUSCOPE_LIB") ? getenv("GPUSCOPE_LIB") : "libgpuscope.so", RTLD_NOW);
  void* fl = dlopen(getenv("FLOOR_LIB") ? getenv("FLOOR_LIB") : "libcupti_floor.so", RTLD_NOW);
  if (!g || !fl) {
    fprintf(stderr, "cannot load: %s\n", dlerror());
    return 1;
  }
  auto init = (init_fn)dlsym(g, "gpuscope_config_init_sized");
  auto start = (start_fn)dlsym(g, "gpuscope_start");
  auto stop = (void_fn)dlsym(g, "gpuscope_stop");
  auto write = (write_fn)dlsym(g, "gpuscope_write_report");
  auto last_error = (err_fn)dlsym(g, "gpuscope_last_error");
  auto floor_start = (floor_start_fn)dlsym(fl, "floor_start");
  auto floor_stop = (floor_stop_fn)dlsym(fl, "floor_stop");

  const int n = 4096;
  float *a, *b;
  cudaMalloc(&a, n * sizeof(float));
  cudaMalloc(&b, n * sizeof(float));
  cudaStream_t s;
  cudaStreamCreate(&s);
  std::vector<uint8_t> junk((size_t)(*std::max_element(kibs.begin(), kibs.end()) + 1) * 1024, 1);
  volatile uint64_t sink = 0;

  // One block: `launches` launches, each after touching `kib` KiB of host
  // memory (a line in 64 bytes); a sync every 64 launches keeps the queue
  // short. Seconds per launch.
  auto block = [&](int kib) {
    size_t bytes = (size_t)kib * 1024;
    cudaStreamSynchronize(s);
    double t0 = now_s();
    uint64_t acc = 0;
    for (int i = 0; i < launches; ++i) {
      for (size_t k = 0; k < bytes; k += 64) acc += junk[k]++;
      small<<<n / 256, 256, 0, s>>>(a, b, n);
      if (i % 64 == 63) cudaStreamSynchronize(s);
    }
    cudaStreamSynchronize(s);
    sink = sink + acc;
    return (now_s() - t0) / launches;
  };
  for (double t0 = now_s(); now_s() - t0 < 1.0;) block(0);

  const char* configs[] = {"records", "gpuscope", "gs-nocal", "gs-noattr"};
  printf("round config kib plain_ns profiled_ns added_ns\n");
  for (int r = 0; r < rounds; ++r) {
    for (int ci = 0; ci < 4; ++ci) {
      std::string c = configs[(ci + r) % 4];
      for (int kib : kibs) {
        double before = block(kib);
        double t;
        if (c == "records") {
          floor_start(1, 0);
          block(kib);  // CUPTI's first buffer
          t = block(kib);
          uint64_t x, y, z;
          floor_stop(&x, &y, &z);
        } else {
          gpuscope_config cfg;
          memset(&cfg, 0, sizeof cfg);
          init(&cfg, sizeof cfg);
          if (c == "gs-nocal") cfg.settings = "calibrate=off";
          if (c == "gs-noattr") cfg.launch_attribution = 0;
          if (start(&cfg) != 0) {
            fprintf(stderr, "gpuscope_start: %s\n", last_error());
            return 1;
          }
          block(kib);  // the calibration at the first launch
          t = block(kib);
          stop();
          std::string path = outdir + "/" + c + "-" + std::to_string(kib) + "-" + std::to_string(r) + ".json";
          if (write(path.c_str(), GPUSCOPE_FORMAT_JSON) != 0) fprintf(stderr, "write: %s\n", last_error());
        }
        double after = block(kib);
        double plain = 0.5 * (before + after);
        printf("%d %s %d %.0f %.0f %.0f\n", r, c.c_str(), kib, plain * 1e9, t * 1e9, (t - plain) * 1e9);
        fflush(stdout);
      }
    }
  }
  return 0;
}
