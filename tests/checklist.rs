//! The kernel checklist on the planted suite (`examples/cuda/checklist.cu`),
//! replayed from counters measured on an H200 (`tests/data/checklist/suite.json`,
//! written by `bench/checklist/run.sh`): each planted kernel gets its cause
//! and no other checklist cause, each clean twin none of the planted ones.
//! Then the rules' edges on made-up counters.

mod records;
use gpuscope::analysis::{analyze, Analysis};
use gpuscope::report::Report;
use gpuscope::testing::{HostEvent, Replay};
use records::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::CString;

const CHECKLIST: [&str; 5] = ["uncoalesced-access", "bank-conflicts", "occupancy-limit", "fp32-matmul", "warp-stalls"];

/// One kernel of the suite: its launch shape and its counters per launch.
struct Measured {
    /// The suite's label for it.
    name: String,
    /// Its name as CUPTI gave it (cuBLAS names its own).
    kernel: String,
    mean_ns: u64,
    grid: i32,
    block: i32,
    regs: u16,
    smem: i32,
    values: BTreeMap<String, f64>,
}

fn suite() -> Vec<Measured> {
    let text = include_str!("data/checklist/suite.json");
    let v: Value = serde_json::from_str(text).expect("the fixture is JSON");
    v["kernels"]
        .as_array()
        .expect("kernels")
        .iter()
        .map(|k| Measured {
            name: k["name"].as_str().unwrap().to_string(),
            kernel: k["kernel"].as_str().or(k["name"].as_str()).unwrap().to_string(),
            mean_ns: k["mean_ns"].as_u64().unwrap(),
            grid: k["grid"].as_i64().unwrap() as i32,
            block: k["block"].as_i64().unwrap() as i32,
            regs: k["registers"].as_u64().unwrap() as u16,
            smem: k["shared_bytes"].as_i64().unwrap() as i32,
            values: k["values"].as_object().unwrap().iter().map(|(m, x)| (m.clone(), x.as_f64().unwrap())).collect(),
        })
        .collect()
}

/// Replays `kernels`, each launched 3 times and measured each time.
fn replay(kernels: &[Measured]) -> (Report, Analysis) {
    let names = gpuscope::MetricSet::default().with_checklist().names().to_vec();
    let mut rp = Replay::with_metrics(vec![h200()], 0, &names);
    let mut records = Vec::new();
    let (mut corr, mut t) = (1u32, 1_000_000u64);
    for k in kernels {
        // Leaked: a record's name lives as long as the replay reads it.
        let name: &'static std::ffi::CStr = Box::leak(CString::new(k.kernel.clone()).unwrap().into_boxed_c_str());
        for _ in 0..3 {
            rp.host_event(HostEvent::Launch {
                correlation_id: corr,
                tid: 1,
                path: 0,
                instance: 0,
                graph: false,
                profiled: true,
                inherited: false,
                ts: t,
                cost_ns: 0,
                prev_call_ns: 0,
            });
            let values = names.iter().map(|n| k.values.get(n).copied().unwrap_or(0.0)).collect();
            rp.host_event(HostEvent::KernelMetrics { correlation_id: corr, values: Some(values) });
            records.extend(kernel_shaped(
                name,
                corr,
                t + 5_000,
                t + 5_000 + k.mean_ns,
                k.grid,
                k.block,
                k.regs,
                k.smem,
            ));
            (corr, t) = (corr + 1, t + k.mean_ns + 20_000);
        }
    }
    rp.buffer(&records);
    let r = rp.finish(0, t + 1_000_000);
    let a = analyze(&r);
    (r, a)
}

/// The checklist causes of the kernel labelled `label` in the suite (or
/// named so).
fn causes(a: &Analysis, label: &str) -> Vec<String> {
    let kernel = suite().into_iter().find(|k| k.name == label).map_or(label.to_string(), |k| k.kernel);
    a.findings
        .iter()
        .filter(|f| f.kernel.as_deref() == Some(kernel.as_str()) && CHECKLIST.contains(&f.kind.as_str()))
        .map(|f| f.kind.as_str().to_string())
        .collect()
}

