//! A device's peak throughput: dense FLOP/s per data type and pipe, and
//! DRAM bandwidth. From NVIDIA's datasheets for the GPUs gpuscope knows
//! (dense figures: the datasheets' "with sparsity" numbers halved), and
//! otherwise computed from the SM count, clocks and memory bus width.

use crate::model::device::DeviceInfo;
use serde::Serialize;

/// A kind of arithmetic with a peak of its own: the tensor cores per input
/// type, and the FMA pipes (CUDA cores).
pub type Pipe = &'static str;

/// Tensor cores, bf16 inputs (fp32 accumulate).
pub const TENSOR_BF16: Pipe = "tensor_bf16";
/// Tensor cores, fp16 inputs.
pub const TENSOR_FP16: Pipe = "tensor_fp16";
/// Tensor cores, tf32 inputs.
pub const TENSOR_TF32: Pipe = "tensor_tf32";
/// Tensor cores, fp8 inputs.
pub const TENSOR_FP8: Pipe = "tensor_fp8";
/// Tensor cores, int8 inputs (ops, not FLOPs).
pub const TENSOR_INT8: Pipe = "tensor_int8";
/// Tensor cores, fp64.
pub const TENSOR_FP64: Pipe = "tensor_fp64";
/// CUDA cores, fp32.
pub const FMA_FP32: Pipe = "fma_fp32";
/// CUDA cores, fp64.
pub const FMA_FP64: Pipe = "fma_fp64";
/// CUDA cores, fp16/bf16 (paired half instructions).
pub const FMA_FP16: Pipe = "fma_fp16";

/// Every pipe, in report order.
pub const PIPES: [Pipe; 9] =
    [TENSOR_BF16, TENSOR_FP16, TENSOR_TF32, TENSOR_FP8, TENSOR_INT8, TENSOR_FP64, FMA_FP32, FMA_FP64, FMA_FP16];

/// Peaks of one device.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Peaks {
    /// Where the figures come from: a datasheet (named, with its address)
    /// or the computation from the device's attributes.
    pub source: String,
    /// Whether they are datasheet figures.
    pub datasheet: bool,
    /// DRAM bandwidth, bytes/s.
    pub dram_bytes_per_s: f64,
    /// Dense peak per pipe, FLOP/s (ops/s for int8); a pipe the GPU lacks
    /// is absent.
    pub flops_per_s: Vec<(Pipe, f64)>,
}

impl Peaks {
    /// The peak of `pipe`, FLOP/s.
    pub fn flops(&self, pipe: Pipe) -> Option<f64> {
        self.flops_per_s.iter().find(|(p, _)| *p == pipe).map(|(_, v)| *v)
    }

    /// Ridge point of the roofline for `pipe`: FLOPs per DRAM byte above
    /// which a kernel can be compute-bound.
    pub fn ridge(&self, pipe: Pipe) -> Option<f64> {
        Some(self.flops(pipe)? / self.dram_bytes_per_s)
    }
}

/// A row of the datasheet table. FLOP/s in TFLOP/s, bandwidth in GB/s.
struct Sheet {
    /// Words of the device name (CUDA's `cuDeviceGetName`, split at spaces
    /// and dashes), all of which must appear; the first matching row is
    /// used.
    names: &'static [&'static str],
    label: &'static str,
    source: &'static str,
    bf16: f64,
    tf32: f64,
    fp8: Option<f64>,
    int8: f64,
    fp64_tensor: Option<f64>,
    fp32: f64,
    fp64: f64,
    fp16_fma: f64,
    dram_gb_s: f64,
}

const A100_SHEET: &str =
    "NVIDIA A100 datasheet, nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf; FP16 CUDA-core rate: A100 architecture whitepaper";
const H100_SHEET: &str =
    "NVIDIA H100 datasheet, nvidia.com/en-us/data-center/h100; FP16 CUDA-core rate: H100 architecture whitepaper";
const H200_SHEET: &str =
    "NVIDIA H200 datasheet, nvidia.com/en-us/data-center/h200; FP16 CUDA-core rate as H100 (same GH100 SMs)";
