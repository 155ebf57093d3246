// Probe: how many auto ranges does CUPTI's range profiler (auto range, user
// replay, one pass) record for 5 launches? It found that CUPTI 12.9 records
// none unless a range is pushed after start (PUSH=1), where CUPTI 13 records 5
// either way (docs/contributing/cupti-findings.md, "CUPTI 12.9").
//
// Build and run on a GPU machine (CUPTI 12.9 from the nvidia-cuda-cupti-cu12 wheel in $C12):
//   nvcc -gencode arch=compute_90,code=sm_90 -I$C12/include scripts/cupti_auto_range_probe.cu \
//        -o probe12 -L$C12/lib -l:libcupti.so.12 -lcuda
//   LD_LIBRARY_PATH=$C12/lib ./probe12 before sync 1 cold        # 0 ranges on 12.9
//   PUSH=1 LD_LIBRARY_PATH=$C12/lib ./probe12 before sync 1 cold # 5 ranges
// Arguments: before|cb (start before the launches or in the first driver-API
// callback), sync|nosync (before stop), 1|0 (subscribe to callbacks),
// cold|warm (launch once before profiling). Environment: PUSH=1, CTX_CREATE=1
// (own context, not the primary), AVAIL=1 (counter availability image),
// MAXR=N (ranges in the counter data image, default 64).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_range_profiler.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define C(x) do { CUptiResult r_ = (x); if (r_ != CUPTI_SUCCESS) { const char* s; cuptiGetResultString(r_, &s); printf("FAIL %s: %s\n", #x, s); exit(1);} } while (0)

__global__ void k(int* p) { p[threadIdx.x] += 1; }

static CUpti_RangeProfiler_Object* obj;
static std::vector<uint8_t> image, config;
static int startInCallback = 0, started = 0;

