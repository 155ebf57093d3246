//! Each crate reads as one pipeline. The runtime (`profiler/src`): collect
//! -> decode -> attribute -> aggregate, then the report crate's report ->
//! analysis -> render, with the session that runs it and the environment
//! configuration on top. The report crate (`report/src`): model ->
//! aggregated (what the runtime's aggregation hands over) -> report ->
//! analysis -> render. Every stage (a folder or file of a crate's `src`)
//! may name, through `crate::` (and in the runtime `gpuscope_report::`),
//! only itself, the stages before it, and `error` and `model` (the data the
//! stages share). This test reads the sources and fails on any path that
//! reaches forward. The report crate depends on nothing of the runtime's.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The runtime's stages in pipeline order. The report crate's stages
/// (reached as `crate::report` or `gpuscope_report::report`, ...) come
/// after aggregation; what aggregation hands them (`aggregated`, the
/// report crate's) comes before it, as the types it fills.
const ORDER: &[&str] = &[
    "error",
    "model",
    "sorted_deque",
    "collect",
    "decode",
    "attribute",
    "aggregated",
    "aggregate",
    "report",
    "analysis",
    "render",
    "report_tests",
    "control",
    "serve",
    "session",
    "config",
    "integration",
    "activity",
    "testing",
    "lib",
];

/// The report crate's stages in pipeline order.
const REPORT_ORDER: &[&str] = &["error", "model", "aggregated", "report", "analysis", "render", "lib"];

/// Names of a later stage that a file may use, and why.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "report/mod.rs",
        "analysis",
        "a report holds its analysis once computed (`analysis::Analysis`, the cache's type); the analysis stage fills it",
    ),
    (
        "session.rs",
        "config",
        "a profiler's counts are checked against the settings registry, where each one's bounds are written once",
    ),
];

fn rank_in(order: &[&str], stage: &str) -> Option<usize> {
    order.iter().position(|s| *s == stage)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module names a source refers to as `PREFIX::NAME` or
/// `PREFIX::{NAME, ...}` (`PREFIX`: `crate`, and `gpuscope_report` for the
/// runtime), outside comments.
fn refs_of(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut refs = BTreeSet::new();
    let prefix = format!("{prefix}::");
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find(&prefix) {
            // `gpuscope_report::` only as a whole word.
            let whole = rest[..i].chars().next_back().map_or(true, |c| !(c.is_alphanumeric() || c == '_'));
            rest = &rest[i + prefix.len()..];
            if !whole {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let name: String = item.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    if !name.is_empty() {
                        refs.insert(name);
                    }
                }
            } else {
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                refs.insert(name);
            }
        }
    }
    refs
}

fn crate_refs(text: &str) -> BTreeSet<String> {
    refs_of(text, "crate")
}

/// The paths of `src` (a crate's sources) that name a later stage of
/// `order` through one of `prefixes`.
fn against_the_order(src: &Path, order: &[&str], prefixes: &[&str]) -> Vec<String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut wrong = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        let own =
            rank_in(order, &first).unwrap_or_else(|| panic!("{}: not a known stage; add it to ORDER", rel.display()));
        let text = std::fs::read_to_string(f).unwrap();
        for prefix in prefixes {
            for name in refs_of(&text, prefix) {
                let allowed = ALLOWED.iter().any(|(file, n, _)| Path::new(file) == rel && *n == name);
                match rank_in(order, &name) {
                    Some(r) if r <= own || name == "error" || name == "model" || allowed => {}
                    Some(_) => wrong.push(format!("{} names {prefix}::{name}, a later stage", rel.display())),
                    None if *prefix != "crate" && name.chars().next().is_some_and(|c| c.is_uppercase()) => {}
                    None => wrong.push(format!(
                        "{} names {prefix}::{name}, not a stage (name the item by its stage)",
                        rel.display()
                    )),
                }
            }
        }
    }
    wrong
}

#[test]
fn every_stage_names_only_the_stages_before_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut wrong = against_the_order(&root.join("profiler/src"), ORDER, &["crate", "gpuscope_report"]);
    wrong.extend(against_the_order(&root.join("report/src"), REPORT_ORDER, &["crate"]));
    assert!(wrong.is_empty(), "imports against the pipeline order:\n{}", wrong.join("\n"));
}

#[test]
fn the_report_crate_depends_on_nothing_of_the_runtime_and_has_no_unsafe_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let manifest = std::fs::read_to_string(root.join("report/Cargo.toml")).unwrap();
    let deps = manifest.split("[dependencies]").nth(1).expect("report/Cargo.toml has dependencies");
    let deps = deps.split("\n[").next().unwrap();
    for runtime in ["cupti-sys", "libloading", "libc", "gpuscope-nvtx", "gpuscope =", "gpuscope.workspace"] {
        assert!(!deps.contains(runtime), "gpuscope-report depends on {runtime}: {deps}");
    }
    let lib = std::fs::read_to_string(root.join("report/src/lib.rs")).unwrap();
    assert!(lib.contains("#![forbid(unsafe_code)]"), "report/src/lib.rs forbids unsafe code");
}

