//! Data that several pipeline stages share. Most of it is the report's
//! (`gpuscope_report::model`: devices, occupancy, metric values, NVTX
//! paths as the report names them); the runtime adds the host events
//! collection hands on and the process's table of interned paths.

pub use gpuscope_report::model::{
    comm, declared, device, device_memory, drops, idle, metrics, names, occupancy, profiler_cost, sampled, trace,
};
pub mod event;
pub mod path;
