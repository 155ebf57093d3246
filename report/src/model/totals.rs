//! A range's totals: figures that add up from call to call (and so over
//! its steady calls too), measured by the aggregation and written to the
//! report's range rows under their own names. A new one is a line in
//! `totals!` here and the code that fills it; the report, its steady
//! calls, the JSON Schema and the JSON reference follow from this list
//! (`GPUSCOPE_BLESS=1 cargo test -p gpuscope --test report_schema` writes
//! the last two).

use serde::{Deserialize, Serialize};

/// Defines [`Totals`] from a list of documented field names.
macro_rules! totals {
    ($( $(#[doc = $doc:literal])+ $name:ident, )*) => {
        /// A range's totals (see the module): each a total over
        /// calls, ns or a count, left out of the JSON when zero.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[non_exhaustive]
        pub struct Totals {
            $(
                $(#[doc = $doc])+
                #[serde(default, skip_serializing_if = "is_zero")]
                pub $name: u64,
            )*
        }

        impl Totals {
            /// Each figure's JSON name and description (its doc comment).
            pub const FIGURES: &'static [(&'static str, &'static str)] =
                &[$((stringify!($name), concat!($($doc),+))),*];

            /// Each figure's name and value, in [`Totals::FIGURES`]' order.
            pub fn each(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$((stringify!($name), self.$name)),*].into_iter()
            }

            /// Each figure's name and a place to set it.
            pub fn each_mut(&mut self) -> impl Iterator<Item = (&'static str, &mut u64)> + '_ {
                [$((stringify!($name), &mut self.$name)),*].into_iter()
            }

            /// Figure by figure, saturating.
            pub fn saturating_add(self, o: Self) -> Self {
                Totals { $($name: self.$name.saturating_add(o.$name)),* }
            }

            /// Figure by figure, saturating at zero.
            pub fn saturating_sub(self, o: Self) -> Self {
                Totals { $($name: self.$name.saturating_sub(o.$name)),* }
            }
        }
    };
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

totals! {
    /// Communication kernels (NCCL's collectives and transfers) launched
    /// in its calls: the union of their time on each device, summed over
    /// devices, ns.
    comm_ns,
    /// The part of `comm_ns` with no compute kernel of the same device
    /// running (on any stream): communication the range waits for, ns.
    exposed_comm_ns,
    /// Its kernels' GPU time summed, not their union: more than
    /// `gpu_busy_ns` by the time its kernels ran at once (on several
    /// streams or GPUs), ns.
    kernel_ns,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_is_named_described_adds_and_is_left_out_at_zero() {
        let mut a = Totals::default();
        for (i, (_, v)) in a.each_mut().enumerate() {
            *v = 10 + i as u64;
        }
        let b = a.saturating_add(a);
        for ((name, x), (_, y)) in a.each().zip(b.each()) {
            assert_eq!(2 * x, y, "{name} adds");
        }
        assert_eq!(b.saturating_sub(a), a);
        assert_eq!(a.saturating_sub(b), Totals::default(), "saturates at zero");
        for (name, doc) in Totals::FIGURES {
            assert!(!doc.trim().is_empty(), "{name} has a description");
        }
        assert_eq!(serde_json::to_string(&Totals::default()).unwrap(), "{}", "zero figures are left out");
        let json = serde_json::to_value(a).unwrap();
        assert_eq!(json.as_object().unwrap().len(), Totals::FIGURES.len());
        assert_eq!(serde_json::from_value::<Totals>(json).unwrap(), a);
    }
}
