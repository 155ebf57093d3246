// What a gpuscope session costs a native CUDA loop, in one process: blocks
// of plain steps, then the same number of blocks under one session, then
// plain blocks again (a sampling session cannot be stopped and started
// again in one process, so the plain blocks sandwich it). Native, so that
// the host's noise is the loop's own and not an interpreter's.
//
//   nvcc -O2 -o cost_native bench/real/cost_native.cu -ldl
//   GPUSCOPE_LIB=.gpu/lib/libgpuscope.so ./cost_native CONFIG LOOP BLOCKS STEPS OUT.json
//
// CONFIG: none, always-on (sampling, 1 ms samples, trace windows of 0;
// always-on:US samples every US microseconds),
// sampling (100 us samples, kernel records all the time), trace; and
// CUPTI's own floor without gpuscope: cupti-rt+drv, cupti-drv, cupti-rt
// subscribe an empty callback to the launch calls gpuscope subscribes to
// (runtime and driver, driver only, runtime only; CUPTI_LIB names
// libcupti.so.13) and count the callbacks each launch makes.
// LOOP: launch (1000 launches of a one-block kernel per step, then a
// stream sync: the host's launches bound it) or gpu (8 launches of a
// ~250 us kernel per step: the GPU bounds it). Each step is an NVTX range
// "step". bench/real/cost.sh alternates configurations process by process
// and summarises.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <vector>

#include <nvtx3/nvToolsExt.h>

// The C ABI, loaded at run time (GPUSCOPE_LIB).
#include "../../ffi/include/gpuscope.h"

__global__ void tiny(int* c) {
  if (threadIdx.x == 0) atomicAdd(c, 1);
}

__global__ void spin(long long cycles, int* c) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(c, 1);
}

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The launch calls gpuscope's callbacks subscribe to (callbacks.rs's
// DRIVER_LAUNCHES and RUNTIME_LAUNCHES), by CUPTI callback id.
static const unsigned DRIVER_LAUNCHES[] = {115, 116, 117, 307, 442, 652, 653, 477, 478, 480, 514, 515};
static const unsigned RUNTIME_LAUNCHES[] = {13, 213, 211, 214, 430, 431, 269, 270, 272, 311, 312, 505, 506};
static unsigned long long callbacks[3];

static void empty_callback(void*, unsigned domain, unsigned, const void*) {
  if (domain < 3) ++callbacks[domain];
}

typedef int (*unsubscribe_fn)(void*);
static unsubscribe_fn unsubscribe = nullptr;

