//! Theoretical occupancy: how many warps of a kernel an SM can hold, and
//! which resource stops it holding more. A port of the rules of CUDA's
//! occupancy calculator (`cuda_occupancy.h`) for compute capability 7.0 and
//! newer, with one difference that matters: the SM's shared memory size is
//! the carveout the driver actually chose for the launch (the activity
//! record's `sharedMemoryExecuted`), and per-block limits use the opt-in
//! maximum, so kernels with over 48 KB of shared memory are computed, not
//! reported as 0%.

use crate::model::occupancy::{Limiter, Occupancy, SmLimits};

/// What a launch asks of an SM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LaunchShape {
    /// Threads per block.
    pub threads_per_block: u32,
    /// Registers per thread.
    pub registers_per_thread: u32,
    /// Static shared memory per block (bytes).
    pub static_smem: u32,
    /// Dynamic shared memory per block (bytes).
    pub dynamic_smem: u32,
    /// The shared memory carveout the driver set for this launch (bytes; 0
    /// when unknown).
    pub smem_carveout: u32,
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

/// The shared-memory sizes an SM can be configured to, smallest first.
fn carveouts_kb(l: &SmLimits) -> &'static [u32] {
    match (l.cc_major, l.cc_minor) {
        (7, 5) => &[32, 64],
        (7, _) => &[0, 8, 16, 32, 64, 96],
        (8, 0) | (8, 7) => &[0, 8, 16, 32, 64, 100, 132, 164],
        (8, _) => &[0, 8, 16, 32, 64, 100],
        _ => &[0, 8, 16, 32, 64, 100, 132, 164, 196, 228],
    }
}