const L4_SHEET: &str = "NVIDIA L4 datasheet, nvidia.com/en-us/data-center/l4; FP16 CUDA-core rate equal to FP32 (Ada)";
const B200_SHEET: &str =
    "NVIDIA HGX B200 specifications (per GPU), nvidia.com/en-us/data-center/hgx; FP16 CUDA-core rate taken as 2x FP32";

/// Compute figures shared by the variants of one chip (they differ in
/// memory); a row takes them and sets its names and bandwidth.
const A100: Sheet = Sheet {
    names: &[],
    label: "",
    source: A100_SHEET,
    bf16: 312.0,
    tf32: 156.0,
    fp8: None,
    int8: 624.0,
    fp64_tensor: Some(19.5),
    fp32: 19.5,
    fp64: 9.7,
    fp16_fma: 78.0,
    dram_gb_s: 0.0,
};

const H100_PCIE: Sheet = Sheet {
    names: &[],
    label: "",
    source: H100_SHEET,
    bf16: 756.0,
    tf32: 378.0,
    fp8: Some(1513.0),
    int8: 1513.0,
    fp64_tensor: Some(51.0),
    fp32: 51.0,
    fp64: 26.0,
    fp16_fma: 102.4,
    dram_gb_s: 0.0,
};

const H100_NVL: Sheet = Sheet {
    names: &[],
    label: "",
    source: H100_SHEET,
    bf16: 835.5,
    tf32: 417.5,
    fp8: Some(1670.5),
    int8: 1670.5,
    fp64_tensor: Some(60.0),
    fp32: 60.0,
    fp64: 30.0,
    fp16_fma: 120.0,
    dram_gb_s: 0.0,
};

const H100_SXM: Sheet = Sheet {
    names: &[],
    label: "",
    source: H100_SHEET,
    bf16: 989.4,
    tf32: 494.7,
    fp8: Some(1978.9),
    int8: 1978.9,
    fp64_tensor: Some(67.0),
    fp32: 67.0,
    fp64: 34.0,
    fp16_fma: 133.8,
    dram_gb_s: 0.0,
};

/// H200 NVL: the H100 NVL's compute (same GH100 SMs), more memory.
const H200_NVL: Sheet = Sheet { source: H200_SHEET, ..H100_NVL };

/// H200 SXM: the H100 SXM's compute, more memory.
const H200_SXM: Sheet = Sheet { source: H200_SHEET, ..H100_SXM };

const L4: Sheet = Sheet {
    names: &[],
    label: "",
    source: L4_SHEET,
    bf16: 121.0,
    tf32: 60.0,
    fp8: Some(242.5),
    int8: 242.5,
    fp64_tensor: None,
    fp32: 30.3,
    fp64: 0.47,
    fp16_fma: 30.3,
    dram_gb_s: 0.0,
};

const B200: Sheet = Sheet {
    names: &[],
    label: "",
    source: B200_SHEET,
    bf16: 2250.0,
    tf32: 1100.0,
    fp8: Some(4500.0),
    int8: 4500.0,
    fp64_tensor: Some(37.0),
    fp32: 75.0,
    fp64: 37.0,
    fp16_fma: 150.0,
    dram_gb_s: 0.0,
};

/// Datasheet figures (dense). Order matters: more specific names first.
const SHEETS: &[Sheet] = &[
    Sheet { names: &["A100", "80GB", "PCIe"], label: "A100 80GB PCIe", dram_gb_s: 1935.0, ..A100 },
    Sheet { names: &["A100", "PCIE"], label: "A100 40GB PCIe", dram_gb_s: 1555.0, ..A100 },
    Sheet { names: &["A100", "80GB"], label: "A100 80GB SXM", dram_gb_s: 2039.0, ..A100 },
    Sheet { names: &["A100"], label: "A100 40GB SXM", dram_gb_s: 1555.0, ..A100 },
    Sheet { names: &["H100", "PCIe"], label: "H100 PCIe", dram_gb_s: 2000.0, ..H100_PCIE },
    Sheet { names: &["H100", "NVL"], label: "H100 NVL", dram_gb_s: 3900.0, ..H100_NVL },
    Sheet { names: &["H100"], label: "H100 SXM", dram_gb_s: 3350.0, ..H100_SXM },
    Sheet { names: &["H200", "NVL"], label: "H200 NVL", dram_gb_s: 4800.0, ..H200_NVL },
    Sheet { names: &["H200"], label: "H200 SXM", dram_gb_s: 4800.0, ..H200_SXM },
    Sheet { names: &["L4"], label: "L4", dram_gb_s: 300.0, ..L4 },
    Sheet { names: &["B200"], label: "B200 (HGX)", dram_gb_s: 7700.0, ..B200 },
];

