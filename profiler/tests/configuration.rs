//! docs/reference/configuration.md against the code. Its table is the
//! settings registry (`gpuscope::config::SETTINGS`) rendered, and the
//! registry is checked against every interface: the `GPUSCOPE_*` variables
//! the sources read, `Profiler`'s options, the C header's fields, functions
//! and constants, the Python package's keywords and format names, and the
//! defaults the environment, Rust, C and Python apply (C's and Python's
//! against Rust's: ffi's and python/tests' own tests). `GPUSCOPE_BLESS=1`
//! rewrites the table.

use gpuscope::config::{setting, EnvConfig, SETTINGS};
use gpuscope::{Format, MetricSet, Profiler};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const DOC: &str = "docs/reference/configuration.md";
const BEGIN: &str = "<!-- The settings table: generated from gpuscope::config::SETTINGS (GPUSCOPE_BLESS=1 cargo test \
                     -p gpuscope --test configuration rewrites it). -->\n";
const END: &str = "<!-- End of the settings table. -->";
/// The doc's heading over the variables only gpuscope's own tests read.
const TEST_VARIABLES: &str = "## Variables for gpuscope's own use";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// A comma-separated list of a registry field.
fn items(list: Option<&'static str>) -> Vec<&'static str> {
    list.map(|l| l.split(", ").collect()).unwrap_or_default()
}

fn code(list: &[&str]) -> String {
    if list.is_empty() {
        return "—".into();
    }
    list.iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ")
}

fn text(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The table, one row per setting.
fn table() -> String {
    let mut out = String::from(
        "| Setting | Meaning | Values | Default | Rust | Environment | `gpuscope run` | C | Python |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for s in SETTINGS {
        let default = match (s.default, s.in_process_default) {
            (None, _) => "none".to_string(),
            (Some(d), None) => format!("`{d}`"),
            (Some(d), Some(p)) => format!("`{d}`; `{p}` in Rust, C and Python"),
        };
        let older = |names: Vec<&str>| match names.as_slice() {
            [] => String::new(),
            n => format!(" (older: {})", code(n)),
        };
        let env = code(&items(s.env)) + &older(s.older.iter().map(|o| o.env).collect());
        let mut flags: Vec<String> = s.short.map(|c| format!("-{c}")).into_iter().collect();
        flags.extend(s.flag.map(String::from));
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let flag = code(&flags) + &older(s.older.iter().map(|o| o.flag).collect());
        out += &format!(
            "| <a id=\"{name}\"></a>`{name}` | {meaning} | {values} | {default} | {rust} | {env} | {flag} | {c} | {python} |\n",
            name = s.name,
            meaning = text(s.meaning),
            values = text(s.values),
            rust = code(&items(s.rust)),
            c = code(&items(s.c)),
            python = code(&items(s.python)),
        );
    }
    out
}

#[test]
fn the_table_is_the_registry() {
    let path = root().join(DOC);
    let doc = read(DOC);
    let start = doc.find(BEGIN).unwrap_or_else(|| panic!("{DOC}: no line {BEGIN:?}")) + BEGIN.len();
    let end = start + doc[start..].find(END).unwrap_or_else(|| panic!("{DOC}: no line {END:?}"));
    let table = table();
    if std::env::var("GPUSCOPE_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, format!("{}{table}{}", &doc[..start], &doc[end..])).unwrap();
    } else if doc[start..end] != table {
        let (doc_rows, rows): (Vec<&str>, Vec<&str>) = (doc[start..end].lines().collect(), table.lines().collect());
        let i = doc_rows.iter().zip(&rows).position(|(a, b)| a != b).unwrap_or(doc_rows.len().min(rows.len()));
        panic!(
            "{DOC}'s table is not the registry's: regenerate it (GPUSCOPE_BLESS=1 cargo test -p gpuscope --test \
             configuration). Row {i}:\n  in the doc: {:?}\n  generated:  {:?}",
            doc_rows.get(i),
            rows.get(i)
        );
    }
}

/// The sources of what ships: every crate's `src` and the Python package.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs" || x == "py") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    for e in std::fs::read_dir(root()).unwrap().flatten() {
        let src = e.path().join("src");
        if src.is_dir() && e.file_name() != "target" {
            walk(&src, &mut files);
        }
    }
    walk(&root().join("python/gpuscope"), &mut files);
    files
        .into_iter()
        .map(|f| (f.strip_prefix(root()).unwrap().display().to_string(), std::fs::read_to_string(&f).unwrap()))
        .collect()
}

