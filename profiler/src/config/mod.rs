//! Configuration from the environment (`GPUSCOPE_*`), for programs profiled
//! without being rebuilt (the preload shim, `gpuscope run`). A bad value is
//! an error naming the variable, the value and what is allowed. Every
//! setting's names, meaning and default are in [`SETTINGS`].

mod settings;

pub use settings::{setting, Kind, Older, Setting, SETTINGS};

use crate::collect::declare::{declare_flops, declare_work};
use crate::collect::metrics::{MetricSet, Selection};
use crate::error::{Error, ErrorKind, Result};
use crate::model::declared::Declared;
use crate::render::Format;
use crate::session::{listen_addr, Profiler, PROMETHEUS_ALLOWED};
use std::path::PathBuf;

pub use crate::session::{expand_output, rank, RANK_VARIABLES};

/// Settings only metrics mode reads, and always-on mode (sampling with
/// trace windows) for the metrics passes asked of the live process (the
/// registry's names): set in another mode, the environment's parser
/// refuses them.
pub const METRICS_ONLY: [&str; 6] =
    ["metrics", "kernel_filter", "nvtx_filter", "launch_count", "every", "metrics_batch"];

/// Everything the `GPUSCOPE_*` variables set; each field is the setting of
/// [`SETTINGS`] of the same name.
#[derive(Debug, Clone)]
pub struct EnvConfig {
    /// `mode` and `metrics`: the metrics of metrics mode, or of the passes
    /// asked of an always-on session.
    pub metrics: Option<MetricSet>,
    /// `sampling_interval`, ns, in sampling mode.
    pub sampling: Option<u64>,
    /// `trace_windows`: (window, period), ns.
    pub trace_windows: Option<(u64, u64)>,
    /// `kernel_filter`, `nvtx_filter`, `launch_count` and `every`.
    pub selection: Selection,
    /// `output`, with `{pid}` and `{rank}` filled in.
    pub output: PathBuf,
    /// `format`.
    pub format: Format,
    /// `prometheus`, as an address to bind (`{rank}` filled in).
    pub prometheus: Option<String>,
    /// `flops` and `work`, for [`crate::declare_flops`] and
    /// [`crate::declare_work`].
    pub declared: Vec<Declared>,
    /// The settings read from the registry alone
    /// ([`Setting::by_name`]), each as given or its default, applied
    /// to a new profiler.
    pub registry: Profiler,
    /// `quiet` (in `registry` too: read for the shim's own messages).
    pub quiet: bool,
}

fn invalid(var: &str, value: &str, allowed: &str) -> Error {
    Error::new(ErrorKind::InvalidConfig, format!("{var}={value:?} is not valid; allowed: {allowed}"))
}

/// A setting's value as the environment gives it, with the variable that
/// gave it (for messages): its own variable, else an older name.
fn lookup(get: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<(&'static str, String)> {
    let s = setting(name)?;
    // An empty variable is the default, for every setting.
    s.env_names().find_map(|var| Some((var, get(var).filter(|v| !v.trim().is_empty())?)))
}

/// A setting's value, or its default.
fn value(get: &dyn Fn(&str) -> Option<String>, name: &str) -> (&'static str, String) {
    lookup(get, name).unwrap_or_else(|| {
        let s = setting(name);
        (s.and_then(|s| s.env).unwrap_or(""), s.and_then(|s| s.default).unwrap_or("").to_string())
    })
}

/// Applies `value` of `s`, a setting read from the registry alone
/// ([`Setting::by_name`]), to `p`; `what` is how the user named it
/// (a variable, a C or Python name), for the message when it is refused.
pub fn apply(p: Profiler, s: &Setting, what: &str, value: &str) -> Result<Profiler> {
    let v = value.trim();
    match s.kind {
        Kind::Switch { set, words } => match v {
            "on" | "1" => Ok(set(p, true)),
            "off" | "0" => Ok(set(p, false)),
            word => match words.iter().find(|(w, _)| *w == word) {
                Some((_, on)) => Ok(set(p, *on)),
                None => {
                    let all: Vec<&str> = ["on", "off"].into_iter().chain(words.iter().map(|(w, _)| *w)).collect();
                    Err(invalid(what, value, &all.join(", ")))
                }
            },
        },
        Kind::Count { set, ok } => match v.parse::<usize>() {
            Ok(n) if ok(n) => Ok(set(p, n)),
            _ => Err(invalid(what, value, s.values)),
        },
        Kind::Own => {
            Err(Error::new(ErrorKind::InvalidConfig, format!("{what}: {} is not a setting given by name", s.name)))
        }
    }
}

/// Applies `NAME=VALUE` pairs, comma-separated, of settings read from the
/// registry alone (C's `settings` string, Python's keywords); `whose`
/// names the interface in messages (`gpuscope_config.settings`). An
/// unknown name is refused with the nearest.
pub fn apply_all(mut p: Profiler, whose: &str, list: &str) -> Result<Profiler> {
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((name, value)) = item.split_once('=') else {
            return Err(invalid(whose, list, "NAME=VALUE, comma-separated (e.g. sync_records=off,max_buffers=128)"));
        };
        let name = name.trim();
        if let Some(own) = setting(name).filter(|s| !s.by_name()) {
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "{whose}: {name:?} is not given by name: it has its own field or keyword{}",
                    own.c.map(|c| format!(" (C: {c})")).unwrap_or_default()
                ),
            ));
        }
        let Some(s) = setting(name).filter(|s| s.by_name()) else {
            let names: Vec<String> =
                SETTINGS.iter().filter(|s| s.by_name()).map(|s| s.name.to_string()).collect();
            let near = crate::collect::metrics::closest(name, &names, 1).pop().unwrap_or_default();
            return Err(Error::new(
                ErrorKind::InvalidConfig,
                format!(
                    "{whose}: {name:?} is not a setting given by name (did you mean {near}?); allowed: {}",
                    names.join(", ")
                ),
            ));
        };
        p = apply(p, s, &format!("{whose} {name}"), value)?;
    }
    Ok(p)
}

