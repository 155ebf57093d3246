//! Searches in a sorted deque that start at one end. The decoder's queues
//! of launches waiting for their kernels are sorted, take new entries near
//! the back and lose them near the front; a binary search over a million
//! entries (a decoder running behind) misses the cache a dozen times, where
//! galloping from the end the entry is near touches only that end's memory.

use std::collections::VecDeque;

/// What `d.partition_point(below)` returns (the first index whose element
/// is not `below`; `d` partitioned by it), searched from the front in
/// strides of 1, 2, 4, ... and then halving the last stride: about
/// 2 log2(i) probes for an answer `i`.
pub(crate) fn partition_point_from_front<T>(d: &VecDeque<T>, below: impl Fn(&T) -> bool) -> usize {
    let n = d.len();
    // Every index before `lo` is below.
    let (mut lo, mut hi) = (0, 1);
    while hi <= n && below(&d[hi - 1]) {
        lo = hi;
        hi *= 2;
    }
    bisect(d, lo, hi.min(n), below)
}

/// As [`partition_point_from_front`], searched from the back.
pub(crate) fn partition_point_from_back<T>(d: &VecDeque<T>, below: impl Fn(&T) -> bool) -> usize {
    let n = d.len();
    // No index from `hi` on is below.
    let (mut hi, mut step) = (n, 1);
    while step <= n && !below(&d[n - step]) {
        hi = n - step;
        step *= 2;
    }
    let lo = if step <= n { n - step + 1 } else { 0 };
    bisect(d, lo, hi, below)
}

/// The first index in `[lo, hi)` whose element is not `below`, or `hi`.
fn bisect<T>(d: &VecDeque<T>, mut lo: usize, mut hi: usize, below: impl Fn(&T) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(&d[mid]) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ends_find_what_partition_point_finds() {
        for n in 0..70u32 {
            let d: VecDeque<u32> = (0..n).map(|i| i * 2).collect();
            for key in 0..2 * n + 3 {
                let want = d.partition_point(|&x| x < key);
                assert_eq!(partition_point_from_front(&d, |&x| x < key), want, "front, n {n} key {key}");
                assert_eq!(partition_point_from_back(&d, |&x| x < key), want, "back, n {n} key {key}");
            }
        }
    }

    #[test]
    fn an_answer_near_the_front_touches_only_the_front() {
        let d: VecDeque<u64> = (0..1_000_000).collect();
        let probes = std::cell::Cell::new(0usize);
        let below = |&x: &u64| {
            probes.set(probes.get() + 1);
            x < 5
        };
        assert_eq!(partition_point_from_front(&d, below), 5);
        assert!(probes.get() <= 8, "{} probes", probes.get());
        probes.set(0);
        let above = |&x: &u64| {
            probes.set(probes.get() + 1);
            x < 999_990
        };
        assert_eq!(partition_point_from_back(&d, above), 999_990);
        assert!(probes.get() <= 10, "{} probes", probes.get());
    }
}
