//! JSON: the report as serde writes it, with the analysis woven in: each
//! range and heavy kernel gets an `analysis` object, the top level the
//! `answer`, `findings`, `peaks` and `analysis_notes`. Reading a report back ignores
//! them; the analysis is recomputed from the data.

use crate::analysis::Analysis;
use crate::report::Report;
use serde_json::{json, Value};

pub(super) fn render(r: &Report, a: &Analysis) -> String {
    let Ok(mut v) = serde_json::to_value(r) else { return String::new() };
    if let Some(ranges) = v.get_mut("ranges").and_then(Value::as_array_mut) {
        // The analysis has one entry per range, in the report's order.
        for (g, ga) in ranges.iter_mut().zip(&a.ranges) {
            if let (Some(obj), Ok(x)) = (g.as_object_mut(), serde_json::to_value(ga)) {
                obj.insert("analysis".into(), x);
            }
        }
    }
    if let Some(kernels) = v.get_mut("kernels").and_then(Value::as_array_mut) {
        for k in kernels.iter_mut() {
            let name = k.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            if let Some(ka) = a.kernels.iter().find(|ka| ka.name == name) {
                if let (Some(obj), Ok(x)) = (k.as_object_mut(), serde_json::to_value(ka)) {
                    obj.insert("analysis".into(), x);
                }
            }
        }
    }
    if let Some(obj) = v.as_object_mut() {
        obj.insert("answer".into(), serde_json::to_value(&a.answer).unwrap_or(Value::Null));
        obj.insert("findings".into(), serde_json::to_value(&a.findings).unwrap_or(Value::Null));
        obj.insert("peaks".into(), serde_json::to_value(&a.peaks).unwrap_or(Value::Null));
        obj.insert("analysis_notes".into(), json!(a.notes));
    }
    serde_json::to_string_pretty(&v).unwrap_or_default()
}
