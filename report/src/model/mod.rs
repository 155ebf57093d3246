//! Data that several pipeline stages share: NVTX paths, device and
//! occupancy descriptions, metric values, sampling's figures, the trace.
//! Plain types and small helpers.

pub mod comm;
pub mod declared;
pub mod device;
pub mod device_memory;
pub mod drops;
pub mod idle;
pub mod metrics;
pub mod names;
pub mod occupancy;
pub mod path;
pub mod profiler_cost;
pub mod sampled;
pub mod totals;
pub mod trace;
pub mod units;