/// `RANGE=AMOUNT[:UNIT]`, comma- or semicolon-separated; `unit`: whether a
/// unit may follow.
fn declarations(var: &str, value: &str, unit: bool) -> Result<Vec<(String, f64, Option<String>)>> {
    let allowed = if unit {
        "RANGE=AMOUNT[:UNIT], comma-separated, AMOUNT a number above 0 (e.g. step=4096:tokens)"
    } else {
        "RANGE=FLOPS, comma-separated, FLOPS a number above 0 (e.g. step=1.2e12)"
    };
    let mut out = Vec::new();
    for item in value.split([',', ';']).map(str::trim).filter(|i| !i.is_empty()) {
        let bad = || invalid(var, value, allowed);
        let (range, amount) = item.rsplit_once('=').ok_or_else(bad)?;
        let (amount, u) = match amount.split_once(':') {
            Some((a, u)) if unit => (a, Some(u.trim().to_string()).filter(|u| !u.is_empty())),
            Some(_) => return Err(bad()),
            None => (amount, None),
        };
        let amount: f64 = amount.trim().parse().map_err(|_| bad())?;
        if range.trim_matches('/').trim().is_empty() || !(amount.is_finite() && amount > 0.0) {
            return Err(bad());
        }
        out.push((range.trim().to_string(), amount, u));
    }
    Ok(out)
}

/// Whether `GPUSCOPE_TORCH_RANGES` (read by gpuscope's PyTorch hooks, which
/// take the depth from it) turns them on: `on`, `auto`, `true`, `yes`, or a
/// depth `N` / `depth=N` of 1 or more, `stack` or `stack=N` (modules from
/// the Python stack at each launch, no hooks); off for `0`, `off`, `false`,
/// `no` and empty (the default, as for every setting); anything else is
/// refused.
pub fn torch_ranges_on(value: &str) -> Result<bool> {
    let v = value.trim().to_ascii_lowercase();
    match v.as_str() {
        "on" | "auto" | "true" | "yes" | "stack" => Ok(true),
        // Empty is the default, as for every setting.
        "" | "0" | "off" | "false" | "no" => Ok(false),
        _ => match v.strip_prefix("depth=").or_else(|| v.strip_prefix("stack=")).unwrap_or(&v).parse::<u32>() {
            Ok(n) if n >= 1 => Ok(true),
            _ => Err(invalid(
                "GPUSCOPE_TORCH_RANGES",
                value,
                "on/auto (default depth), N or depth=N (N module levels, 1 or more), stack or stack=N (modules \
                 from the Python stack at each launch, no hooks), off/0",
            )),
        },
    }
}

/// `GPUSCOPE_*` variables of gpuscope's own (not settings): its tests',
/// and the preloaded library's mark of a message said.
const TEST_VARIABLES: [&str; 4] = ["GPUSCOPE_FAULT", "GPUSCOPE_PANIC_GUARD_CHILD", "GPUSCOPE_CI", "GPUSCOPE_SAID"];