#[test]
fn each_planted_kernel_gets_its_cause_and_no_other_and_the_twins_none_of_them() {
    let suite = suite();
    let (r, a) = replay(&suite);
    let planted = [
        ("strided_copy", Some("uncoalesced-access")),
        ("coalesced_copy", None),
        ("transpose_conflicted", Some("bank-conflicts")),
        ("transpose_padded", None),
        ("registers_limited", Some("occupancy-limit")),
        ("registers_light", None),
        ("sgemm_fma", Some("fp32-matmul")),
        ("cublas_tf32_gemm", None),
        ("barrier_heavy", Some("warp-stalls")),
        ("barrier_free", None),
    ];
    let table = r.to_table(120);
    for (kernel, cause) in planted {
        let got = causes(&a, kernel);
        match cause {
            Some(c) => assert_eq!(got, [c], "{kernel}\n{table}"),
            // A twin may show what it is (a dependent-load chain waits on
            // memory), never a cause planted in the suite's other kernels.
            None => assert!(got.iter().all(|g| g == "warp-stalls"), "{kernel}: {got:?}\n{table}"),
        }
    }
    // The evidence says how far from the ideal, in ncu's terms.
    let msg = |kind: &str, label: &str| {
        let kernel = suite.iter().find(|k| k.name == label).unwrap().kernel.clone();
        let f = a.findings.iter().find(|f| f.kind == kind && f.kernel.as_deref() == Some(kernel.as_str()));
        f.map(|f| f.message.clone()).unwrap_or_default()
    };
    let said = [
        ("uncoalesced-access", "strided_copy", "32.0 sectors per request where 4.0 would do (12% of the fetched bytes"),
        ("bank-conflicts", "transpose_conflicted", "loads with 32.2-way bank conflicts"),
        ("occupancy-limit", "registers_limited", "theoretical occupancy 25% limited by registers per thread"),
        ("fp32-matmul", "sgemm_fma", "tensor cores 0.0%"),
        ("warp-stalls", "barrier_heavy", "wait at barriers for sibling warps (barrier)"),
    ];
    for (kind, kernel, text) in said {
        assert!(msg(kind, kernel).contains(text), "{kind} on {kernel}: {}", msg(kind, kernel));
    }
    // The specific cause replaces the generic ones on the same kernel.
    for (kind, label) in [("memory-bound", "strided_copy"), ("low-occupancy", "registers_limited")] {
        let kernel = suite.iter().find(|k| k.name == label).unwrap().kernel.clone();
        assert!(
            !a.findings.iter().any(|f| f.kind == kind && f.kernel.as_deref() == Some(kernel.as_str())),
            "{kind} on {label}"
        );
    }
    // The table shows them.
    assert!(table.contains("uncoalesced global loads"), "{table}");
}

/// One kernel of `sectors` per request over `requests`, `bytes` asked for
/// (`None`: not counted), on top of the suite's padded transpose.
fn copy_with(f: impl Fn(&mut BTreeMap<String, f64>)) -> Vec<String> {
    let mut k = suite().into_iter().find(|k| k.name == "transpose_padded").unwrap();
    f(&mut k.values);
    let (_, a) = replay(&[k]);
    causes(&a, "transpose_padded")
}

#[test]
fn coalescing_is_judged_from_the_share_of_bytes_used_or_else_only_beyond_the_widest_access() {
    use gpuscope_report::model::metrics::{GLOBAL_LD_REQUESTS, GLOBAL_LD_SECTORS, GLOBAL_LD_USE};
    // 16 sectors a request: 16-byte loads, coalesced, use every byte.
    let sectors = |per_request: f64, used: Option<f64>| {
        copy_with(move |c| {
            let r = c[GLOBAL_LD_REQUESTS];
            c.insert(GLOBAL_LD_SECTORS.into(), per_request * r);
            match used {
                Some(u) => c.insert(GLOBAL_LD_USE.into(), u),
                None => c.remove(GLOBAL_LD_USE),
            };
        })
    };
    assert_eq!(sectors(16.0, Some(100.0)), Vec::<String>::new());
    // The same sectors for 4-byte loads: a quarter used.
    assert_eq!(sectors(16.0, Some(25.0)), ["uncoalesced-access"]);
    // At the threshold (60% used) and just above it.
    assert_eq!(sectors(8.0, Some(60.0)), ["uncoalesced-access"]);
    assert_eq!(sectors(8.0, Some(60.5)), Vec::<String>::new());
    // Not measured (or read 0, as on demand): 16 sectors a request could be
    // either; more can only be uncoalesced.
    assert_eq!(sectors(16.0, None), Vec::<String>::new());
    assert_eq!(sectors(16.0, Some(0.0)), Vec::<String>::new());
    assert_eq!(sectors(16.5, None), ["uncoalesced-access"]);
}

