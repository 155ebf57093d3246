//! The aggregator fed an arbitrary stream of host events (pushes, pops,
//! start/end ranges, launches measured or not, launches counted between
//! trace windows, host waits and copies, measured values) and CUPTI
//! records (kernels of any times, ids, devices, streams and launch shapes
//! in all three dimensions; copies and synchronisations of any times and
//! sizes; a kernel's name pointer set to a real string, as CUPTI's always
//! is), on a known device and one of arbitrary SM limits, then the report
//! built, analysed and rendered. Nothing may panic: times out of order,
//! pops without pushes, kernels without launches, sums at u64's edge and
//! products past it included.
#![no_main]

use cupti_sys as sys;
use gpuscope::occupancy::SmLimits;
use gpuscope::report::DeviceInfo;
use gpuscope::testing::{kernel_name, HostEvent, Replay};
use libfuzzer_sys::fuzz_target;

const NAMES: [&std::ffi::CStr; 4] = [c"gemm", c"_Z4tinyPi", c"elementwise", c"ncclDevKernel_AllReduce_Sum_f32_RING_LL"];

/// Reads little-endian integers off the input; zeros once it runs out.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |v, i| v | (self.byte() as u64) << (8 * i))
    }
    fn u32(&mut self) -> u32 {
        self.u64() as u32
    }
    fn i32(&mut self) -> i32 {
        self.u32() as i32
    }
    /// A device ordinal: mostly the two known ones, at times any.
    fn device(&mut self) -> u32 {
        match self.byte() % 4 {
            3 => self.u32(),
            d => d as u32,
        }
    }
}

/// A plain-data record's bytes.
fn bytes_of<T>(r: &T) -> Vec<u8> {
    // SAFETY: `r` is a plain-data CUPTI record of size_of::<T>() bytes.
    unsafe { std::slice::from_raw_parts(r as *const T as *const u8, std::mem::size_of::<T>()) }.to_vec()
}

fn kernel(i: &mut Input) -> Vec<u8> {
    // SAFETY: an all-zero record is a valid value (integers, null pointers).
    let mut r: sys::CUpti_ActivityKernel10 = unsafe { std::mem::zeroed() };
    r.kind = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.name = kernel_name(NAMES[i.byte() as usize % NAMES.len()]);
    r.correlationId = i.byte() as u32;
    r.start = i.u64();
    r.end = i.u64();
    r.streamId = i.byte() as u32;
    r.deviceId = i.device();
    r.contextId = 1;
    (r.gridX, r.gridY, r.gridZ) = (i.i32(), i.i32(), i.i32());
    (r.blockX, r.blockY, r.blockZ) = (i.i32(), i.i32(), i.i32());
    r.registersPerThread = i.u64() as u16;
    r.staticSharedMemory = i.i32();
    r.dynamicSharedMemory = i.i32();
    r.sharedMemoryExecuted = i.u32();
    r.graphId = i.byte() as u32 % 2;
    bytes_of(&r)
}

fn copy(i: &mut Input) -> Vec<u8> {
    match i.byte() % 3 {
        0 => {
            // SAFETY: as above.
            let mut r: sys::CUpti_ActivityMemcpy6 = unsafe { std::mem::zeroed() };
            r.kind = sys::CUPTI_ACTIVITY_KIND_MEMCPY;
            (r.copyKind, r.srcKind, r.dstKind) = (i.byte() % 12, i.byte() % 8, i.byte() % 8);
            (r.bytes, r.start, r.end) = (i.u64(), i.u64(), i.u64());
            (r.deviceId, r.streamId, r.correlationId) = (i.device(), i.byte() as u32, i.byte() as u32);
            bytes_of(&r)
        }
        1 => {
            // SAFETY: as above.
            let mut r: sys::CUpti_ActivityMemset4 = unsafe { std::mem::zeroed() };
            r.kind = sys::CUPTI_ACTIVITY_KIND_MEMSET;
            (r.bytes, r.start, r.end) = (i.u64(), i.u64(), i.u64());
            (r.deviceId, r.streamId, r.correlationId) = (i.device(), i.byte() as u32, i.byte() as u32);
            bytes_of(&r)
        }
        _ => {
            // SAFETY: as above.
            let mut r: sys::CUpti_ActivitySynchronization2 = unsafe { std::mem::zeroed() };
            r.kind = sys::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
            r.type_ = i.byte() as u32 % 6;
            (r.start, r.end) = (i.u64(), i.u64());
            (r.streamId, r.correlationId) = (i.byte() as u32, i.byte() as u32);
            bytes_of(&r)
        }
    }
}

fn device(id: u32, limits: SmLimits, sm_count: u32) -> DeviceInfo {
    let mut d = DeviceInfo::new(id, "NVIDIA H100", sm_count, limits);
    d.clock_khz = Some(1_980_000);
    d
}

fn float(i: &mut Input) -> f64 {
    f64::from_bits(i.u64())
}

