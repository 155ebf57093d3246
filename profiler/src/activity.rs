//! CUPTI activity records as gpuscope decodes them.

pub use crate::decode::{
    decode, record_size, Activity, DecodeError, KernelActivity, LayoutCursor, MemcpyActivity, MemsetActivity,
    RecordCursor, SyncActivity,
};
