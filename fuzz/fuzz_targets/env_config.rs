//! The environment gpuscope reads: arbitrary `NAME=value` lines (names from
//! the GPUSCOPE_* set, so most inputs reach a parser). Each is accepted or
//! refused with an error naming the variable, never a panic.
#![no_main]

use gpuscope::config::EnvConfig;
use libfuzzer_sys::fuzz_target;

const NAMES: &[&str] = &[
    "GPUSCOPE_MODE",
    "GPUSCOPE_OUTPUT",
    "GPUSCOPE_FORMAT",
    "GPUSCOPE_METRICS",
    "GPUSCOPE_KERNELS",
    "GPUSCOPE_NVTX",
    "GPUSCOPE_LAUNCH_COUNT",
    "GPUSCOPE_TRACE",
    "GPUSCOPE_QUIET",
    "GPUSCOPE_FLOPS",
    "GPUSCOPE_WORK",
    "GPUSCOPE_EVERY",
    "GPUSCOPE_THREAD_RANGES",
    "GPUSCOPE_SAMPLING_INTERVAL",
    "GPUSCOPE_TRACE_WINDOWS",
    "LOCAL_RANK",
    "RANK",
];

fuzz_target!(|text: &str| {
    let vars: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            // A short key picks a name from the list, so the fuzzer need
            // not spell variable names.
            let name = match k.parse::<usize>() {
                Ok(i) => NAMES[i % NAMES.len()].to_string(),
                Err(_) => k.to_string(),
            };
            Some((name, v.to_string()))
        })
        .collect();
    let get = |k: &str| vars.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if let Err(e) = EnvConfig::from_vars(&get, 4242) {
        assert!(!e.message().is_empty());
    }
});
