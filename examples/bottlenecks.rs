//! The bottleneck zoo: one NVTX range per way a GPU program is slow, each
//! made of real CUDA work (kernels from `kernels/kernels.ptx`, a cuBLAS
//! bf16 GEMM), with the verdict gpuscope must give it. Shared by
//! `examples/zoo.rs` and the GPU tests.

use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use std::sync::Arc;

/// The kernels, as PTX text (see kernels/gen-ptx.sh).
pub const PTX: &str = include_str!("kernels/kernels.ptx");

/// One case: its NVTX range and the verdict it must get from trace data
/// and from hardware counters (`None`: trace data decides it; counters
/// only add gpuscope's own measurement time to it).
pub struct Case {
    /// The range.
    pub range: &'static str,
    /// Verdict in trace mode.
    pub trace: &'static str,
    /// Verdict in metrics mode, for the cases counters decide.
    pub metrics: Option<&'static str>,
}

/// Every case, in the order the zoo runs them.
pub const CASES: &[Case] = &[
    // A large bf16 GEMM: tensor cores near their peak.
    Case { range: "zoo/compute-bound", trace: "gpu-bound", metrics: Some("compute-bound") },
    // A streaming copy: DRAM near its peak.
    Case { range: "zoo/memory-bound", trace: "gpu-bound", metrics: Some("memory-bound") },
    // One block spinning: "100% utilisation" on 1 SM of 132.
    Case { range: "zoo/one block", trace: "latency-bound", metrics: Some("latency-bound") },
    // 2 x SMs + 1 blocks of one block per SM: the third wave runs on 1 SM.
    Case { range: "zoo/tail wave", trace: "gpu-bound", metrics: Some("latency-bound") },
    // Thousands of tiny kernels: the GPU waits for each launch.
    Case { range: "zoo/launch-bound", trace: "launch-bound", metrics: None },
    // Short kernels between long host pauses (data loading, Python).
    Case { range: "zoo/host-bound", trace: "host-bound", metrics: None },
    // A kernel, then a synchronisation, over and over (`.item()` per step).
    Case { range: "zoo/sync-bound", trace: "sync-bound", metrics: None },
    // Copies from pageable host memory, which block the host.
    Case { range: "zoo/pageable copies", trace: "host-bound", metrics: None },
];

/// Sizes of the run.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// GEMM size (n x n x n) and calls.
    pub gemm_n: usize,
    /// See `gemm_n`.
    pub gemm_reps: usize,
    /// float4s copied per streaming copy.
    pub copy_float4s: usize,
    /// Repetitions of the spinning and copying kernels.
    pub reps: usize,
    /// Tiny launches of the launch-bound case.
    pub tiny: usize,
    /// Iterations of the host- and sync-bound loops.
    pub loops: usize,
}

impl Sizes {
    /// The demo's sizes (about a second on an H100).
    pub fn demo() -> Self {
        Sizes { gemm_n: 8192, gemm_reps: 10, copy_float4s: 32 << 20, reps: 6, tiny: 5000, loops: 300 }
    }
}

/// What the zoo did that a test checks against.
pub struct Ran {
    /// FLOPs of the GEMMs by hand: 2 n^3 per call.
    pub gemm_flops: f64,
}

fn cfg(grid: u32, block: u32, smem: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: smem }
}

