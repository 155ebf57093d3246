//! What to change for each cause of an idle GPU, from the evidence the
//! report holds, and never what the program already does:
//!
//! - *dispatch* (launch gaps and dispatch idle): the host issued kernels
//!   one by one; the launch rate and the mean kernel time say so. The fix
//!   is fewer launches: CUDA graphs, fusion, more work per launch; graphs
//!   or `torch.compile` already in use are named, not advised.
//! - *host work*: the launching thread ran code of its own between CUDA
//!   calls. Data-loader advice only with evidence of data loading (a range
//!   named for it, batch-sized host-to-device copies in the calls); worker
//!   processes already forked, or pinned copies, are not advised again.
//! - *sync*: the synchronisations made in the calls, per call.
//! - *copies*: pinning only for copies from pageable memory made in the
//!   calls counted (start-up copies are not the step's).

use super::framework::Framework;
use super::RangeAnalysis;
use crate::model::units::{fmt_bytes, fmt_ns};
use crate::report::Report;

/// Launch-bound work: the fix for kernels waiting on their launches.
pub(super) const LAUNCH_OVERHEAD: &str = "Cut per-kernel launch overhead: capture the step in a CUDA graph \
     (torch.compile(mode=\"reduce-overhead\"), torch.cuda.CUDAGraph) or fuse small kernels (torch.compile).";

/// Range names that say they load data (compared without case).
const DATA_NAMES: &[&str] = &["data", "load", "batch", "input", "fetch", "prefetch", "dataloader", "sample"];

pub(crate) use crate::aggregated::timeline::BATCH_BYTES;

/// `1250 launches per call, one every 21.8 us; kernels average 16.6 us`.
pub(super) fn launch_rate(launches: u64, calls: u64, wall_ns: u64, kernel_ns_per_call: f64) -> String {
    if launches == 0 {
        return "no kernel launch".to_string();
    }
    let per_call = launches as f64 / calls.max(1) as f64;
    let every = wall_ns / launches;
    let mean = kernel_ns_per_call / per_call.max(1e-9);
    format!("{per_call:.0} launches per call, one every {}; kernels average {}", fmt_ns(every), fmt_ns(mean as u64))
}

/// Whether a range's last name says it loads data.
fn is_data_range(path: &str) -> bool {
    // By word, from its start: `load_batch`, `DataLoader` and `fetch` are
    // data ranges; a module named `downsample` or `payload` is not.
    let leaf = path.rsplit('/').next().unwrap_or("");
    let words: Vec<String> = words(leaf).collect();
    // A model's layers named after their input (`input_layernorm`,
    // `BatchNorm2d`) load nothing.
    let layer = words.iter().any(|w| {
        w.trim_end_matches(|c: char| c.is_ascii_digit() || c == 'd').ends_with("norm")
            || LAYER_WORDS.contains(&w.as_str())
    });
    !layer && words.iter().any(|w| DATA_NAMES.iter().any(|d| w.starts_with(d)))
}

/// Words of module names that make a range a model's layer, not data
/// loading.
const LAYER_WORDS: &[&str] = &["layer", "conv", "linear", "proj", "attn", "attention", "mlp"];

/// The words of a name, lowercase: split at anything not a letter or
/// digit, and where a lowercase letter meets an uppercase one.
fn words(name: &str) -> impl Iterator<Item = String> + '_ {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        let boundary = !c.is_ascii_alphanumeric() || (prev_lower && c.is_ascii_uppercase());
        if boundary && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_lowercase());
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out.into_iter()
}

/// Whether `inner` is `outer` or a range nested in it.
pub(super) fn within(outer: &str, inner: &str) -> bool {
    inner == outer || (inner.len() > outer.len() && inner.starts_with(outer) && inner.as_bytes()[outer.len()] == b'/')
}

/// What the analysis of one report knows, for advice. Ranges nested in a
/// range are found by prefix in paths sorted once (a report may have tens
/// of thousands), not by scanning all of them per range.
pub(super) struct Evidence<'a> {
    pub r: &'a Report,
    /// The program's own ranges, by path.
    sorted: Vec<&'a RangeAnalysis>,
    /// Paths (the program's own part) where torch.compile's kernels ran.
    triton: Vec<String>,
    /// The framework whose switches advice names.
    pub fw: Framework,
    /// Each GPU's use, when the process drove several.
    pub devices: Vec<super::devices::DeviceUse>,
}

/// Launch-overhead advice for PyTorch without kernel records: whether it
/// compiles is not seen (a loaded Triton is no sign: Hugging Face's
/// transformers loads it for eager models too).
pub(super) const PYTORCH_DISPATCH_UNSEEN: &str = "Launch fewer, larger kernels: capture the step in a CUDA graph \
     (torch.compile(mode=\"reduce-overhead\"), torch.cuda.CUDAGraph), fuse small ops with torch.compile if it is not \
     compiled yet (without kernel records gpuscope cannot see whether it is), or give each launch more work (a larger \
     batch).";

