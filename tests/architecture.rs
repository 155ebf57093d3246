//! The crate reads as one pipeline: collect -> decode -> attribute ->
//! aggregate -> report -> analysis -> render, with the session that runs it
//! and the environment configuration on top. Every stage (a folder or file
//! of `profiler/src`) may name, through `crate::`, only itself, the stages
//! before it, and `error` and `model` (the data the stages share). This test
//! reads the sources and fails on any `crate::` path that reaches forward.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Stages in pipeline order.
const ORDER: &[&str] = &[
    "error",
    "model",
    "collect",
    "decode",
    "attribute",
    "aggregate",
    "report",
    "analysis",
    "render",
    "control",
    "serve",
    "session",
    "config",
    "lib",
];

fn rank(stage: &str) -> Option<usize> {
    ORDER.iter().position(|s| *s == stage)
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

/// The top-level module names a source refers to as `crate::NAME` or
/// `crate::{NAME, ...}`, outside comments.
fn crate_refs(text: &str) -> BTreeSet<String> {
    let mut refs = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
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

#[test]
fn every_stage_names_only_the_stages_before_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut wrong = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        let own = rank(&first).unwrap_or_else(|| panic!("{}: not a known stage; add it to ORDER", rel.display()));
        for name in crate_refs(&std::fs::read_to_string(f).unwrap()) {
            match rank(&name) {
                Some(r) if r <= own || name == "error" || name == "model" => {}
                Some(_) => wrong.push(format!("{} names crate::{name}, a later stage", rel.display())),
                None => wrong
                    .push(format!("{} names crate::{name}, not a stage (name the item by its stage)", rel.display())),
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the pipeline order:\n{}", wrong.join("\n"));
}

#[test]
fn the_checker_sees_grouped_and_plain_paths_but_not_comments() {
    let refs = crate_refs("use crate::{model::path, collect};\nlet x = crate::render::fmt_ns(1); // crate::session\n");
    assert_eq!(refs.into_iter().collect::<Vec<_>>(), vec!["collect", "model", "render"]);
}