// CUPTI subscribed with an empty callback on the launch calls of the
// domains `config` names; the subscriber, or null on failure.
static void* subscribe_empty(const std::string& config) {
  const char* path = getenv("CUPTI_LIB");
  void* h = dlopen(path ? path : "libcupti.so.13", RTLD_NOW);
  if (!h) {
    fprintf(stderr, "cannot load CUPTI: %s\n", dlerror());
    return nullptr;
  }
  typedef int (*subscribe_fn)(void**, void (*)(void*, unsigned, unsigned, const void*), void*);
  typedef int (*enable_fn)(unsigned, void*, unsigned, unsigned);
  auto subscribe = (subscribe_fn)dlsym(h, "cuptiSubscribe");
  auto enable = (enable_fn)dlsym(h, "cuptiEnableCallback");
  unsubscribe = (unsubscribe_fn)dlsym(h, "cuptiUnsubscribe");
  void* sub = nullptr;
  if (!subscribe || !enable || subscribe(&sub, empty_callback, nullptr) != 0) {
    fprintf(stderr, "cuptiSubscribe failed\n");
    return nullptr;
  }
  bool drv = config != "cupti-rt", rt = config != "cupti-drv";
  for (unsigned id : DRIVER_LAUNCHES)
    if (drv) enable(1, sub, 1, id);  // CUPTI_CB_DOMAIN_DRIVER_API
  for (unsigned id : RUNTIME_LAUNCHES)
    if (rt) enable(1, sub, 2, id);  // CUPTI_CB_DOMAIN_RUNTIME_API
  return sub;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s none|always-on|sampling|trace|cupti-rt+drv|cupti-drv|cupti-rt launch|gpu BLOCKS STEPS OUT.json\n", argv[0]);
    return 2;
  }
  std::string config = argv[1], loop = argv[2];
  int blocks = atoi(argv[3]), steps = atoi(argv[4]);
  const char* out_path = argv[5];
  if ((loop != "launch" && loop != "gpu") || blocks < 1 || steps < 1) {
    fprintf(stderr, "bad LOOP %s (launch, gpu) or BLOCKS/STEPS\n", loop.c_str());
    return 2;
  }
  int* counter;
  cudaMalloc(&counter, sizeof(int));
  cudaStream_t s;
  cudaStreamCreate(&s);
  // ~250 us a launch, at the clock the card runs now: timed, not set.
  long long cycles = 1000000;
  {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    spin<<<264, 128, 0, s>>>(cycles, counter);
    cudaEventRecord(a, s);
    spin<<<264, 128, 0, s>>>(cycles, counter);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    if (ms > 0) cycles = (long long)(cycles * 0.25 / ms);
  }

  auto step = [&]() {
    nvtxRangePushA("step");
    if (loop == "launch") {
      for (int k = 0; k < 1000; ++k) tiny<<<1, 32, 0, s>>>(counter);
    } else {
      for (int k = 0; k < 8; ++k) spin<<<264, 128, 0, s>>>(cycles, counter);
    }
    cudaStreamSynchronize(s);
    nvtxRangePop();
  };
  auto block = [&]() {
    double t0 = now_s();
    for (int i = 0; i < steps; ++i) step();
    return now_s() - t0;
  };

  // A second of warm-up: the GPU's clocks ramp up from idle over the
  // first hundreds of milliseconds.
  for (double t0 = now_s(); now_s() - t0 < 1.0;) step();
  std::vector<double> before, during, after;
  for (int b = 0; b < blocks; ++b) before.push_back(block());

  typedef int (*init_fn)(gpuscope_config*, size_t);
  typedef int (*start_fn)(const gpuscope_config*);
  typedef int (*stop_fn)(void);
  typedef const char* (*err_fn)(void);
  stop_fn stop = nullptr;
  err_fn last_error = nullptr;
  double start_s = 0, stop_s = 0;
  bool probe = config.rfind("cupti-", 0) == 0;
  void* probe_sub = nullptr;
  if (probe) {
    if (config != "cupti-rt+drv" && config != "cupti-drv" && config != "cupti-rt") {
      fprintf(stderr, "bad CONFIG %s\n", config.c_str());
      return 2;
    }
    double t0 = now_s();
    probe_sub = subscribe_empty(config);
    if (!probe_sub) return 1;
    start_s = now_s() - t0;
  } else if (config != "none") {
    const char* lib = getenv("GPUSCOPE_LIB");
    void* h = dlopen(lib ? lib : "libgpuscope.so", RTLD_NOW);
    if (!h) {
      fprintf(stderr, "cannot load gpuscope: %s\n", dlerror());
      return 1;
    }
    auto init = (init_fn)dlsym(h, "gpuscope_config_init_sized");
    auto start = (start_fn)dlsym(h, "gpuscope_start");
    stop = (stop_fn)dlsym(h, "gpuscope_stop");
    last_error = (err_fn)dlsym(h, "gpuscope_last_error");
    gpuscope_config c;
    memset(&c, 0, sizeof c);
    init(&c, sizeof(c));
    if (config.rfind("always-on", 0) == 0) {
      // always-on:US: another sampling interval than 1 ms.
      c.mode = GPUSCOPE_MODE_SAMPLING;
      c.sampling_interval_us = config.size() > 10 ? (uint32_t)atoi(config.c_str() + 10) : 1000;
      c.trace_window_ms = 0;
      c.trace_period_ms = 1000;
    } else if (config == "sampling") {
      c.mode = GPUSCOPE_MODE_SAMPLING;
    } else if (config != "trace") {
      fprintf(stderr, "bad CONFIG %s (none, always-on, sampling, trace)\n", config.c_str());
      return 2;
    }
    double t0 = now_s();
    if (start(&c) != 0) {
      fprintf(stderr, "gpuscope_start: %s\n", last_error());
      return 1;
    }
    start_s = now_s() - t0;
  }
  for (int b = 0; b < blocks; ++b) during.push_back(block());
  unsigned long long during_callbacks[3] = {callbacks[0], callbacks[1], callbacks[2]};
  if (probe_sub && unsubscribe) {
    double t0 = now_s();
    unsubscribe(probe_sub);
    stop_s = now_s() - t0;
  }
  if (stop) {
    double t0 = now_s();
    if (stop() != 0) {
      fprintf(stderr, "gpuscope_stop: %s\n", last_error());
      return 1;
    }
    stop_s = now_s() - t0;
  }
  for (int b = 0; b < blocks; ++b) after.push_back(block());

  std::vector<double> plain = before;
  plain.insert(plain.end(), after.begin(), after.end());
  // The session's first block holds its set-up's wake (a device's sampling
  // set-up finishes on gpuscope's thread after start returns): left out.
  std::vector<double> settled(during.begin() + (during.size() > 1 ? 1 : 0), during.end());
  double ratio = median(settled) / median(plain);
  FILE* f = fopen(out_path, "w");
  if (!f) {
    perror(out_path);
    return 1;
  }
  auto list = [&](const char* name, const std::vector<double>& v) {
    fprintf(f, "\"%s\": [", name);
    for (size_t i = 0; i < v.size(); ++i) fprintf(f, "%s%.6f", i ? ", " : "", v[i]);
    fprintf(f, "], ");
  };
  fprintf(f, "{\"config\": \"%s\", \"loop\": \"%s\", \"steps_per_block\": %d, ", config.c_str(), loop.c_str(),
          steps);
  list("before", before);
  list("during", during);
  list("after", after);
  double launches = (double)blocks * steps * (loop == "launch" ? 1000 : 8);
  fprintf(f, "\"driver_callbacks_per_launch\": %.3f, \"runtime_callbacks_per_launch\": %.3f, ", during_callbacks[1] / launches,
          during_callbacks[2] / launches);
  fprintf(f, "\"ratio_to_before\": %.5f, ", median(settled) / median(before));
  fprintf(f, "\"plain_step_ms\": %.4f, \"ratio\": %.5f, \"start_s\": %.3f, \"stop_s\": %.3f}\n",
          1e3 * median(plain) / steps, ratio, start_s, stop_s);
  fclose(f);
  printf("%-12s %-6s ratio %.4f (to before %.4f)  plain step %.3f ms  start %.2f s  stop %.2f s", config.c_str(),
         loop.c_str(), ratio, median(settled) / median(before), 1e3 * median(plain) / steps, start_s, stop_s);
  if (probe) printf("  callbacks per launch: driver %.2f runtime %.2f", during_callbacks[1] / launches, during_callbacks[2] / launches);
  printf("\n");
  cudaFree(counter);
  return 0;
}
