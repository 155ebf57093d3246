//! The aggregator fed an arbitrary stream of host events (pushes, pops,
//! launches, launches counted between trace windows, host waits and
//! copies) and CUPTI kernel records (any times, ids, streams, launch
//! shapes; the name pointer set to a real string, as CUPTI's always is),
//! then the report built and rendered. Nothing may panic: times out of
//! order, pops without pushes, kernels without launches and sums at u64's
//! edge included.
#![no_main]

use cupti_sys as sys;
use gpuscope::report::DeviceInfo;
use gpuscope::testing::{HostEvent, Replay};
use libfuzzer_sys::fuzz_target;

const NAMES: [&std::ffi::CStr; 3] = [c"gemm", c"_Z4tinyPi", c"elementwise"];

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
}

fn kernel(i: &mut Input) -> Vec<u8> {
    // SAFETY: an all-zero record is a valid value (integers, null pointers).
    let mut r: sys::CUpti_ActivityKernel10 = unsafe { std::mem::zeroed() };
    r.kind = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.name = NAMES[i.byte() as usize % NAMES.len()].as_ptr();
    r.correlationId = i.byte() as u32;
    r.start = i.u64();
    r.end = i.u64();
    r.streamId = i.byte() as u32;
    r.deviceId = i.byte() as u32 % 3;
    r.contextId = 1;
    (r.gridX, r.gridY, r.gridZ) = (i.u32() as i32, 1, 1);
    (r.blockX, r.blockY, r.blockZ) = (i.u32() as i32, 1, 1);
    r.registersPerThread = i.byte() as u16;
    r.dynamicSharedMemory = i.u32() as i32;
    r.sharedMemoryExecuted = i.u32();
    r.graphId = i.byte() as u32 % 2;
    // SAFETY: reading a plain-data record's bytes.
    unsafe { std::slice::from_raw_parts(&r as *const _ as *const u8, std::mem::size_of_val(&r)) }.to_vec()
}

fuzz_target!(|data: &[u8]| {
    let device = DeviceInfo {
        id: 0,
        name: "NVIDIA H100".into(),
        sm_count: 132,
        limits: gpuscope::occupancy::SmLimits::SM_90,
        clock_khz: Some(1_980_000),
        memory_clock_khz: None,
        memory_bus_bits: None,
    };
    let mut rp = Replay::new(vec![device], 16);
    let paths = [rp.path(&["step"]), rp.path(&["step", "forward"]), rp.path(&["other"])];
    let mut i = Input(data);
    let mut buffer = Vec::new();
    while !i.0.is_empty() {
        let op = i.byte();
        let small = |i: &mut Input| i.byte() as u64;
        match op % 10 {
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
                    profiled: false,
                    inherited: i.byte() % 2 == 0,
                    ts: i.u64(),
                    cost_ns: i.u64() as u32,
                    prev_call_ns: i.u64() as u32,
                };
                rp.host_event(e);
            }
            3 => rp.host_event(HostEvent::HostWait {
                start: i.u64(),
                end: i.u64(),
                instance: small(&mut i),
            }),
            4 => rp.host_event(HostEvent::HostCopy {
                start: i.u64(),
                end: i.u64(),
                correlation_id: i.byte() as u32,
                instance: small(&mut i),
            }),
            5 | 6 => buffer.extend(kernel(&mut i)),
            7 => rp.host_event(HostEvent::UntracedLaunches { path: paths[i.byte() as usize % 3], launches: i.u64() }),
            8 => rp.host_event(match i.byte() % 3 {
                0 => HostEvent::Calibrated { record_ns: i.u64() as u32, plain_ns: i.u64() as u32, traced_ns: i.u64() as u32 },
                1 => HostEvent::NotCalibrated { why: "fuzz".into() },
                _ => HostEvent::Forked { ts: i.u64() },
            }),
            _ => rp.buffer(&std::mem::take(&mut buffer)),
        }
    }
    rp.buffer(&buffer);
    let r = rp.finish(0, i.u64().max(1));
    let _ = (r.to_table(100), r.to_json(), r.to_openmetrics());
});
