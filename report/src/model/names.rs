//! Kernel names as people read them.

/// Demangles an Itanium C++ name; other names pass through.
pub fn demangle(name: &str) -> String {
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(s) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return s;
            }
        }
    }
    name.to_string()
}

/// A kernel's name without return type and parameter list:
/// `void matmul_tiled<16>(float const*, ...)` -> `matmul_tiled<16>`.
pub fn short_name(name: &str) -> &str {
    let mut s = name;
    // Cut the parameter list: the last top-level '(' ... ')'.
    if s.ends_with(')') {
        let mut depth = 0i32;
        for (i, c) in s.char_indices().rev() {
            match c {
                ')' => depth += 1,
                '(' => {
                    depth -= 1;
                    if depth == 0 {
                        s = &s[..i];
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    // Drop a return type: the text before the last top-level space.
    let mut depth = 0i32;
    let mut cut = 0;
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ' ' if depth == 0 => cut = i + 1,
            _ => {}
        }
    }
    &s[cut..]
}

/// Scalar types: they tell instances apart only when nothing else does.
const SCALARS: &[&str] = &[
    "float",
    "double",
    "int",
    "unsigned",
    "long",
    "short",
    "char",
    "bool",
    "signed",
    "half",
    "__half",
    "__nv_bfloat16",
    "__nv_fp8_e4m3",
    "__nv_fp8_e5m2",
    "Half",
    "BFloat16",
    "complex",
    "Float8_e4m3fn",
    "Float8_e5m2",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "size_t",
];

/// Helper types that say nothing about which kernel it is (nor do
/// [`SCALARS`]).
const HELPER_TYPES: &[&str] = &[
    "TensorListMetadata",
    "FusedOptimizerTensorListMetadata",
    "OffsetCalculator",
    "TrivialOffsetCalculator",
    "LoadWithoutCast",
    "StoreWithoutCast",
    "LoadWithCast",
    "StoreWithCast",
    "Array",
    "IntDivider",
    "TensorInfo",
    "PackedTensorAccessor",
    "PackedTensorAccessor32",
    "PackedTensorAccessor64",
    "DefaultPtrTraits",
    "RestrictPtrTraits",
];

/// `s` split at its top-level commas (outside `<>`, `()`, `{}`).
fn split_top(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' | '{' | '[' => depth += 1,
            '>' | ')' | '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out.retain(|a| !a.is_empty());
    out
}

/// The leading qualified name of `s` and its template arguments:
/// `a::f<X, Y>(int)::{lambda}` -> (`a::f`, `X, Y`).
fn head(s: &str) -> (&str, Option<&str>) {
    let Some(open) = s.find(['<', '(']) else { return (s.trim(), None) };
    let name = s[..open].trim();
    if !s[open..].starts_with('<') {
        return (name, None);
    }
    let mut depth = 0i32;
    for (i, c) in s[open..].char_indices() {
        match c {
            '<' | '(' | '{' => depth += 1,
            '>' | ')' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return (name, Some(&s[open + 1..open + i]));
                }
            }
            _ => {}
        }
    }
    (name, Some(&s[open + 1..]))
}

/// The last component of a qualified name: `at::native::f` -> `f`.
fn last_component(q: &str) -> &str {
    q.rsplit("::").next().unwrap_or(q).trim()
}

/// The names that identify a template argument, outermost first, and how
/// deep the last was found: the classes and functions named down to the
/// deepest one that is not a scalar, `std::` or helper type
/// (`BinaryFunctor<float, MulFunctor<float>>` -> `[BinaryFunctor,
/// MulFunctor]`). A lambda names the function it is in.
fn key_of(arg: &str, depth: usize) -> Option<(Vec<&str>, usize)> {
    let arg = arg.trim();
    let first = arg.chars().next()?;
    if first == '(' || first == '{' || first == '-' || first.is_ascii_digit() || arg == "true" || arg == "false" {
        return None;
    }
    let (qname, targs) = head(arg);
    let base = last_component(qname);
    let named = !qname.starts_with("std::")
        && !qname.contains(' ')
        && !base.is_empty()
        && !SCALARS.contains(&base)
        && !HELPER_TYPES.contains(&base)
        && base.chars().all(|c| c.is_alphanumeric() || c == '_');
    let nested = targs.and_then(|t| deepest(split_top(t).into_iter().filter_map(|a| key_of(a, depth + 1))));
    match (named, nested) {
        (true, Some((mut chain, d))) => {
            chain.insert(0, base);
            Some((chain, d))
        }
        (true, None) => Some((vec![base], depth)),
        (false, nested) => nested,
    }
}

/// The deepest of some keys; the first of equals.
fn deepest<'a>(keys: impl Iterator<Item = (Vec<&'a str>, usize)>) -> Option<(Vec<&'a str>, usize)> {
    keys.fold(None, |best, k| match best {
        Some(b) if b.1 >= k.1 => Some(b),
        _ => Some(k),
    })
}

/// The key of a kernel's template arguments (see [`key_of`]).
fn name_key(name: &str) -> (String, Option<String>, Option<Vec<String>>) {
    let s = short_name(name).replace("(anonymous namespace)::", "");
    let (qname, targs) = head(&s);
    let base = last_component(qname).to_string();
    let key = targs.and_then(|t| deepest(split_top(t).into_iter().filter_map(|a| key_of(a, 0))));
    let chain = key.map(|(c, _)| c.into_iter().map(str::to_string).collect::<Vec<_>>());
    (base, targs.map(str::to_string), chain)
}

/// A kernel's name as a table shows it: the function's own name with the
/// template argument that tells its instances apart, namespaces and
/// parameters dropped. `void at::native::vectorized_elementwise_kernel<4,
/// at::native::GeluCUDAKernelImpl(...)::{lambda()#1}, std::array<char*,
/// 2ul> >(...)` -> `vectorized_elementwise_kernel<GeluCUDAKernelImpl>`.
pub fn display_name(name: &str) -> String {
    let (base, targs, chain) = name_key(name);
    match (chain.as_ref().and_then(|c| c.last()), targs) {
        (Some(k), _) if *k != base => format!("{base}<{k}>"),
        // Only numbers (a tile size): short, and they tell instances apart.
        (None, Some(t))
            if t.len() <= 24 && split_top(&t).iter().all(|a| a.chars().all(|c| c.is_ascii_digit() || c == '-')) =>
        {
            format!("{base}<{}>", split_top(&t).join(", "))
        }
        _ => base,
    }
}

/// The second form for names whose short forms collide: every name on the
/// way to the key (`vectorized_elementwise_kernel<BinaryFunctor<MulFunctor>>`).
fn display_name_chain(name: &str) -> Option<String> {
    let (base, _, chain) = name_key(name);
    let chain = chain.filter(|c| c.len() > 1)?;
    let inner =
        chain.iter().rev().fold(String::new(), |acc, n| if acc.is_empty() { n.clone() } else { format!("{n}<{acc}>") });
    Some(format!("{base}<{inner}>"))
}

/// The third form: the key and the first scalar type among the template
/// arguments (`reduce_kernel<sum_functor, BFloat16>`).
fn display_name_typed(name: &str) -> Option<String> {
    let (base, targs, chain) = name_key(name);
    let targs = targs?;
    let scalar = targs.split(|c: char| !(c.is_alphanumeric() || c == '_')).find(|w| SCALARS.contains(w))?;
    Some(match chain.as_ref().and_then(|c| c.last()) {
        Some(k) => format!("{base}<{k}, {scalar}>"),
        None => format!("{base}<{scalar}>"),
    })
}

/// `s` with every namespace qualifier dropped: `at::native::F<c10::Half>`
/// -> `F<Half>`.
fn strip_namespaces(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split("::").enumerate() {
        if i > 0 {
            // What precedes `::` was a namespace (or class) name.
            let kept = out.trim_end_matches(|c: char| c.is_alphanumeric() || c == '_').len();
            out.truncate(kept);
        }
        out.push_str(part);
    }
    out
}

/// The fourth form: every template argument, namespaces and lambda bodies
/// dropped.
fn display_name_long(name: &str) -> Option<String> {
    let s = short_name(name).replace("(anonymous namespace)::", "");
    let (qname, targs) = head(&s);
    let Some(targs) = targs else { return Some(s.clone()) };
    let args: Vec<String> = split_top(targs)
        .into_iter()
        .map(|a| {
            // A lambda's text after the function it is in says nothing.
            let a = a.find('(').filter(|&i| i > 0).map_or(a, |i| &a[..i]);
            strip_namespaces(a.trim_end_matches("::operator"))
        })
        .collect();
    Some(format!("{}<{}>", last_component(qname), args.join(", ")))
}

/// Display names for a set of kernels, no two alike: the short form; where
/// short forms collide, the chain to the key, then the key with a scalar
/// type, then every template argument; then a number.
pub fn display_names<'a>(names: impl IntoIterator<Item = &'a str>) -> std::collections::HashMap<String, String> {
    use std::collections::{BTreeSet, HashMap};
    let full: BTreeSet<&str> = names.into_iter().collect();
    let mut out: HashMap<String, String> = full.iter().map(|n| (n.to_string(), display_name(n))).collect();
    let collisions = |out: &HashMap<String, String>| -> Vec<Vec<String>> {
        let mut by: HashMap<&str, Vec<String>> = HashMap::new();
        for (f, d) in out {
            by.entry(d.as_str()).or_default().push(f.clone());
        }
        let mut groups: Vec<Vec<String>> = by.into_values().filter(|g| g.len() > 1).collect();
        for g in &mut groups {
            g.sort();
        }
        groups
    };
    let longer: [fn(&str) -> Option<String>; 3] = [display_name_chain, display_name_typed, display_name_long];
    for form in longer {
        for f in collisions(&out).into_iter().flatten() {
            if let Some(d) = form(&f) {
                out.insert(f, d);
            }
        }
    }
    for g in collisions(&out) {
        for (i, f) in g.into_iter().enumerate() {
            let numbered = format!("{} #{}", out[&f], i + 1);
            out.insert(f, numbered);
        }
    }
    out
}

