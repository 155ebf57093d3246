//! What the program declares a range does per call: the FLOPs its model
//! math takes (`6 * params * tokens` for a training step) and the work it
//! processes (tokens, samples). The analysis turns them into model FLOPs
//! utilisation and throughput.

use serde::{Deserialize, Serialize};

/// Declarations for one range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Declared {
    /// The range: a full path (`train/step`) or, without `/`, a range name
    /// at any depth.
    pub range: String,
    /// Model FLOPs per call of the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<f64>,
    /// Work items per call (tokens, samples, images).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<f64>,
    /// What a work item is ("tokens").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

impl Declared {
    /// Whether this declaration is for the range at `path` (`a/b/c`).
    pub fn matches(&self, path: &str) -> bool {
        if self.range.contains('/') {
            path == self.range.trim_matches('/')
        } else {
            path.rsplit('/').next() == Some(self.range.as_str())
        }
    }
}