static void start() {
  CUpti_RangeProfiler_Start_Params p = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
  p.pRangeProfilerObject = obj;
  C(cuptiRangeProfilerStart(&p));
  started = 1;
  if (getenv("PUSH")) {
    CUpti_RangeProfiler_PushRange_Params pr = {CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
    pr.pRangeProfilerObject = obj; pr.pRangeName = "gpuscope";
    C(cuptiRangeProfilerPushRange(&pr));
  }
}

static void CUPTIAPI cb(void*, CUpti_CallbackDomain d, CUpti_CallbackId id, const void* data) {
  const CUpti_CallbackData* cd = (const CUpti_CallbackData*)data;
  if (d == CUPTI_CB_DOMAIN_DRIVER_API && cd->callbackSite == CUPTI_API_ENTER && startInCallback && !started) start();
}

int main(int argc, char** argv) {
  startInCallback = argc > 1 && !strcmp(argv[1], "cb");
  int sync = argc > 2 && !strcmp(argv[2], "sync");
  int subscribe = argc > 3 ? atoi(argv[3]) : 1;
  uint32_t v; cuptiGetVersion(&v); printf("CUPTI API %u, start %s, %s, subscribe %d\n", v, startInCallback ? "in launch callback" : "before launches", sync ? "sync before stop" : "no sync", subscribe);
  cuInit(0); CUdevice dev; cuDeviceGet(&dev, 0); CUcontext ctx; if (getenv("CTX_CREATE")) { cuCtxCreate(&ctx, (CUctxCreateParams*)0, 0, dev); } else { cuDevicePrimaryCtxRetain(&ctx, dev); } cuCtxSetCurrent(ctx);
  size_t maxr = getenv("MAXR") ? atoi(getenv("MAXR")) : 64;
  printf("ctx %s, maxr %zu, avail %s\n", getenv("CTX_CREATE") ? "created" : "primary", maxr, getenv("AVAIL") ? "yes" : "no");
  int* d; cudaMalloc(&d, 1024);
  int warm = argc > 4 && !strcmp(argv[4], "warm");
  if (warm) { k<<<4, 32>>>(d); cudaDeviceSynchronize(); printf("warm launch done\n"); }
  if (subscribe) {
    CUpti_SubscriberHandle sub; C(cuptiSubscribe(&sub, (CUpti_CallbackFunc)cb, NULL));
    C(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API));
  }
  CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE}; C(cuptiProfilerInitialize(&ip));
  CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE}; cn.deviceIndex = 0; C(cuptiDeviceGetChipName(&cn));
  const char* metrics[] = {"sm__ctas_launched.sum"};
  CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  std::vector<uint8_t> avail;
  if (getenv("AVAIL")) {
    CUpti_Profiler_GetCounterAvailability_Params ga = {CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE}; ga.ctx = ctx;
    C(cuptiProfilerGetCounterAvailability(&ga)); avail.resize(ga.counterAvailabilityImageSize); ga.pCounterAvailabilityImage = avail.data();
    C(cuptiProfilerGetCounterAvailability(&ga)); hi.pCounterAvailabilityImage = avail.data();
  }
  hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER; hi.pChipName = cn.pChipName; C(cuptiProfilerHostInitialize(&hi));
  CUpti_Profiler_Host_ConfigAddMetrics_Params am = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  am.pHostObject = hi.pHostObject; am.ppMetricNames = metrics; am.numMetrics = 1; C(cuptiProfilerHostConfigAddMetrics(&am));
  CUpti_Profiler_Host_GetConfigImageSize_Params cs = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
  cs.pHostObject = hi.pHostObject; C(cuptiProfilerHostGetConfigImageSize(&cs)); config.resize(cs.configImageSize);
  CUpti_Profiler_Host_GetConfigImage_Params ci = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  ci.pHostObject = hi.pHostObject; ci.pConfigImage = config.data(); ci.configImageSize = config.size(); C(cuptiProfilerHostGetConfigImage(&ci));
  CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE}; en.ctx = ctx; C(cuptiRangeProfilerEnable(&en)); obj = en.pRangeProfilerObject;
  CUpti_RangeProfiler_GetCounterDataSize_Params sz = {CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
  sz.pRangeProfilerObject = obj; sz.pMetricNames = metrics; sz.numMetrics = 1; sz.maxNumOfRanges = maxr; sz.maxNumRangeTreeNodes = maxr;
  C(cuptiRangeProfilerGetCounterDataSize(&sz)); image.resize(sz.counterDataSize);
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params ii = {CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
  ii.pRangeProfilerObject = obj; ii.pCounterData = image.data(); ii.counterDataSize = image.size(); C(cuptiRangeProfilerCounterDataImageInitialize(&ii));
  CUpti_RangeProfiler_SetConfig_Params sc = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
  sc.pRangeProfilerObject = obj; sc.configSize = config.size(); sc.pConfig = config.data(); sc.counterDataImageSize = image.size(); sc.pCounterDataImage = image.data();
  sc.range = CUPTI_AutoRange; sc.replayMode = CUPTI_UserReplay; sc.maxRangesPerPass = maxr; sc.numNestingLevels = 1; sc.minNestingLevel = 1; sc.passIndex = 0; sc.targetNestingLevel = 1;
  C(cuptiRangeProfilerSetConfig(&sc));
  if (!startInCallback) start();
  for (int i = 0; i < 5; i++) k<<<4, 32>>>(d);
  if (sync) cudaDeviceSynchronize();
  if (getenv("PUSH")) {
    CUpti_RangeProfiler_PopRange_Params pp = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
    pp.pRangeProfilerObject = obj; C(cuptiRangeProfilerPopRange(&pp));
  }
  CUpti_RangeProfiler_Stop_Params st = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE}; st.pRangeProfilerObject = obj; C(cuptiRangeProfilerStop(&st));
  CUpti_RangeProfiler_DecodeData_Params dd = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE}; dd.pRangeProfilerObject = obj; C(cuptiRangeProfilerDecodeData(&dd));
  CUpti_RangeProfiler_GetCounterDataInfo_Params gi = {CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
  gi.pCounterDataImage = image.data(); gi.counterDataImageSize = image.size(); C(cuptiRangeProfilerGetCounterDataInfo(&gi));
  for (size_t i = 0; i < gi.numTotalRanges; i++) {
    CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri = {CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
    ri.pCounterDataImage = image.data(); ri.counterDataImageSize = image.size(); ri.rangeIndex = i; ri.rangeDelimiter = "/";
    C(cuptiRangeProfilerCounterDataGetRangeInfo(&ri)); printf("range %zu: %s\n", i, ri.rangeName);
  }
  printf("RESULT 5 launches -> %zu ranges, %zu dropped, allPassSubmitted %d\n", gi.numTotalRanges, dd.numOfRangeDropped, st.isAllPassSubmitted);
  return 0;
}
