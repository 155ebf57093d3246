//! `fp32-matmul-named`: a matrix product whose kernel name says it runs in
//! FP32 on the FMA pipes, where no counters measured it (trace mode: the
//! default, in which most programs are profiled).

use super::{checklist, few_sms, fp32_matmul, FindingKind, Found, Input, Rule};
use crate::analysis::findings::ms;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::Fp32MatmulNamed,
    bound: None,
    reads: "each kernel's name and GPU time, where no counters measured its pipes",
    when: "a kernel of at least 100 us whose name says a matrix product on the FMA pipes (`sgemm`, `simt`, `ffma`) \
           and no tensor-core op or narrower type",
    cost: "its GPU time less what the tensor cores' TF32 peak would take, at most",
    find,
};

/// Words in cuBLAS, cuDNN and CUTLASS kernel names for FP32 products on
/// the FMA pipes (`ampere_sgemm_128x64_nn`, `cutlass_80_simt_sgemm_...`,
/// `sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma_...`, `implicit_convolve_sgemm`).
const FMA_WORDS: [&str; 3] = ["sgemm", "simt", "ffma"];

/// Words for a product on the tensor cores (TF32's `s1688gemm`, and the
/// rest: `tensorop`, `hmma`, `imma`, `s16816`, Hopper's `wgmma`).
const TENSOR_WORDS: [&str; 6] = ["tensorop", "hmma", "imma", "s1688", "s16816", "wgmma"];

/// The word of `name` that says an FP32 product on the FMA pipes, if any.
fn fma_word(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    if !checklist::maybe_fp32_product(&name) || TENSOR_WORDS.iter().any(|w| name.contains(w)) {
        return None;
    }
    FMA_WORDS.iter().copied().find(|w| name.contains(w))
}

fn find(rule: &Rule, input: &Input) -> Found {
    let out = few_sms::judged(input)
        .filter(|k| checklist::stats(input, k).map_or(true, |s| !checklist::pipes_measured(s)))
        .filter_map(|k| {
            let word = fma_word(&k.name)?;
            Some(rule.kernel_finding(
                k,
                checklist::matmul_cost(k, input.peaks),
                format!(
                    "{}: its name (`{word}`) says a matrix product on the FMA pipes in FP32, the tensor cores idle, \
                     {} of GPU time",
                    k.display_name,
                    ms(k.gpu_ns)
                ),
                fp32_matmul::ADVICE.into(),
            ))
        })
        .collect();
    (out, 0)
}

#[cfg(test)]
mod tests {
    use super::fma_word;

    #[test]
    fn names_of_fp32_products_on_the_fma_pipes_and_of_others() {
        // Names CUPTI gave on an H200 (GPT-2 in FP32, cuDNN), then TF32,
        // BF16 and other kernels that are not FP32 products on the FMA
        // pipes.
        for (name, word) in [
            ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(cutlass_80_simt_sgemm_128x256_8x4_nt_align1::Params)", "sgemm"),
            ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas", "ffma"),
            ("ampere_sgemm_128x64_nn", "sgemm"),
            ("implicit_convolve_sgemm", "sgemm"),
        ] {
            assert_eq!(fma_word(name), Some(word), "{name}");
        }
        for name in [
            "sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_execute_kernel__5x_cublas",
            "cutlass_80_tensorop_s1688gemm_128x128_16x3_nn_align4",
            "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn",
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
            "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(float)",
            "triton_poi_fused_add_convert_element_type_mul_0",
            "dgemm_nn_kernel",
            "elementwise_kernel_simt",
        ] {
            assert_eq!(fma_word(name), None, "{name}");
        }
    }
}
