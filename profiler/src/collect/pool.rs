//! A bounded pool of activity buffers. CUPTI asks for a buffer on whatever
//! thread needs one; the pool hands out a recycled one, allocates while under
//! its cap, and otherwise refuses (CUPTI then drops records and counts them).

use crossbeam_queue::ArrayQueue;
use std::alloc::{alloc, dealloc, Layout};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// CUPTI requires 8-byte aligned buffers.
const ALIGN: usize = 8;

/// Fixed-size buffers, at most `max_buffers` of them alive.
pub struct BufferPool {
    size: usize,
    max_buffers: usize,
    allocated: AtomicUsize,
    free: ArrayQueue<usize>,
    refused: AtomicU64,
}

impl BufferPool {
    /// A pool of up to `max_buffers` buffers of `size` bytes (allocated on
    /// demand).
    pub fn new(size: usize, max_buffers: usize) -> Self {
        BufferPool {
            size,
            max_buffers,
            allocated: AtomicUsize::new(0),
            free: ArrayQueue::new(max_buffers.max(1)),
            refused: AtomicU64::new(0),
        }
    }

    /// Bytes per buffer.
    pub fn buffer_size(&self) -> usize {
        self.size
    }

    /// Bytes of the buffers allocated now, and at most.
    pub fn bytes(&self) -> (usize, usize) {
        (self.allocated() * self.size, self.max_buffers * self.size)
    }

    fn layout(&self) -> Layout {
        Layout::from_size_align(self.size, ALIGN).expect("buffer size checked by the builder")
    }

    /// A buffer, or `None` when all `max_buffers` are in use. Never blocks.
    pub fn take(&self) -> Option<*mut u8> {
        if let Some(p) = self.free.pop() {
            return Some(p as *mut u8);
        }
        let mut n = self.allocated.load(Ordering::Relaxed);
        loop {
            if n >= self.max_buffers {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            match self.allocated.compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break,
                Err(cur) => n = cur,
            }
        }
        // SAFETY: the layout has a non-zero size (checked by the builder).
        let p = unsafe { alloc(self.layout()) };
        if p.is_null() {
            self.allocated.fetch_sub(1, Ordering::AcqRel);
            self.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(p)
    }

    /// Returns a buffer from [`take`](Self::take).
    ///
    /// # Safety
    /// `p` came from `take` on this pool and is no longer used.
    pub unsafe fn give_back(&self, p: *mut u8) {
        if self.free.push(p as usize).is_err() {
            // Cannot happen: the queue holds max_buffers. Free rather than leak.
            // SAFETY: `p` came from `take` with this layout.
            unsafe { dealloc(p, self.layout()) };
            self.allocated.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Requests refused because every buffer was in use.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Buffers allocated now (held by CUPTI or waiting for the decoder).
    pub fn allocated(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        while let Some(p) = self.free.pop() {
            // SAFETY: every queued pointer came from `take` with this layout.
            unsafe { dealloc(p as *mut u8, self.layout()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_is_bounded_and_recycles() {
        let pool = BufferPool::new(1024, 2);
        assert_eq!(pool.bytes(), (0, 2048));
        let a = pool.take().unwrap();
        let b = pool.take().unwrap();
        assert_eq!(pool.bytes(), (2048, 2048));
        assert_eq!(a as usize % ALIGN, 0);
        assert!(pool.take().is_none());
        assert_eq!(pool.refused(), 1);
        // SAFETY: a and b came from this pool and are not used after.
        unsafe { pool.give_back(a) };
        assert_eq!(pool.take(), Some(a));
        // SAFETY: as above.
        unsafe {
            pool.give_back(a);
            pool.give_back(b);
        }
        assert_eq!(pool.allocated(), 2);
    }
}
