//! Decoding: the second stage. CUPTI activity records into plain Rust
//! values.
//!
//! Records are read with `read_unaligned` from the bindgen structs of
//! CUPTI 13 (`CUpti_ActivityKernel10`, `Memcpy6`, `Memset4`,
//! `Synchronization2`). CUPTI 12 writes the same but for kernels,
//! `CUpti_ActivityKernel9`: Kernel10 without its last field; collection
//! says which CUPTI is loaded ([`read_cupti_12_records`]). Walking a buffer is a [`RecordCursor`]'s job: CUPTI's
//! own `cuptiActivityGetNextRecord` in a session, [`LayoutCursor`] (which
//! knows these record sizes) for buffers built in tests.

use crate::collect::cupti::activity;
use cupti_sys as sys;
use std::ffi::c_char;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A kernel execution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelActivity {
    /// CUPTI's name string (owned by CUPTI, shared by records of a kernel).
    pub name: *const c_char,
    /// Start, ns on CUPTI's clock.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// Device ordinal.
    pub device: u32,
    /// Context id.
    pub context: u32,
    /// Stream id.
    pub stream: u32,
    /// Correlation id of the launching API call.
    pub correlation_id: u32,
    /// Grid dimensions.
    pub grid: [i32; 3],
    /// Block dimensions.
    pub block: [i32; 3],
    /// Cluster dimensions (0 when not a cluster launch).
    pub cluster: [u32; 3],
    /// Registers per thread.
    pub registers_per_thread: u16,
    /// Static shared memory per block, bytes.
    pub static_smem: i32,
    /// Dynamic shared memory per block, bytes.
    pub dynamic_smem: i32,
    /// Shared memory carveout the driver set for the launch, bytes.
    pub smem_executed: u32,
    /// Local memory per thread, bytes.
    pub local_mem_per_thread: u32,
    /// CUDA graph id (0: not from a graph).
    pub graph_id: u32,
    /// CUDA graph node id.
    pub graph_node_id: u64,
    /// Launched from the device (dynamic parallelism).
    pub device_launched: bool,
}

#[cfg(test)]
impl KernelActivity {
    /// A record of a 32-thread, one-block kernel, for unit tests.
    pub(crate) fn sample(correlation_id: u32, start: u64, end: u64) -> Self {
        KernelActivity {
            name: c"k".as_ptr(),
            start,
            end,
            device: 0,
            context: 1,
            stream: 7,
            correlation_id,
            grid: [1, 1, 1],
            block: [32, 1, 1],
            cluster: [0; 3],
            registers_per_thread: 8,
            static_smem: 0,
            dynamic_smem: 0,
            smem_executed: 0,
            local_mem_per_thread: 0,
            graph_id: 0,
            graph_node_id: 0,
            device_launched: false,
        }
    }
}

/// A memory copy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemcpyActivity {
    /// `CUpti_ActivityMemcpyKind`.
    pub copy_kind: u8,
    /// `CUpti_ActivityMemoryKind` of the source (1: pageable host).
    pub src_kind: u8,
    /// `CUpti_ActivityMemoryKind` of the destination.
    pub dst_kind: u8,
    /// Bytes copied.
    pub bytes: u64,
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// Device.
    pub device: u32,
    /// Context.
    pub context: u32,
    /// Stream.
    pub stream: u32,
    /// Correlation id.
    pub correlation_id: u32,
}

/// A memset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemsetActivity {
    /// Bytes set.
    pub bytes: u64,
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// Device.
    pub device: u32,
    /// Context.
    pub context: u32,
    /// Stream.
    pub stream: u32,
    /// Correlation id.
    pub correlation_id: u32,
}

/// A device memory allocation or release (`CUPTI_ACTIVITY_KIND_MEMORY2`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceMemoryActivity {
    /// An allocation (else a release).
    pub alloc: bool,
    /// `CUpti_ActivityMemoryKind` (device, pinned host, managed, ...).
    pub memory_kind: u8,
    /// Virtual address.
    pub address: u64,
    /// Bytes.
    pub bytes: u64,
    /// When, ns.
    pub ts: u64,
    /// Device.
    pub device: u32,
    /// Correlation id of the API call that made it.
    pub correlation_id: u32,
    /// From a stream-ordered memory pool (`cudaMallocAsync`).
    pub pool: bool,
    /// The file of the shared library whose call made it (CUPTI's string,
    /// null when allocation-source tracking is off or unsupported).
    pub source: *const c_char,
}

