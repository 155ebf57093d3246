//! Copies, sets and host synchronisations.

use crate::decode::{MemcpyActivity, MemsetActivity, SyncActivity};
use std::collections::BTreeMap;

pub(crate) use gpuscope_report::aggregated::CopyAcc;

/// All memory operations and host waits.
#[derive(Debug, Default)]
pub(crate) struct MemoryAcc {
    /// By `CUpti_ActivityMemcpyKind`.
    pub memcpy: BTreeMap<u8, CopyAcc>,
    pub memset: CopyAcc,
    /// Host synchronisations: count, ns.
    pub syncs: (u64, u64),
    /// Of which on the process's main thread (`None`: none whose thread
    /// was known).
    pub main_syncs: Option<(u64, u64)>,
    /// Some synchronisation's thread was not known (synchronisation
    /// records): the main thread's share is not given.
    pub threads_unknown: bool,
}

/// The name of a `CUpti_ActivityMemcpyKind`.
pub(crate) fn copy_kind_name(k: u8) -> &'static str {
    match k as u32 {
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD => "HtoD",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH => "DtoH",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_DTOD => "DtoD",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_HTOH => "HtoH",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_PTOP => "PtoP",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_HTOA => "HtoA",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_ATOH => "AtoH",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_ATOA => "AtoA",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_ATOD => "AtoD",
        cupti_sys::CUPTI_ACTIVITY_MEMCPY_KIND_DTOA => "DtoA",
        _ => "unknown",
    }
}

/// Whether a copy reads or writes pageable host memory.
pub(crate) fn is_pageable(m: &MemcpyActivity) -> bool {
    let pageable = cupti_sys::CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE as u8;
    m.src_kind == pageable || m.dst_kind == pageable
}

impl MemoryAcc {
    pub(crate) fn copy(&mut self, m: &MemcpyActivity) {
        let acc = self.memcpy.entry(m.copy_kind).or_default();
        acc.count += 1;
        acc.bytes = acc.bytes.saturating_add(m.bytes);
        acc.ns = acc.ns.saturating_add(m.end.saturating_sub(m.start));
        if is_pageable(m) {
            acc.pageable += 1;
        }
    }

    pub(crate) fn set(&mut self, m: &MemsetActivity) {
        self.memset.count += 1;
        self.memset.bytes = self.memset.bytes.saturating_add(m.bytes);
        self.memset.ns = self.memset.ns.saturating_add(m.end.saturating_sub(m.start));
    }

    /// A synchronisation record (no thread).
    pub(crate) fn sync(&mut self, s: &SyncActivity) {
        self.wait(s.start, s.end, None);
    }

    /// A host wait from `start` to `end`; `main`: made on the process's
    /// main thread (`None`: not known).
    pub(crate) fn wait(&mut self, start: u64, end: u64, main: Option<bool>) {
        let ns = end.saturating_sub(start);
        self.syncs.0 += 1;
        self.syncs.1 = self.syncs.1.saturating_add(ns);
        match main {
            Some(true) => {
                let m = self.main_syncs.get_or_insert((0, 0));
                *m = (m.0 + 1, m.1.saturating_add(ns));
            }
            Some(false) => {
                self.main_syncs.get_or_insert((0, 0));
            }
            None => self.threads_unknown = true,
        }
    }
}
