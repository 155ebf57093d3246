//! Communication kernels: collectives and point-to-point transfers that
//! NCCL (and RCCL, which keeps its names) runs as kernels on the GPU.
//!
//! A communication kernel's time is mostly waiting on the network or on
//! the other ranks, not work of its SMs: its occupancy and SM efficiency
//! say nothing about what to change, and what costs is the part of it no
//! compute kernel runs under (see the runtime aggregation's exposed
//! communication).

/// A collective (or point-to-point) operation, as its kernel's name gives
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Collective {
    /// `AllReduce`.
    AllReduce,
    /// `AllGather`.
    AllGather,
    /// `ReduceScatter`.
    ReduceScatter,
    /// `Broadcast`.
    Broadcast,
    /// `Reduce`.
    Reduce,
    /// `SendRecv`: NCCL's kernel for grouped sends and receives (also
    /// `AllToAll`, which PyTorch builds from them).
    SendRecv,
    /// `Send`.
    Send,
    /// `Recv`.
    Recv,
    /// A communication kernel whose name does not say (`ncclDevKernel_Generic`).
    Unknown,
}

impl Collective {
    /// The operation's name as NCCL spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Collective::AllReduce => "AllReduce",
            Collective::AllGather => "AllGather",
            Collective::ReduceScatter => "ReduceScatter",
            Collective::Broadcast => "Broadcast",
            Collective::Reduce => "Reduce",
            Collective::SendRecv => "SendRecv",
            Collective::Send => "Send",
            Collective::Recv => "Recv",
            Collective::Unknown => "communication",
        }
    }
}

impl Collective {
    /// Bytes a call of it moves by nccl-tests' definition of algorithm
    /// bandwidth, from its NCCL message size (what NCCL's NVTX payload
    /// gives: one rank's part for `AllGather` and `ReduceScatter`, the
    /// whole buffer for the rest) over `ranks` ranks.
    pub fn algorithm_bytes(self, message: u64, ranks: usize) -> u64 {
        match self {
            Collective::AllGather | Collective::ReduceScatter => message.saturating_mul(ranks as u64),
            _ => message,
        }
    }

    /// Bus bandwidth over algorithm bandwidth on `ranks` ranks, as
    /// nccl-tests defines them (the share of the data each rank's links
    /// carry, comparable to the links' peak): `2(n-1)/n` for `AllReduce`,
    /// `(n-1)/n` for `AllGather` and `ReduceScatter`, 1 for the rest.
    /// `None` for an operation the kernel's name did not give.
    pub fn bus_factor(self, ranks: usize) -> Option<f64> {
        let n = ranks.max(1) as f64;
        match self {
            Collective::AllReduce => Some(2.0 * (n - 1.0) / n),
            Collective::AllGather | Collective::ReduceScatter => Some((n - 1.0) / n),
            Collective::Unknown => None,
            _ => Some(1.0),
        }
    }
}

/// The message size of an NCCL call (`ncclAllReduce`, `ncclAllGather`,
/// ..., `ncclSend`; not `ncclRecv`: a group's sends and receives run in
/// one kernel, counted by what it sends), bytes, from the
/// extended payloads NCCL attaches to that range, given as (schema id,
/// blob). NCCL lays the payload out as a C struct whose "Message size
/// \[bytes\]" entry (a `size_t`) came first in earlier releases
/// (`{bytes, op}`; `AllGather` passed the `size_t` alone) and follows the
/// communicator's id (a `uint64_t`) in later ones (`{comm, bytes, op}`):
/// the blob's size tells the two apart. `None` for other calls, or a blob of neither layout.
pub fn nccl_message_bytes<'a>(call: &str, blobs: impl IntoIterator<Item = (u64, &'a [u8])>) -> Option<u64> {
    let op = call.strip_prefix("nccl")?;
    // The size of the old layout: a `size_t` alone for AllGather, the
    // `size_t` and an `int` (padded) for the rest.
    let old = match op {
        "AllGather" => 8,
        "AllReduce" | "ReduceScatter" | "Broadcast" | "Reduce" | "Send" => 16,
        // A group's sends and receives run in one kernel: its bytes are
        // the sent ones, one direction, as nccl-tests counts them.
        _ => return None,
    };
    let (_, blob) = blobs.into_iter().find(|(schema, _)| *schema >= STATIC_SCHEMA_IDS)?;
    let at = match blob.len() {
        n if n == old => 0,
        n if n >= old + 8 => 8,
        _ => return None,
    };
    let bytes = u64::from_ne_bytes(blob.get(at..at + 8)?.try_into().ok()?);
    // A communicator's address or hash read as a size is far beyond any
    // buffer: a layout not understood.
    (bytes < MAX_MESSAGE_BYTES).then_some(bytes)
}