#[cfg(test)]
impl DeviceMemoryActivity {
    /// A device-memory allocation (or release) on device 0, made by no
    /// call seen and no library named, for unit tests.
    pub(crate) fn sample(alloc: bool, address: u64, bytes: u64, ts: u64) -> Self {
        DeviceMemoryActivity {
            alloc,
            memory_kind: sys::CUPTI_ACTIVITY_MEMORY_KIND_DEVICE as u8,
            address,
            bytes,
            ts,
            device: 0,
            correlation_id: 0,
            pool: false,
            source: std::ptr::null(),
        }
    }
}

/// A host-side wait (stream/event/context synchronize).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyncActivity {
    /// `CUpti_ActivitySynchronizationType`.
    pub sync_type: u32,
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// Context.
    pub context: u32,
    /// Stream (`u32::MAX` for context syncs).
    pub stream: u32,
    /// Correlation id.
    pub correlation_id: u32,
}

/// One decoded record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Activity {
    /// `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL` (or `KERNEL`).
    Kernel(KernelActivity),
    /// `CUPTI_ACTIVITY_KIND_MEMCPY`.
    Memcpy(MemcpyActivity),
    /// `CUPTI_ACTIVITY_KIND_MEMSET`.
    Memset(MemsetActivity),
    /// `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`.
    Sync(SyncActivity),
    /// `CUPTI_ACTIVITY_KIND_MEMORY2`.
    DeviceMemory(DeviceMemoryActivity),
    /// A kind gpuscope does not decode (counted, skipped).
    Other(u32),
}

/// Why a buffer could not be decoded to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The record at this offset runs past the valid bytes.
    Truncated {
        /// Offset of the record.
        offset: usize,
    },
    /// A kind whose size [`LayoutCursor`] does not know.
    UnknownKind {
        /// The kind.
        kind: u32,
        /// Offset of the record.
        offset: usize,
    },
    /// CUPTI's cursor failed with this code.
    Cupti(u32),
}

/// CUPTI 12's kernel record (`CUpti_ActivityKernel9`, CUPTI 12.9): CUPTI
/// 13's `CUpti_ActivityKernel10` up to `isDeviceLaunched` (offset 208).
pub const KERNEL9_SIZE: usize = 208;
const KERNEL10_SIZE: usize = std::mem::size_of::<sys::CUpti_ActivityKernel10>();

/// The kernel record size of the loaded CUPTI.
static KERNEL_SIZE: AtomicUsize = AtomicUsize::new(KERNEL10_SIZE);

/// Reads kernel records as CUPTI 12 writes them (`true`) or CUPTI 13
/// (`false`, the default). Set when CUPTI is loaded, before any record.
pub fn read_cupti_12_records(on: bool) {
    KERNEL_SIZE.store(if on { KERNEL9_SIZE } else { KERNEL10_SIZE }, Ordering::Relaxed);
}

/// The byte size of the records this crate decodes, by kind (kernels: of
/// the loaded CUPTI's version).
pub fn record_size(kind: u32) -> Option<usize> {
    record_size_with(kind, KERNEL_SIZE.load(Ordering::Relaxed))
}

fn record_size_with(kind: u32, kernel_size: usize) -> Option<usize> {
    Some(match kind {
        sys::CUPTI_ACTIVITY_KIND_KERNEL | sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => kernel_size,
        sys::CUPTI_ACTIVITY_KIND_MEMCPY => std::mem::size_of::<sys::CUpti_ActivityMemcpy6>(),
        sys::CUPTI_ACTIVITY_KIND_MEMSET => std::mem::size_of::<sys::CUpti_ActivityMemset4>(),
        sys::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION => std::mem::size_of::<sys::CUpti_ActivitySynchronization2>(),
        // The same record in CUPTI 12.9 and 13.
        sys::CUPTI_ACTIVITY_KIND_MEMORY2 => std::mem::size_of::<sys::CUpti_ActivityMemory4>(),
        _ => return None,
    })
}

/// Decodes the record at the start of `bytes`.
pub fn decode(bytes: &[u8]) -> Result<Activity, DecodeError> {
    decode_with(bytes, KERNEL_SIZE.load(Ordering::Relaxed))
}

