//! CUPTI activity records: the bounded buffer pool and record decoding.

pub mod pool;
pub mod record;

pub use record::{
    Activity, DecodeError, KernelActivity, LayoutCursor, MemcpyActivity, MemsetActivity, RecordCursor, SyncActivity,
};
