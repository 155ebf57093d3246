/* The floor of CUPTI tracing: what any tracer built on CUPTI pays, with no
 * work of its own. Loaded by overhead.py with ctypes; built on the device:
 *
 *   gcc -O2 -shared -fPIC -I$CUDA/include -I$CUDA/extras/CUPTI/include \
 *       cupti_floor.c -L$CUDA/lib64 -lcupti -lcuda -lpthread -o libcupti_floor.so
 *
 * floor_start(kinds, callbacks) enables the activity kinds in `kinds` (bit
 * 1 kernels, 2 memcpy, 4 memset, 8 synchronization) and, with a callback
 * that only counts, the API callbacks in `callbacks` (bit 1 driver
 * launches, 2 runtime launches, 4 copies of both APIs, 8 every call of
 * both APIs, counted per call: floor_census reads the counts). Completed buffers
 * are walked and their records counted, nothing more. floor_kinds(kinds)
 * switches the activity kinds to `kinds` while CUPTI stays attached (as
 * gpuscope's trace windows do), flushing what was recorded. floor_stop()
 * flushes, disables everything and detaches CUPTI (cuptiFinalize), as
 * gpuscope does.
 */
#include <cuda.h>
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BUF (4u << 20)

static CUpti_SubscriberHandle sub;
static int subscribed;
static unsigned kinds_on;
static volatile uint64_t records, driver_calls, runtime_calls;
/* Calls per callback id, per API (bit 8 of floor_start's callbacks). */
#define IDS 2048
static uint64_t census[2][IDS];

static void CUPTIAPI requested(uint8_t **buf, size_t *size, size_t *max) {
  *buf = aligned_alloc(8, BUF);
  *size = *buf ? BUF : 0;
  *max = 0;
}

static void CUPTIAPI completed(CUcontext c, uint32_t s, uint8_t *buf, size_t size, size_t valid) {
  CUpti_Activity *r = NULL;
  uint64_t n = 0;
  while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) n++;
  __atomic_add_fetch(&records, n, __ATOMIC_RELAXED);
  free(buf);
}

static int is_launch(CUpti_CallbackDomain d, CUpti_CallbackId id);

/* Launch calls timed from their outermost callback's entry to its exit (a
 * runtime launch's driver launch is inside it), summed: floor_calls reads
 * them, so that a configuration with callbacks and no records times the
 * program's plain launch calls as gpuscope times its traced ones. */
static volatile uint64_t call_ns, calls;
static __thread int depth;
static __thread uint64_t entered;

static uint64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void CUPTIAPI on_api(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data) {
  const CUpti_CallbackData *cb = data;
  if (cb && cb->callbackSite == CUPTI_API_ENTER && id < IDS)
    __atomic_add_fetch(&census[d == CUPTI_CB_DOMAIN_DRIVER_API][id], 1, __ATOMIC_RELAXED);
  if (d == CUPTI_CB_DOMAIN_DRIVER_API)
    __atomic_add_fetch(&driver_calls, 1, __ATOMIC_RELAXED);
  else
    __atomic_add_fetch(&runtime_calls, 1, __ATOMIC_RELAXED);
  if (cb && is_launch(d, id)) {
    if (cb->callbackSite == CUPTI_API_ENTER) {
      if (depth++ == 0) entered = mono_ns();
    } else if (depth > 0 && --depth == 0) {
      __atomic_add_fetch(&call_ns, mono_ns() - entered, __ATOMIC_RELAXED);
      __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    }
  }
}

static const CUpti_CallbackId DRIVER_LAUNCHES[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
};
static const CUpti_CallbackId RUNTIME_LAUNCHES[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
};
static const CUpti_CallbackId RUNTIME_COPIES[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
};
static const CUpti_CallbackId DRIVER_COPIES[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemcpy, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static int is_launch(CUpti_CallbackDomain d, CUpti_CallbackId id) {
  const CUpti_CallbackId *l = d == CUPTI_CB_DOMAIN_DRIVER_API ? DRIVER_LAUNCHES : RUNTIME_LAUNCHES;
  size_t n = d == CUPTI_CB_DOMAIN_DRIVER_API ? N(DRIVER_LAUNCHES) : N(RUNTIME_LAUNCHES);
  if (d != CUPTI_CB_DOMAIN_DRIVER_API && d != CUPTI_CB_DOMAIN_RUNTIME_API) return 0;
  for (size_t i = 0; i < n; i++)
    if (l[i] == id) return 1;
  return 0;
}

/* The launch calls timed since floor_start: their summed time, ns, and
 * how many. */
void floor_calls(uint64_t *out_ns, uint64_t *out_calls) {
  *out_ns = call_ns;
  *out_calls = calls;
}
#define CHECK(call)                                                   \
  do {                                                                \
    CUptiResult r_ = (call);                                          \
    if (r_ != CUPTI_SUCCESS) {                                        \
      const char *s_ = "?";                                           \
      cuptiGetResultString(r_, &s_);                                  \
      fprintf(stderr, "cupti_floor: %s: %s\n", #call, s_);            \
      return -1;                                                      \
    }                                                                 \
  } while (0)

static const CUpti_ActivityKind KINDS[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                           CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};

int floor_start(unsigned kinds, unsigned callbacks) {
  records = driver_calls = runtime_calls = call_ns = calls = 0;
  for (size_t i = 0; i < IDS; i++) census[0][i] = census[1][i] = 0;
  if (callbacks) {
    CHECK(cuptiSubscribe(&sub, on_api, NULL));
    subscribed = 1;
    for (size_t i = 0; (callbacks & 1) && i < N(DRIVER_LAUNCHES); i++)
      cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, DRIVER_LAUNCHES[i]);
    for (size_t i = 0; (callbacks & 2) && i < N(RUNTIME_LAUNCHES); i++)
      cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, RUNTIME_LAUNCHES[i]);
    for (size_t i = 0; (callbacks & 4) && i < N(RUNTIME_COPIES); i++)
      cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, RUNTIME_COPIES[i]);
    for (size_t i = 0; (callbacks & 4) && i < N(DRIVER_COPIES); i++)
      cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, DRIVER_COPIES[i]);
    if (callbacks & 8) {
      CHECK(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API));
      CHECK(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API));
    }
  }
  CHECK(cuptiActivityRegisterCallbacks(requested, completed));
  kinds_on = kinds;
  for (size_t i = 0; i < N(KINDS); i++)
    if (kinds & (1u << i)) CHECK(cuptiActivityEnable(KINDS[i]));
  return 0;
}

