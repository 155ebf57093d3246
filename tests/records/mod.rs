//! CUPTI 13 activity records laid out as CUPTI writes them, for the CPU
//! tests that fold synthetic buffers into reports.
#![allow(dead_code)]

use cupti_sys as sys;
use gpuscope::occupancy::SmLimits;
use gpuscope::report::DeviceInfo;
use std::ffi::CStr;

pub fn h200() -> DeviceInfo {
    let mut d = DeviceInfo::new(0, "NVIDIA H200", 132, SmLimits::SM_90);
    d.clock_khz = Some(1_980_000);
    d.memory_clock_khz = Some(3_201_000);
    d.memory_bus_bits = Some(6144);
    d.memory_bytes = Some(150_754_820_096);
    d.uuid = Some("GPU-5c7a3f1e-2b9d-4e8a-9f10-7d6c5b4a3e21".into());
    d.nvlinks = Some(18);
    d.pcie = Some((5, 16));
    d
}

pub fn bytes_of<T: Copy>(v: &T) -> Vec<u8> {
    // SAFETY: T is a plain-data CUPTI record struct; reading its bytes is
    // what CUPTI's consumers do.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }.to_vec()
}

pub struct K {
    pub name: &'static CStr,
    pub corr: u32,
    pub start: u64,
    pub end: u64,
    pub block: i32,
    pub regs: u16,
    pub dyn_smem: i32,
    pub stream: u32,
}

pub fn kernel(k: &K) -> Vec<u8> {
    kernel_on(k, 0)
}

/// [`kernel`] on GPU `device`.
pub fn kernel_on(k: &K, device: u32) -> Vec<u8> {
    // SAFETY: an all-zero CUpti_ActivityKernel10 is a valid value (integers
    // and null pointers).
    let mut r: sys::CUpti_ActivityKernel10 = unsafe { std::mem::zeroed() };
    r.kind = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.name = gpuscope::testing::kernel_name(k.name);
    r.correlationId = k.corr;
    r.start = k.start;
    r.end = k.end;
    r.streamId = k.stream;
    r.deviceId = device;
    r.contextId = 1 + device;
    (r.gridX, r.gridY, r.gridZ) = (1024, 1, 1);
    (r.blockX, r.blockY, r.blockZ) = (k.block, 1, 1);
    r.registersPerThread = k.regs;
    r.dynamicSharedMemory = k.dyn_smem;
    r.sharedMemoryExecuted = 228 * 1024;
    bytes_of(&r)
}

pub fn memcpy(corr: u32, start: u64, end: u64, bytes: u64) -> Vec<u8> {
    // SAFETY: all-zero is a valid CUpti_ActivityMemcpy6.
    let mut r: sys::CUpti_ActivityMemcpy6 = unsafe { std::mem::zeroed() };
    r.kind = sys::CUPTI_ACTIVITY_KIND_MEMCPY;
    r.copyKind = sys::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD as u8;
    r.srcKind = sys::CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE as u8;
    r.dstKind = sys::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE as u8;
    r.bytes = bytes;
    r.start = start;
    r.end = end;
    r.correlationId = corr;
    bytes_of(&r)
}

pub fn memset(start: u64, end: u64) -> Vec<u8> {
    // SAFETY: all-zero is a valid CUpti_ActivityMemset4.
    let mut r: sys::CUpti_ActivityMemset4 = unsafe { std::mem::zeroed() };
    r.kind = sys::CUPTI_ACTIVITY_KIND_MEMSET;
    r.bytes = 4096;
    r.start = start;
    r.end = end;
    bytes_of(&r)
}

pub fn sync(start: u64, end: u64) -> Vec<u8> {
    // SAFETY: all-zero is a valid CUpti_ActivitySynchronization2.
    let mut r: sys::CUpti_ActivitySynchronization2 = unsafe { std::mem::zeroed() };
    r.kind = sys::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    r.start = start;
    r.end = end;
    bytes_of(&r)
}

/// A kernel record with a grid of `grid` blocks of `block` threads.
pub fn kernel_grid(name: &'static CStr, corr: u32, start: u64, end: u64, grid: i32, block: i32) -> Vec<u8> {
    kernel_shaped(name, corr, start, end, grid, block, 32, 0)
}

/// A host-to-device copy from pinned memory.
pub fn memcpy_pinned(corr: u32, start: u64, end: u64, bytes: u64) -> Vec<u8> {
    let mut b = memcpy(corr, start, end, bytes);
    let at = std::mem::offset_of!(sys::CUpti_ActivityMemcpy6, srcKind);
    b[at] = sys::CUPTI_ACTIVITY_MEMORY_KIND_PINNED as u8;
    b
}

/// A device memory allocation (`alloc`) or release record.
pub fn memory2(alloc: bool, address: u64, bytes: u64, ts: u64) -> Vec<u8> {
    // SAFETY: all-zero is a valid CUpti_ActivityMemory4.
    let mut r: sys::CUpti_ActivityMemory4 = unsafe { std::mem::zeroed() };
    r.kind = sys::CUPTI_ACTIVITY_KIND_MEMORY2;
    r.memoryOperationType = if alloc {
        sys::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
    } else {
        sys::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
    };
    r.memoryKind = sys::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    r.address = address;
    r.bytes = bytes;
    r.timestamp = ts;
    bytes_of(&r)
}

/// A kernel record with the launch shape and resources of a real launch:
/// `grid` blocks of `block` threads, `regs` registers a thread, `smem`
/// bytes of shared memory a block.
#[allow(clippy::too_many_arguments)]
pub fn kernel_shaped(
    name: &'static CStr,
    corr: u32,
    start: u64,
    end: u64,
    grid: i32,
    block: i32,
    regs: u16,
    smem: i32,
) -> Vec<u8> {
    // SAFETY: an all-zero CUpti_ActivityKernel10 is a valid value.
    let mut r: sys::CUpti_ActivityKernel10 = unsafe { std::mem::zeroed() };
    r.kind = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.name = gpuscope::testing::kernel_name(name);
    r.correlationId = corr;
    (r.start, r.end) = (start, end);
    r.streamId = 7;
    r.contextId = 1;
    (r.gridX, r.gridY, r.gridZ) = (grid, 1, 1);
    (r.blockX, r.blockY, r.blockZ) = (block, 1, 1);
    r.registersPerThread = regs;
    r.staticSharedMemory = smem;
    r.sharedMemoryExecuted = 228 * 1024;
    bytes_of(&r)
}
