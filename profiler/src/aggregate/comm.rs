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