fn decode_with(bytes: &[u8], kernel_size: usize) -> Result<Activity, DecodeError> {
    if bytes.len() < 4 {
        return Err(DecodeError::Truncated { offset: 0 });
    }
    let kind = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let Some(size) = record_size_with(kind, kernel_size) else {
        return Ok(Activity::Other(kind));
    };
    if bytes.len() < size {
        return Err(DecodeError::Truncated { offset: 0 });
    }
    let p = bytes.as_ptr();
    // The reads below are sound for one reason: `bytes` holds at least
    // `size` bytes, the size of the struct read; read_unaligned has no
    // alignment requirement; the structs are plain data (pointers are
    // copied, not dereferenced).
    Ok(match kind {
        sys::CUPTI_ACTIVITY_KIND_KERNEL | sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => {
            let r = if size >= KERNEL10_SIZE {
                // SAFETY: `bytes` holds at least size_of::<CUpti_ActivityKernel10>() bytes.
                unsafe { std::ptr::read_unaligned(p as *const sys::CUpti_ActivityKernel10) }
            } else {
                // A CUPTI 12 record is Kernel10's first `size` bytes; the
                // rest (isDeviceLaunched) reads as 0.
                let mut full = [0u8; KERNEL10_SIZE];
                full[..size].copy_from_slice(&bytes[..size]);
                // SAFETY: `full` holds size_of::<CUpti_ActivityKernel10>() bytes.
                unsafe { std::ptr::read_unaligned(full.as_ptr() as *const sys::CUpti_ActivityKernel10) }
            };
            Activity::Kernel(KernelActivity {
                name: r.name,
                start: r.start,
                end: r.end,
                device: r.deviceId,
                context: r.contextId,
                stream: r.streamId,
                correlation_id: r.correlationId,
                grid: [r.gridX, r.gridY, r.gridZ],
                block: [r.blockX, r.blockY, r.blockZ],
                cluster: [r.clusterX, r.clusterY, r.clusterZ],
                registers_per_thread: r.registersPerThread,
                static_smem: r.staticSharedMemory,
                dynamic_smem: r.dynamicSharedMemory,
                smem_executed: r.sharedMemoryExecuted,
                local_mem_per_thread: r.localMemoryPerThread,
                graph_id: r.graphId,
                graph_node_id: r.graphNodeId,
                device_launched: r.isDeviceLaunched != 0,
            })
        }
        sys::CUPTI_ACTIVITY_KIND_MEMCPY => {
            // SAFETY: `bytes` holds record_size(kind) = size_of::<CUpti_ActivityMemcpy6>() bytes.
            let r = unsafe { std::ptr::read_unaligned(p as *const sys::CUpti_ActivityMemcpy6) };
            Activity::Memcpy(MemcpyActivity {
                copy_kind: r.copyKind,
                src_kind: r.srcKind,
                dst_kind: r.dstKind,
                bytes: r.bytes,
                start: r.start,
                end: r.end,
                device: r.deviceId,
                context: r.contextId,
                stream: r.streamId,
                correlation_id: r.correlationId,
            })
        }
        sys::CUPTI_ACTIVITY_KIND_MEMSET => {
            // SAFETY: `bytes` holds record_size(kind) = size_of::<CUpti_ActivityMemset4>() bytes.
            let r = unsafe { std::ptr::read_unaligned(p as *const sys::CUpti_ActivityMemset4) };
            Activity::Memset(MemsetActivity {
                bytes: r.bytes,
                start: r.start,
                end: r.end,
                device: r.deviceId,
                context: r.contextId,
                stream: r.streamId,
                correlation_id: r.correlationId,
            })
        }
        sys::CUPTI_ACTIVITY_KIND_MEMORY2 => {
            // SAFETY: `bytes` holds record_size(kind) = size_of::<CUpti_ActivityMemory4>() bytes.
            let r = unsafe { std::ptr::read_unaligned(p as *const sys::CUpti_ActivityMemory4) };
            let pool_type = r.memoryPoolConfig.memoryPoolType;
            Activity::DeviceMemory(DeviceMemoryActivity {
                alloc: r.memoryOperationType == sys::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                memory_kind: r.memoryKind as u8,
                address: r.address,
                bytes: r.bytes,
                ts: r.timestamp,
                device: r.deviceId,
                correlation_id: r.correlationId,
                pool: pool_type == sys::CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL
                    || pool_type == sys::CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED,
                source: r.source,
            })
        }
        sys::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION => {
            // SAFETY: `bytes` holds record_size(kind) = size_of::<CUpti_ActivitySynchronization2>() bytes.
            let r = unsafe { std::ptr::read_unaligned(p as *const sys::CUpti_ActivitySynchronization2) };
            Activity::Sync(SyncActivity {
                sync_type: r.type_,
                start: r.start,
                end: r.end,
                context: r.contextId,
                stream: r.streamId,
                correlation_id: r.correlationId,
            })
        }
        _ => Activity::Other(kind),
    })
}

/// Walks the records of one completed buffer.
pub trait RecordCursor {
    /// The next record's bytes (from its start to the buffer's valid end),
    /// `Ok(None)` at the end.
    fn next_record(&mut self) -> Result<Option<&[u8]>, DecodeError>;
}

