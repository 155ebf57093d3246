//! Launches waiting for their kernel record, kept in correlation-id order.
//!
//! CUPTI numbers API calls in the order they are made, launch events reach
//! the decoder merged by time, and kernels of a stream finish in launch
//! order: launches join at the back and mostly leave near the front. A
//! sorted deque searched from the end an id is near walks memory in that
//! order, where a hash table of a million launches (a decoder a buffer pool
//! behind) missed the cache at every insert and removal.

use super::LaunchInfo;
use crate::sorted_deque::{partition_point_from_back, partition_point_from_front};
use std::collections::VecDeque;

/// Launches by correlation id, oldest first.
#[derive(Default)]
pub(super) struct Waiting {
    /// (id unwrapped to 64 bits, the launch; `None` once its kernel came),
    /// sorted by id. Removed entries stay until they reach the front.
    entries: VecDeque<(u64, Option<LaunchInfo>)>,
    /// Entries still waiting.
    live: usize,
    /// The latest id inserted and its unwrapped value.
    latest: Option<(u32, u64)>,
}

impl Waiting {
    /// `id` unwrapped near the latest id: CUPTI's 32-bit ids wrap after
    /// four billion calls, and an id within half the space before or after
    /// the latest one is that one's neighbour.
    fn unwrapped(&self, id: u32) -> u64 {
        match self.latest {
            // Starting a full id space up keeps ids just before the first
            // one above zero.
            None => u64::from(id) + (1 << 32),
            Some((last, key)) => {
                // Keys start at 2^32 and only grow; d is at least -2^31:
                // never below zero.
                let d = i64::from(id.wrapping_sub(last) as i32);
                (key as i64 + d) as u64
            }
        }
    }

    /// Launches still waiting.
    pub(super) fn len(&self) -> usize {
        self.live
    }

    /// Slots held: waiting launches and removed ones not yet at the front.
    pub(super) fn slots(&self) -> usize {
        self.entries.len()
    }

    /// Launch `id` waits for its kernel (in its place by id, near the back).
    pub(super) fn insert(&mut self, id: u32, info: LaunchInfo) {
        let key = self.unwrapped(id);
        if !self.latest.is_some_and(|(_, k)| key <= k) {
            self.latest = Some((id, key));
        }
        match self.entries.back() {
            Some(&(back, _)) if back >= key => {
                let i = partition_point_from_back(&self.entries, |e| e.0 < key);
                match self.entries.get_mut(i) {
                    Some(e) if e.0 == key => {
                        // An id seen again (a session's ids are unique): the
                        // later launch stands.
                        if e.1.replace(info).is_none() {
                            self.live += 1;
                        }
                    }
                    _ => {
                        self.entries.insert(i, (key, Some(info)));
                        self.live += 1;
                    }
                }
            }
            _ => {
                self.entries.push_back((key, Some(info)));
                self.live += 1;
            }
        }
    }

    /// The launch of `id`, no longer waiting.
    pub(super) fn remove(&mut self, id: u32) -> Option<LaunchInfo> {
        if self.entries.is_empty() {
            return None;
        }
        let key = self.unwrapped(id);
        // Kernels finish mostly in launch order: near the front.
        let i = partition_point_from_front(&self.entries, |e| e.0 < key);
        let info = self.entries.get_mut(i).filter(|e| e.0 == key)?.1.take()?;
        self.live -= 1;
        if i == 0 {
            self.trim();
        }
        Some(info)
    }

    /// Removed entries at the front, dropped.
    fn trim(&mut self) {
        while self.entries.front().is_some_and(|e| e.1.is_none()) {
            self.entries.pop_front();
        }
    }

    /// Forgets every launch `stale` says is, and the removed entries.
    pub(super) fn forget(&mut self, stale: impl Fn(&LaunchInfo) -> bool) {
        self.entries.retain(|e| e.1.as_ref().is_some_and(|l| !stale(l)));
        self.live = self.entries.len();
    }

    /// Forgets the oldest `n` waiting launches (by id).
    pub(super) fn forget_oldest(&mut self, n: usize) {
        let mut left = n;
        while left > 0 {
            match self.entries.pop_front() {
                Some((_, Some(_))) => {
                    left -= 1;
                    self.live -= 1;
                }
                Some((_, None)) => {}
                None => break,
            }
        }
        self.trim();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ts: u64) -> LaunchInfo {
        LaunchInfo { ts, ..LaunchInfo::UNKNOWN }
    }

    #[test]
    fn launches_leave_in_any_order_and_removed_ones_go_once_at_the_front() {
        let mut w = Waiting::default();
        for id in [10, 11, 13, 12, 14] {
            w.insert(id, at(u64::from(id)));
        }
        assert_eq!(w.len(), 5);
        assert_eq!(w.remove(12).map(|l| l.ts), Some(12));
        assert_eq!(w.remove(12), None, "gone once taken");
        assert_eq!(w.remove(99), None, "never seen");
        assert_eq!(w.slots(), 5, "a removed entry in the middle stays");
        assert_eq!(w.remove(10).map(|l| l.ts), Some(10));
        assert_eq!(w.remove(11).map(|l| l.ts), Some(11));
        assert_eq!(w.slots(), 2, "the front trimmed through the removed 12");
        assert_eq!(w.len(), 2);
    }

    #[test]
    fn ids_that_wrap_around_stay_in_order() {
        let mut w = Waiting::default();
        for id in [u32::MAX - 1, u32::MAX, 0, 1] {
            w.insert(id, at(u64::from(id.wrapping_add(2))));
        }
        assert_eq!(w.remove(0).map(|l| l.ts), Some(2));
        assert_eq!(w.remove(u32::MAX - 1).map(|l| l.ts), Some(0));
        w.forget_oldest(1);
        assert_eq!(w.remove(u32::MAX), None, "the oldest left was u32::MAX");
        assert_eq!(w.remove(1).map(|l| l.ts), Some(3));
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn forgetting_keeps_only_what_is_not_stale_and_counts_right() {
        let mut w = Waiting::default();
        for id in 0..100u32 {
            w.insert(id, at(u64::from(id)));
        }
        w.remove(70);
        w.forget(|l| l.ts < 50);
        assert_eq!(w.len(), 49);
        assert_eq!(w.slots(), 49);
        w.forget_oldest(10);
        assert_eq!(w.len(), 39);
        assert_eq!(w.remove(59), None);
        assert_eq!(w.remove(60).map(|l| l.ts), Some(60));
    }

    #[test]
    fn a_launch_merged_late_goes_into_its_place() {
        let mut w = Waiting::default();
        for id in [5, 7, 9] {
            w.insert(id, at(u64::from(id)));
        }
        w.insert(6, at(6));
        w.insert(5, at(55));
        assert_eq!(w.len(), 4);
        assert_eq!(w.remove(5).map(|l| l.ts), Some(55), "the later launch of an id stands");
        assert_eq!(w.remove(6).map(|l| l.ts), Some(6));
        assert_eq!(w.slots(), 2);
    }
}
