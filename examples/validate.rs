//! Validation workload for metrics mode: kernels whose SM efficiency and
//! achieved occupancy differ on purpose, in NVTX ranges, to compare
//! gpuscope with Nsight Compute launch by launch (bench/metrics/validate.sh).
//!
//!     validate --mode plain|trace|all|default [--out report.json] [--reps N]
//!              [--metrics SPEC] [--trace-records N] [--timeline]
//!
//! `plain` runs without gpuscope (for ncu, and as the timing baseline);
//! `trace` traces without metrics; `all` measures every launch; `default`
//! the first 3 of each kernel. `--metrics` takes `GPUSCOPE_METRICS` text;
//! `--trace-records` keeps that many per-launch records in the report
//! (default 100000, for the launch-by-launch join with ncu; 0 for timing
//! runs, as `Profiler::keep_trace` defaults to); `--timeline` prints when each
//! start-up step ended (ms since start).

use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use std::time::Instant;

const PTX: &str = include_str!("kernels/kernels.ptx");

fn cfg(grid: u32, block: u32, smem: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: smem }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let t0 = Instant::now();
    let args: Vec<String> = std::env::args().collect();
    // --timeline: when each start-up step ended, to line up with
    // GPUSCOPE_DEBUG's timestamps.
    let timeline = args.iter().any(|a| a == "--timeline");
    let step = |what: &str| {
        if timeline {
            eprintln!("validate[timeline] {:>9.3} ms: {what}", t0.elapsed().as_secs_f64() * 1e3);
        }
    };
    let arg = |k: &str| args.iter().position(|a| a == k).and_then(|i| args.get(i + 1)).cloned();
    let mode = arg("--mode").unwrap_or_else(|| "plain".into());
    let reps: usize = match arg("--reps").map(|r| r.parse()) {
        None => 3,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => return Err("--reps: a positive integer".into()),
    };
    let metrics = match arg("--metrics") {
        Some(spec) => gpuscope::MetricSet::parse(&spec)?,
        None => gpuscope::MetricSet::default(),
    };
    let keep: usize = match arg("--trace-records").map(|r| r.parse()) {
        None => 100_000,
        Some(Ok(n)) => n,
        Some(Err(_)) => return Err("--trace-records: a non-negative integer".into()),
    };
    let session = match mode.as_str() {
        "plain" => None,
        "trace" => Some(gpuscope::Profiler::new().keep_trace(keep).start()?),
        "all" | "default" => {
            let sel = if mode == "all" { gpuscope::Selection::all() } else { gpuscope::Selection::default() };
            Some(gpuscope::Profiler::new().keep_trace(keep).metrics(metrics).select(sel).start()?)
        }
        other => return Err(format!("--mode {other:?}: allowed plain, trace, all, default").into()),
    };

    step("session started");
    let ctx = CudaContext::new(0)?;
    step("context created");
    let sms = ctx.attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
    let clock_khz = ctx.attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as u64;
    let cycles = |us: u64| us * clock_khz / 1000;
    let stream = ctx.default_stream();
    let m = ctx.load_module(cudarc::nvrtc::Ptx::from_src(PTX))?;
    let f = |n: &str| m.load_function(n);
    let (one_block, tail, smem_limited, copy, fma, tiny) =
        (f("one_block_spin")?, f("tail_wave_spin")?, f("smem_limited")?, f("stream_copy")?, f("fma_loop")?, f("tiny")?);
    step("module loaded");
    use cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as MAX_DYN;
    let big_smem = 200 * 1024u32;
    let tail_smem = 120 * 1024u32;
    smem_limited.set_attribute(MAX_DYN, big_smem as i32)?;
    tail.set_attribute(MAX_DYN, tail_smem as i32)?;
    let n4 = 16usize << 20; // float4s: 256 MiB each way
    let src = stream.alloc_zeros::<f32>(n4 * 4)?;
    let mut dst = stream.alloc_zeros::<f32>(n4 * 4)?;
    let mut out = stream.alloc_zeros::<f32>((sms * 16 * 256) as usize)?;
    let mut counter = stream.alloc_zeros::<i32>(1)?;
    step("buffers allocated");
    let gemm_n = 2048usize;
    // SAFETY: only tries to dlopen libcublas; nothing is called.
    let blas = if unsafe { cudarc::cublas::sys::is_culib_present() } {
        Some(cudarc::cublas::CudaBlas::new(stream.clone())?)
    } else {
        eprintln!("validate: libcublas not found; the cuBLAS GEMM is skipped");
        None
    };
    step("cuBLAS ready");
    let ga = stream.clone_htod(&vec![0.5f32; gemm_n * gemm_n])?;
    let gb = stream.clone_htod(&vec![0.25f32; gemm_n * gemm_n])?;
    let mut gc = stream.alloc_zeros::<f32>(gemm_n * gemm_n)?;
    stream.synchronize()?;

    step("workload starts");
    let t = Instant::now();
    let _all = gpuscope_nvtx::push("validate");
    for rep in 0..reps {
        let _rep = gpuscope_nvtx::push(&format!("rep {rep}"));
        {
            let _r = gpuscope_nvtx::push("one block");
            let c = cycles(300);
            let mut l = stream.launch_builder(&one_block);
            l.arg(&c);
            // SAFETY: one_block_spin(u64).
            unsafe { l.launch(cfg(1, 128, 0)) }?;
        }
        {
            let _r = gpuscope_nvtx::push("smem limited");
            let (words, iters) = ((big_smem / 4) as i32, 4i32);
            let mut l = stream.launch_builder(&smem_limited);
            l.arg(&mut out).arg(&words).arg(&iters);
            // SAFETY: smem_limited(float*, int, int) with `words` floats of smem.
            unsafe { l.launch(cfg(sms, 256, big_smem)) }?;
        }
        {
            let _r = gpuscope_nvtx::push("stream copy");
            let n = n4 as u64;
            let mut l = stream.launch_builder(&copy);
            l.arg(&src).arg(&mut dst).arg(&n);
            // SAFETY: stream_copy(const float4*, float4*, u64); buffers hold n float4s.
            unsafe { l.launch(cfg(sms * 8, 256, 0)) }?;
        }
        {
            let _r = gpuscope_nvtx::push("fma loop");
            let iters = 4000i32;
            let mut l = stream.launch_builder(&fma);
            l.arg(&mut out).arg(&iters);
            // SAFETY: fma_loop(float*, int); out holds sms*16*256 floats.
            unsafe { l.launch(cfg(sms * 16, 256, 0)) }?;
        }
        {
            let _r = gpuscope_nvtx::push("tail wave");
            let c = cycles(40);
            let mut l = stream.launch_builder(&tail);
            l.arg(&c);
            // SAFETY: tail_wave_spin(u64) with tail_smem bytes of dynamic smem.
            unsafe { l.launch(cfg(2 * sms + 1, 256, tail_smem)) }?;
        }
        {
            let _r = gpuscope_nvtx::push("tiny launches");
            for _ in 0..100 {
                let mut l = stream.launch_builder(&tiny);
                l.arg(&mut counter);
                // SAFETY: tiny(int*).
                unsafe { l.launch(cfg(1, 32, 0)) }?;
            }
        }
        if let Some(blas) = &blas {
            use cudarc::cublas::{sys::cublasOperation_t::CUBLAS_OP_N, Gemm, GemmConfig};
            let _r = gpuscope_nvtx::push("cublas sgemm");
            let n = gemm_n as i32;
            let g = GemmConfig {
                transa: CUBLAS_OP_N,
                transb: CUBLAS_OP_N,
                m: n,
                n,
                k: n,
                alpha: 1.0f32,
                lda: n,
                ldb: n,
                beta: 0.0,
                ldc: n,
            };
            // SAFETY: all three matrices hold n*n floats.
            unsafe { blas.gemm(g, &ga, &gb, &mut gc) }?;
        }
    }
    stream.synchronize()?;
    drop(_all);
    let wall = t.elapsed();
    println!("validate --mode {mode}: workload {:.1} ms", wall.as_secs_f64() * 1e3);
    step("workload done");
    if let Some(s) = session {
        let r = s.stop()?;
        step("session stopped");
        eprintln!("{}", r.to_table(100));
        if let Some(path) = arg("--out") {
            r.write(&path, gpuscope::Format::Json)?;
        }
        step("report written");
    }
    Ok(())
}
