//! `fp32-matmul`: a matrix product run on the FMA pipes, the tensor cores
//! idle.

use super::{checklist, few_sms, FindingKind, Found, Input, Rule};
use crate::analysis::findings::ms;

/// The rule.
pub static RULE: Rule = Rule {
    kind: FindingKind::Fp32Matmul,
    bound: None,
    reads: "each measured kernel whose name says a matrix product (gemm, matmul, a convolution; not a narrower type): \
            its tensor and FMA pipes' activity (metrics mode, --metrics checklist)",
    when:
        "a matrix-product kernel with the tensor pipe at most 1% active and the FMA pipe at least 10%, where this is \
           its costliest checklist cause",
    cost: "its GPU time less what the tensor cores' TF32 peak would take",
    find,
};

fn find(rule: &Rule, input: &Input) -> Found {
    let out = few_sms::judged(input)
        .filter_map(|k| {
            let (FindingKind::Fp32Matmul, cost_ns) = checklist::chosen(input, k)? else { return None };
            let (fma, tensor) = checklist::fp32_matmul(k, checklist::stats(input, k)?)?;
            Some(rule.kernel_finding(
                k,
                cost_ns,
                format!(
                    "{}: a matrix product on the FMA pipes (FMA pipe {fma:.0}% active, tensor cores {tensor:.1}%), \
                         {} of GPU time",
                    k.display_name,
                    ms(k.gpu_ns)
                ),
                ADVICE.into(),
            ))
        })
        .collect();
    (out, 0)
}

/// How to run an FP32 matrix product on the tensor cores.
pub(super) const ADVICE: &str = "Run it on the tensor cores: TF32 keeps fp32 data (PyTorch: \
                      torch.set_float32_matmul_precision('high'), and torch.backends.cudnn.allow_tf32 = True for \
                      convolutions; cuBLAS: CUBLAS_COMPUTE_32F_FAST_TF32; JAX: \
                      jax.default_matmul_precision('tensorfloat32')), or bf16/fp16 inputs (autocast); in a kernel of \
                      your own, WMMA/MMA instructions or CUTLASS.";