/// Of the variable names `names`, those that begin with `GPUSCOPE_` but
/// name no setting gpuscope reads (a misspelling: `GPUSCOPE_MODEE`), each
/// with the setting's variable nearest to it.
pub fn unknown_variables<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<(String, String)> {
    let known: Vec<String> =
        SETTINGS.iter().flat_map(|s| s.env_names()).chain(TEST_VARIABLES).map(String::from).collect();
    let mut out: Vec<(String, String)> = names
        .into_iter()
        .filter(|n| n.starts_with("GPUSCOPE_") && !known.iter().any(|k| k == n))
        .map(|n| {
            let settings: Vec<String> = SETTINGS.iter().filter_map(|s| s.env).map(String::from).collect();
            // Variables are upper case: `GPUSCOPE_mode` means GPUSCOPE_MODE.
            let near =
                crate::collect::metrics::closest(&n.to_ascii_uppercase(), &settings, 1).pop().unwrap_or_default();
            (n.to_string(), near)
        })
        .collect();
    out.sort();
    out
}

/// What gpuscope says of the misspelt variables among `names` (one line
/// each, as [`unknown_variables`] finds them), `None` when there are none.
pub fn unknown_variables_said<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let lines: Vec<String> = unknown_variables(names)
        .into_iter()
        .map(|(var, near)| {
            format!("gpuscope: {var} is not a gpuscope variable, so it does nothing (did you mean {near}?)")
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// A message's key, the same in every process of a job (FNV-1a, 64 bits):
/// `GPUSCOPE_SAID` holds the keys of what was said, so that processes a
/// job starts (inheriting the preload and the variable) do not say it
/// again.
pub fn said_key(message: &str) -> String {
    let h = message.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{h:016x}")
}

impl EnvConfig {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(&|k| std::env::var(k).ok(), std::process::id())
    }

    /// Reads variables through `get` (tests pass a map).
    pub fn from_vars(get: &dyn Fn(&str) -> Option<String>, pid: u32) -> Result<Self> {
        let (mode_var, mode) = value(get, "mode");
        // Set in another mode, these would do nothing, which the user did
        // not ask for.
        // Always-on mode measures the metric set when a pass is asked of it.
        let on_demand = mode == "sampling" && lookup(get, "trace_windows").is_some();
        if mode != "metrics" && !on_demand {
            for name in METRICS_ONLY {
                if let Some((var, v)) = lookup(get, name) {
                    return Err(Error::new(
                        ErrorKind::InvalidConfig,
                        format!(
                            "{var}={v:?} needs metrics mode ({mode_var}=metrics), or trace windows \
                             (GPUSCOPE_TRACE_WINDOWS=0/1000, in sampling mode) for the passes asked of a live \
                             process; the mode is {mode}"
                        ),
                    ));
                }
            }
        }
        let metrics = match mode.as_str() {
            "trace" => None,
            "sampling" if !on_demand || lookup(get, "metrics").is_none() => None,
            "metrics" | "sampling" => {
                let (var, m) = value(get, "metrics");
                Some(
                    MetricSet::parse(&m)
                        .map_err(|e| Error::new(ErrorKind::InvalidConfig, format!("{var}={m:?}: {}", e.message())))?,
                )
            }
            other => return Err(invalid(mode_var, other, "trace, metrics, sampling")),
        };
        let trace_windows = match lookup(get, "trace_windows") {
            None => None,
            Some((var, v)) => {
                let allowed = "WINDOW/PERIOD in milliseconds, the window 0 (no kernel records) or 10 or more and \
                               shorter than the period (e.g. 100/1000 or 0/1000), in sampling mode";
                // Not negative: the cast would make -1 a window of 0.
                let ms = |x: &str| {
                    x.trim().parse::<f64>().ok().filter(|m| m.is_finite() && *m >= 0.0).map(|m| (m * 1e6) as u64)
                };
                match v.split_once('/').and_then(|(w, p)| Some((ms(w)?, ms(p)?))) {
                    Some((w, p)) if crate::collect::sampling::trace_windows_valid(w, p) => {
                        if mode != "sampling" {
                            return Err(Error::new(
                                ErrorKind::InvalidConfig,
                                format!("{var}={v:?} needs sampling mode ({mode_var}=sampling); the mode is {mode}"),
                            ));
                        }
                        Some((w, p))
                    }
                    _ => return Err(invalid(var, &v, allowed)),
                }
            }
        };
        let interval = match lookup(get, "sampling_interval") {
            None => crate::collect::sampling::default_interval_ns(trace_windows.is_some()),
            Some((var, v)) => match v.trim().parse::<f64>().map(|us| (us * 1e3) as u64) {
                Ok(ns) if crate::collect::sampling::INTERVALS_NS.contains(&ns) => ns,
                _ => return Err(invalid(var, &v, "microseconds, 1 to 100000 (e.g. 100)")),
            },
        };
        let sampling = (mode == "sampling").then_some(interval);
        let (var, n) = value(get, "launch_count");
        let mut selection = match n.trim() {
            "all" => Selection::all(),
            count => match count.parse::<u64>() {
                Ok(n) if n > 0 => Selection::default().first(n),
                _ => return Err(invalid(var, &n, "1 or more, or all")),
            },
        };
        let (var, k) = value(get, "every");
        match k.trim().parse::<u64>() {
            Ok(k) => selection = selection.every(k),
            Err(_) => return Err(invalid(var, &k, "a count of launches, 0 or more (0: none after the first ones)")),
        }
        if let Some((var, r)) = lookup(get, "kernel_filter") {
            selection = selection
                .kernels(&r)
                .map_err(|e| Error::new(ErrorKind::InvalidConfig, format!("{var}={r:?}: {}", e.message())))?;
        }
        if let Some((_, p)) = lookup(get, "nvtx_filter") {
            selection = selection.nvtx(&p);
        }
        let (var, f) = value(get, "format");
        let format = f.parse().map_err(|_| invalid(var, &f, &Format::NAMES.join(", ")))?;
        // Read where they act (the collector, the debug log), which is too
        // late to refuse them: checked here, before anything runs.
        if let Some((var, v)) = lookup(get, "metrics_batch") {
            let max = crate::collect::metrics::collector::MAX_BATCH;
            if !v.trim().parse::<usize>().is_ok_and(|n| (1..=max).contains(&n)) {
                return Err(invalid(var, &v, &format!("launches, 1 to {max}")));
            }
        }
        if let Some((var, v)) = lookup(get, "debug") {
            if !matches!(v.as_str(), "" | "0" | "1") {
                return Err(invalid(var, &v, "1 (on) or 0 (off)"));
            }
        }
        let mut registry = Profiler::new();
        for s in SETTINGS.iter().filter(|s| s.by_name()) {
            let (var, v) = value(get, s.name);
            registry = apply(registry, s, var, &v)?;
        }
        let quiet = matches!(value(get, "quiet").1.trim(), "on" | "1");
        let (var, template) = value(get, "output");
        if template.trim().is_empty() {
            return Err(invalid(var, &template, "a file path; {pid} and {rank} are replaced"));
        }
        let output = PathBuf::from(expand_output(&template, pid, get));
        let mut declared: Vec<Declared> = Vec::new();
        fn entry(declared: &mut Vec<Declared>, range: String) -> &mut Declared {
            let i = match declared.iter().position(|d| d.range == range) {
                Some(i) => i,
                None => {
                    declared.push(Declared { range, flops: None, work: None, unit: None });
                    declared.len() - 1
                }
            };
            &mut declared[i]
        }
        let mut flops = Vec::new();
        if let Some((var, v)) = lookup(get, "flops") {
            flops = declarations(var, &v, false)?;
        }
        let mut work = Vec::new();
        if let Some((var, v)) = lookup(get, "work") {
            work = declarations(var, &v, true)?;
        }
        for (range, f, _) in flops {
            entry(&mut declared, range).flops = Some(f);
        }
        for (range, w, unit) in work {
            let d = entry(&mut declared, range);
            d.work = Some(w);
            d.unit = unit;
        }
        let prometheus = match lookup(get, "prometheus").filter(|(_, v)| !v.is_empty()) {
            None => None,
            Some((var, v)) => {
                Some(listen_addr(&expand_output(&v, pid, get)).ok_or_else(|| invalid(var, &v, PROMETHEUS_ALLOWED))?)
            }
        };
        if let Some((_, v)) = lookup(get, "torch_ranges") {
            torch_ranges_on(&v)?;
        }
        Ok(EnvConfig { metrics, sampling, trace_windows, selection, output, format, prometheus, declared, registry, quiet })
    }

    /// Registers `GPUSCOPE_FLOPS` and `GPUSCOPE_WORK` (values already
    /// checked).
    pub fn declare(&self) -> Result<()> {
        for d in &self.declared {
            if let Some(f) = d.flops {
                declare_flops(&d.range, f)?;
            }
            if let Some(w) = d.work {
                declare_work(&d.range, w, d.unit.as_deref().unwrap_or(""))?;
            }
        }
        Ok(())
    }

    /// The profiler these settings describe.
    pub fn profiler(&self) -> Profiler {
        let mut p = self.registry.clone().output(&self.output, self.format);
        if let Some(m) = &self.metrics {
            p = p.metrics(m.clone());
        }
        if self.metrics.is_some() || self.trace_windows.is_some() {
            p = p.select(self.selection.clone());
        }
        if let Some(ns) = self.sampling {
            p = p.sampling(std::time::Duration::from_nanos(ns));
        }
        if let Some((w, period)) = self.trace_windows {
            p = p.trace_windows(std::time::Duration::from_nanos(w), std::time::Duration::from_nanos(period));
        }
        if let Some(addr) = &self.prometheus {
            p = p.prometheus(addr.clone());
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<EnvConfig> {
        let m: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        EnvConfig::from_vars(&|k| m.get(k).cloned(), 4242)
    }

    #[test]
    fn an_empty_variable_is_the_default_for_every_setting() {
        let default = format!("{:?}", cfg(&[]).unwrap());
        for var in SETTINGS.iter().flat_map(|s| s.env_names()) {
            let empty = cfg(&[(var, ""), ("GPUSCOPE_MODE", "")]);
            assert_eq!(empty.map(|c| format!("{c:?}")).map_err(|e| e.to_string()), Ok(default.clone()), "{var}");
        }
    }

    #[test]
    fn torch_ranges_values_are_checked() {
        for (v, on) in [
            ("", false),
            ("on", true),
            ("Auto", true),
            ("3", true),
            ("depth=2", true),
            ("stack", true),
            ("Stack=4", true),
            ("off", false),
        ] {
            assert_eq!(torch_ranges_on(v).unwrap(), on, "{v:?}");
        }
        for bad in ["deep", "depth=0", "-1", "stack=0", "stack=x"] {
            let e = cfg(&[("GPUSCOPE_TORCH_RANGES", bad)]).unwrap_err().to_string();
            assert!(e.contains(&format!("GPUSCOPE_TORCH_RANGES={bad:?}")) && e.contains("depth=N"), "{e}");
        }
    }

    #[test]
    fn defaults_trace_to_a_json_file_named_by_pid() {
        let c = cfg(&[]).unwrap();
        assert!(c.metrics.is_none());
        assert_eq!(c.output, PathBuf::from("gpuscope-4242.json"));
        assert_eq!(c.format, Format::Json);
    }

    #[test]
    fn sampling_mode_reads_its_interval_in_microseconds() {
        let c = cfg(&[("GPUSCOPE_MODE", "sampling")]).unwrap();
        assert_eq!(c.sampling, Some(100_000));
        assert!(c.metrics.is_none());
        let c = cfg(&[("GPUSCOPE_MODE", "sampling"), ("GPUSCOPE_SAMPLING_INTERVAL", "2.5")]).unwrap();
        assert_eq!(c.sampling, Some(2_500));
        let c = cfg(&[("GPUSCOPE_SAMPLING_INTERVAL", "50")]).unwrap();
        assert_eq!(c.sampling, None, "the interval alone does not switch modes");
    }

    #[test]
    fn the_prometheus_address_is_host_and_port() {
        let addr = |v: &str| cfg(&[("GPUSCOPE_PROMETHEUS", v), ("RANK", "3")]).map(|c| c.prometheus);
        assert_eq!(addr("127.0.0.1:9400").unwrap().as_deref(), Some("127.0.0.1:9400"));
        assert_eq!(addr(":9400").unwrap().as_deref(), Some("0.0.0.0:9400"));
        assert_eq!(addr(":940{rank}").unwrap().as_deref(), Some("0.0.0.0:9403"));
        assert_eq!(addr("").unwrap(), None);
        for bad in ["9400", "host:port", ":70000", "host:"] {
            let m = addr(bad).err().unwrap().message().to_string();
            assert!(m.starts_with(&format!("GPUSCOPE_PROMETHEUS=\"{bad}\" is not valid; allowed: HOST:PORT")), "{m}");
        }
    }

    #[test]
    fn trace_windows_are_read_in_milliseconds_and_checked() {
        let c = cfg(&[("GPUSCOPE_MODE", "sampling"), ("GPUSCOPE_TRACE_WINDOWS", "100/1000")]).unwrap();
        assert_eq!(c.trace_windows, Some((100_000_000, 1_000_000_000)));
        assert_eq!(c.sampling, Some(1_000_000), "always on samples every 1 ms unless told");
        let c = cfg(&[
            ("GPUSCOPE_MODE", "sampling"),
            ("GPUSCOPE_TRACE_WINDOWS", "100/1000"),
            ("GPUSCOPE_SAMPLING_INTERVAL", "100"),
        ])
        .unwrap();
        assert_eq!(c.sampling, Some(100_000));
        // A window of 0: no kernel records at all.
        let c = cfg(&[("GPUSCOPE_MODE", "sampling"), ("GPUSCOPE_TRACE_WINDOWS", "0/1000")]).unwrap();
        assert_eq!(c.trace_windows, Some((0, 1_000_000_000)));
        let e = |v: &str, mode: &str| {
            cfg(&[("GPUSCOPE_MODE", mode), ("GPUSCOPE_TRACE_WINDOWS", v)]).err().map(|e| e.message().to_string())
        };
        for bad in ["100", "1000/100", "5/1000", "100/100", "x/1000", "100/inf", "0/0", "0/5", "-1/1000"] {
            let m = e(bad, "sampling").unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(m.contains(&format!("GPUSCOPE_TRACE_WINDOWS=\"{bad}\"")) && m.contains("WINDOW/PERIOD"), "{m}");
        }
        let m = e("100/1000", "trace").unwrap();
        assert!(m.contains("needs sampling mode") && m.contains("the mode is trace") && !m.contains("e.g."), "{m}");
    }

    #[test]
    fn rank_and_pid_fill_the_output_template() {
        let c =
            cfg(&[("GPUSCOPE_OUTPUT", "/tmp/run-{rank}-{pid}.csv"), ("LOCAL_RANK", "3"), ("GPUSCOPE_FORMAT", "csv")])
                .unwrap();
        assert_eq!(c.output, PathBuf::from("/tmp/run-3-4242.csv"));
        let c = cfg(&[("GPUSCOPE_OUTPUT", "r{rank}"), ("OMPI_COMM_WORLD_RANK", "7")]).unwrap();
        assert_eq!(c.output, PathBuf::from("r7"));
        // srun, MPICH and MVAPICH ranks are told apart too.
        for var in ["SLURM_PROCID", "PMI_RANK", "MV2_COMM_WORLD_RANK"] {
            let c = cfg(&[("GPUSCOPE_OUTPUT", "run-{rank}.json"), (var, "5")]).unwrap();
            assert_eq!(c.output, PathBuf::from("run-5.json"), "{var}");
        }
        // A global rank wins over the node-local one; junk is skipped.
        let c = cfg(&[("GPUSCOPE_OUTPUT", "r{rank}"), ("LOCAL_RANK", "1"), ("SLURM_PROCID", "9")]).unwrap();
        assert_eq!(c.output, PathBuf::from("r9"));
        let c = cfg(&[("GPUSCOPE_OUTPUT", "r{rank}"), ("RANK", "x"), ("PMI_RANK", "4")]).unwrap();
        assert_eq!(c.output, PathBuf::from("r4"));
    }

    #[test]
    fn misspelt_variables_are_found_with_the_setting_meant() {
        // Built, not spelt out: the configuration test takes every quoted
        // variable name in the sources for one gpuscope reads.
        let var = |n: &str| format!("GPUSCOPE_{n}");
        let names = ["MODEE", "KEEPTRACE", "OUPUT", "MODE", "LIB", "mode"].map(var);
        let got = unknown_variables(names.iter().map(String::as_str).chain(["PATH"]));
        let want: Vec<(String, String)> =
            [("KEEPTRACE", "KEEP_TRACE"), ("MODEE", "MODE"), ("OUPUT", "OUTPUT"), ("mode", "MODE")]
                .map(|(a, b)| (var(a), var(b)))
                .to_vec();
        assert_eq!(got, want);
    }

    #[test]
    fn metrics_mode_reads_its_selection() {
        let c = cfg(&[
            ("GPUSCOPE_MODE", "metrics"),
            ("GPUSCOPE_METRICS", "dram"),
            ("GPUSCOPE_KERNELS", "^gemm"),
            ("GPUSCOPE_NVTX", "train/fwd"),
            ("GPUSCOPE_LAUNCH_COUNT", "5"),
        ])
        .unwrap();
        assert!(c.metrics.unwrap().names().iter().any(|n| n == "dram__bytes_read.sum"));
        assert!(c.selection.matches("gemm_kernel", "train/fwd/attn"));
        assert!(!c.selection.matches("softmax", "train/fwd"));
        assert!(c.selection.picks(4) && !c.selection.picks(5));
    }

    #[test]
    fn always_on_mode_reads_the_set_a_metrics_pass_measures_and_plain_sampling_refuses_it() {
        let on =
            [("GPUSCOPE_MODE", "sampling"), ("GPUSCOPE_TRACE_WINDOWS", "0/1000"), ("GPUSCOPE_METRICS", "checklist")];
        let c = cfg(&on).unwrap();
        assert!(c
            .metrics
            .as_ref()
            .unwrap()
            .names()
            .iter()
            .any(|n| n == "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"));
        // The profiler takes it as the on-demand set: no error.
        assert!(c.profiler().validate().is_ok(), "the profiler takes it");
        let e = cfg(&on[..1].iter().chain(&on[2..]).copied().collect::<Vec<_>>()).unwrap_err();
        assert!(e.message().contains("needs metrics mode"), "{}", e.message());
        assert!(e.message().contains("or trace windows (GPUSCOPE_TRACE_WINDOWS=0/1000"), "{}", e.message());
        // The pass's selection too.
        let c = cfg(&[on[0], on[1], ("GPUSCOPE_KERNELS", "^gemm"), ("GPUSCOPE_LAUNCH_COUNT", "1")]).unwrap();
        assert!(c.selection.matches("gemm_kernel", "") && !c.selection.matches("softmax", ""));
        assert!(c.selection.picks(0) && !c.selection.picks(1));
        let e = cfg(&[on[0], ("GPUSCOPE_LAUNCH_COUNT", "5")]).unwrap_err();
        assert!(e.message().contains("needs metrics mode"), "{}", e.message());
    }

    /// The profiler the registry's settings made.
    fn shown(c: &EnvConfig) -> String {
        format!("{:?}", c.registry)
    }

    /// The registry's defaults, changed by `f`.
    fn with(f: impl FnOnce(Profiler) -> Profiler) -> String {
        format!("{:?}", f(cfg(&[]).unwrap().registry))
    }

    #[test]
    fn older_names_are_read_and_named_in_messages_and_the_current_name_wins() {
        let c = cfg(&[
            ("GPUSCOPE_MODE", "metrics"),
            ("GPUSCOPE_TRACE", "7"),
            ("GPUSCOPE_KERNELS", "^gemm"),
            ("GPUSCOPE_NVTX", "train"),
        ])
        .unwrap();
        assert_eq!(shown(&c), with(|p| p.keep_trace(7)));
        assert!(c.selection.matches("gemm_kernel", "train/fwd") && !c.selection.matches("softmax", "train"));
        assert!(!c.selection.matches("gemm_kernel", "eval"));
        let c = cfg(&[("GPUSCOPE_TRACE", "7"), ("GPUSCOPE_KEEP_TRACE", "9")]).unwrap();
        assert_eq!(shown(&c), with(|p| p.keep_trace(9)), "the current name wins");
        let strict = with(|p| p.cross_thread_ranges(false));
        assert_eq!(shown(&cfg(&[("GPUSCOPE_THREAD_RANGES", "strict")]).unwrap()), strict);
        assert_eq!(shown(&cfg(&[("GPUSCOPE_CROSS_THREAD_RANGES", "off")]).unwrap()), strict);
        let m = cfg(&[("GPUSCOPE_TRACE", "lots")]).unwrap_err().to_string();
        assert!(m.starts_with("GPUSCOPE_TRACE=\"lots\" is not valid"), "the variable as set: {m}");
        let m = cfg(&[("GPUSCOPE_THREAD_RANGES", "loose")]).unwrap_err().to_string();
        assert!(m.ends_with("allowed: on, off, inherit, strict"), "{m}");
    }

    #[test]
    fn switches_take_on_off_1_0_and_empty_is_the_default() {
        for (v, on) in [("on", true), ("1", true), ("off", false), ("0", false), ("", true)] {
            let c = cfg(&[("GPUSCOPE_SYNC_RECORDS", v), ("GPUSCOPE_MEMORY_RECORDS", v)]).unwrap();
            assert_eq!(shown(&c), with(|p| p.sync_records(on).memory_records(on)), "{v:?}");
        }
        assert!(cfg(&[("GPUSCOPE_QUIET", "on")]).unwrap().quiet);
        assert!(!cfg(&[("GPUSCOPE_QUIET", "")]).unwrap().quiet);
        let off = cfg(&[("GPUSCOPE_LAUNCH_ATTRIBUTION", "off")]).unwrap();
        assert_eq!(shown(&off), with(|p| p.launch_attribution(false)));
    }

    #[test]
    fn every_and_the_capacity_options_are_read() {
        let c = cfg(&[
            ("GPUSCOPE_MODE", "metrics"),
            ("GPUSCOPE_LAUNCH_COUNT", "2"),
            ("GPUSCOPE_EVERY", "10"),
            ("GPUSCOPE_BUFFER_SIZE", "65536"),
            ("GPUSCOPE_MAX_BUFFERS", "8"),
            ("GPUSCOPE_HOST_QUEUE", "4096"),
            ("GPUSCOPE_MAX_LIVE_RANGES", "5"),
        ])
        .unwrap();
        assert!(c.selection.picks(1) && !c.selection.picks(2) && c.selection.picks(11));
        assert_eq!(shown(&c), with(|p| p.buffer_size(65536).max_buffers(8).host_queue(4096).max_live_ranges(5)));
    }

    #[test]
    fn flops_and_work_are_declared_per_range() {
        let c = cfg(&[("GPUSCOPE_FLOPS", "step=1.2e12, train/fwd=4e11"), ("GPUSCOPE_WORK", "step=4096:tokens;eval=8")])
            .unwrap();
        let get = |r: &str| c.declared.iter().find(|d| d.range == r).unwrap().clone();
        assert_eq!(
            (get("step").flops, get("step").work, get("step").unit.as_deref()),
            (Some(1.2e12), Some(4096.0), Some("tokens"))
        );
        assert_eq!((get("train/fwd").flops, get("train/fwd").work), (Some(4e11), None));
        assert_eq!((get("eval").flops, get("eval").work, get("eval").unit.clone()), (None, Some(8.0), None));
        assert!(cfg(&[]).unwrap().declared.is_empty());
    }

    #[test]
    fn bad_values_name_the_variable_the_value_and_what_is_allowed() {
        let e = |vars: &[(&str, &str)]| cfg(vars).unwrap_err().to_string();
        assert_eq!(
            e(&[("GPUSCOPE_MODE", "fast")]),
            "GPUSCOPE_MODE=\"fast\" is not valid; allowed: trace, metrics, sampling"
        );
        assert!(e(&[("GPUSCOPE_MODE", "sampling"), ("GPUSCOPE_SAMPLING_INTERVAL", "0.1")])
            .contains("GPUSCOPE_SAMPLING_INTERVAL=\"0.1\" is not valid; allowed: microseconds, 1 to 100000"));
        assert_eq!(
            e(&[("GPUSCOPE_FORMAT", "xml")]),
            "GPUSCOPE_FORMAT=\"xml\" is not valid; allowed: table, json, csv, chrome, openmetrics"
        );
        let metrics = ("GPUSCOPE_MODE", "metrics");
        assert!(e(&[metrics, ("GPUSCOPE_LAUNCH_COUNT", "-1")]).contains("allowed: 1 or more, or all"));
        assert!(e(&[metrics, ("GPUSCOPE_LAUNCH_COUNT", "0")]).contains("allowed: 1 or more, or all"));
        // What only metrics mode reads, set in another mode, would do
        // nothing: refused, naming the variable and the mode it needs.
        for var in ["GPUSCOPE_METRICS", "GPUSCOPE_KERNEL_FILTER", "GPUSCOPE_NVTX_FILTER", "GPUSCOPE_LAUNCH_COUNT"] {
            assert_eq!(
                e(&[(var, "3")]),
                format!(
                    "{var}=\"3\" needs metrics mode (GPUSCOPE_MODE=metrics), or trace windows \
                     (GPUSCOPE_TRACE_WINDOWS=0/1000, in sampling mode) for the passes asked of a live process; the \
                     mode is trace"
                )
            );
        }
        assert!(e(&[metrics, ("GPUSCOPE_METRICS_BATCH", "0")])
            .ends_with("GPUSCOPE_METRICS_BATCH=\"0\" is not valid; allowed: launches, 1 to 1024"));
        assert!(cfg(&[metrics, ("GPUSCOPE_METRICS_BATCH", "1")]).is_ok());
        assert!(e(&[("GPUSCOPE_DEBUG", "true")])
            .ends_with("GPUSCOPE_DEBUG=\"true\" is not valid; allowed: 1 (on) or 0 (off)"));
        assert!(cfg(&[("GPUSCOPE_DEBUG", "1")]).is_ok());
        assert!(e(&[("GPUSCOPE_MODE", "sampling"), ("GPUSCOPE_EVERY", "10")])
            .contains("GPUSCOPE_EVERY=\"10\" needs metrics mode (GPUSCOPE_MODE=metrics), or trace windows"));
        assert!(e(&[("GPUSCOPE_MODE", "metrics"), ("GPUSCOPE_METRICS", "tensors")])
            .starts_with("GPUSCOPE_METRICS=\"tensors\""));
        assert!(e(&[("GPUSCOPE_KERNELS", "(")]).starts_with("GPUSCOPE_KERNELS=\"(\""));
        assert_eq!(e(&[("GPUSCOPE_QUIET", "yes")]), "GPUSCOPE_QUIET=\"yes\" is not valid; allowed: on, off");
        assert!(e(&[("GPUSCOPE_BUFFER_SIZE", "1000")]).ends_with("allowed: bytes: 64 KiB to 256 MiB, a multiple of 8"));
        assert!(e(&[("GPUSCOPE_MAX_BUFFERS", "0")]).starts_with("GPUSCOPE_MAX_BUFFERS=\"0\" is not valid"));
        assert_eq!(
            e(&[("GPUSCOPE_FLOPS", "step")]),
            "GPUSCOPE_FLOPS=\"step\" is not valid; allowed: RANGE=FLOPS, comma-separated, FLOPS a number above 0 (e.g. step=1.2e12)"
        );
        assert!(e(&[("GPUSCOPE_FLOPS", "step=-3")]).contains("a number above 0"));
        assert!(e(&[("GPUSCOPE_FLOPS", "step=1e12:tokens")]).starts_with("GPUSCOPE_FLOPS="));
        assert!(e(&[("GPUSCOPE_WORK", "=5")]).contains("e.g. step=4096:tokens"));
        for msg in [e(&[("GPUSCOPE_MODE", "fast")]), e(&[("GPUSCOPE_TRACE", "lots")])] {
            assert_eq!(msg.lines().count(), 1, "one line: {msg}");
        }
    }
}
