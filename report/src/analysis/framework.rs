//! Which framework launched the kernels, from what the report holds, so
//! that advice names that framework's switches and never another's: XLA's
//! NVTX domains mean JAX (or TensorFlow); ATen or Triton kernels mean
//! PyTorch; without kernel records, the framework libraries the process
//! loaded; anything else gets advice in CUDA's own terms.

use crate::report::Report;

/// Share of the wall time the launching threads must be off a CPU for the
/// host time to read as waiting: a PyTorch loop that never waited for its
/// loader had its threads off a CPU 14-25% of the time (GIL hand-offs with
/// the pin-memory thread, the allocator's locks).
pub(crate) const WAITED_SHARE: f64 = 1.0 / 3.0;

/// "N child processes were forked", in words.
fn forked(n: u64) -> String {
    if n == 1 {
        "1 child process was forked".into()
    } else {
        format!("{n} child processes were forked")
    }
}

/// What the launching threads' CPU time says of a steady state's host
/// time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct HostCpu {
    /// Their CPU time, summed over them, ns.
    pub cpu_ns: u64,
    /// Of it, gpuscope's own (callbacks and hooks), ns.
    pub own_ns: u64,
    /// Time they were off a CPU, outside CUDA calls that block, while the
    /// GPU idled, at least, ns
    /// ([`SessionSteady::launching_off_cpu_ns`](crate::report::SessionSteady::launching_off_cpu_ns)).
    pub off_idle_ns: u64,
    /// Time host threads were blocked in CUDA calls, ns.
    pub blocked_ns: u64,
    /// The steady state's wall time and the GPU's busy time in it, ns.
    pub wall_ns: u64,
    /// See `wall_ns`.
    pub busy_ns: u64,
    /// GPU idle time in it while the host ran code of its own, ns.
    pub host_idle_ns: u64,
}

impl HostCpu {
    fn pct(&self, ns: u64) -> f64 {
        (100.0 * ns as f64 / self.wall_ns.max(1) as f64).min(100.0)
    }

    fn waiting(&self, off_ns: u64) -> bool {
        off_ns.saturating_mul(2) >= self.host_idle_ns && off_ns as f64 >= WAITED_SHARE * self.wall_ns as f64
    }

    /// They waited off a CPU for at least half the GPU's idle time on the
    /// host and [`WAITED_SHARE`] of the wall time: the host time is mostly
    /// waiting, not code.
    pub(crate) fn waited(&self) -> bool {
        self.waiting(self.off_idle_ns)
    }

    /// Their host time was code: they did not wait even if their blocked
    /// time was spent spinning on a CPU (CUDA spins in a synchronisation
    /// where it has cores to spare) while the GPU worked, and their own CPU
    /// time, less that, covers half the GPU's idle time on the host.
    pub(crate) fn computed(&self) -> bool {
        let spun = self.blocked_ns.min(self.busy_ns);
        let own_code = self.cpu_ns.saturating_sub(self.own_ns).saturating_sub(self.blocked_ns);
        !self.waiting(self.off_idle_ns.saturating_add(spun)) && own_code.saturating_mul(2) >= self.host_idle_ns
    }
}

/// The framework behind a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framework {
    /// ATen's (`at::native::`) or torch.compile's (`triton_`) kernels ran.
    PyTorch,
    /// XLA's ranges (TSL, XLA or JAX NVTX domains) were seen.
    Xla,
    /// Neither: CUDA's own terms.
    Cuda,
}

impl Framework {
    /// The framework of `r`.
    pub(crate) fn of(r: &Report) -> Self {
        let xla = |d: &str| matches!(d, "TSL" | "XLA" | "JAX" | "TensorFlow");
        // Without kernel records, the libraries loaded say it.
        let loaded = |names: &[&str]| r.kernels.is_empty() && r.frameworks.iter().any(|f| names.contains(&f.as_str()));
        let aten = r.kernels.iter().any(|k| k.name.contains("at::native::") || k.name.starts_with("triton_"));
        if r.ranges.iter().any(|g| g.library.as_deref().is_some_and(xla)) {
            Framework::Xla
        } else if aten || loaded(&["torch"]) {
            Framework::PyTorch
        } else if loaded(&["jax", "tensorflow"]) {
            Framework::Xla
        } else {
            Framework::Cuda
        }
    }

