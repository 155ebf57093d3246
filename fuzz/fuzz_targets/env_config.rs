//! The environment gpuscope reads: arbitrary `NAME=value` lines (names from
//! the GPUSCOPE_* set, so most inputs reach a parser). Each is accepted or
//! refused with an error naming the variable, never a panic.
#![no_main]

use gpuscope::config::{EnvConfig, RANK_VARIABLES, SETTINGS};
use libfuzzer_sys::fuzz_target;

/// Every variable of gpuscope's settings (older names too), then the
/// launchers' rank variables.
fn names() -> Vec<&'static str> {
    SETTINGS.iter().flat_map(|s| s.env_names()).chain(RANK_VARIABLES.iter().copied()).collect()
}

fuzz_target!(|text: &str| {
    let names = names();
    let vars: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            // A short key picks a name from the list, so the fuzzer need
            // not spell variable names.
            let name = match k.parse::<usize>() {
                Ok(i) => names[i % names.len()].to_string(),
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
