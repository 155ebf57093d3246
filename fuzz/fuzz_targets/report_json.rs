//! A report file of arbitrary text: read, and when it is a report, analysed
//! and rendered in every format and compared both ways with itself, as
//! `gpuscope report` and `--compare` do.
#![no_main]

use gpuscope_report::Report;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let Ok(r) = Report::from_json(text) else { return };
    let _ = gpuscope_report::analysis::analyze(&r);
    let _ = (r.to_table(100), r.to_json(), r.to_csv(), r.to_chrome_trace(), r.to_openmetrics(), r.compare(&r, 80));
    let _ = gpuscope_report::report::JobReport::merge(&[("a".into(), r.clone()), ("b".into(), r)]);
});