fuzz_target!(|data: &[u8]| {
    let mut i = Input(data);
    // Device 1: SM limits of any values (a driver's, or a report's).
    let odd = SmLimits {
        cc_major: i.byte() as u32,
        cc_minor: i.byte() as u32,
        warp_size: i.u32(),
        max_threads_per_sm: i.u32(),
        max_blocks_per_sm: i.u32(),
        max_threads_per_block: i.u32(),
        regs_per_sm: i.u32(),
        regs_per_block: i.u32(),
        smem_per_sm: i.u32(),
        smem_per_block_optin: i.u32(),
        reserved_smem_per_block: i.u32(),
    };
    let devices = vec![device(0, SmLimits::SM_90, 132), device(1, odd, i.u32())];
    let metrics: Vec<String> = [
        gpuscope::metrics::DURATION,
        gpuscope::metrics::SM_EFFICIENCY,
        gpuscope::metrics::ACHIEVED_OCCUPANCY,
        "sm__inst_executed.sum",
    ]
    .map(String::from)
    .to_vec();
    // Metrics mode or not; when the session ends.
    let mut rp = if i.byte() % 2 == 0 { Replay::with_metrics(devices, 16, &metrics) } else { Replay::new(devices, 16) };
    let end_ns = i.u64().max(1);
    let paths = [rp.path(&["step"]), rp.path(&["step", "forward"]), rp.path(&["other"])];
    let mut buffer = Vec::new();
    while !i.0.is_empty() {
        let op = i.byte();
        let small = |i: &mut Input| i.byte() as u64;
        match op % 15 {
            0 => {
                let (instance, parent, path, tid, ts) =
                    (small(&mut i), small(&mut i), paths[i.byte() as usize % 3], i.byte() as u32, i.u64());
                rp.host_event(HostEvent::Push { instance, parent, path, tid, ts });
            }
            1 => rp.host_event(HostEvent::Pop { instance: small(&mut i), ts: i.u64() }),
            2 => {
                let e = HostEvent::Launch {
                    correlation_id: i.byte() as u32,
                    tid: i.byte() as u32,
                    path: paths[i.byte() as usize % 3],
                    instance: small(&mut i),
                    graph: i.byte() % 2 == 0,
                    profiled: i.byte() % 4 == 0,
                    inherited: i.byte() % 2 == 0,
                    ts: i.u64(),
                    cost_ns: i.u32(),
                    prev_call_ns: i.u32(),
                };
                rp.host_event(e);
            }
            3 => rp.host_event(match i.byte() % 2 {
                0 => HostEvent::HostWait {
                    start: i.u64(),
                    end: i.u64(),
                    instance: small(&mut i),
                    main: i.byte() % 2 == 0,
                },
                // An NCCL call's size, for the thread's next communication kernel.
                _ => HostEvent::CommMessage { tid: 1 + i.byte() as u32 % 2, bytes: i.u64(), ts: i.u64() },
            }),
            4 => rp.host_event(HostEvent::HostCopy {
                start: i.u64(),
                end: i.u64(),
                correlation_id: i.byte() as u32,
                instance: small(&mut i),
            }),
            5 | 6 => buffer.extend(kernel(&mut i)),
            7 => rp.host_event(HostEvent::UntracedLaunches {
                path: paths[i.byte() as usize % 3],
                instance: i.byte() as u64 % 4,
                launches: i.u64(),
                graphs: i.u64(),
                start: i.u64(),
                end: i.u64(),
            }),
            8 => rp.host_event(match i.byte() % 3 {
                0 => HostEvent::Calibrated { record_ns: i.u32(), plain_ns: i.u32(), traced_ns: i.u32() },
                1 => HostEvent::NotCalibrated { why: "fuzz".into() },
                _ => HostEvent::Forked { ts: i.u64() },
            }),
            9 => buffer.extend(copy(&mut i)),
            10 => {
                let correlation_id = i.byte() as u32;
                let values = (i.byte() % 4 != 0).then(|| (0..i.byte() % 6).map(|_| float(&mut i)).collect());
                rp.host_event(HostEvent::KernelMetrics { correlation_id, values });
            }
            11 => rp.host_event(match i.byte() % 3 {
                0 => HostEvent::Start { id: small(&mut i), path: paths[i.byte() as usize % 3], tid: 1, ts: i.u64() },
                1 => HostEvent::End { id: small(&mut i), ts: i.u64() },
                _ => HostEvent::Overhead { start: i.u64(), end: i.u64() },
            }),
            12 => rp.host_event(match i.byte() % 2 {
                // Launches logged between trace windows, of a few kernels.
                0 => HostEvent::LaunchLog {
                    lane: i.byte() as u32 % 3,
                    entries: (0..i.byte() % 32).map(|_| (i.u64(), small(&mut i) % 8)).collect(),
                },
                // Their names: library variants, or any bytes.
                _ => {
                    const NAMES: [&str; 4] = [
                        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_execute_kernel__5x_cublas",
                        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIlLlbNS0_16CompareEqFunctorIlEEEESt5arrayIPcLm3EEEEviT0_T1_",
                        "void at::native::unrolled_elementwise_kernel<at::native::BinaryFunctor<long, long, bool, at::native::CompareEqFunctor<long> >, 4>(int)",
                        "void at::native::(anonymous namespace)::CatArrayBatchedCopy_vectorized<OpaqueType<8u>, unsigned int, 2, 128, 1>()",
                    ];
                    let kernel = small(&mut i) % 8;
                    let name = match i.byte() % 5 {
                        4 => String::from_utf8_lossy(&(0..i.byte() % 64).map(|_| i.byte()).collect::<Vec<u8>>()).into_owned(),
                        k => NAMES[k as usize].to_string(),
                    };
                    HostEvent::KernelName { kernel, name }
                }
            }),
            _ => rp.buffer(&std::mem::take(&mut buffer)),
        }
    }
    rp.buffer(&buffer);
    let r = rp.finish(0, end_ns);
    let _ = gpuscope::analysis::analyze(&r);
    let _ = (r.to_table(100), r.to_json(), r.to_csv(), r.to_chrome_trace(), r.to_openmetrics());
});
