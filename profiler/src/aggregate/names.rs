//! Kernel names, interned: CUPTI's name string pointers (one per kernel per
//! module) to demangled names, each stored once.

use crate::model::comm::is_comm_kernel;
use crate::model::names::demangle;
use rustc_hash::FxHashMap;
use std::ffi::{c_char, CStr};

/// Demangled kernel names by id.
#[derive(Default)]
pub(crate) struct KernelNames {
    by_ptr: FxHashMap<usize, u32>,
    ids: FxHashMap<String, u32>,
    names: Vec<String>,
    /// Whether each is a communication kernel's, by id.
    comm: Vec<bool>,
}

impl KernelNames {
    /// The id of CUPTI's name string `p`.
    pub(crate) fn id(&mut self, p: *const c_char) -> u32 {
        if let Some(id) = self.by_ptr.get(&(p as usize)) {
            return *id;
        }
        let raw = if p.is_null() {
            "(unnamed kernel)".to_string()
        } else {
            // SAFETY: CUPTI's kernel name strings are NUL-terminated and live
            // until CUPTI is finalized, after the session's last record.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        };
        let name = demangle(&raw);
        let next = self.names.len() as u32;
        let id = *self.ids.entry(name.clone()).or_insert(next);
        if id == next {
            self.comm.push(is_comm_kernel(&name));
            self.names.push(name);
        }
        self.by_ptr.insert(p as usize, id);
        id
    }

    /// The demangled name of CUPTI's name string `p`.
    pub(crate) fn name(&mut self, p: *const c_char) -> &str {
        let id = self.id(p);
        &self.names[id as usize]
    }

    /// Whether an id is a communication kernel's.
    pub(crate) fn is_comm(&self, id: u32) -> bool {
        self.comm[id as usize]
    }

    /// The name of an id.
    pub(crate) fn get(&self, id: u32) -> &str {
        &self.names[id as usize]
    }
}
