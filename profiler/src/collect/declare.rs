//! The program's declarations of what its ranges do (see
//! [`crate::model::declared`]): process-wide, kept across sessions, and
//! copied into each report when its session stops.

use crate::error::{Error, ErrorKind, Result};
use crate::model::declared::Declared;
use std::sync::Mutex;

static DECLARED: Mutex<Vec<Declared>> = Mutex::new(Vec::new());

fn check(range: &str, what: &str, v: f64) -> Result<()> {
    if range.trim_matches('/').is_empty() {
        return Err(Error::new(ErrorKind::InvalidConfig, format!("{what}: the range name is empty")));
    }
    if !(v.is_finite() && v > 0.0) {
        return Err(Error::new(
            ErrorKind::InvalidConfig,
            format!("{what} for range {range:?} = {v}; allowed: a finite number above 0"),
        ));
    }
    Ok(())
}

fn update(range: &str, f: impl FnOnce(&mut Declared)) {
    let mut all = DECLARED.lock().unwrap_or_else(|e| e.into_inner());
    let range = range.trim_matches('/');
    let i = match all.iter().position(|d| d.range == range) {
        Some(i) => i,
        None => {
            all.push(Declared { range: range.to_string(), flops: None, work: None, unit: None });
            all.len() - 1
        }
    };
    f(&mut all[i]);
}

/// Declares the model FLOPs one call of `range` performs (for a training
/// step, usually `6 * parameters * tokens`): the report then gives the
/// range's model FLOPs utilisation. `range` is a path (`train/step`) or,
/// without `/`, a range name at any depth. A later call replaces it.
pub fn declare_flops(range: &str, flops_per_call: f64) -> Result<()> {
    check(range, "declared FLOPs", flops_per_call)?;
    update(range, |d| d.flops = Some(flops_per_call));
    Ok(())
}

/// Declares the work one call of `range` processes (`amount` of `unit`:
/// 4096 tokens, 256 samples): the report then gives its throughput per
/// second.
pub fn declare_work(range: &str, amount_per_call: f64, unit: &str) -> Result<()> {
    check(range, "declared work", amount_per_call)?;
    let unit = unit.trim();
    update(range, |d| {
        d.work = Some(amount_per_call);
        d.unit = (!unit.is_empty()).then(|| unit.to_string());
    });
    Ok(())
}

/// Every declaration so far.
pub(crate) fn all() -> Vec<Declared> {
    DECLARED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_checked_and_a_later_one_replaces_an_earlier_one() {
        declare_flops("/declare-test/step/", 1e12).unwrap();
        declare_flops("declare-test/step", 2e12).unwrap();
        declare_work("declare-test/step", 4096.0, "tokens").unwrap();
        let d = all().into_iter().find(|d| d.range == "declare-test/step").unwrap();
        assert_eq!((d.flops, d.work, d.unit.as_deref()), (Some(2e12), Some(4096.0), Some("tokens")));
        let e = declare_flops("step", f64::NAN).unwrap_err().to_string();
        assert!(e.contains("\"step\"") && e.contains("allowed: a finite number above 0"), "{e}");
        assert!(declare_work("", 1.0, "x").unwrap_err().to_string().contains("range name is empty"));
        assert!(declare_flops("step", -1.0).is_err());
    }
}
