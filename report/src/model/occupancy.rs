//! What theoretical occupancy is made of: an SM's limits, the resource
//! that binds, and the result. The calculator is `aggregate::occupancy`.

use serde::{Deserialize, Serialize};

/// An SM's limits, from the device's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmLimits {
    /// Compute capability major.
    pub cc_major: u32,
    /// Compute capability minor.
    pub cc_minor: u32,
    /// Threads per warp.
    pub warp_size: u32,
    /// Resident threads per SM (64 warps on Hopper).
    pub max_threads_per_sm: u32,
    /// Resident blocks per SM.
    pub max_blocks_per_sm: u32,
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// Registers one block may use.
    pub regs_per_block: u32,
    /// Shared memory per SM at the largest carveout (bytes).
    pub smem_per_sm: u32,
    /// Opt-in maximum shared memory per block (bytes).
    pub smem_per_block_optin: u32,
    /// Shared memory the driver reserves per block (bytes; 1 KB since Ampere).
    pub reserved_smem_per_block: u32,
}

impl SmLimits {
    /// Hopper (H100/H200, compute capability 9.0).
    pub const SM_90: SmLimits = SmLimits {
        cc_major: 9,
        cc_minor: 0,
        warp_size: 32,
        max_threads_per_sm: 2048,
        max_blocks_per_sm: 32,
        max_threads_per_block: 1024,
        regs_per_sm: 65536,
        regs_per_block: 65536,
        smem_per_sm: 233_472,
        smem_per_block_optin: 232_448,
        reserved_smem_per_block: 1024,
    };

    /// Warps an SM holds at most.
    pub fn max_warps(&self) -> u32 {
        self.max_threads_per_sm / self.warp_size
    }
}

/// The resource that caps the blocks an SM holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limiter {
    /// Warp slots (threads per SM).
    Warps,
    /// The register file.
    Registers,
    /// Shared memory.
    SharedMemory,
    /// The blocks-per-SM maximum.
    Blocks,
}

impl Limiter {
    /// A short name for tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Limiter::Warps => "warps",
            Limiter::Registers => "registers",
            Limiter::SharedMemory => "shared mem",
            Limiter::Blocks => "blocks",
        }
    }
}

/// Theoretical occupancy of one launch configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Occupancy {
    /// Active warps over the SM's maximum, in percent (ncu's
    /// `sm__maximum_warps_per_active_cycle_pct`).
    pub theoretical_pct: f64,
    /// Blocks an SM holds at once.
    pub blocks_per_sm: u32,
    /// Warps an SM holds at once.
    pub warps_per_sm: u32,
    /// The binding limit (the first of warps, blocks, registers, shared
    /// memory when several bind equally).
    pub limiter: Limiter,
    /// Blocks each resource would allow.
    pub block_limit_warps: u32,
    /// See `block_limit_warps`.
    pub block_limit_registers: u32,
    /// See `block_limit_warps`.
    pub block_limit_shared_mem: u32,
    /// See `block_limit_warps`.
    pub block_limit_blocks: u32,
}