/// The string literals `"GPUSCOPE_..."` of a source: the variables it names
/// (not those of `env!`, which a build script sets at compile time).
fn variables(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("\"GPUSCOPE_") {
        if text[..i].ends_with("env!(") {
            continue;
        }
        let name: String =
            text[i + 1..].chars().take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_').collect();
        // The prefix alone names no variable (it finds the misspelt ones).
        if text[i + 1 + name.len()..].starts_with('"') && name != "GPUSCOPE_" {
            out.insert(name);
        }
    }
    out
}

/// The variables `EnvConfig::from_vars` asks for, in every mode.
fn asked_by_the_environment_s_parser() -> BTreeSet<String> {
    let asked = RefCell::new(BTreeSet::new());
    for mode in ["trace", "metrics", "sampling"] {
        let get = |k: &str| {
            asked.borrow_mut().insert(k.to_string());
            (k == "GPUSCOPE_MODE").then(|| mode.to_string())
        };
        EnvConfig::from_vars(&get, 1).unwrap();
    }
    asked.into_inner()
}

#[test]
fn every_variable_read_is_a_setting_and_every_setting_s_variable_is_read() {
    let registry: BTreeSet<&str> = SETTINGS.iter().flat_map(|s| s.env_names()).collect();
    let doc = read(DOC);
    let tests_only = &doc[doc.find(TEST_VARIABLES).unwrap_or_else(|| panic!("{DOC}: no {TEST_VARIABLES:?}"))..];
    let tests_only: BTreeSet<String> = variables(&tests_only.replace('`', "\""));
    let mut read_elsewhere = BTreeSet::new();
    for (file, text) in sources() {
        // The registry names them all; what reads them is elsewhere.
        if file.ends_with("config/settings.rs") {
            continue;
        }
        for v in variables(&text) {
            assert!(
                registry.contains(v.as_str()) || tests_only.contains(&v),
                "{file} reads {v}, which is no setting of gpuscope::config::SETTINGS (nor in {DOC}'s \
                 {TEST_VARIABLES:?})"
            );
            read_elsewhere.insert(v);
        }
    }
    let asked = asked_by_the_environment_s_parser();
    // The launchers' rank variables (RANK, ...) are read too: not gpuscope's.
    for v in asked.iter().filter(|v| v.starts_with("GPUSCOPE_")) {
        assert!(registry.contains(v.as_str()), "EnvConfig reads {v}, which is no setting");
    }
    for v in registry {
        assert!(asked.contains(v) || read_elsewhere.contains(v), "{v} is a setting, but nothing reads it");
    }
    for v in &tests_only {
        assert!(read_elsewhere.contains(v), "{DOC} lists {v} for gpuscope's tests, but no source reads it");
    }
}

/// Each `name` of `pub fn name(` in a source.
fn pub_fns(text: &str, receiver: &str) -> BTreeSet<String> {
    text.match_indices("pub fn ")
        .filter_map(|(i, _)| {
            let rest = &text[i + "pub fn ".len()..];
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            rest[name.len()..].starts_with(&format!("({receiver}")).then_some(name)
        })
        .collect()
}