/// NVTX's first static schema id (`NVTX_PAYLOAD_SCHEMA_ID_STATIC_START`):
/// NCCL numbers its schemas from there.
const STATIC_SCHEMA_IDS: u64 = 1 << 24;

/// No one message is this large (1 PiB).
const MAX_MESSAGE_BYTES: u64 = 1 << 50;

/// Operations in the order they are looked for: a name holding
/// `AllReduce` also holds `Reduce`, one holding `SendRecv` holds `Send`.
const OPERATIONS: [(&str, Collective); 8] = [
    ("allreduce", Collective::AllReduce),
    ("allgather", Collective::AllGather),
    ("reducescatter", Collective::ReduceScatter),
    ("broadcast", Collective::Broadcast),
    ("sendrecv", Collective::SendRecv),
    ("reduce", Collective::Reduce),
    ("send", Collective::Send),
    ("recv", Collective::Recv),
];

/// The operation of a communication kernel, `None` for any other kernel.
///
/// `name`: the kernel's name, demangled or not, with or without its
/// parameters. NCCL's kernels have been named `ncclDevKernel_<Op>_...`
/// since 2.19 (`ncclDevKernel_AllReduce_Sum_f32_RING_LL`,
/// `ncclDevKernel_SendRecv`, `ncclDevKernel_Generic`),
/// `ncclKernel_<Op>_...` before (`ncclKernel_AllReduce_RING_LL_Sum_float`)
/// and `nccl<Op><Algo>Kernel_...` in 2.3 and earlier
/// (`ncclAllReduceRingLLKernel_sum_f32`); a mangled name holds the same
/// identifier after its length prefix.
pub fn collective(name: &str) -> Option<Collective> {
    let id = identifier(name)?;
    let lower = id.to_ascii_lowercase();
    let op = lower.strip_prefix("ncclkernel_").or_else(|| lower.strip_prefix("nccldevkernel_")).or_else(|| {
        // NCCL 2.3 and earlier: the operation, then `Kernel`.
        lower.strip_prefix("nccl").filter(|rest| rest.contains("kernel"))
    })?;
    let found = OPERATIONS.iter().find(|(word, _)| op.starts_with(word)).map(|&(_, c)| c);
    Some(found.unwrap_or(Collective::Unknown))
}

/// Whether `name` is a communication kernel's.
pub fn is_comm_kernel(name: &str) -> bool {
    collective(name).is_some()
}

