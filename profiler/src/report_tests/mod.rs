//! Tests of the report crate (`gpuscope-report`) on reports the runtime's
//! aggregator folded from activity records and host events: they need the
//! aggregator, so they live with it.

mod analysis;
mod devices;
mod job;
pub(crate) mod openmetrics;
mod sampled_answer;
mod steady;
mod steps;
mod windows;