/// Words in a kernel's name that make it a matrix product or convolution
/// of cuBLAS, cuDNN or CUTLASS (lower case).
const PRODUCT_WORDS: [&str; 8] = ["gemm", "xmma", "nvjet", "cutlass", "convolve", "fprop", "dgrad", "wgrad"];

/// PyTorch's launchers of an elementwise functor, which one picked by the
/// tensors' alignment and sizes.
const ELEMENTWISE_LAUNCHERS: [&str; 2] = ["vectorized_elementwise_kernel", "unrolled_elementwise_kernel"];

/// PyTorch's concatenation copies (`_contig`, `_alignedK_contig`,
/// `_vectorized`, picked likewise).
const CONCAT_COPY: &str = "CatArrayBatchedCopy";

/// What a kernel does, without the variant a library picks by the shapes:
/// a matrix product or convolution of cuBLAS, cuDNN or CUTLASS (its tile,
/// split-K and data-type variants change with the sizes) is `matrix
/// product`; PyTorch's vectorized and unrolled launches of one elementwise
/// functor are one family, as are its concatenation copies; another kernel
/// is its name as the kernel table shows it (the function and the functor
/// it applies, without numeric or type template arguments:
/// `reduce_kernel<512, 1, ...>` and `reduce_kernel<128, 4, ...>` of one
/// reduction are one). Steps are looked for by family where a program's
/// shapes change from step to step (a batch of graphs of other sizes) and
/// the exact kernels do not repeat.
pub fn kernel_family(name: &str) -> String {
    let (base, targs, chain) = name_key(name);
    // The function's own name, or for CUTLASS's generic entry points
    // (`Kernel2<cutlass_80_simt_sgemm_...>`, `device_kernel<...Gemm...>`)
    // their first template argument: a kernel that merely takes CUTLASS
    // types (FlashAttention's `cutlass::half_t`) is not a product.
    let first = || targs.as_deref().and_then(|t| split_top(t).into_iter().next()).unwrap_or("");
    let own = if base.starts_with("Kernel") || base == "device_kernel" { first() } else { base.as_str() };
    let lower = own.to_ascii_lowercase();
    if PRODUCT_WORDS.iter().any(|w| lower.contains(w)) {
        return "matrix product".to_string();
    }
    // PyTorch's launchers of one elementwise functor: vectorized where the
    // tensors' alignment and sizes allow it (and by 2 or 4), else
    // unrolled; likewise its concatenation's copies.
    if ELEMENTWISE_LAUNCHERS.contains(&base.as_str()) {
        let functor = targs
            .as_deref()
            .and_then(|t| split_top(t).into_iter().map(str::trim).find(|a| !a.chars().all(|c| c.is_ascii_digit())));
        return format!("elementwise_kernel<{}>", functor.unwrap_or_default());
    }
    if base.starts_with(CONCAT_COPY) {
        return CONCAT_COPY.to_string();
    }
    match chain.as_ref().and_then(|c| c.last()) {
        Some(k) if *k != base => format!("{base}<{k}>"),
        _ => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_drop_return_type_and_parameters() {
        assert_eq!(short_name("void matmul_tiled<16>(float const*, float const*, float*, int)"), "matmul_tiled<16>");
        assert_eq!(short_name("vector_add"), "vector_add");
        assert_eq!(short_name("void at::native::f<(int)4, float>(int, float)"), "at::native::f<(int)4, float>");
    }

    /// Names as PyTorch 2.x kernels demangle on an H100.
    const GELU: &str = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)";
    const ADAM: &str = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double, double, double, double, double, double, bool, float*, float*>(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double, double, double, double, double, double, bool, float*, float*)";
    const COPY: &str = "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1})";
    const MUL: &str = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul>)";
    const MEAN: &str = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4>)";
    const SOFTMAX_BF16: &str = "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 8, false, false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)";
    const SOFTMAX_F32: &str = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 8, false, false>(float*, float const*, int, int, int, bool const*, int, bool)";

    #[test]
    fn display_names_keep_the_function_and_its_key_template_argument() {
        assert_eq!(display_name(GELU), "vectorized_elementwise_kernel<GeluCUDAKernelImpl>");
        assert_eq!(display_name(ADAM), "multi_tensor_apply_kernel<FusedAdamMathFunctor>");
        assert_eq!(display_name(COPY), "elementwise_kernel<direct_copy_kernel_cuda>");
        assert_eq!(display_name(MUL), "vectorized_elementwise_kernel<MulFunctor>");
        assert_eq!(display_name(MEAN), "reduce_kernel<MeanOps>");
        assert_eq!(display_name(SOFTMAX_BF16), "softmax_warp_forward");
        assert_eq!(
            display_name("nvjet_tst_128x64_64x6_2x1_v_bz_coopA_TNN"),
            "nvjet_tst_128x64_64x6_2x1_v_bz_coopA_TNN"
        );
        assert_eq!(display_name("void matmul_tiled<16>(float const*, float*, int)"), "matmul_tiled<16>");
        assert_eq!(display_name("_Z3fooi"), "_Z3fooi");
        assert_eq!(display_name(""), "");
        // Malformed input does not panic.
        for bad in ["a<<b", "f(", ">>><<<", "x<(,>", "::<>::"] {
            let _ = display_name(bad);
        }
    }

    #[test]
    fn no_two_display_names_are_alike() {
        let all = [GELU, ADAM, COPY, MUL, MEAN, SOFTMAX_BF16, SOFTMAX_F32, "void k<1>(int)", "void k<2>(int)"];
        let d = display_names(all);
        assert_eq!(d[SOFTMAX_BF16], "softmax_warp_forward<BFloat16>");
        assert_eq!(d[SOFTMAX_F32], "softmax_warp_forward<float>");
        let sum = |t: &str| {
            format!("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<{t}, at::native::func_wrapper_t<{t}, at::native::sum_functor<{t}, float, {t}>::operator()(at::TensorIterator&)::{{lambda(float, float)#1}}>, unsigned int, {t}, 4, 4> >(at::native::ReduceOp<{t}, at::native::func_wrapper_t<{t}, at::native::sum_functor<{t}, float, {t}>::operator()(at::TensorIterator&)::{{lambda(float, float)#1}}>, unsigned int, {t}, 4, 4>)")
        };
        let (bf, fl) = (sum("c10::BFloat16"), sum("float"));
        let d2 = display_names([bf.as_str(), fl.as_str()]);
        assert_eq!(
            (d2[&bf].as_str(), d2[&fl].as_str()),
            ("reduce_kernel<sum_functor, BFloat16>", "reduce_kernel<sum_functor, float>")
        );
        assert_eq!(d["void k<1>(int)"], "k<1>");
        assert_eq!(d[GELU], "vectorized_elementwise_kernel<GeluCUDAKernelImpl>");
        let distinct: std::collections::HashSet<&String> = d.values().collect();
        assert_eq!(distinct.len(), all.len());
        assert_eq!(
            strip_namespaces("at::native::F<c10::Half, std::array<char*, 2ul> >"),
            "F<Half, array<char*, 2ul> >"
        );
        assert_eq!(
            display_name_long("void k<at::A<float>, 3, b::f(int)::{lambda()#1}>(int)").as_deref(),
            Some("k<A<float>, 3, f>")
        );
        // Same long form too: numbered.
        let d = display_names(["void k<a::T>(int)", "void k<b::T>(int)"]);
        let mut v: Vec<&String> = d.values().collect();
        v.sort();
        assert_eq!(v, ["k<T> #1", "k<T> #2"]);
    }

    #[test]
    fn a_library_s_variants_are_one_family_and_template_sizes_are_dropped() {
        let f = |n: &str| kernel_family(n);
        let a = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas";
        let b = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas";
        assert_eq!(f(a), f(b));
        assert_eq!(f("nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_splitK_bias_NNT"), f(a));
        assert_eq!(f("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nt_align1>(cutlass_80_simt_sgemm_128x64_8x5_nt_align1::Params)"), f(a));
        let r = |a: &str| {
            format!("void at::native::reduce_kernel<{a}, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{{lambda(float, float)#1}}>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{{lambda(float, float)#1}}>, unsigned int, float, 4, 4>)")
        };
        assert_eq!(f(&r("128, 4")), f(&r("512, 1")));
        assert_ne!(f(&r("128, 4")), f(a));
        // Kernels that do different things stay apart.
        let gelu = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#1}::operator()() const::{lambda()#1}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#1}::operator()() const::{lambda()#1}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)";
        let mul = "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)";
        assert_ne!(f(gelu), f(mul));
        // PyTorch's elementwise launchers by alignment (a GNN's batches of
        // odd node counts), and its concatenation copies.
        let eq =
            "at::native::BinaryFunctor<long, long, bool, at::native::(anonymous namespace)::CompareEqFunctor<long> >";
        let vectorized = |v: u32| {
            format!("void at::native::vectorized_elementwise_kernel<{v}, {eq}, std::array<char*, (unsigned long)3> >(int, {eq}, std::array<char*, (unsigned long)3>)")
        };
        let unrolled = format!("void at::native::unrolled_elementwise_kernel<{eq}, std::array<char*, (unsigned long)3>, 4, TrivialOffsetCalculator<2, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithoutCast, at::native::memory::StoreWithoutCast>(int, {eq}, std::array<char*, (unsigned long)3>, TrivialOffsetCalculator<2, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithoutCast, at::native::memory::StoreWithoutCast)");
        assert_eq!(f(&vectorized(4)), f(&unrolled));
        assert_eq!(f(&vectorized(2)), f(&unrolled));
        assert_ne!(f(&vectorized(4)), f(mul));
        let cat = |v: &str| {
            format!("void at::native::(anonymous namespace)::CatArrayBatchedCopy_{v}<at::native::(anonymous namespace)::OpaqueType<(unsigned int)8>, unsigned int, 2, 128, 1, 16>(at::native::(anonymous namespace)::OpaqueType<(unsigned int)8>*, unsigned int)")
        };
        assert_eq!(f(&cat("alignedK_contig")), f(&cat("vectorized")));
        // Reductions of other operations stay apart.
        let reduce = |op: &str| {
            format!("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::{op}<float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::{op}<float>, unsigned int, float, 4, 4>)")
        };
        assert_ne!(f(&reduce("MaxOps")), f(&reduce("MinOps")));
        // A kernel that takes CUTLASS's types is no product; CUTLASS 3's
        // GEMM entry point is.
        let flash = "void flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::half_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::half_t> >, false, true>(Flash_fwd_params)";
        assert_ne!(f(flash), f(a));
        let sm90 = "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, cutlass::gemm::collective::CollectiveMma<...> > >(cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int> >::Params)";
        assert_eq!(f(sm90), f(a));
    }
}