/// The slice of sorted `items` (by `key`) nested in `outer` (not itself).
fn nested_in<'s, T>(items: &'s [T], key: impl Fn(&T) -> &str, outer: &str) -> &'s [T] {
    let from = format!("{outer}/");
    let to = format!("{outer}0"); // '0' follows '/'
    let a = items.partition_point(|x| key(x) < from.as_str());
    let b = items.partition_point(|x| key(x) < to.as_str());
    &items[a..b.max(a)]
}

impl<'a> Evidence<'a> {
    pub(super) fn new(r: &'a Report, ranges: &'a [RangeAnalysis]) -> Self {
        let mut sorted: Vec<&RangeAnalysis> = ranges.iter().filter(|g| g.library.is_none()).collect();
        sorted.sort_by(|a, b| a.path.cmp(&b.path));
        let mut triton: Vec<String> = r
            .path_kernels
            .iter()
            .filter(|k| k.name.starts_with("triton_"))
            .map(|k| k.path.user_prefix().to_string())
            .collect();
        triton.sort();
        triton.dedup();
        Evidence { r, sorted, triton, fw: Framework::of(r), devices: super::devices::device_use(r) }
    }

    /// Ranges nested in `g` (not `g`), not folded.
    fn inside<'b>(&'b self, g: &'b RangeAnalysis) -> impl Iterator<Item = &'b RangeAnalysis> + 'b {
        nested_in(&self.sorted, |c| c.path.as_str(), &g.path).iter().copied()
    }

    /// Whether torch.compile's (Triton's) kernels run in `path`: the
    /// program compiles already.
    fn compiled(&self, path: &str) -> bool {
        self.triton.binary_search_by(|p| p.as_str().cmp(path)).is_ok()
            || !nested_in(&self.triton, |p| p.as_str(), path).is_empty()
    }

    /// Launch gaps and dispatch: what to change.
    pub(super) fn dispatch(&self, g: &RangeAnalysis) -> String {
        let compiled = self.compiled(&g.path);
        let calls = g.count.max(1);
        let graphs = g.host.graph_launches;
        let eager = g.launches.unwrap_or(0).saturating_sub(graphs) / calls;
        match (graphs > 0, compiled) {
            (true, true) => format!(
                "It already replays CUDA graphs ({} per call) of torch.compile's kernels: give each launch more \
                 work (a larger batch), or bring the {eager} launches per call still made one by one into the \
                 compiled, captured region.",
                graphs / calls
            ),
            (true, false) => format!(
                "It already replays CUDA graphs ({} per call): capture the {eager} launches per call still made \
                 one by one too, fuse small ops (torch.compile), or give each launch more work (a larger batch).",
                graphs / calls
            ),
            (false, true) => "Its kernels are torch.compile's already: add CUDA graphs \
                 (torch.compile(mode=\"reduce-overhead\")) so the step launches once, or give each launch more work \
                 (a larger batch)."
                .to_string(),
            // Without kernel records, whether it compiles is not seen (a
            // loaded Triton is no sign: Hugging Face's transformers loads
            // it for eager models too).
            (false, false) if self.fw == Framework::PyTorch && self.r.kernels.is_empty() => {
                PYTORCH_DISPATCH_UNSEEN.to_string()
            }
            (false, false) if self.fw == Framework::PyTorch => "Launch fewer, larger kernels: capture the step in a \
                 CUDA graph (torch.compile(mode=\"reduce-overhead\"), torch.cuda.CUDAGraph), fuse small ops \
                 (torch.compile), or give each launch more work (a larger batch)."
                .to_string(),
            (false, false) => self.fw.launch_overhead().to_string(),
        }
    }

    /// Where in `g` the host worked: the nested range with most of its
    /// host idle time, when it has at least half.
    pub(super) fn host_where<'b>(&'b self, g: &'b RangeAnalysis) -> Option<&'b RangeAnalysis> {
        let own = g.idle.map_or(0, |i| i.host_ns);
        let best = self.inside(g).max_by_key(|c| c.idle.map_or(0, |i| i.host_ns))?;
        let theirs = best.idle.map_or(0, |i| i.host_ns);
        (own > 0 && theirs as f64 >= 0.5 * own as f64).then_some(best)
    }

    /// Host work: what to change.
    pub(super) fn host_work(&self, g: &RangeAnalysis) -> String {
        let calls = g.count.max(1);
        let data_range = std::iter::once(g)
            .chain(self.inside(g))
            .filter(|c| is_data_range(&c.path))
            .max_by_key(|c| c.idle.map_or(0, |i| i.host_ns))
            .filter(|c| c.idle.is_some_and(|i| i.host_ns > 0));
        let h2d = g.host.h2d_bytes / calls;
        let batch_copies = h2d >= BATCH_BYTES;
        let pageable = g.host.pageable_copies;
        let mut a = if data_range.is_some() || batch_copies {
            let seen = match (data_range, batch_copies) {
                (Some(d), true) => format!("it waits in {} and copies {} per call to the GPU", d.path, fmt_bytes(h2d)),
                (Some(d), false) => format!("it waits in {}", d.path),
                (None, _) => format!("it copies {} per call to the GPU", fmt_bytes(h2d)),
            };
            if self.r.forks > 0 {
                format!(
                    "The step waits for data ({seen}) although loading already runs in other processes ({} forked, \
                     e.g. DataLoader workers): add workers, make per-sample work cheaper (decode and augment on the \
                     GPU), or keep workers busy ahead (persistent_workers=True, a larger prefetch_factor).",
                    self.r.forks
                )
            } else {
                format!(
                    "The step waits for data ({seen}): load and preprocess it off the training thread \
                     (PyTorch: DataLoader(num_workers>0)), with transforms on the GPU."
                )
            }
        } else {
            let place = match self.host_where(g) {
                Some(c) => format!("mostly in {}", c.path),
                None => format!("in {}", g.path),
            };
            format!(
                "The launching thread ran host code of its own between CUDA calls ({place}), and nothing there \
                 looks like data loading (no data range, no batch-sized copies): profile that code ({}) and keep \
                 logging, checkpoints and other CPU work out of the step.",
                self.fw.host_profiler()
            )
        };
        if pageable > 0 {
            a.push_str(&format!(
                " {} of its copies per call are from pageable memory: pin it ({}.",
                fmt_count(pageable as f64 / calls as f64),
                self.fw.pinning()
            ));
        }
        a
    }

    /// Synchronisations: what to change.
    pub(super) fn sync(&self, g: &RangeAnalysis) -> String {
        let calls = g.count.max(1);
        let syncs = g.host.syncs;
        let d2h = g.host.d2h_copies;
        let which = if syncs == 0 && d2h > 0 {
            let how = if self.fw == Framework::PyTorch { ".item(), .cpu(), printing a GPU tensor: " } else { "" };
            format!(
                "the {} device-to-host copies per call ({how}each waits for the GPU)",
                fmt_count(d2h as f64 / calls as f64)
            )
        } else if syncs == 0 {
            "host synchronisations".to_string()
        } else {
            format!(
                "{} host synchronisation(s) per call, {} blocked each time",
                fmt_count(syncs as f64 / calls as f64),
                fmt_ns(g.host.sync_ns / syncs)
            )
        };
        let calls = match self.fw {
            Framework::PyTorch => "no .item(), .cpu(), printing GPU tensors or torch.cuda.synchronize()",
            fw => fw.sync_calls(),
        };
        format!("Take {which} out of the loop: {calls} per step; keep values on the GPU and read them every N steps.")
    }

    /// Copies: what to change.
    pub(super) fn copies(&self, g: &RangeAnalysis) -> String {
        let calls = g.count.max(1);
        let pageable = g.host.pageable_copies;
        if pageable > 0 {
            format!(
                "{} of its {} copies per call use pageable host memory, which blocks the host: pin it ({}, so \
                 copies overlap compute.",
                fmt_count(pageable as f64 / calls as f64),
                fmt_count(g.host.copies as f64 / calls as f64),
                self.fw.pinning()
            )
        } else if g.host.h2d_bytes == 0 && g.host.d2h_copies == 0 {
            "Its copies stay on the device (no host memory involved): avoid them (.contiguous(), .clone(), \
             torch.cat of small pieces) or fuse them into the kernels around them (torch.compile)."
                .to_string()
        } else {
            "Its copies use pinned memory already: overlap them with compute by issuing them on a side stream ahead \
             of use (prefetch the next batch)."
                .to_string()
        }
    }
}

