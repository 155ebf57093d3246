//! The quickstart workload, shared by `examples/quickstart.rs` and the GPU
//! tests (which check that the profiler saw exactly these launches).
//!
//! Phases, each in NVTX ranges under "quickstart": a vector add, the naive
//! three-kernel softmax against a fused one-kernel softmax (the classic
//! memory-bound case; the fused one caches a 64 KB row in shared memory), a
//! small tiled matmul, a burst of tiny launches, and a CUDA graph replay.

use cudarc::driver::{CudaContext, CudaFunction, DriverError, LaunchConfig, PushKernelArg};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The kernels, as PTX text (see kernels/gen-ptx.sh).
pub const PTX: &str = include_str!("kernels/kernels.ptx");

/// Launches per (NVTX path, kernel name), what the profiler must report.
pub type Expected = BTreeMap<(String, String), u64>;

/// Sizes of the run; `small()` for tests.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Elements of the vector add.
    pub n: usize,
    /// Softmax rows and columns.
    pub rows: usize,
    /// See `rows`.
    pub cols: usize,
    /// Matmul size.
    pub matmul_n: usize,
    /// Launches of the tiny kernel.
    pub tiny: usize,
    /// Repetitions of each phase.
    pub reps: usize,
}

impl Sizes {
    /// The demo's sizes.
    pub fn demo() -> Self {
        Sizes { n: 1 << 24, rows: 4096, cols: 16384, matmul_n: 1024, tiny: 2000, reps: 3 }
    }

    /// Quick, for tests (and for ncu, which replays every kernel). Rows stay
    /// 16384 floats long so the fused softmax still needs over 48 KB.
    #[allow(dead_code)]
    pub fn small() -> Self {
        Sizes { n: 1 << 20, rows: 256, cols: 16384, matmul_n: 256, tiny: 50, reps: 2 }
    }
}

struct Kernels {
    vector_add: CudaFunction,
    row_max: CudaFunction,
    exp_sum: CudaFunction,
    normalize: CudaFunction,
    fused: CudaFunction,
    matmul: CudaFunction,
    tiny: CudaFunction,
}

fn cfg(grid: u32, block: u32, smem: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: smem }
}

fn blocks(n: usize, b: usize) -> u32 {
    n.div_ceil(b) as u32
}