/// Walks a buffer by the record sizes of [`record_size`]: for buffers made in
/// tests, and as the reference for what CUPTI's cursor returns.
pub struct LayoutCursor<'a> {
    buf: &'a [u8],
    offset: usize,
}

impl<'a> LayoutCursor<'a> {
    /// A cursor over `buf`'s valid bytes.
    pub fn new(buf: &'a [u8]) -> Self {
        LayoutCursor { buf, offset: 0 }
    }
}

impl RecordCursor for LayoutCursor<'_> {
    fn next_record(&mut self) -> Result<Option<&[u8]>, DecodeError> {
        let rest = &self.buf[self.offset..];
        if rest.is_empty() {
            return Ok(None);
        }
        if rest.len() < 4 {
            return Err(DecodeError::Truncated { offset: self.offset });
        }
        let kind = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let Some(size) = record_size(kind) else {
            return Err(DecodeError::UnknownKind { kind, offset: self.offset });
        };
        if rest.len() < size {
            return Err(DecodeError::Truncated { offset: self.offset });
        }
        self.offset += size;
        Ok(Some(rest))
    }
}

/// CUPTI's `cuptiActivityGetNextRecord` over a completed buffer.
pub(crate) struct CuptiCursor<'a> {
    cupti: &'a sys::Cupti,
    buf: *mut u8,
    valid: usize,
    record: *mut sys::CUpti_Activity,
}

impl<'a> CuptiCursor<'a> {
    /// A cursor over the `valid` bytes of a buffer CUPTI completed.
    pub(crate) fn new(cupti: &'a sys::Cupti, buf: *mut u8, valid: usize) -> Self {
        CuptiCursor { cupti, buf, valid, record: std::ptr::null_mut() }
    }
}

impl RecordCursor for CuptiCursor<'_> {
    fn next_record(&mut self) -> Result<Option<&[u8]>, DecodeError> {
        // SAFETY: buf/valid are the buffer CUPTI completed; `record` is null
        // or the previous record, as the API requires.
        match unsafe { activity::next_record(self.cupti, self.buf, self.valid, &mut self.record) } {
            Ok(true) => {
                let off = self.record as usize - self.buf as usize;
                // SAFETY: CUPTI returned a record inside [buf, buf + valid).
                Ok(Some(unsafe { std::slice::from_raw_parts(self.record as *const u8, self.valid - off) }))
            }
            Ok(false) => Ok(None),
            // A missing function has no code.
            Err(e) => Err(DecodeError::Cupti(e.cupti_code().unwrap_or(u32::MAX))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CUPTI 13 kernel record's bytes.
    fn kernel10(correlation: u32, start: u64, device_launched: u8) -> Vec<u8> {
        // SAFETY: all-zero is a valid value of this plain-data struct.
        let mut r: sys::CUpti_ActivityKernel10 = unsafe { std::mem::zeroed() };
        r.kind = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        r.correlationId = correlation;
        (r.start, r.end) = (start, start + 100);
        r.isDeviceLaunched = device_launched;
        // SAFETY: the struct is plain data of KERNEL10_SIZE bytes.
        unsafe { std::slice::from_raw_parts(&r as *const _ as *const u8, KERNEL10_SIZE) }.to_vec()
    }

    #[test]
    fn cupti_12_kernel_records_are_kernel10_without_its_last_field() {
        assert_eq!(std::mem::offset_of!(sys::CUpti_ActivityKernel10, isDeviceLaunched), KERNEL9_SIZE);
        // Two CUPTI 12 records back to back: each is Kernel10's first 208
        // bytes; the last one ends the buffer.
        let mut buf = kernel10(1, 1_000, 1)[..KERNEL9_SIZE].to_vec();
        buf.extend_from_slice(&kernel10(2, 2_000, 1)[..KERNEL9_SIZE]);
        for (at, corr) in [(0, 1), (KERNEL9_SIZE, 2)] {
            match decode_with(&buf[at..], KERNEL9_SIZE).unwrap() {
                Activity::Kernel(k) => {
                    assert_eq!((k.correlation_id, k.end - k.start), (corr, 100));
                    assert!(!k.device_launched, "the field CUPTI 12 lacks reads as 0");
                }
                other => panic!("{other:?}"),
            }
        }
        // Read as CUPTI 13 records, the last one is cut short.
        assert!(matches!(decode_with(&buf[KERNEL9_SIZE..], KERNEL10_SIZE), Err(DecodeError::Truncated { .. })));
        assert_eq!(record_size_with(sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, KERNEL9_SIZE), Some(208));
    }
}