fn from_sheet(s: &Sheet) -> Peaks {
    let t = 1e12;
    let mut flops = vec![
        (TENSOR_BF16, s.bf16 * t),
        (TENSOR_FP16, s.bf16 * t),
        (TENSOR_TF32, s.tf32 * t),
        (TENSOR_INT8, s.int8 * t),
        (FMA_FP32, s.fp32 * t),
        (FMA_FP64, s.fp64 * t),
        (FMA_FP16, s.fp16_fma * t),
    ];
    if let Some(f) = s.fp8 {
        flops.push((TENSOR_FP8, f * t));
    }
    flops.push((TENSOR_FP64, s.fp64_tensor.unwrap_or(s.fp64) * t));
    flops.sort_by_key(|(p, _)| PIPES.iter().position(|q| q == p));
    Peaks {
        source: format!("datasheet: NVIDIA {} ({})", s.label, s.source),
        datasheet: true,
        dram_bytes_per_s: s.dram_gb_s * 1e9,
        flops_per_s: flops,
    }
}

/// Dense FLOPs per SM per clock, by compute capability: (fp32, fp64,
/// fp64 tensor, fp16 FMA, bf16/fp16 tensor, fp8 tensor). From the
/// architecture whitepapers (A100: 64 FP32 cores and 1024 dense FP16
/// tensor FMAs per SM per clock; Ada, Hopper, Blackwell: 128 FP32 cores;
/// tensor rates doubling per generation).
fn per_sm_clock(major: u32, minor: u32) -> (f64, f64, f64, f64, f64, Option<f64>) {
    match (major, minor) {
        (8, 0) => (128.0, 64.0, 128.0, 512.0, 2048.0, None),
        (8, 9) => (256.0, 4.0, 4.0, 256.0, 1024.0, Some(2048.0)),
        (8, _) => (256.0, 4.0, 4.0, 256.0, 1024.0, None),
        (9, _) => (256.0, 128.0, 256.0, 512.0, 4096.0, Some(8192.0)),
        (10, _) => (256.0, 128.0, 128.0, 512.0, 8192.0, Some(16384.0)),
        (m, _) if m >= 11 => (256.0, 4.0, 4.0, 512.0, 2048.0, Some(4096.0)),
        _ => (128.0, 4.0, 4.0, 256.0, 512.0, None),
    }
}

/// Peaks from the device's attributes: SMs x clock x per-SM rate, and
/// double data rate x bus width for DRAM. `None` without clock figures.
fn computed(d: &DeviceInfo) -> Option<Peaks> {
    let clock = d.clock_khz? as f64 * 1e3;
    let mem = d.memory_clock_khz? as f64 * 1e3;
    let bus = d.memory_bus_bits? as f64;
    let (fp32, fp64, fp64t, fp16, bf16, fp8) = per_sm_clock(d.limits.cc_major, d.limits.cc_minor);
    let k = d.sm_count as f64 * clock;
    let mut flops = vec![
        (TENSOR_BF16, bf16 * k),
        (TENSOR_FP16, bf16 * k),
        (TENSOR_TF32, bf16 / 2.0 * k),
        (TENSOR_INT8, bf16 * 2.0 * k),
        (TENSOR_FP64, fp64t * k),
        (FMA_FP32, fp32 * k),
        (FMA_FP64, fp64 * k),
        (FMA_FP16, fp16 * k),
    ];
    if let Some(f) = fp8 {
        flops.push((TENSOR_FP8, f * k));
    }
    flops.sort_by_key(|(p, _)| PIPES.iter().position(|q| q == p));
    Some(Peaks {
        source: format!(
            "computed: {} SMs x {:.0} MHz (compute capability {}.{}), {}-bit memory at {:.0} MHz; no datasheet figures for {:?}",
            d.sm_count,
            clock / 1e6,
            d.limits.cc_major,
            d.limits.cc_minor,
            d.memory_bus_bits.unwrap_or(0),
            mem / 1e6,
            d.name
        ),
        datasheet: false,
        dram_bytes_per_s: 2.0 * mem * bus / 8.0,
        flops_per_s: flops,
    })
}

