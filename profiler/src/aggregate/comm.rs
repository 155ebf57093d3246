//! Exposed communication: the time communication kernels run with no
//! compute kernel of the same device under them.
//!
//! Per device, `exposed = |comm ∪ compute| - |compute|`, which is
//! `|union(comm) \ union(compute)|`, from three running interval unions
//! (any stream of the device counts: compute on one stream hides a
//! collective on another). Devices are kept apart: a kernel on one GPU
//! hides nothing on another. Each union is bounded ([`IntervalUnion`]) and
//! adding a kernel costs at most its bounded span count, so the cost stays
//! linear in kernels.

use super::interval::IntervalUnion;

/// One device's unions.
#[derive(Debug, Clone, Default)]
struct DeviceUnions {
    device: u32,
    /// Every kernel.
    all: IntervalUnion,
    /// Kernels other than communication.
    compute: IntervalUnion,
    /// Communication kernels.
    comm: IntervalUnion,
}

/// Communication and compute kernels of a range instance, per device.
#[derive(Debug, Clone, Default)]
pub(crate) struct CommOverlap {
    devices: Vec<DeviceUnions>,
}

/// Communication time, and the part of it exposed, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CommTime {
    /// Union of the communication kernels' time, summed over devices.
    pub comm_ns: u64,
    /// The part of it no compute kernel of the same device ran under.
    pub exposed_ns: u64,
}

impl CommOverlap {
    /// Starts from `compute`, kernels that already ran on `device`, none of
    /// them communication.
    pub(crate) fn seeded(device: u32, compute: &IntervalUnion) -> Self {
        let d = DeviceUnions { device, all: compute.clone(), compute: compute.clone(), comm: IntervalUnion::default() };
        CommOverlap { devices: vec![d] }
    }

    /// A kernel ran over `[start, end)` on `device`.
    pub(crate) fn add(&mut self, device: u32, start: u64, end: u64, comm: bool) {
        // A process drives one GPU or a few: a scan beats a map.
        let i = match self.devices.iter().position(|d| d.device == device) {
            Some(i) => i,
            None => {
                self.devices.push(DeviceUnions { device, ..Default::default() });
                self.devices.len() - 1
            }
        };
        let d = &mut self.devices[i];
        d.all.add(start, end);
        if comm {
            d.comm.add(start, end);
        } else {
            d.compute.add(start, end);
        }
    }

    /// Communication time and its exposed part, summed over devices.
    pub(crate) fn time(&self) -> CommTime {
        self.devices.iter().fold(CommTime::default(), |t, d| CommTime {
            comm_ns: t.comm_ns.saturating_add(d.comm.total()),
            exposed_ns: t.exposed_ns.saturating_add(d.all.total().saturating_sub(d.compute.total())),
        })
    }
}

pub(crate) use gpuscope_report::aggregated::Union;

/// The session's communication and its exposed part, over time: per
/// device, from its first communication kernel on, the three unions of
/// [`CommOverlap`], whose spans are handed out (to the session's time
/// bins) as they leave the bounded unions and at the end. In any stretch of
/// time, exposed communication is `All − Compute` of the spans in it.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionComm {
    devices: Vec<DeviceUnions>,
    /// Per device without communication yet: its latest compute kernels
    /// (at most [`RECENT`]), which may run under its first collective.
    before: Vec<(u32, Vec<(u64, u64)>)>,
}

/// Compute kernels kept per device before its first communication kernel.
const RECENT: usize = 8;

