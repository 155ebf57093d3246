/* Headers that cupti-sys binds: CUPTI activity and callback APIs (with the
 * NVTX and resource domains), range profiler, profiler host and target,
 * PM sampling, and the CUDA driver types they use. */
#include <cuda.h>
#include <cupti.h>
#include <cupti_range_profiler.h>
#include <cupti_profiler_host.h>
#include <cupti_target.h>
#include <cupti_profiler_target.h>
#include <cupti_pmsampling.h>
#include <generated_nvtx_meta.h>