#[test]
fn the_checker_sees_grouped_and_plain_paths_but_not_comments() {
    let refs = crate_refs("use crate::{model::path, collect};\nlet x = crate::render::fmt_ns(1); // crate::session\n");
    assert_eq!(refs.into_iter().collect::<Vec<_>>(), vec!["collect", "model", "render"]);
}

/// Types whose statics hold state that changes (interior mutability).
const MUTABLE: &[&str] =
    &["Mutex", "RwLock", "Atomic", "OnceLock", "OnceCell", "Cell", "LazyLock", "Lazy", "Once", "UnsafeCell", "Slots"];

/// The statics with interior mutability and the thread-locals of the
/// sources under `dir` (test modules left out), as (file, name), the file
/// relative to `root`.
fn process_state(root: &Path, dir: &str) -> Vec<(String, String)> {
    let mut files = Vec::new();
    sources(&root.join(dir), &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        // Up to the test module (a `#[cfg(test)]` item elsewhere stays).
        let lines: Vec<&str> = text.lines().collect();
        let end = (0..lines.len())
            .find(|&i| {
                lines[i].trim() == "#[cfg(test)]"
                    && lines[i + 1..].iter().find(|l| !l.trim().is_empty()).is_some_and(|l| l.contains("mod "))
            })
            .unwrap_or(lines.len());
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        let mut thread_local = false;
        // After `#[cfg(test)]`: the next item is the tests' (a thread-local
        // block is skipped to its end).
        let (mut test_item, mut skipping) = (false, false);
        for line in &lines[..end] {
            let mut l = line.trim();
            if l == "#[cfg(test)]" {
                test_item = true;
                continue;
            }
            if skipping {
                skipping = !l.starts_with('}');
                continue;
            }
            if std::mem::take(&mut test_item) && !l.is_empty() {
                skipping = l.starts_with("thread_local!") && !l.ends_with(';');
                continue;
            }
            let one_line = l.starts_with("thread_local!") && l.ends_with(';');
            if let Some(rest) = l.strip_prefix("thread_local!") {
                thread_local = true;
                // `thread_local!(static X: T = ...);` on one line.
                l = rest.trim_start_matches(['(', '{', ' ']);
            }
            let l = ["pub(crate) ", "pub(super) ", "pub "].iter().fold(l, |l, p| l.strip_prefix(p).unwrap_or(l));
            if let Some(decl) = l.strip_prefix("static ") {
                let decl = decl.strip_prefix("mut ").map_or(decl, |d| d);
                if let Some((name, ty)) = decl.split_once(':') {
                    let name = name.trim();
                    let named = !name.is_empty()
                        && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
                    let mutable = l.contains("static mut ") || MUTABLE.iter().any(|m| ty.contains(m));
                    if named && (thread_local || mutable) {
                        out.push((rel.clone(), name.to_string()));
                    }
                }
            }
            if one_line || (thread_local && l.starts_with('}')) {
                thread_local = false;
            }
        }
    }
    out
}

#[test]
fn the_process_wide_state_is_listed_in_one_file_and_the_report_crate_has_none() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = root.canonicalize().unwrap();
    assert_eq!(process_state(&root, "report/src"), [], "gpuscope-report holds no process-wide state");
    let mut found: Vec<(String, String)> =
        ["profiler/src", "nvtx-rs/src", "ffi/src"].iter().flat_map(|d| process_state(&root, d)).collect();
    found.sort();
    let list = std::fs::read_to_string(root.join("docs/contributing/global-state.md")).unwrap();
    let mut listed: Vec<(String, String)> = list
        .lines()
        .filter_map(|l| {
            let mut cells = l.strip_prefix("| `")?.split("` | `");
            let file = cells.next()?.to_string();
            let name = cells.next()?.split('`').next()?.to_string();
            Some((file, name))
        })
        .collect();
    listed.sort();
    let missing: Vec<_> = found.iter().filter(|f| !listed.contains(f)).collect();
    let stale: Vec<_> = listed.iter().filter(|l| !found.contains(l)).collect();
    assert!(
        missing.is_empty() && stale.is_empty() && found.len() == listed.len(),
        "docs/contributing/global-state.md against the code: not listed {missing:?}; listed but gone {stale:?}"
    );
    // The scan sees what it must: statics and thread-locals, not constants.
    assert!(found.iter().any(|(f, n)| f == "profiler/src/session.rs" && n == "RUNNING"));
    assert!(found.iter().any(|(f, n)| f == "profiler/src/collect/callbacks.rs" && n == "IN_RUNTIME_CALL"));
    assert!(!found.iter().any(|(_, n)| n == "PRELOAD_INIT"), "an immutable static is not state");
    assert!(
        found.iter().any(|(f, n)| f == "profiler/src/decode/mod.rs" && n == "KERNEL_SIZE"),
        "a static after a #[cfg(test)] item that is not the test module"
    );
}