#[test]
fn every_option_of_the_rust_api_is_a_setting_and_every_name_exists() {
    let options = pub_fns(&read("profiler/src/session.rs"), "mut self");
    let metrics = pub_fns(&read("profiler/src/collect/metrics/mod.rs"), "");
    let all: String = sources().into_iter().filter(|(f, _)| f.starts_with("profiler/src")).map(|(_, t)| t).collect();
    let functions = pub_fns(&all, "");
    let named: BTreeSet<&str> = SETTINGS.iter().flat_map(|s| items(s.rust)).collect();
    for o in &options {
        assert!(named.contains(format!("Profiler::{o}").as_str()), "Profiler::{o} is no setting's Rust name");
    }
    for item in named {
        let known = match item.split_once("::") {
            Some(("Profiler", m)) => options.contains(m),
            Some(("Selection" | "MetricSet", m)) => metrics.contains(m),
            Some(_) => false,
            None if item == "Format" => true,
            None => functions.contains(item),
        };
        assert!(known, "{item}, a setting's Rust name, is no option or function of the crate");
    }
}

/// The header's `gpuscope_config` fields, functions and constants.
fn header() -> (Vec<String>, BTreeSet<String>, BTreeMap<String, String>) {
    let h = read("ffi/include/gpuscope.h");
    let code: Vec<&str> = h.lines().map(str::trim).filter(|l| !l.starts_with("//")).collect();
    let body = h.split("typedef struct {").nth(1).and_then(|b| b.split("} gpuscope_config;").next()).unwrap();
    let fields = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && l.ends_with(';'))
        .map(|l| l.trim_end_matches(';').rsplit([' ', '*']).next().unwrap().to_string())
        .collect();
    let functions = code
        .iter()
        .filter_map(|l| {
            let i = l.find("gpuscope_")?;
            let name: String = l[i..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            l[i + name.len()..].starts_with('(').then_some(name)
        })
        .collect();
    let constants = code
        .iter()
        .filter_map(|l| {
            let mut w = l.strip_prefix("#define ")?.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.to_string()))
        })
        .collect();
    (fields, functions, constants)
}

#[test]
fn every_c_field_is_a_setting_and_every_c_name_exists() {
    let (fields, functions, constants) = header();
    let named: BTreeSet<&str> = SETTINGS.iter().flat_map(|s| items(s.c)).collect();
    // `settings` carries switches and counts by name.
    for f in fields.iter().filter(|f| *f != "struct_size" && *f != "settings") {
        assert!(named.contains(f.as_str()), "gpuscope_config.{f} is no setting's C name");
    }
    assert!(fields.iter().any(|f| f == "settings"), "gpuscope_config.settings");
    for s in SETTINGS.iter().filter(|s| items(s.c).contains(&"settings")) {
        assert!(s.by_name(), "{} is given through gpuscope_config.settings, so read from the registry", s.name);
    }
    for item in named {
        let known = if let Some(f) = item.strip_suffix("()") {
            functions.contains(f)
        } else if let Some(prefix) = item.strip_suffix('*') {
            constants.keys().any(|c| c.starts_with(prefix))
        } else if item.starts_with("GPUSCOPE_") {
            constants.contains_key(item)
        } else {
            fields.iter().any(|f| f == item)
        };
        assert!(known, "{item}, a setting's C name, is not in gpuscope.h");
    }
    let doc = read(DOC);
    for f in &functions {
        assert!(doc.contains(&format!("`{f}`")), "{DOC} does not name {f}");
    }
    for (i, name) in Format::NAMES.iter().enumerate() {
        let c = format!("GPUSCOPE_FORMAT_{}", name.to_uppercase());
        assert_eq!(constants.get(&c), Some(&i.to_string()), "{c}: the format names' order");
    }
}