/// Runs every case on device 0 inside its NVTX range.
pub fn run(ctx: &Arc<CudaContext>, s: Sizes) -> Result<Ran, Box<dyn std::error::Error>> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    let stream = ctx.default_stream();
    let m = ctx.load_module(cudarc::nvrtc::Ptx::from_src(PTX))?;
    let f = |n: &str| m.load_function(n);
    let (one_block, tail, copy, fma, tiny) =
        (f("one_block_spin")?, f("tail_wave_spin")?, f("stream_copy4")?, f("fma_loop")?, f("tiny")?);
    let sms = ctx.attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
    let clock_khz = ctx.attribute(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as u64;
    let cycles = |us: u64| us * clock_khz / 1000;
    let tail_smem = 120 * 1024u32;
    tail.set_attribute(
        cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        tail_smem as i32,
    )?;
    // Set up before the ranges: allocations and copies are not the cases.
    // SAFETY: only tries to dlopen libcublas; nothing is called.
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        return Err("libcublas not found: the compute-bound case needs it".into());
    }
    let blas = cudarc::cublas::CudaBlas::new(stream.clone())?;
    let n = s.gemm_n;
    let host: Vec<half::bf16> =
        (0..n * n).map(|i| half::bf16::from_f32(((i * 7919) % 255) as f32 / 255.0 - 0.5)).collect();
    let (ga, gb) = (stream.clone_htod(&host)?, stream.clone_htod(&host)?);
    let mut gc = stream.alloc_zeros::<half::bf16>(n * n)?;
    let src = stream.alloc_zeros::<f32>(s.copy_float4s * 4)?;
    let mut dst = stream.alloc_zeros::<f32>(s.copy_float4s * 4)?;
    let mut out = stream.alloc_zeros::<f32>((sms * 16 * 256) as usize)?;
    let mut counter = stream.alloc_zeros::<i32>(1)?;
    let pageable = vec![1.0f32; 16 << 20]; // 64 MiB
    let mut landing = stream.alloc_zeros::<f32>(pageable.len())?;
    use cudarc::cublas::{sys::cublasOperation_t::CUBLAS_OP_N, Gemm, GemmConfig};
    let d = n as i32;
    let g = GemmConfig {
        transa: CUBLAS_OP_N,
        transb: CUBLAS_OP_N,
        m: d,
        n: d,
        k: d,
        alpha: half::bf16::ONE,
        lda: d,
        ldb: d,
        beta: half::bf16::ZERO,
        ldc: d,
    };
    // cuBLAS picks its kernel at the first call: not part of the case.
    // SAFETY: all three matrices hold n*n bf16 values.
    unsafe { blas.gemm(g, &ga, &gb, &mut gc) }?;
    stream.synchronize()?;

    let _zoo = gpuscope_nvtx::push("zoo");
    {
        let _r = gpuscope_nvtx::push("compute-bound");
        for _ in 0..s.gemm_reps {
            // SAFETY: all three matrices hold n*n bf16 values.
            unsafe { blas.gemm(g, &ga, &gb, &mut gc) }?;
        }
        stream.synchronize()?;
    }
    {
        let _r = gpuscope_nvtx::push("memory-bound");
        let n4 = s.copy_float4s as u64;
        for _ in 0..s.reps {
            let mut l = stream.launch_builder(&copy);
            l.arg(&src).arg(&mut dst).arg(&n4);
            // SAFETY: stream_copy4(const float4*, float4*, u64); both hold n4 float4s.
            unsafe { l.launch(cfg(sms * 32, 256, 0)) }?;
        }
        stream.synchronize()?;
    }
    {
        let _r = gpuscope_nvtx::push("one block");
        let c = cycles(200);
        for _ in 0..s.reps {
            let mut l = stream.launch_builder(&one_block);
            l.arg(&c);
            // SAFETY: one_block_spin(u64).
            unsafe { l.launch(cfg(1, 128, 0)) }?;
        }
        stream.synchronize()?;
    }
    {
        let _r = gpuscope_nvtx::push("tail wave");
        let c = cycles(40);
        for _ in 0..s.reps {
            let mut l = stream.launch_builder(&tail);
            l.arg(&c);
            // SAFETY: tail_wave_spin(u64) with tail_smem bytes of dynamic smem.
            unsafe { l.launch(cfg(2 * sms + 1, 256, tail_smem)) }?;
        }
        stream.synchronize()?;
    }
    {
        let _r = gpuscope_nvtx::push("launch-bound");
        for _ in 0..s.tiny {
            let mut l = stream.launch_builder(&tiny);
            l.arg(&mut counter);
            // SAFETY: tiny(int*).
            unsafe { l.launch(cfg(1, 32, 0)) }?;
        }
        stream.synchronize()?;
    }
    {
        let _r = gpuscope_nvtx::push("host-bound");
        let iters = 1000i32;
        for _ in 0..s.loops / 10 {
            let mut l = stream.launch_builder(&fma);
            l.arg(&mut out).arg(&iters);
            // SAFETY: fma_loop(float*, int); out holds sms*16*256 floats.
            unsafe { l.launch(cfg(sms * 16, 256, 0)) }?;
            // The host prepares the next batch.
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        stream.synchronize()?;
    }
    {
        let _r = gpuscope_nvtx::push("sync-bound");
        for _ in 0..s.loops {
            let mut l = stream.launch_builder(&tiny);
            l.arg(&mut counter);
            // SAFETY: tiny(int*).
            unsafe { l.launch(cfg(1, 32, 0)) }?;
            // Reading a result back each step, as `.item()` does.
            stream.synchronize()?;
        }
    }
    {
        let _r = gpuscope_nvtx::push("pageable copies");
        for _ in 0..s.reps {
            stream.memcpy_htod(&pageable, &mut landing)?;
            let mut l = stream.launch_builder(&tiny);
            l.arg(&mut counter);
            // SAFETY: tiny(int*).
            unsafe { l.launch(cfg(1, 32, 0)) }?;
        }
        stream.synchronize()?;
    }
    drop(_zoo);
    let expected = (s.tiny + s.loops + s.reps) as i32;
    assert_eq!(stream.clone_dtoh(&counter)?[0], expected, "the tiny kernels ran");
    Ok(Ran { gemm_flops: 2.0 * (n as f64).powi(3) * s.gemm_reps as f64 })
}