#[test]
fn mild_bank_conflicts_are_not_a_finding() {
    use gpuscope_report::model::metrics::{SHARED_ST_CONFLICTS, SHARED_ST_REQUESTS, SHARED_ST_WAVEFRONTS};
    let conflicts = |per_request: f64| {
        copy_with(move |c| {
            c.insert(SHARED_ST_REQUESTS.into(), 1e6);
            c.insert(SHARED_ST_WAVEFRONTS.into(), 1e6 * (1.0 + per_request));
            c.insert(SHARED_ST_CONFLICTS.into(), 1e6 * per_request);
        })
    };
    // ncu flags 1.1-way on the suite's SGEMM; gpuscope from 2-way.
    assert_eq!(conflicts(0.13), Vec::<String>::new());
    assert_eq!(conflicts(1.0), ["bank-conflicts"]);
}

#[test]
fn a_library_kernel_s_occupancy_and_stalls_are_no_advice_for_the_program() {
    // registers_limited's counters and shape under a cuBLAS kernel's name.
    let mut k = suite().into_iter().find(|k| k.name == "registers_limited").unwrap();
    k.name = "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x16_cublas".into();
    k.kernel = k.name.clone();
    let (_, a) = replay(std::slice::from_ref(&k));
    // An fp32 GEMM of cuBLAS's with the tensor cores idle: the fix is a
    // setting (TF32), not its registers.
    assert_eq!(causes(&a, &k.name), ["fp32-matmul"]);
    // Its own kernel gets the limiter.
    k.name = "registers_limited".into();
    k.kernel = suite().into_iter().find(|k| k.name == "registers_limited").unwrap().kernel;
    let (_, a) = replay(&[k]);
    assert_eq!(causes(&a, "registers_limited"), ["occupancy-limit"]);
}

#[test]
fn a_used_share_that_reads_zero_is_said_and_coalescing_falls_back_to_sectors_per_request() {
    use gpuscope_report::model::metrics::{GLOBAL_LD_USE, GLOBAL_ST_USE};
    // As a pass asked of a live process measured them: no instrumentation.
    let mut kernels = suite();
    for k in &mut kernels {
        k.values.insert(GLOBAL_LD_USE.into(), 0.0);
        k.values.insert(GLOBAL_ST_USE.into(), 0.0);
    }
    let (_, a) = replay(&kernels);
    assert_eq!(causes(&a, "strided_copy"), ["uncoalesced-access"]);
    let f = a.findings.iter().find(|f| f.kind == "uncoalesced-access").unwrap();
    assert!(f.message.contains("32.0 sectors per request, more than the widest access needs (16)"), "{}", f.message);
    assert!(a.notes.iter().any(|n| n.contains("used bytes (smsp__sass_*) read 0")), "{:?}", a.notes);
    let (_, a) = replay(&suite());
    assert!(!a.notes.iter().any(|n| n.contains("smsp__sass_")), "{:?}", a.notes);
}

/// The checklist causes of the suite's `name` with `f` applied to its
/// counters first.
fn causes_of(name: &str, f: impl Fn(&mut Measured)) -> Vec<String> {
    let mut k = suite().into_iter().find(|k| k.name == name).unwrap();
    f(&mut k);
    let kernel = k.kernel.clone();
    let (_, a) = replay(&[k]);
    causes(&a, &kernel)
}