/// The peaks of `d`: datasheet figures when its name is known, otherwise
/// computed from its attributes (`None` when those are missing too, as in
/// schema-1 reports of unknown GPUs).
pub fn peaks(d: &DeviceInfo) -> Option<Peaks> {
    let name = d.name.to_ascii_uppercase();
    let words: Vec<&str> = name.split([' ', '-']).collect();
    SHEETS
        .iter()
        .find(|s| s.names.iter().all(|n| words.contains(&n.to_ascii_uppercase().as_str())))
        .map(from_sheet)
        .or_else(|| computed(d))
}

/// The peak bandwidth of a GPU's links to its peers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[non_exhaustive]
pub struct LinkPeak {
    /// "NVLink" or "PCIe".
    pub link: &'static str,
    /// Per direction, GB/s.
    pub gb_per_s: f64,
}

/// A GPU's peak bandwidth to its peers: its NVLinks to NVSwitches at the
/// nominal rate of its architecture's NVLink generation (per link and
/// direction: 20 GB/s on compute capability 6.x, 14.0625 on 8.6 and 8.9,
/// 25 on the other 7.x to 9.x, 50 on 10.x); with none, its PCIe link (per
/// lane and direction: 0.25, 0.5, 0.985, 1.969, 3.938, 7.563 GB/s for
/// generations 1 to 6). `None` where the report does not say (NVML
/// missing, NVLinks straight to other GPUs, an older report) or gpuscope
/// does not know the generation's rate.
pub fn link_peak(d: &DeviceInfo) -> Option<LinkPeak> {
    let nvlinks = d.nvlinks?;
    if nvlinks > 0 {
        let per_link = match (d.limits.cc_major, d.limits.cc_minor) {
            (6, _) => 20.0,
            (8, 6) | (8, 9) => 14.0625,
            (7..=9, _) => 25.0,
            (10, _) => 50.0,
            _ => return None,
        };
        return Some(LinkPeak { link: "NVLink", gb_per_s: nvlinks as f64 * per_link });
    }
    let (generation, lanes) = d.pcie?;
    let per_lane = [0.25, 0.5, 0.985, 1.969, 3.938, 7.563].get((generation as usize).checked_sub(1)?).copied()?;
    (lanes > 0).then_some(LinkPeak { link: "PCIe", gb_per_s: per_lane * lanes as f64 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::occupancy::SmLimits;

    #[test]
    fn links_peak_at_their_generation_s_rate() {
        let mut h200 = dev("NVIDIA H200", 132, (9, 0), None);
        assert_eq!(link_peak(&h200), None, "no link figures in the report");
        h200.pcie = Some((5, 16));
        assert_eq!(link_peak(&h200), None, "NVLinks unknown: PCIe may not be the link used");
        h200.nvlinks = Some(18);
        assert_eq!(link_peak(&h200), Some(LinkPeak { link: "NVLink", gb_per_s: 450.0 }));
        h200.nvlinks = Some(0);
        let p = link_peak(&h200).unwrap();
        assert_eq!(p.link, "PCIe");
        assert!((p.gb_per_s - 63.0).abs() < 0.1, "{}", p.gb_per_s);
        h200.pcie = Some((9, 16));
        assert_eq!(link_peak(&h200), None, "a generation gpuscope does not know");
        let mut a40 = dev("NVIDIA A40", 84, (8, 6), None);
        a40.nvlinks = Some(4);
        assert_eq!(link_peak(&a40).map(|p| p.gb_per_s), Some(56.25));
        let mut future = dev("NVIDIA X", 200, (11, 0), None);
        future.nvlinks = Some(18);
        assert_eq!(link_peak(&future), None, "an NVLink generation gpuscope does not know");
    }

    fn dev(name: &str, sms: u32, cc: (u32, u32), clocks: Option<(u32, u32, u32)>) -> DeviceInfo {
        let mut d = DeviceInfo::new(0, name, sms, SmLimits { cc_major: cc.0, cc_minor: cc.1, ..SmLimits::SM_90 });
        if let Some((c, m, b)) = clocks {
            (d.clock_khz, d.memory_clock_khz, d.memory_bus_bits) = (Some(c), Some(m), Some(b));
        }
        d
    }

    #[test]
    fn known_gpus_get_their_datasheet_figures() {
        let h100 = peaks(&dev("NVIDIA H100 80GB HBM3", 132, (9, 0), None)).unwrap();
        assert!(h100.datasheet && h100.source.contains("H100 SXM"), "{}", h100.source);
        assert_eq!(h100.flops(TENSOR_BF16), Some(989.4e12));
        assert_eq!(h100.dram_bytes_per_s, 3350e9);
        assert!((h100.ridge(TENSOR_BF16).unwrap() - 295.3).abs() < 0.1);
        let pcie = peaks(&dev("NVIDIA H100 PCIe", 114, (9, 0), None)).unwrap();
        assert_eq!(pcie.flops(TENSOR_BF16), Some(756e12));
        assert!(peaks(&dev("NVIDIA H200", 132, (9, 0), None)).unwrap().source.contains("H200 SXM"));
        assert_eq!(peaks(&dev("NVIDIA H200 NVL", 132, (9, 0), None)).unwrap().dram_bytes_per_s, 4800e9);
        let a100 = peaks(&dev("NVIDIA A100-SXM4-80GB", 108, (8, 0), None)).unwrap();
        assert_eq!((a100.flops(TENSOR_BF16), a100.dram_bytes_per_s), (Some(312e12), 2039e9));
        assert_eq!(peaks(&dev("NVIDIA A100-PCIE-40GB", 108, (8, 0), None)).unwrap().dram_bytes_per_s, 1555e9);
        let l4 = peaks(&dev("NVIDIA L4", 58, (8, 9), None)).unwrap();
        assert_eq!((l4.flops(TENSOR_FP8), l4.dram_bytes_per_s), (Some(242.5e12), 300e9));
        assert_eq!(peaks(&dev("NVIDIA B200", 148, (10, 0), None)).unwrap().flops(TENSOR_BF16), Some(2250e12));
        // Names are matched by word: an L40S is not an L4, a GH200 not an H200.
        assert!(peaks(&dev("NVIDIA L40S", 142, (8, 9), None)).is_none());
        assert!(peaks(&dev("NVIDIA GH200 480GB", 132, (9, 0), None)).is_none());
    }

    #[test]
    fn unknown_gpus_get_computed_peaks_and_say_so() {
        // An H100's attributes under an unknown name: the computation gives
        // its figures at the attribute clock (1980 MHz, above the 1830 MHz
        // the datasheet's tensor figure assumes).
        let p = peaks(&dev("Some GPU", 132, (9, 0), Some((1_980_000, 2_619_000, 5120)))).unwrap();
        assert!(!p.datasheet && p.source.starts_with("computed: 132 SMs x 1980 MHz"), "{}", p.source);
        assert!((p.dram_bytes_per_s - 3.352e12).abs() < 1e9, "{}", p.dram_bytes_per_s);
        assert!((p.flops(TENSOR_BF16).unwrap() / 1e12 - 1070.5).abs() < 1.0);
        assert!((p.flops(FMA_FP32).unwrap() / 1e12 - 66.9).abs() < 0.1);
        assert!(p.flops(TENSOR_FP8).is_some());
        // An A100's: 108 SMs at 1410 MHz give its datasheet's 312 and 19.5.
        let a = peaks(&dev("Unlisted Ampere GPU", 108, (8, 0), Some((1_410_000, 1_593_000, 5120)))).unwrap();
        assert!((a.flops(TENSOR_BF16).unwrap() / 1e12 - 311.9).abs() < 0.1);
        assert!((a.flops(FMA_FP32).unwrap() / 1e12 - 19.5).abs() < 0.1);
        assert!(a.flops(TENSOR_FP8).is_none(), "Ampere has no fp8 tensor cores");
        assert!(peaks(&dev("Some GPU", 132, (9, 0), None)).is_none(), "no clocks, no peaks");
    }
}