/// The keywords of `gpuscope.profile` with their defaults as written.
fn python_keywords() -> Vec<(String, String)> {
    let api = read("python/gpuscope/_api.py");
    let class = &api[api.find("class profile").expect("class profile in _api.py")..];
    let sig = &class[class.find("def __init__(").unwrap() + "def __init__(".len()..];
    let sig = &sig[..sig.find("):").unwrap()];
    sig.split(',')
        .map(str::trim)
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[test]
fn every_python_keyword_is_a_setting_with_its_default() {
    let keywords = python_keywords();
    let api = read("python/gpuscope/_api.py");
    let named: BTreeSet<&str> = SETTINGS.iter().flat_map(|s| items(s.python)).collect();
    for (k, default) in &keywords {
        let s = SETTINGS.iter().find(|s| items(s.python).contains(&k.as_str()));
        let s = s.unwrap_or_else(|| panic!("profile({k}=) is no setting's Python name"));
        let documented = s.in_process_default.or(s.default);
        let written = match default.as_str() {
            // The library's default.
            "None" => continue,
            "True" => "on".to_string(),
            "False" => "off".to_string(),
            d => d.trim_matches('"').to_string(),
        };
        assert_eq!(Some(written.as_str()), documented, "profile({k}={default}) against the registry");
    }
    // Switches and counts applied from the registry are keywords by name
    // (`**settings`) without one of their own.
    let by_name = api.contains("strict=False,\n                 **settings):");
    assert!(by_name, "profile(**settings) in gpuscope/_api.py");
    for s in SETTINGS {
        for item in items(s.python) {
            let known = match item.strip_suffix("()") {
                Some(f) => api.contains(&format!("\ndef {f}(")),
                None => keywords.iter().any(|(k, _)| k == item) || (s.by_name() && item == s.name),
            };
            assert!(known, "{item}, a setting's Python name, is not in gpuscope/_api.py");
        }
    }
    let _ = named;
    let native = read("python/gpuscope/_native.py");
    let formats = native.lines().find_map(|l| l.strip_prefix("FORMATS = {")).expect("FORMATS in _native.py");
    let formats: Vec<String> = formats
        .trim_end_matches('}')
        .split(',')
        .map(|kv| kv.split(':').next().unwrap().trim().trim_matches('"').to_string())
        .collect();
    assert_eq!(formats, Format::NAMES, "Python's format names");
}

/// What the environment's settings make: the profiler and the declarations.
fn made(vars: &[(&str, &str)]) -> String {
    let get = |k: &str| vars.iter().rev().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
    let c = EnvConfig::from_vars(&get, 7).unwrap_or_else(|e| panic!("{vars:?}: {e}"));
    format!("{:?} {:?}", c.profiler(), c.declared)
}

#[test]
fn each_documented_default_is_what_the_environment_applies() {
    let asked = asked_by_the_environment_s_parser();
    for mode in ["trace", "metrics", "sampling"] {
        let base = [("GPUSCOPE_MODE", mode)];
        for s in SETTINGS {
            let (Some(env), Some(default)) = (s.env, s.default) else { continue };
            if !asked.contains(env) || env == "GPUSCOPE_MODE" {
                continue;
            }
            // Refused outside metrics mode (the parser's own tests).
            if mode != "metrics" && gpuscope::config::METRICS_ONLY.contains(&s.name) {
                continue;
            }
            assert_eq!(made(&[base[0], (env, default)]), made(&base), "{env}={default} (mode {mode}) is no default");
        }
    }
}

#[test]
fn rust_s_defaults_are_the_environment_s_where_the_registry_says_so() {
    let in_process: Vec<(&str, &str)> = SETTINGS.iter().filter_map(|s| Some((s.env?, s.in_process_default?))).collect();
    let output = setting("output").and_then(|s| s.default).unwrap().replace("{pid}", "7");
    let format: Format = setting("format").and_then(|s| s.default).unwrap().parse().unwrap();
    let interval = std::time::Duration::from_nanos(gpuscope::sampling::DEFAULT_INTERVAL_NS);
    for (mode, rust) in [
        ("trace", Profiler::new()),
        ("metrics", Profiler::new().metrics(MetricSet::default())),
        ("sampling", Profiler::new().sampling(interval)),
    ] {
        let mut vars = in_process.clone();
        vars.push(("GPUSCOPE_MODE", mode));
        // Rust writes a file only when told to.
        let rust = rust.output(&output, format);
        assert_eq!(made(&vars), format!("{rust:?} []"), "mode {mode}");
    }
}
