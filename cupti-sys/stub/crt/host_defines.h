/* Stand-in for CUDA's crt/host_defines.h (shipped with nvcc, not with the
 * runtime wheel): bindgen only needs these attribute macros to vanish. */
#pragma once
#define __host__
#define __device__
#define __global__
#define __shared__
#define __constant__
#define __managed__
#define __device_builtin__
#define __cudart_builtin__
#define __device_builtin_texture_type__
#define __device_builtin_surface_type__
#define __builtin_align__(a) __attribute__((aligned(a)))
#define __align__(a) __attribute__((aligned(a)))
#define __inline__ inline
#define __launch_bounds__(...)
#define CUDARTAPI
#define __dv(v)
