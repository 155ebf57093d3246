//! Configuration from the environment (`GPUSCOPE_*`), for programs profiled
//! without being rebuilt (the preload shim, `gpuscope run`). A bad value is
//! an error naming the variable, the value and what is allowed.

use crate::collect::declare::{declare_flops, declare_work};
use crate::collect::metrics::{MetricSet, Selection};
use crate::error::{Error, ErrorKind, Result};
use crate::model::declared::Declared;
use crate::render::Format;
use crate::session::Profiler;
use std::path::PathBuf;

/// Everything the `GPUSCOPE_*` variables set.
#[derive(Debug, Clone)]
pub struct EnvConfig {
    /// `GPUSCOPE_MODE`: `trace` (default), `metrics` or `sampling`: the
    /// metrics of metrics mode.
    pub metrics: Option<MetricSet>,
    /// Sampling mode (`GPUSCOPE_MODE=sampling`): the interval between PM
    /// samples, ns (`GPUSCOPE_SAMPLING_INTERVAL` in microseconds; default
    /// 100).
    pub sampling: Option<u64>,
    /// Sampling mode's trace windows (window, period), ns
    /// (`GPUSCOPE_TRACE_WINDOWS=WINDOW/PERIOD` in milliseconds): kernel
    /// records only for the first window of every period; a window of 0:
    /// never.
    pub trace_windows: Option<(u64, u64)>,
    /// `GPUSCOPE_KERNELS` (regex), `GPUSCOPE_NVTX` (path prefix),
    /// `GPUSCOPE_LAUNCH_COUNT` (first N per kernel; `all`).
    pub selection: Selection,
    /// `GPUSCOPE_OUTPUT` with `{pid}` and `{rank}` filled in; default
    /// `gpuscope-{pid}.json`.
    pub output: PathBuf,
    /// `GPUSCOPE_FORMAT`: `json` (default), `table`, `csv`, `chrome`.
    pub format: Format,
    /// `GPUSCOPE_QUIET=1`: no summary on stderr.
    pub quiet: bool,
    /// `GPUSCOPE_PROMETHEUS=HOST:PORT` (`:PORT`: every interface; `{rank}`
    /// replaced as in `GPUSCOPE_OUTPUT`): serve `/metrics` while running.
    pub prometheus: Option<String>,
    /// `GPUSCOPE_TRACE`: per-kernel records kept (default 0; 100000 for
    /// the chrome format).
    pub trace: usize,
    /// `GPUSCOPE_FLOPS` (`step=1.2e12,fwd=4e11`: model FLOPs per call of a
    /// range) and `GPUSCOPE_WORK` (`step=4096:tokens`: work per call), for
    /// [`crate::declare_flops`] and [`crate::declare_work`].
    pub declared: Vec<Declared>,
    /// `GPUSCOPE_THREAD_RANGES`: `inherit` (default: threads with no NVTX
    /// range of their own take the lead thread's) or `strict`.
    pub inherit_ranges: bool,
    /// `GPUSCOPE_DEVICE_MEMORY`: `on` (default) or `off`: device memory
    /// allocation records.
    pub device_memory: bool,
}