    /// How to put a range around the step.
    pub(crate) fn nvtx_example(self) -> &'static str {
        match self {
            Framework::PyTorch => "torch.cuda.nvtx.range_push(\"step\")",
            Framework::Xla => "nvtx.annotate(\"step\") from the nvtx package",
            Framework::Cuda => "nvtxRangePushA(\"step\"), or the nvtx package in Python",
        }
    }

    /// What to change when the host ran code of its own and nothing says
    /// where (no ranges).
    /// `copies_batches`: the program copies batches to the GPU (data
    /// loading is part of its loop). `cpu`: what the launching threads'
    /// CPU time says of that host time, where it was read.
    pub(crate) fn host_work(self, forks: u64, copies_batches: bool, cpu: Option<HostCpu>) -> String {
        let annotate = format!("annotate the training step with NVTX ranges ({})", self.nvtx_example());
        if let Some(c) = cpu.filter(|c| c.waited() || c.computed()) {
            let off = format!(
                "The threads that launch kernels were off a CPU, outside CUDA calls that block, while the GPU idled \
                 for at least {:.0}% of the steady state",
                c.pct(c.off_idle_ns)
            );
            let on = format!(
                "The threads that launch kernels were on a CPU {:.0}% of the steady state (summed over them; blocked \
                 in CUDA calls {:.0}%)",
                c.pct(c.cpu_ns.saturating_sub(c.own_ns)),
                c.pct(c.blocked_ns)
            );
            return match (c.waited(), forks) {
                (true, 0) => format!(
                    "{off}: they waited for something else (input, a lock, I/O, another thread): {annotate} to see \
                     where, and prefetch input ahead of the step."
                ),
                (true, n) => format!(
                    "{off}, and {} (data-loader workers): the step most likely waits \
                     for data: add workers, make per-sample work cheaper, or keep workers busy ahead{}; {annotate}, \
                     with a data range around fetching the batch, to confirm.",
                    forked(n),
                    self.prefetch()
                ),
                // Batches copied in the loop with no worker forked: the
                // loading is likely that code.
                (false, 0) if copies_batches => format!(
                    "{on}: their own code between CUDA calls, and the loop copies batches to the GPU: keep {}; \
                     {annotate} to see where the rest goes.",
                    self.loading_off_thread()
                ),
                (false, _) => format!(
                    "{on}: mostly {} between CUDA calls: {}; to see where, sample their stacks with {}.",
                    self.host_code(),
                    self.less_host_code(),
                    self.host_profiler()
                ),
            };
        }
        self.host_work_unread(forks, copies_batches, &annotate)
    }

    /// [`Self::host_work`] where the CPU time says nothing.
    fn host_work_unread(self, forks: u64, copies_batches: bool, annotate: &str) -> String {
        match (self, forks) {
            (_, 0) if !copies_batches => format!(
                "The launching thread ran code of its own between CUDA calls: {annotate} to see where (or sample \
                 its stacks with {}), and keep logging and checkpoints off that thread.",
                self.host_profiler()
            ),
            (Framework::PyTorch, 0) => format!(
                "The launching thread ran code of its own between CUDA calls: {annotate} to see where, and keep data \
                 loading (DataLoader(num_workers>0)), logging and checkpoints off that thread."
            ),
            (Framework::PyTorch, n) => format!(
                "The launching thread ran code of its own between CUDA calls, and {} \
                 (data-loader workers already run): {annotate}, with a data range around fetching the batch, to \
                 see whether it waits for data or runs framework code.",
                forked(n)
            ),
            (_, 0) => format!(
                "The launching thread ran code of its own between CUDA calls: {annotate} to see where, and keep \
                 input loading (prefetched ahead of the step), logging and checkpoints off that thread."
            ),
            (_, n) => format!(
                "The launching thread ran code of its own between CUDA calls, and {}: \
                 {annotate}, with a data range around fetching the batch, to see whether it waits for data.",
                forked(n)
            ),
        }
    }

    /// Where a loop's input loading belongs.
    fn loading_off_thread(self) -> &'static str {
        match self {
            Framework::PyTorch => "data loading off that thread (DataLoader(num_workers>0))",
            _ => "input loading off that thread (prefetched ahead of the step)",
        }
    }

    /// How to keep loader workers ahead of the step.
    fn prefetch(self) -> &'static str {
        match self {
            Framework::PyTorch => " (persistent_workers=True, a larger prefetch_factor)",
            _ => "",
        }
    }

    /// What runs on the launching thread between CUDA calls.
    fn host_code(self) -> &'static str {
        match self {
            Framework::PyTorch | Framework::Xla => "the host's own code (Python and framework dispatch)",
            Framework::Cuda => "the program's own host code",
        }
    }

    /// How to run less host code per kernel.
    fn less_host_code(self) -> &'static str {
        match self {
            Framework::PyTorch => "compile the step (torch.compile) to run less Python per kernel",
            Framework::Xla => "put more of the step under one jax.jit",
            Framework::Cuda => "move work off the launching thread, or launch fewer, larger kernels",
        }
    }

    /// Profilers that show where host code spends its time.
    pub(crate) fn host_profiler(self) -> &'static str {
        match self {
            Framework::PyTorch | Framework::Xla => "py-spy, cProfile",
            Framework::Cuda => "perf, or py-spy for Python",
        }
    }

    /// How to pin host memory and copy without blocking.
    pub(crate) fn pinning(self) -> &'static str {
        match self {
            Framework::PyTorch => "DataLoader(pin_memory=True), tensor.pin_memory()) and copy with non_blocking=True",
            Framework::Xla => "hand jax.device_put batches ahead of the step so copies overlap compute)",
            Framework::Cuda => "cudaMallocHost or cudaHostRegister) and copy with cudaMemcpyAsync",
        }
    }

    /// The calls that make the host wait for the GPU, to take out of a step.
    pub(crate) fn sync_calls(self) -> &'static str {
        match self {
            Framework::PyTorch => "no .item(), .cpu() or torch.cuda.synchronize()",
            Framework::Xla => "no block_until_ready(), jax.device_get() or float() of a device array",
            Framework::Cuda => "no cudaDeviceSynchronize(), cudaStreamSynchronize() or blocking cudaMemcpy()",
        }
    }

    /// What to change when kernels wait on their launches.
    pub(crate) fn launch_overhead(self) -> &'static str {
        match self {
            Framework::PyTorch => {
                "Cut per-kernel launch overhead: capture the step in a CUDA graph \
                 (torch.compile(mode=\"reduce-overhead\"), torch.cuda.CUDAGraph) or fuse small kernels \
                 (torch.compile)."
            }
            Framework::Xla => {
                "Cut per-kernel launch overhead: put the whole step under one jax.jit so that XLA fuses it, or give \
                 each launch more work (a larger batch)."
            }
            Framework::Cuda => {
                "Cut per-kernel launch overhead: capture the repeated launches in a CUDA graph \
                 (cudaStreamBeginCapture, cudaGraphLaunch), fuse small kernels, or give each launch more work."
            }
        }
    }

    /// What to change when ranges wait on communication kernels.
    pub(crate) fn exposed_communication(self) -> &'static str {
        match self {
            Framework::PyTorch => {
                "Overlap communication with compute: with DDP, smaller gradient buckets (bucket_cap_mb) start \
                 all-reduces earlier in backward and gradient_as_bucket_view=True saves their copies; with FSDP, \
                 prefetch the next all-gather (forward_prefetch, backward_prefetch=BACKWARD_PRE). Fewer, larger \
                 collectives cost less than many small ones; if they stay slow, check the topology (nvidia-smi topo \
                 -m: NVLink between the GPUs, not PCIe) and NCCL_DEBUG=INFO's rings."
            }
            Framework::Xla => {
                "Overlap communication with compute: let XLA's latency-hiding scheduler run collectives under \
                 independent work (shard so the next layer's all-gather can start early), and prefer fewer, larger \
                 collectives; if they stay slow, check the topology (NVLink between the GPUs, not PCIe)."
            }
            Framework::Cuda => {
                "Overlap communication with compute: issue NCCL collectives on their own stream while independent \
                 kernels run, and group small ones (ncclGroupStart/End) into fewer, larger transfers; if they stay \
                 slow, check the topology (nvidia-smi topo -m: NVLink between the GPUs, not PCIe)."
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(off_idle_ns: u64, host_idle_ns: u64) -> HostCpu {
        HostCpu { cpu_ns: 0, own_ns: 0, off_idle_ns, blocked_ns: 0, wall_ns: 300, busy_ns: 0, host_idle_ns }
    }

    #[test]
    fn code_needs_cpu_time_that_is_not_a_spin_in_a_synchronisation() {
        // Busy 150 of 300, idle on the host 135; on a CPU 165, 150 of it
        // blocked in a synchronisation (spinning while the GPU worked).
        let spin = HostCpu { cpu_ns: 165, blocked_ns: 150, busy_ns: 150, ..cpu(0, 135) };
        assert!(!spin.waited() && !spin.computed(), "neither: the clocks cannot tell");
        // The same CPU time with nothing blocked: code.
        let code = HostCpu { blocked_ns: 0, ..spin };
        assert!(code.computed());
        // gpuscope's own time is no code of the program's.
        assert!(!HostCpu { own_ns: 120, ..code }.computed());
    }

    #[test]
    fn waiting_needs_half_the_host_idle_time_and_a_third_of_the_wall_time() {
        assert!(cpu(100, 200).waited());
        assert!(!cpu(100, 201).waited(), "a third of the wall time, short of half the host idle time");
        assert!(!cpu(99, 150).waited(), "half the host idle time, short of a third of the wall time");
        assert!(cpu(150, 300).waited());
        assert!(!cpu(149, 300).waited());
    }
}