/// `3`, `0.5`, `12`.
fn fmt_count(v: f64) -> String {
    if v >= 10.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_paths_are_found_by_prefix_in_sorted_order() {
        let mut v = vec!["a", "a b", "a/x", "a/x/y", "a0", "ab", "b"];
        v.sort();
        assert_eq!(nested_in(&v, |s| s, "a"), ["a/x", "a/x/y"]);
        assert_eq!(nested_in(&v, |s| s, "a/x"), ["a/x/y"]);
        assert!(nested_in(&v, |s| s, "b").is_empty());
    }

    #[test]
    fn data_ranges_are_told_by_their_last_name() {
        assert!(is_data_range("step/data"));
        assert!(is_data_range("train/LoadBatch"));
        assert!(!is_data_range("data/forward"), "the last name counts");
        assert!(is_data_range("step/DataLoader") && is_data_range("fetch_batch") && is_data_range("prefetch"));
        // By word: ResNet's `downsample` modules load no data.
        assert!(!is_data_range("step/forward/layer3/0/downsample") && !is_data_range("payload"));
        // Layers named after their input.
        assert!(!is_data_range("step/forward/layers.0/input_layernorm") && !is_data_range("forward/BatchNorm2d"));
        assert!(is_data_range("input_pipeline") && is_data_range("next_batch"));
        assert!(is_data_range("normalize_batch") && is_data_range("load_embeddings"));
        assert!(within("step", "step/data") && within("step", "step") && !within("step", "steps"));
        assert_eq!(
            launch_rate(2500, 2, 54_400_000, 20_800_000.0),
            "1250 launches per call, one every 21.8 us; kernels average 16.6 us"
        );
    }
}