fn invalid(var: &str, value: &str, allowed: &str) -> Error {
    Error::new(ErrorKind::InvalidConfig, format!("{var}={value:?} is not valid; allowed: {allowed}"))
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

pub use crate::session::{rank, RANK_VARIABLES};

/// Whether `GPUSCOPE_TORCH_RANGES` (read by gpuscope's PyTorch hooks, which
/// take the depth from it) turns them on: `on`, `auto`, `true`, `yes`, empty,
/// or a depth `N` / `depth=N` of 1 or more; off for `0`, `off`, `false`,
/// `no`; anything else is refused.
pub fn torch_ranges_on(value: &str) -> Result<bool> {
    let v = value.trim().to_ascii_lowercase();
    match v.as_str() {
        "" | "on" | "auto" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        _ => match v.strip_prefix("depth=").unwrap_or(&v).parse::<u32>() {
            Ok(n) if n >= 1 => Ok(true),
            _ => Err(invalid(
                "GPUSCOPE_TORCH_RANGES",
                value,
                "on/auto (default depth), N or depth=N (N module levels, 1 or more), off/0",
            )),
        },
    }
}

/// `{pid}` and `{rank}` ([`rank`]; 0 when none is set) substituted in
/// `template`.
pub fn expand_output(template: &str, pid: u32, get: &dyn Fn(&str) -> Option<String>) -> String {
    let rank = rank(get).unwrap_or(0);
    template.replace("{pid}", &pid.to_string()).replace("{rank}", &rank.to_string())
}

impl EnvConfig {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(&|k| std::env::var(k).ok(), std::process::id())
    }

    /// Reads variables through `get` (tests pass a map).
    pub fn from_vars(get: &dyn Fn(&str) -> Option<String>, pid: u32) -> Result<Self> {
        let mode = get("GPUSCOPE_MODE").unwrap_or_else(|| "trace".into());
        let metrics = match mode.as_str() {
            "trace" | "sampling" => None,
            "metrics" => Some(match get("GPUSCOPE_METRICS") {
                Some(m) => MetricSet::parse(&m).map_err(|e| {
                    Error::new(ErrorKind::InvalidConfig, format!("GPUSCOPE_METRICS={m:?}: {}", e.message()))
                })?,
                None => MetricSet::default(),
            }),
            other => return Err(invalid("GPUSCOPE_MODE", other, "trace, metrics, sampling")),
        };
        let trace_windows = match get("GPUSCOPE_TRACE_WINDOWS") {
            None => None,
            Some(v) => {
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
                                format!(
                                    "GPUSCOPE_TRACE_WINDOWS={v:?} needs sampling mode (GPUSCOPE_MODE=sampling); \
                                     the mode is {mode}"
                                ),
                            ));
                        }
                        Some((w, p))
                    }
                    _ => return Err(invalid("GPUSCOPE_TRACE_WINDOWS", &v, allowed)),
                }
            }
        };
        let interval = match get("GPUSCOPE_SAMPLING_INTERVAL") {
            None => crate::collect::sampling::default_interval_ns(trace_windows.is_some()),
            Some(v) => match v.trim().parse::<f64>().map(|us| (us * 1e3) as u64) {
                Ok(ns) if crate::collect::sampling::INTERVALS_NS.contains(&ns) => ns,
                _ => return Err(invalid("GPUSCOPE_SAMPLING_INTERVAL", &v, "microseconds, 1 to 100000 (e.g. 100)")),
            },
        };
        let sampling = (mode == "sampling").then_some(interval);
        let mut selection = Selection::default();
        if let Some(n) = get("GPUSCOPE_LAUNCH_COUNT") {
            selection = match n.as_str() {
                "all" => Selection::all(),
                _ => match n.parse::<u64>() {
                    Ok(n) if n > 0 => selection.first(n),
                    _ => return Err(invalid("GPUSCOPE_LAUNCH_COUNT", &n, "a positive integer, or all")),
                },
            };
        }
        if let Some(k) = get("GPUSCOPE_EVERY") {
            match k.parse::<u64>() {
                Ok(k) => selection = selection.every(k),
                Err(_) => return Err(invalid("GPUSCOPE_EVERY", &k, "an integer (0: none after the first ones)")),
            }
        }
        if let Some(r) = get("GPUSCOPE_KERNELS") {
            selection = selection.kernels(&r).map_err(|e| {
                Error::new(ErrorKind::InvalidConfig, format!("GPUSCOPE_KERNELS={r:?}: {}", e.message()))
            })?;
        }
        if let Some(p) = get("GPUSCOPE_NVTX") {
            selection = selection.nvtx(&p);
        }
        let format = match get("GPUSCOPE_FORMAT") {
            None => Format::Json,
            Some(f) => f.parse().map_err(|_| invalid("GPUSCOPE_FORMAT", &f, crate::render::FORMAT_NAMES))?,
        };
        let quiet = match get("GPUSCOPE_QUIET").as_deref() {
            None | Some("0") | Some("") => false,
            Some("1") => true,
            Some(v) => return Err(invalid("GPUSCOPE_QUIET", v, "0, 1")),
        };
        let trace = match get("GPUSCOPE_TRACE") {
            None => {
                if format == Format::ChromeTrace {
                    100_000
                } else {
                    0
                }
            }
            Some(t) => {
                t.parse().map_err(|_| invalid("GPUSCOPE_TRACE", &t, "a count of kernels to keep, e.g. 100000"))?
            }
        };
        let template = get("GPUSCOPE_OUTPUT").unwrap_or_else(|| "gpuscope-{pid}.json".into());
        if template.trim().is_empty() {
            return Err(invalid("GPUSCOPE_OUTPUT", &template, "a file path; {pid} and {rank} are replaced"));
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
        if let Some(v) = get("GPUSCOPE_FLOPS") {
            flops = declarations("GPUSCOPE_FLOPS", &v, false)?;
        }
        let mut work = Vec::new();
        if let Some(v) = get("GPUSCOPE_WORK") {
            work = declarations("GPUSCOPE_WORK", &v, true)?;
        }
        for (range, f, _) in flops {
            entry(&mut declared, range).flops = Some(f);
        }
        for (range, w, unit) in work {
            let d = entry(&mut declared, range);
            d.work = Some(w);
            d.unit = unit;
        }
        let prometheus = match get("GPUSCOPE_PROMETHEUS").filter(|v| !v.is_empty()) {
            None => None,
            Some(v) => Some(listen_addr(&expand_output(&v, pid, get)).ok_or_else(|| {
                invalid("GPUSCOPE_PROMETHEUS", &v, "HOST:PORT, e.g. 0.0.0.0:9400 or :9400 ({rank} is replaced)")
            })?),
        };
        if let Some(v) = get("GPUSCOPE_TORCH_RANGES") {
            torch_ranges_on(&v)?;
        }
        let inherit_ranges = match get("GPUSCOPE_THREAD_RANGES").as_deref() {
            None | Some("") | Some("inherit") => true,
            Some("strict") => false,
            Some(v) => return Err(invalid("GPUSCOPE_THREAD_RANGES", v, "inherit, strict")),
        };
        let device_memory = match get("GPUSCOPE_DEVICE_MEMORY").as_deref() {
            None | Some("") | Some("on") | Some("1") => true,
            Some("off") | Some("0") => false,
            Some(v) => return Err(invalid("GPUSCOPE_DEVICE_MEMORY", v, "on, off")),
        };
        Ok(EnvConfig {
            device_memory,
            metrics,
            sampling,
            trace_windows,
            selection,
            output,
            format,
            quiet,
            trace,
            declared,
            inherit_ranges,
            prometheus,
        })
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
        let mut p = Profiler::new()
            .keep_trace(self.trace)
            .output(&self.output, self.format)
            .quiet(self.quiet)
            .cross_thread_ranges(self.inherit_ranges)
            .device_memory(self.device_memory);
        if let Some(m) = &self.metrics {
            p = p.metrics(m.clone()).select(self.selection.clone());
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

/// `HOST:PORT` or `:PORT` (every interface) as an address to bind, if the
/// port is a port.
fn listen_addr(v: &str) -> Option<String> {
    let (host, port) = v.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    Some(format!("{host}:{port}"))
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
    fn torch_ranges_values_are_checked() {
        for (v, on) in [("", true), ("on", true), ("Auto", true), ("3", true), ("depth=2", true), ("off", false)] {
            assert_eq!(torch_ranges_on(v).unwrap(), on, "{v:?}");
        }
        for bad in ["deep", "depth=0", "-1"] {
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
        assert!(e(&[("GPUSCOPE_LAUNCH_COUNT", "-1")]).contains("a positive integer, or all"));
        assert!(e(&[("GPUSCOPE_MODE", "metrics"), ("GPUSCOPE_METRICS", "tensors")])
            .starts_with("GPUSCOPE_METRICS=\"tensors\""));
        assert!(e(&[("GPUSCOPE_KERNELS", "(")]).starts_with("GPUSCOPE_KERNELS=\"(\""));
        assert!(e(&[("GPUSCOPE_QUIET", "yes")]).contains("allowed: 0, 1"));
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