impl SessionComm {
    /// A kernel ran over `[start, end)` on `device`; `out` takes the spans
    /// that leave the unions.
    pub(crate) fn kernel(
        &mut self,
        device: u32,
        start: u64,
        end: u64,
        comm: bool,
        out: &mut impl FnMut(Union, u64, u64),
    ) {
        let mut hand = |u: Union, span: Option<(u64, u64)>| {
            if let Some((s, e)) = span {
                out(u, s, e);
            }
        };
        let i = match self.devices.iter().position(|d| d.device == device) {
            Some(i) => i,
            // Before a device's first communication kernel there is none to
            // expose: only its latest compute is kept.
            None if !comm => {
                let b = match self.before.iter().position(|(d, _)| *d == device) {
                    Some(b) => b,
                    None => {
                        self.before.push((device, Vec::with_capacity(RECENT)));
                        self.before.len() - 1
                    }
                };
                let recent = &mut self.before[b].1;
                if recent.len() == RECENT {
                    recent.remove(0);
                }
                recent.push((start, end));
                return;
            }
            None => {
                let mut d = DeviceUnions { device, ..Default::default() };
                if let Some(b) = self.before.iter().position(|(d, _)| *d == device) {
                    for (s, e) in self.before.swap_remove(b).1 {
                        hand(Union::All, d.all.add_folding(s, e));
                        hand(Union::Compute, d.compute.add_folding(s, e));
                    }
                }
                self.devices.push(d);
                self.devices.len() - 1
            }
        };
        let d = &mut self.devices[i];
        hand(Union::All, d.all.add_folding(start, end));
        if comm {
            hand(Union::Comm, d.comm.add_folding(start, end));
        } else {
            hand(Union::Compute, d.compute.add_folding(start, end));
        }
    }

    /// Hands out every span still held (at the end, or into a copy for a
    /// live report).
    pub(crate) fn drain(&mut self, out: &mut impl FnMut(Union, u64, u64)) {
        for d in &mut self.devices {
            for (u, spans) in [
                (Union::All, d.all.take_spans()),
                (Union::Compute, d.compute.take_spans()),
                (Union::Comm, d.comm.take_spans()),
            ] {
                for (s, e) in spans {
                    out(u, s, e);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernels as (device, start, end, comm), in the order given.
    fn time(kernels: &[(u32, u64, u64, bool)]) -> CommTime {
        let mut o = CommOverlap::default();
        for &(d, s, e, c) in kernels {
            o.add(d, s, e, c);
        }
        o.time()
    }

    #[test]
    fn communication_under_compute_of_any_stream_is_hidden() {
        // An all-reduce on its own stream, under back-to-back compute.
        let t = time(&[(0, 0, 40, false), (0, 40, 100, false), (0, 10, 90, true)]);
        assert_eq!(t, CommTime { comm_ns: 80, exposed_ns: 0 });
    }

    #[test]
    fn communication_past_the_compute_is_exposed() {
        // Compute [0, 50), all-reduce [30, 130): 80 ns exposed.
        let t = time(&[(0, 0, 50, false), (0, 30, 130, true)]);
        assert_eq!(t, CommTime { comm_ns: 100, exposed_ns: 80 });
        // No compute at all: all of it.
        assert_eq!(time(&[(0, 0, 10, true), (0, 20, 30, true)]), CommTime { comm_ns: 20, exposed_ns: 20 });
        // Compute with gaps under one collective: the gaps are exposed.
        let gaps = time(&[(0, 0, 100, true), (0, 10, 20, false), (0, 40, 70, false), (0, 90, 120, false)]);
        assert_eq!(gaps, CommTime { comm_ns: 100, exposed_ns: 10 + 20 + 20 });
    }

    #[test]
    fn overlapping_collectives_count_once_and_arrival_order_does_not_matter() {
        let kernels = [(0, 0, 60, true), (0, 40, 100, true), (0, 50, 70, false), (0, 90, 95, false)];
        let t = time(&kernels);
        assert_eq!(t, CommTime { comm_ns: 100, exposed_ns: 100 - 20 - 5 });
        let mut reversed = kernels;
        reversed.reverse();
        assert_eq!(time(&reversed), t);
    }

    #[test]
    fn devices_are_kept_apart() {
        // Device 1's compute runs while device 0's collective waits: it
        // hides nothing there.
        let t = time(&[(0, 0, 100, true), (1, 0, 100, false), (1, 50, 150, true)]);
        assert_eq!(t, CommTime { comm_ns: 200, exposed_ns: 100 + 50 });
    }

    #[test]
    fn a_seed_of_earlier_compute_hides_later_communication() {
        let mut compute = IntervalUnion::default();
        compute.add(0, 100);
        let mut o = CommOverlap::seeded(3, &compute);
        o.add(3, 80, 120, true);
        o.add(2, 80, 120, true);
        assert_eq!(o.time(), CommTime { comm_ns: 80, exposed_ns: 20 + 40 });
    }
}
