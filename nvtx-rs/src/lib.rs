//! NVTX v3 in pure Rust.
//!
//! - Emitting: [`push`] returns a [`RangeGuard`] that pops on drop;
//!   [`Domain`]s, [`start_range`], [`mark`], registered strings and thread
//!   names. Calls follow the NVTX v3 loader protocol, so a tool named by
//!   `NVTX_INJECTION64_PATH` (Nsight Systems, gpuscope's shim) receives them,
//!   and with no tool each call costs two atomic loads.
//! - Receiving: [`tool`] is the tool side of the same protocol. Its
//!   [`tool::initialize_injection`] attaches to any NVTX copy; every push,
//!   pop, start, end and mark (core and domain functions, A/W/Ex variants)
//!   becomes a [`tool::Event`] for one [`tool::Handler`].
//!
//! ```
//! let _outer = gpuscope_nvtx::push("train step");
//! {
//!     let _inner = gpuscope_nvtx::push("forward");
//! } // "forward" pops here
//! ```

#![warn(missing_docs)]

mod emit;
pub mod loader;
pub mod sys;
pub mod tool;

pub use emit::{
    mark, name_current_thread, pop, push, push_c, push_with, start_range, Attributes, Domain, Payload, RangeGuard,
    RegisteredString, StartedRange,
};