/// Runs the workload on device 0 and returns what it launched.
pub fn run(ctx: &Arc<CudaContext>, s: Sizes) -> Result<Expected, DriverError> {
    let stream = ctx.default_stream();
    let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(PTX))?;
    let k = Kernels {
        vector_add: module.load_function("vector_add")?,
        row_max: module.load_function("softmax_row_max")?,
        exp_sum: module.load_function("softmax_exp_sum")?,
        normalize: module.load_function("softmax_normalize")?,
        fused: module.load_function("softmax_fused")?,
        matmul: module.load_function("_Z12matmul_tiledILi16EEvPKfS1_Pfi")?,
        tiny: module.load_function("tiny")?,
    };
    let mut expected = Expected::new();
    let mut count = |path: &str, name: &str, n: usize| {
        *expected.entry((path.to_string(), name.to_string())).or_default() += n as u64;
    };
    let _all = gpuscope_nvtx::push("quickstart");

    {
        let _r = gpuscope_nvtx::push("vector_add");
        let a = stream.clone_htod(&vec![1.0f32; s.n])?;
        let b = stream.clone_htod(&vec![2.0f32; s.n])?;
        let mut c = stream.alloc_zeros::<f32>(s.n)?;
        let n = s.n as i32;
        for _ in 0..s.reps {
            let mut l = stream.launch_builder(&k.vector_add);
            l.arg(&a).arg(&b).arg(&mut c).arg(&n);
            // SAFETY: vector_add(const float*, const float*, float*, int).
            unsafe { l.launch(cfg(blocks(s.n, 256), 256, 0)) }?;
        }
        count("quickstart/vector_add", "vector_add", s.reps);
        let back = stream.clone_dtoh(&c)?;
        assert!(back.iter().all(|&v| v == 3.0), "vector_add computed a wrong sum");
    }

    {
        let _r = gpuscope_nvtx::push("softmax");
        let (rows, cols) = (s.rows, s.cols);
        let x: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 1000) as f32 / 250.0).collect();
        let x = stream.clone_htod(&x)?;
        let mut y_naive = stream.alloc_zeros::<f32>(rows * cols)?;
        let mut y_fused = stream.alloc_zeros::<f32>(rows * cols)?;
        let mut row_max = stream.alloc_zeros::<f32>(rows)?;
        let mut row_sum = stream.alloc_zeros::<f32>(rows)?;
        let (r32, c32) = (rows as i32, cols as i32);
        {
            let _n = gpuscope_nvtx::push("naive");
            for _ in 0..s.reps {
                let mut l = stream.launch_builder(&k.row_max);
                l.arg(&x).arg(&mut row_max).arg(&r32).arg(&c32);
                // SAFETY: softmax_row_max(const float*, float*, int, int).
                unsafe { l.launch(cfg(blocks(rows, 128), 128, 0)) }?;
                let mut l = stream.launch_builder(&k.exp_sum);
                l.arg(&x).arg(&row_max).arg(&mut y_naive).arg(&mut row_sum).arg(&r32).arg(&c32);
                // SAFETY: softmax_exp_sum(const float*, const float*, float*, float*, int, int).
                unsafe { l.launch(cfg(blocks(rows, 128), 128, 0)) }?;
                let mut l = stream.launch_builder(&k.normalize);
                l.arg(&mut y_naive).arg(&row_sum).arg(&r32).arg(&c32);
                // SAFETY: softmax_normalize(float*, const float*, int, int).
                unsafe { l.launch(cfg(blocks(rows * cols, 256), 256, 0)) }?;
            }
            for name in ["softmax_row_max", "softmax_exp_sum", "softmax_normalize"] {
                count("quickstart/softmax/naive", name, s.reps);
            }
        }
        {
            let _f = gpuscope_nvtx::push("fused");
            let threads = 256u32;
            let smem = (cols as u32 + threads) * 4;
            k.fused.set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem as i32,
            )?;
            for _ in 0..s.reps {
                let mut l = stream.launch_builder(&k.fused);
                l.arg(&x).arg(&mut y_fused).arg(&c32);
                // SAFETY: softmax_fused(const float*, float*, int) with
                // (cols + blockDim) floats of dynamic shared memory.
                unsafe { l.launch(cfg(rows as u32, threads, smem)) }?;
            }
            count("quickstart/softmax/fused", "softmax_fused", s.reps);
        }
        let a = stream.clone_dtoh(&y_naive)?;
        let b = stream.clone_dtoh(&y_fused)?;
        let worst = a.iter().zip(&b).map(|(p, q)| (p - q).abs()).fold(0.0f32, f32::max);
        assert!(worst < 1e-5, "naive and fused softmax disagree by {worst}");
    }

    {
        let _r = gpuscope_nvtx::push("matmul");
        let n = s.matmul_n;
        let a: Vec<f32> = (0..n * n).map(|i| (i % 13) as f32 * 0.5).collect();
        let b: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 * 0.25).collect();
        let da = stream.clone_htod(&a)?;
        let db = stream.clone_htod(&b)?;
        let mut dc = stream.alloc_zeros::<f32>(n * n)?;
        let n32 = n as i32;
        let tiles = n.div_ceil(16) as u32;
        let mm_cfg = LaunchConfig { grid_dim: (tiles, tiles, 1), block_dim: (16, 16, 1), shared_mem_bytes: 0 };
        for _ in 0..s.reps {
            let mut l = stream.launch_builder(&k.matmul);
            l.arg(&da).arg(&db).arg(&mut dc).arg(&n32);
            // SAFETY: matmul_tiled<16>(const float*, const float*, float*, int).
            unsafe { l.launch(mm_cfg) }?;
        }
        count("quickstart/matmul", "void matmul_tiled<16>(float const*, float const*, float*, int)", s.reps);
        let c = stream.clone_dtoh(&dc)?;
        for &(i, j) in &[(0, 0), (n / 2, n / 3), (n - 1, n - 1)] {
            let want: f32 = (0..n).map(|t| a[i * n + t] * b[t * n + j]).sum();
            assert!(
                (c[i * n + j] - want).abs() <= want.abs() * 1e-4 + 1e-3,
                "matmul[{i},{j}] = {} != {want}",
                c[i * n + j]
            );
        }
    }

    {
        let _r = gpuscope_nvtx::push("tiny burst");
        let mut counter = stream.alloc_zeros::<i32>(1)?;
        for _ in 0..s.tiny {
            let mut l = stream.launch_builder(&k.tiny);
            l.arg(&mut counter);
            // SAFETY: tiny(int*).
            unsafe { l.launch(cfg(1, 32, 0)) }?;
        }
        count("quickstart/tiny burst", "tiny", s.tiny);
        assert_eq!(stream.clone_dtoh(&counter)?[0], s.tiny as i32);
    }

    graph_phase(ctx, &k, s, &mut count)?;
    stream.synchronize()?;
    Ok(expected)
}

/// Captures three vector adds into a CUDA graph on a side stream, then
/// launches the graph twice inside "quickstart/graph replay".
fn graph_phase(
    ctx: &Arc<CudaContext>,
    k: &Kernels,
    s: Sizes,
    count: &mut impl FnMut(&str, &str, usize),
) -> Result<(), DriverError> {
    use cudarc::driver::sys::CUstreamCaptureMode;
    let stream = ctx.new_stream()?;
    let n = 1 << 16;
    let a = stream.clone_htod(&vec![1.0f32; n])?;
    let b = stream.clone_htod(&vec![1.0f32; n])?;
    let mut c = stream.alloc_zeros::<f32>(n)?;
    let n32 = n as i32;
    stream.synchronize()?;
    // cudarc makes streams wait on events of earlier uncaptured work, which
    // capture forbids; the stream was synchronised, so tracking can pause.
    // SAFETY: no other stream touches these buffers until the graph ran.
    unsafe { ctx.disable_event_tracking() };
    // Launches during capture are recorded into the graph, not run: they
    // are not kernels yet, and get no NVTX path of their own.
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    for _ in 0..3 {
        let mut l = stream.launch_builder(&k.vector_add);
        l.arg(&a).arg(&b).arg(&mut c).arg(&n32);
        // SAFETY: vector_add(const float*, const float*, float*, int).
        unsafe { l.launch(cfg(blocks(n, 256), 256, 0)) }?;
    }
    let graph = stream
        .end_capture(cudarc::driver::sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)?;
    let graph = graph.expect("capture produced a graph");
    // SAFETY: re-enabling what was disabled above.
    unsafe { ctx.enable_event_tracking() };
    {
        let _r = gpuscope_nvtx::push("graph replay");
        for _ in 0..s.reps.max(1) {
            graph.launch()?;
        }
        count("quickstart/graph replay", "vector_add", 3 * s.reps.max(1));
    }
    stream.synchronize()?;
    Ok(())
}