/// The `nccl...` identifier in a kernel's name: demangled names carry a
/// return type before it and parameters after, mangled ones a length
/// prefix (`_Z29ncclKernel_...`).
fn identifier(name: &str) -> Option<&str> {
    let start = name.find("nccl")?;
    let rest = &name[start..];
    let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
    let id = &rest[..end];
    // A name that only mentions NCCL somewhere inside (a template argument
    // of another kernel) is no NCCL kernel: the identifier must be the
    // kernel's own, at the start or after a return type or length prefix.
    let before = name[..start].trim_end();
    let own = before.is_empty()
        || before.ends_with(|c: char| c.is_ascii_digit())
        || before.rsplit(' ').next().is_some_and(|w| w == "void" || w.ends_with("::"));
    own.then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_kernel_names_of_every_generation_give_their_operation() {
        for (name, op) in [
            // NCCL 2.19 and later (PyTorch 2.2+ wheels), demangled.
            (
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm *, unsigned long, ncclWork *)",
                Collective::AllReduce,
            ),
            ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", Collective::AllReduce),
            ("void ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", Collective::AllGather),
            ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", Collective::ReduceScatter),
            ("ncclDevKernel_Broadcast_RING_LL(ncclDevComm *, unsigned long, ncclWork *)", Collective::Broadcast),
            ("ncclDevKernel_Reduce_Sum_f32_RING_LL", Collective::Reduce),
            ("ncclDevKernel_SendRecv(ncclDevComm *, unsigned long, ncclWork *)", Collective::SendRecv),
            ("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", Collective::Unknown),
            // NCCL 2.4 to 2.18.
            ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", Collective::AllReduce),
            ("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, ncclWork*)", Collective::AllGather),
            ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, ncclWork*)", Collective::SendRecv),
            ("_Z38ncclKernel_AllReduce_RING_LL_Sum_float13ncclWorkElem", Collective::AllReduce),
            // NCCL 2.3 and earlier.
            ("ncclAllReduceRingLLKernel_sum_f32(CollectiveArgs)", Collective::AllReduce),
            ("ncclReduceScatterRingLLKernel_sum_half(CollectiveArgs)", Collective::ReduceScatter),
            ("ncclSendKernel_copy_i8(CollectiveArgs)", Collective::Send),
            ("ncclRecvKernel_copy_i8(CollectiveArgs)", Collective::Recv),
        ] {
            assert_eq!(collective(name), Some(op), "{name}");
        }
    }

    #[test]
    fn nccl_payloads_of_both_layouts_give_the_message_size() {
        let gib = 1u64 << 30;
        let words = |w: &[u64]| w.iter().flat_map(|v| v.to_ne_bytes()).collect::<Vec<u8>>();
        let sid = (1 << 24) + 5;
        // Later releases: {comm, bytes, op}.
        let new = words(&[0x7f00_dead_beef, gib, 0]);
        assert_eq!(nccl_message_bytes("ncclAllReduce", [(sid, &new[..])]), Some(gib));
        // Earlier: {bytes, op}; AllGather's size_t alone, or after the comm.
        let old = words(&[gib, 0]);
        assert_eq!(nccl_message_bytes("ncclReduceScatter", [(sid, &old[..])]), Some(gib));
        assert_eq!(nccl_message_bytes("ncclAllGather", [(sid, &words(&[4096])[..])]), Some(4096));
        assert_eq!(nccl_message_bytes("ncclAllGather", [(sid, &words(&[0x55aa, 4096])[..])]), Some(4096));
        // Not a collective, a predefined-type payload, an odd size, or a
        // pointer where the size should be.
        assert_eq!(nccl_message_bytes("ncclCommInitRank", [(sid, &new[..])]), None);
        assert_eq!(nccl_message_bytes("ncclRecv", [(sid, &new[..])]), None, "the sends count");
        assert_eq!(nccl_message_bytes("ncclSend", [(sid, &new[..])]), Some(gib));
        assert_eq!(nccl_message_bytes("ncclAllReduce", [(22, &new[..])]), None);
        assert_eq!(nccl_message_bytes("ncclAllReduce", [(sid, &new[..12])]), None);
        assert_eq!(nccl_message_bytes("ncclAllReduce", [(sid, &words(&[0x7f00_dead_beef_0000, 0])[..])]), None);
        assert_eq!(nccl_message_bytes("ncclAllReduce", std::iter::empty()), None);
    }

    #[test]
    fn bus_bandwidth_factors_are_nccl_tests() {
        assert_eq!(Collective::AllReduce.bus_factor(2), Some(1.0));
        assert_eq!(Collective::AllReduce.bus_factor(4), Some(1.5));
        assert_eq!(Collective::AllGather.bus_factor(4), Some(0.75));
        assert_eq!(Collective::Broadcast.bus_factor(8), Some(1.0));
        assert_eq!(Collective::Unknown.bus_factor(8), None);
        assert_eq!(Collective::AllGather.algorithm_bytes(100, 4), 400);
        assert_eq!(Collective::AllReduce.algorithm_bytes(100, 4), 100);
    }

    #[test]
    fn other_kernels_are_not_communication() {
        for name in [
            "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn",
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)",
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(float)",
            "void my_kernel<ncclKernel_AllReduce>(int)",
            "ncclAllocator",
            "",
        ] {
            assert_eq!(collective(name), None, "{name}");
        }
    }
}