/* Switches the enabled activity kinds to `kinds`; CUPTI stays attached. */
int floor_kinds(unsigned kinds) {
  for (size_t i = 0; i < N(KINDS); i++)
    if ((kinds & (1u << i)) && !(kinds_on & (1u << i))) CHECK(cuptiActivityEnable(KINDS[i]));
  for (size_t i = 0; i < N(KINDS); i++)
    if (!(kinds & (1u << i)) && (kinds_on & (1u << i))) CHECK(cuptiActivityDisable(KINDS[i]));
  kinds_on = kinds;
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  return 0;
}

/* Records counted, and API callbacks seen per domain. */
int floor_stop(uint64_t *out_records, uint64_t *out_driver, uint64_t *out_runtime) {
  if (subscribed) {
    cuptiEnableDomain(0, sub, CUPTI_CB_DOMAIN_DRIVER_API);
    cuptiEnableDomain(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
  }
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (size_t i = 0; i < N(KINDS); i++)
    if (kinds_on & (1u << i)) cuptiActivityDisable(KINDS[i]);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (subscribed) {
    cuptiUnsubscribe(sub);
    subscribed = 0;
  }
  cuptiFinalize();
  *out_records = records;
  *out_driver = driver_calls;
  *out_runtime = runtime_calls;
  return 0;
}

/* The calls counted by API (0 runtime, 1 driver): up to `n` (id, count)
 * pairs of the ids called, into `out`; returns how many. */
int floor_census(int api, uint64_t *out, int n) {
  int k = 0;
  for (size_t i = 0; i < IDS && k < n; i++)
    if (census[api & 1][i]) {
      out[2 * k] = i;
      out[2 * k + 1] = census[api & 1][i];
      k++;
    }
  return k;
}

/* The name of callback id `id` of API `api` (0 runtime, 1 driver). */
const char *floor_name(int api, unsigned id) {
  const char *name = NULL;
  if (cuptiGetCallbackName(api ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, id, &name) != CUPTI_SUCCESS)
    return "?";
  return name;
}

/* gpuscope's calibration, step by step, to find which of its steps leaves
 * the program's launches costlier: `how` bit 1 runs it on a thread of its
 * own (else on the caller's), bit 2 launches an empty kernel (a PTX module
 * loaded here) 288 times before `kinds` are enabled, bit 4 288 times after,
 * bit 8 on the default stream (else on a non-blocking stream of its own).
 * With neither launch bit it only enables `kinds` (from its thread). The
 * caller's context must be current. Returns 0, or -1 on a CUDA error. */
static const char CAL_PTX[] =
    ".version 7.0\n.target sm_70\n.address_size 64\n\n.visible .entry floor_empty()\n{\n\tret;\n}\n";

struct cal {
  CUcontext ctx;
  unsigned how, kinds;
  int rc;
};

static int cal_launches(CUfunction f, CUstream s, int n) {
  for (int i = 0; i < n; i++)
    if (cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL) != CUDA_SUCCESS) return -1;
  return cuStreamSynchronize(s) == CUDA_SUCCESS ? 0 : -1;
}

static void *cal_run(void *p) {
  struct cal *c = p;
  c->rc = -1;
  if (cuCtxSetCurrent(c->ctx) != CUDA_SUCCESS) return NULL;
  CUmodule m = NULL;
  CUfunction f = NULL;
  CUstream s = NULL;
  if (c->how & 6) {
    if (cuModuleLoadData(&m, CAL_PTX) != CUDA_SUCCESS || cuModuleGetFunction(&f, m, "floor_empty") != CUDA_SUCCESS)
      return NULL;
    if (!(c->how & 8) && cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return NULL;
  }
  if ((c->how & 2) && cal_launches(f, s, 288)) return NULL;
  kinds_on = c->kinds;
  for (size_t i = 0; i < N(KINDS); i++)
    if (c->kinds & (1u << i)) cuptiActivityEnable(KINDS[i]);
  if ((c->how & 4) && cal_launches(f, s, 288)) return NULL;
  if (s) cuStreamDestroy(s);
  c->rc = 0;
  return NULL;
}

int floor_calibrate(unsigned how, unsigned kinds) {
  struct cal c = {NULL, how, kinds, -1};
  if (cuCtxGetCurrent(&c.ctx) != CUDA_SUCCESS || !c.ctx) return -1;
  if (how & 1) {
    pthread_t t;
    if (pthread_create(&t, NULL, cal_run, &c)) return -1;
    pthread_join(t, NULL);
  } else {
    cal_run(&c);
  }
  return c.rc;
}