#[test]
fn each_rule_fires_at_its_threshold_and_not_just_short_of_it() {
    use gpuscope_report::model::metrics::{
        ACHIEVED_OCCUPANCY, FMA_PIPE_ACTIVE, SHARED_LD_CONFLICTS, SHARED_LD_REQUESTS, SHARED_LD_WAVEFRONTS,
        TENSOR_ACTIVE, WARP_STALLS,
    };
    let none = Vec::<String>::new();
    // Bank conflicts: one a request on average and a quarter of the
    // wavefronts (4 requests, 4 conflicts of 16 wavefronts).
    let conflicts = |per_request: f64, wavefronts_per_request: f64| {
        causes_of("transpose_padded", move |k| {
            k.values.insert(SHARED_LD_REQUESTS.into(), 1e6);
            k.values.insert(SHARED_LD_WAVEFRONTS.into(), 1e6 * wavefronts_per_request);
            k.values.insert(SHARED_LD_CONFLICTS.into(), 1e6 * per_request);
        })
    };
    assert_eq!(conflicts(1.0, 4.0), ["bank-conflicts"]);
    assert_eq!(conflicts(0.99, 3.96), none);
    assert_eq!(conflicts(1.0, 4.01), none, "under 25% of the wavefronts");
    // Occupancy: theoretical 50% or less (registers: 64 a thread, blocks
    // of 256 -> 50%; 48 -> 62.5%), reached to 70%.
    let limited = |regs: u16, achieved: f64| {
        causes_of("registers_limited", move |k| {
            k.regs = regs;
            k.values.insert(ACHIEVED_OCCUPANCY.into(), achieved);
        })
    };
    assert_eq!(limited(64, 35.0), ["occupancy-limit"]);
    // Short of either, the chain's stalls are named instead.
    assert_eq!(limited(48, 44.0), ["warp-stalls"], "theoretical 62.5%");
    assert_eq!(limited(64, 34.9), ["warp-stalls"], "under 70% of the theoretical 50%");
    // fp32 matmul: tensor pipe at most 1%, FMA pipe at least 10%.
    let matmul = |tensor: f64, fma: f64| {
        causes_of("sgemm_fma", move |k| {
            k.values.insert(TENSOR_ACTIVE.into(), tensor);
            k.values.insert(FMA_PIPE_ACTIVE.into(), fma);
        })
    };
    assert_eq!(matmul(1.0, 10.0), ["fp32-matmul"]);
    // Short of it, what its warps wait for (the MIO queue) is named.
    assert_eq!(matmul(1.01, 10.0), ["warp-stalls"]);
    assert_eq!(matmul(1.0, 9.99), ["warp-stalls"]);
    // Stalls: barriers at 30% of the stalls; another reason at 40% on a
    // latency-bound kernel (coalesced_copy: latency-bound at about half of
    // the DRAM peak).
    let stalled = |name: &str, reason: &str, share: f64| {
        let reason = reason.to_string();
        causes_of(name, move |k| {
            for (r, m) in WARP_STALLS {
                // The rest spread over three others, each smaller.
                let rest = ["not_selected", "wait", "math_pipe_throttle"];
                let v = if r == reason {
                    share
                } else if rest.contains(&r) {
                    (100.0 - share) / 3.0
                } else {
                    0.0
                };
                k.values.insert(m.into(), v);
            }
        })
    };
    assert_eq!(stalled("barrier_heavy", "barrier", 30.0), ["warp-stalls"]);
    assert_eq!(stalled("barrier_heavy", "barrier", 29.9), none);
    assert_eq!(stalled("coalesced_copy", "long_scoreboard", 40.0), ["warp-stalls"]);
    assert_eq!(stalled("coalesced_copy", "long_scoreboard", 39.9), none);
}

#[test]
fn a_kernel_gets_one_checklist_cause_the_costliest() {
    use gpuscope_report::model::metrics::{SHARED_LD_CONFLICTS, SHARED_LD_REQUESTS, SHARED_LD_WAVEFRONTS};
    // The strided copy with conflicted shared loads as well: the
    // uncoalesced loads waste 78% of its sectors, the conflicts are 30%
    // of its wavefronts.
    let both = causes_of("strided_copy", |k| {
        k.values.insert(SHARED_LD_REQUESTS.into(), 1e6);
        k.values.insert(SHARED_LD_WAVEFRONTS.into(), 1e6 / 0.7);
        k.values.insert(SHARED_LD_CONFLICTS.into(), 1e6 / 0.7 * 0.3);
    });
    assert_eq!(both, ["uncoalesced-access"]);
    // Conflicts that cost more win.
    let both = causes_of("strided_copy", |k| {
        k.values.insert(SHARED_LD_REQUESTS.into(), 1e6);
        k.values.insert(SHARED_LD_WAVEFRONTS.into(), 32e6);
        k.values.insert(SHARED_LD_CONFLICTS.into(), 31e6);
    });
    assert_eq!(both, ["bank-conflicts"]);
}