/// Computes theoretical occupancy; `None` if the launch could not run
/// (a block larger than the device allows, registers or shared memory over
/// the per-block limits, or `l` holds no warp).
pub fn theoretical(l: &SmLimits, s: &LaunchShape) -> Option<Occupancy> {
    if s.threads_per_block == 0 || s.threads_per_block > l.max_threads_per_block {
        return None;
    }
    if l.warp_size == 0 || l.max_warps() == 0 {
        return None;
    }
    let warps_per_block = s.threads_per_block.div_ceil(l.warp_size);

    // Warps.
    let by_warps = l.max_warps() / warps_per_block;

    // Registers: allocated per warp in units of 256, warps placed per SM
    // sub-partition (4), each with a quarter of the register file.
    let by_regs = if s.registers_per_thread == 0 {
        u32::MAX
    } else {
        let per_warp = round_up(s.registers_per_thread as u64 * l.warp_size as u64, 256);
        let per_block = per_warp * warps_per_block as u64;
        let assumed = per_warp * round_up(warps_per_block as u64, 4);
        if per_block > l.regs_per_block as u64 || assumed > l.regs_per_block as u64 || s.registers_per_thread > 255 {
            return None;
        }
        let warps_per_subpartition = (l.regs_per_sm as u64 / 4) / per_warp;
        ((warps_per_subpartition * 4) / warps_per_block as u64) as u32
    };

    // Shared memory: static + dynamic + the driver's reserve, in 128-byte
    // units, against the carveout the driver chose.
    let per_block = round_up(s.static_smem as u64 + s.dynamic_smem as u64 + l.reserved_smem_per_block as u64, 128);
    if per_block > l.smem_per_block_optin as u64 + l.reserved_smem_per_block as u64 {
        return None;
    }
    let by_smem = if per_block == 0 {
        u32::MAX
    } else {
        // Unknown carveout: the calculator's default preference, the SM's
        // whole shared memory.
        let mut sm = if s.smem_carveout == 0 { l.smem_per_sm as u64 } else { s.smem_carveout as u64 };
        if sm < per_block {
            // Too small for one block: the driver would pick the next size up.
            sm = carveouts_kb(l)
                .iter()
                .map(|kb| *kb as u64 * 1024)
                .find(|&c| c >= per_block)
                .unwrap_or(l.smem_per_sm as u64);
        }
        (sm / per_block) as u32
    };

    let by_blocks = l.max_blocks_per_sm;
    let blocks = by_warps.min(by_regs).min(by_smem).min(by_blocks);
    // On a tie the fixed caps (warps, blocks per SM) are named first: a
    // resource that ties with them is not what to reduce.
    let limiter = if blocks == by_warps {
        Limiter::Warps
    } else if blocks == by_blocks {
        Limiter::Blocks
    } else if blocks == by_regs {
        Limiter::Registers
    } else {
        Limiter::SharedMemory
    };
    let warps = blocks * warps_per_block;
    Some(Occupancy {
        theoretical_pct: 100.0 * warps as f64 / l.max_warps() as f64,
        blocks_per_sm: blocks,
        warps_per_sm: warps,
        limiter,
        block_limit_warps: by_warps,
        block_limit_registers: by_regs,
        block_limit_shared_mem: by_smem,
        block_limit_blocks: by_blocks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occ(threads: u32, regs: u32, smem: u32, carveout: u32) -> Occupancy {
        let shape = LaunchShape {
            threads_per_block: threads,
            registers_per_thread: regs,
            static_smem: 0,
            dynamic_smem: smem,
            smem_carveout: carveout,
        };
        theoretical(&SmLimits::SM_90, &shape).unwrap()
    }

    // Values Nsight Compute printed for this kernel on an H200.
    #[test]
    fn matches_ncu_44_regs_256_threads() {
        let o = occ(256, 44, 0, 0);
        assert_eq!(o.theoretical_pct, 62.5);
        assert_eq!(o.blocks_per_sm, 5);
        assert_eq!(o.limiter, Limiter::Registers);
    }

    #[test]
    fn matches_ncu_168_regs_384_threads_214k_smem() {
        let o = occ(384, 168, 214 * 1024, 228 * 1024);
        assert_eq!(o.theoretical_pct, 18.75);
        assert_eq!(o.blocks_per_sm, 1);
    }

    #[test]
    fn over_48k_of_shared_memory_is_not_zero() {
        // Kineto's port reports 0% here; 64 KB + 1 KB reserve fits 3 per SM
        // in the 228 KB carveout.
        let o = occ(256, 32, 64 * 1024, 228 * 1024);
        assert_eq!(o.blocks_per_sm, 3);
        assert_eq!(o.limiter, Limiter::SharedMemory);
        assert_eq!(o.theoretical_pct, 3.0 * 8.0 / 64.0 * 100.0);
    }

    #[test]
    fn small_blocks_hit_the_block_limit() {
        // 32 KB carveout: shared memory (1 KB reserve per block) allows 32
        // blocks too; the tie names the blocks-per-SM cap.
        let o = occ(32, 16, 0, 32 * 1024);
        assert_eq!(o.block_limit_shared_mem, 32);
        assert_eq!(o.blocks_per_sm, 32);
        assert_eq!(o.limiter, Limiter::Blocks);
        assert_eq!(o.theoretical_pct, 50.0);
    }

    #[test]
    fn full_occupancy_names_warps() {
        let o = occ(1024, 32, 0, 0);
        assert_eq!(o.blocks_per_sm, 2);
        assert_eq!(o.theoretical_pct, 100.0);
        assert_eq!(o.limiter, Limiter::Warps);
    }

    #[test]
    fn carveout_limits_blocks_and_unknown_carveout_rounds_up() {
        // 8 KB + 1 KB per block: a 32 KB carveout holds 3, 228 KB holds 25.
        assert_eq!(occ(64, 16, 8 * 1024, 32 * 1024).blocks_per_sm, 3);
        assert_eq!(occ(64, 16, 8 * 1024, 228 * 1024).blocks_per_sm, 25);
        // Unknown carveout: the whole 228 KB, as CUDA's calculator assumes.
        assert_eq!(occ(64, 16, 8 * 1024, 0).blocks_per_sm, 25);
        // A carveout smaller than one block rounds up to the next size (16 KB).
        assert_eq!(occ(64, 16, 8 * 1024, 8 * 1024).blocks_per_sm, 1);
    }

    #[test]
    fn impossible_launches_have_no_occupancy() {
        let l = SmLimits::SM_90;
        let s = |t, r, d| LaunchShape {
            threads_per_block: t,
            registers_per_thread: r,
            dynamic_smem: d,
            ..Default::default()
        };
        assert!(theoretical(&l, &s(2048, 16, 0)).is_none());
        assert!(theoretical(&l, &s(1024, 128, 0)).is_none());
        assert!(theoretical(&l, &s(128, 16, 230 * 1024)).is_none());
        assert!(theoretical(&l, &s(0, 16, 0)).is_none());
    }

    #[test]
    fn limits_that_hold_no_warp_give_no_occupancy() {
        let shape = LaunchShape { threads_per_block: 256, registers_per_thread: 32, ..Default::default() };
        let no_warps = SmLimits { warp_size: 0, ..SmLimits::SM_90 };
        assert!(theoretical(&no_warps, &shape).is_none());
        let no_room = SmLimits { max_threads_per_sm: 16, ..SmLimits::SM_90 };
        assert!(theoretical(&no_room, &shape).is_none());
    }

    #[test]
    fn odd_thread_counts_round_up_to_whole_warps() {
        // 100 threads = 4 warps; 64/4 = 16 blocks by warps; 32 regs: 1024
        // per warp -> 16 warps per sub-partition -> 64 warps -> 16 blocks.
        let o = occ(100, 32, 0, 0);
        assert_eq!(o.block_limit_warps, 16);
        assert_eq!(o.block_limit_registers, 16);
        assert_eq!(o.theoretical_pct, 100.0);
    }
}
