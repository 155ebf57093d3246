// What CUPTI's kernel records add to a launch call, by how the launch is
// made: through the runtime (`<<<>>>`, cudaLaunchKernel) or the driver
// (cuLaunchKernel, as gpuscope's calibration does), with no parameters or
// 256 bytes of them, on the legacy default stream or a non-blocking one,
// one function or 64 in turn. Each launch call is timed; the median, the
// mean and the tail are printed per case, without records and then with
// them, and with launch callbacks that do nothing (as a tracer's), in the
// order given: CUPTI's costs stay until it is detached, so each phase adds
// to the ones before it (`plain,callbacks,records`: what records add to a
// process whose launches CUPTI already calls back, as in gpuscope's
// calibration; `plain,records,callbacks`: what records add alone).
//
//   nvcc -O2 -arch=native bench/cupti/launch_cost.cu -I$CUDA/extras/CUPTI/include \
//       -L$CUDA/extras/CUPTI/lib64 -lcupti -lcuda -o launch_cost
//   ./launch_cost [launches] [plain,callbacks,records]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

struct Params {
  char bytes[256];
};

__global__ void empty() {}
__global__ void with_params(Params p) {
  if (p.bytes[0] == 42 && threadIdx.x == 1024) p.bytes[1] = 0;
}
template <int I>
__global__ void many() {}

template <int... I>
static std::vector<const void *> many_table(std::integer_sequence<int, I...>) {
  return {reinterpret_cast<const void *>(&many<I>)...};
}

static double now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static uint64_t records = 0;

static void CUPTIAPI requested(uint8_t **buf, size_t *size, size_t *max) {
  *buf = static_cast<uint8_t *>(aligned_alloc(8, 8 << 20));
  *size = *buf ? 8 << 20 : 0;
  *max = 0;
}

static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid) {
  CUpti_Activity *r = nullptr;
  while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) records++;
  free(buf);
}

// The outermost launch call's entry and exit as its callbacks see them:
// what a tracer can time of the call, against the call timed outside.
static thread_local double entered_ns, exited_ns;
static thread_local int depth;
static bool callbacks_on;

static void CUPTIAPI on_api(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *data) {
  const CUpti_CallbackData *cb = static_cast<const CUpti_CallbackData *>(data);
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (depth++ == 0) entered_ns = now_ns();
  } else if (--depth == 0) {
    exited_ns = now_ns();
  }
}

struct Case {
  const char *name;
  bool driver, params, own_stream, many;
};

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 5000;
  cudaStream_t own;
  cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
  CUfunction f_empty, f_params;
  cudaGetFuncBySymbol(&f_empty, reinterpret_cast<const void *>(&empty));
  cudaGetFuncBySymbol(&f_params, reinterpret_cast<const void *>(&with_params));
  auto table = many_table(std::make_integer_sequence<int, 64>{});
  Params p{};
  const Case cases[] = {
      {"runtime, no params, default stream", false, false, false, false},
      {"runtime, no params, own stream", false, false, true, false},
      {"runtime, 256 B params, default stream", false, true, false, false},
      {"runtime, 64 functions, default stream", false, false, false, true},
      {"driver, no params, own stream", true, false, true, false},
      {"driver, no params, default stream", true, false, false, false},
      {"driver, 256 B params, default stream", true, true, false, false},
  };
  auto launch = [&](const Case &c, int i) {
    cudaStream_t s = c.own_stream ? own : nullptr;
    if (c.driver) {
      void *args[] = {&p};
      cuLaunchKernel(c.params ? f_params : f_empty, 1, 1, 1, 32, 1, 1, 0, s, c.params ? args : nullptr, nullptr);
    } else if (c.many) {
      cudaLaunchKernel(table[i % 64], 1, 32, nullptr, 0, s);
    } else if (c.params) {
      with_params<<<1, 32, 0, s>>>(p);
    } else {
      empty<<<1, 32, 0, s>>>();
    }
  };
  std::string order = argc > 2 ? argv[2] : "plain,callbacks,records";
  cuptiActivityRegisterCallbacks(requested, completed);
  CUpti_SubscriberHandle sub;
  std::string on;
  for (size_t at = 0; at <= order.size();) {
    size_t end = std::min(order.find(',', at), order.size());
    std::string phase = order.substr(at, end - at);
    at = end + 1;
    if (phase == "records") {
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    } else if (phase == "callbacks") {
      cuptiSubscribe(&sub, on_api, nullptr);
      cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
      cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
      cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000);
      callbacks_on = true;
    } else if (phase != "plain") {
      fprintf(stderr, "unknown phase %s (plain, callbacks, records)\n", phase.c_str());
      return 2;
    }
    on += (on.empty() ? "" : "+") + phase;
    for (const Case &c : cases) {
      for (int i = 0; i < 64; i++) launch(c, i);
      cudaDeviceSynchronize();
      std::vector<double> t(n), inside(n), outside(n);
      for (int i = 0; i < n; i++) {
        double t0 = now_ns();
        launch(c, i);
        t[i] = now_ns() - t0;
        inside[i] = exited_ns - entered_ns;
        outside[i] = t[i] - inside[i];
      }
      cudaDeviceSynchronize();
      if (callbacks_on) {
        std::sort(inside.begin(), inside.end());
        std::sort(outside.begin(), outside.end());
        printf("%-24s %-40s between callbacks median %7.0f, outside them %7.0f\n", on.c_str(), c.name, inside[n / 2],
               outside[n / 2]);
      }
      double first = std::accumulate(t.begin(), t.begin() + 256, 0.0) / 256;
      double mean = std::accumulate(t.begin(), t.end(), 0.0) / n;
      std::sort(t.begin(), t.end());
      double top = std::accumulate(t.begin() + n * 99 / 100, t.end(), 0.0);
      printf("%-24s %-40s median %7.0f  mean %7.0f  first 256 mean %7.0f  p99 %8.0f  max %9.0f  top 1%% share of time %4.1f%%\n",
             on.c_str(), c.name, t[n / 2], mean, first, t[n * 99 / 100], t[n - 1],
             100 * top / (mean * n));
    }
  }
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  printf("records %llu (%s)\n", (unsigned long long)records, cudaGetErrorString(cudaGetLastError()));
  return 0;
}