#[test]
fn uncoalesced_access_is_judged_per_direction_on_its_share_of_the_traffic_and_not_on_compute_bound_kernels() {
    use gpuscope_report::model::metrics::{GLOBAL_ST_REQUESTS, GLOBAL_ST_SECTORS, GLOBAL_ST_USE, ISSUE_ACTIVE};
    // The padded transpose's stores made uncoalesced (12.5% used): found as
    // stores while they carry 10% of its sectors or more.
    let stores = |sectors_per_request: f64| {
        causes_of("transpose_padded", move |k| {
            let r = k.values[GLOBAL_ST_REQUESTS];
            k.values.insert(GLOBAL_ST_SECTORS.into(), sectors_per_request * r);
            k.values.insert(GLOBAL_ST_USE.into(), 12.5);
        })
    };
    assert_eq!(stores(32.0), ["uncoalesced-access"]);
    let msg = {
        let mut k = suite().into_iter().find(|k| k.name == "transpose_padded").unwrap();
        let r = k.values[GLOBAL_ST_REQUESTS];
        k.values.insert(GLOBAL_ST_SECTORS.into(), 32.0 * r);
        k.values.insert(GLOBAL_ST_USE.into(), 12.5);
        let (_, a) = replay(&[k]);
        a.findings.iter().find(|f| f.kind == "uncoalesced-access").unwrap().message.clone()
    };
    assert!(msg.contains("uncoalesced global stores"), "{msg}");
    // The loads carry 4 sectors a request: stores of 0.4 a request are
    // under a tenth of the sectors.
    assert_eq!(stores(0.4), Vec::<String>::new());
    // A compute-bound kernel's waste is not its time: none.
    let busy = causes_of("strided_copy", |k| {
        k.values.insert(ISSUE_ACTIVE.into(), 95.0);
        k.values.insert("dram__bytes_read.sum".into(), 0.0);
        k.values.insert("dram__bytes_write.sum".into(), 0.0);
    });
    assert_eq!(busy, Vec::<String>::new());
}

#[test]
fn a_library_s_conflicts_and_stalls_are_not_the_program_s_and_names_that_only_look_like_products_are_not_products() {
    // The conflicted transpose and the barrier kernel under library names.
    for (label, library) in
        [("transpose_conflicted", "cutlass_80_tensorop_transpose"), ("barrier_heavy", "cudnn_barrier_kernel")]
    {
        let got = causes_of(label, |k| {
            k.kernel = library.into();
            k.name = library.into();
        });
        assert_eq!(got, Vec::<String>::new(), "{library}");
    }
    // sgemm_fma's counters under Inductor's name for a type conversion, and
    // under a TF32 GEMM's name: no product on the FMA pipes.
    for name in ["triton_poi_fused_add_convert_element_type_mul_0", "sm80_xmma_gemm_tf32f32_tf32f32_f32_nn"] {
        let got = causes_of("sgemm_fma", |k| {
            k.kernel = name.into();
            k.name = name.into();
        });
        assert!(!got.contains(&"fp32-matmul".to_string()), "{name}: {got:?}");
    }
    // A convolution's name is a product.
    let got = causes_of("sgemm_fma", |k| {
        k.kernel = "implicit_convolve_sgemm".into();
        k.name = "implicit_convolve_sgemm".into();
    });
    assert_eq!(got, ["fp32-matmul"]);
}

#[test]
fn the_limiter_is_named_for_shared_memory_and_for_small_blocks() {
    use gpuscope_report::model::metrics::ACHIEVED_OCCUPANCY;
    let message = |f: &dyn Fn(&mut Measured)| {
        let mut k = suite().into_iter().find(|k| k.name == "registers_limited").unwrap();
        f(&mut k);
        let (_, a) = replay(&[k]);
        a.findings.iter().find(|f| f.kind == "occupancy-limit").map(|f| f.message.clone()).unwrap_or_default()
    };
    // 24 registers, 100 KiB of shared memory a block: 2 blocks of 8 warps.
    let smem = message(&|k| {
        k.regs = 24;
        k.smem = 100 * 1024;
        k.values.insert(ACHIEVED_OCCUPANCY.into(), 24.0);
    });
    assert!(smem.contains("limited by shared memory per block"), "{smem}");
    // Blocks of 32 threads: 32 blocks of one warp, half the SM's 64.
    let blocks = message(&|k| {
        k.regs = 24;
        k.block = 32;
        k.grid = 132 * 32 * 4;
        k.values.insert(ACHIEVED_OCCUPANCY.into(), 48.0);
    });
    assert!(blocks.contains("limited by the blocks an SM holds"), "{blocks}");
}

/// A measured FP32 product is judged by its pipes alone: the name rule
/// (for kernels no counters measured) stays out.
#[test]
fn a_measured_fp32_product_is_judged_by_its_counters_not_its_name() {
    let mut k = suite().into_iter().find(|k| k.name == "sgemm_fma").unwrap();
    k.kernel = "ampere_sgemm_128x64_nn".into();
    k.name = k.kernel.clone();
    let (_, a) = replay(&[k]);
    let kinds: Vec<&str> = a.findings.iter().map(|f| f.kind.as_str()).collect();
    assert!(kinds.contains(&"fp32-matmul") && !kinds.contains(&"fp32-matmul-named"), "{kinds:?}");
}
