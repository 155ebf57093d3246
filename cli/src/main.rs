//! `gpuscope`: profile a program without rebuilding it, and read reports.
//!
//!     gpuscope run [options] -- CMD ARGS...
//!     gpuscope report FILE [--format table|json|csv|chrome|openmetrics] [-o OUT]
//!     gpuscope report BEFORE AFTER        (compare two runs)
//!     gpuscope trigger PID --trace 5s     (a trace window in a live always-on process)

mod library;
mod torch_hooks;

use clap::{Parser, Subcommand};
use gpuscope::config::{Setting, SETTINGS};
// Reading, rendering, comparing and merging reports: the report crate's.
use gpuscope_report::report::{Declared, JobReport};
use gpuscope_report::{Format, Report};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

#[derive(Parser)]
#[command(
    name = "gpuscope",
    version,
    about = "Per-kernel GPU profiling: what nvidia-smi's utilization does not tell you"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

// Parsed once per process: the size of `Run` costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Run a program under gpuscope (through the CUDA injection interface:
    /// no rebuild needed), then print its report.
    #[command(after_help = "Each option sets the GPUSCOPE_* variable of the same name for the program \
        (--keep-trace: GPUSCOPE_KEEP_TRACE, ...). A flag wins over the variable; a variable you set is used where \
        no flag is given; every GPUSCOPE_* variable the program will see is checked before it starts. Every \
        setting in every interface: docs/reference/configuration.md.\n\nExamples:\n  \
        gpuscope run -- python3 train.py\n  \
        gpuscope run --mode sampling -- python3 train.py\n  \
        gpuscope run --mode metrics --kernel-filter 'gemm|softmax' --nvtx-filter train/forward -o run-{rank}.json \
        -- torchrun ...")]
    Run {
        #[command(flatten)]
        settings: RunSettings,
        /// libgpuscope.so to inject (default, in this order: GPUSCOPE_LIB; the
        /// copy this program carries, in builds that carry one; else the one
        /// beside it, in ../lib or ../lib64).
        #[arg(long, value_name = "PATH")]
        lib: Option<PathBuf>,
        /// The program and its arguments, after `--` (or after gpuscope's
        /// own options: everything from the program's name on is the
        /// program's).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
    /// Print a saved report (one file), or compare two.
    Report {
        /// One report to render, BEFORE and AFTER to compare, or with
        /// --merge the reports of a job's ranks (files or a folder of them).
        #[arg(required = true, num_args = 1.., value_name = "FILE")]
        files: Vec<PathBuf>,
        /// One job from its ranks' reports: per range each rank's wall time
        /// per call, and the slowest rank (table or json).
        #[arg(long)]
        merge: bool,
        /// table, json, csv, chrome or openmetrics (one report only).
        #[arg(long, default_value = "table", value_name = "FORMAT")]
        format: String,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Table width in columns, 80 to 400 (default: the terminal's, else
        /// 100).
        #[arg(long, value_name = "COLUMNS", value_parser = parse_width)]
        width: Option<usize>,
        /// Declare (or replace) model FLOPs per call of ranges, as in `run`.
        #[arg(long, value_name = "RANGE=FLOPS")]
        flops: Option<String>,
        /// Declare (or replace) work per call of ranges, as in `run`.
        #[arg(long, value_name = "RANGE=N[:UNIT]")]
        work: Option<String>,
    },
    /// Ask a running always-on process (--mode sampling --trace-windows ...)
    /// for a trace window now (kernel records for that long), or a metrics
    /// pass (kernel records, and hardware metrics of the first launches of
    /// each kernel launched in it, the set its --metrics names, e.g.
    /// checklist; PM sampling pauses meanwhile): in its
    /// report at exit and its next scrapes. Same user only.
    #[command(after_help = "Exit status 1 when the process refused (a window asked for is still open, it \
        traces every kernel already, or its counters cannot be had) or runs no always-on session.\n\nExamples:\n  \
        gpuscope trigger 12345 --trace 5s\n  gpuscope trigger 12345 --metrics 2s")]
    #[command(group(clap::ArgGroup::new("what").required(true).args(["trace", "metrics"])))]
    Trigger {
        /// The process's id.
        pid: u32,
        /// How long to trace: seconds (5, 5s) or milliseconds (500ms), 10 ms
        /// to 600 s.
        #[arg(long, value_name = "DURATION", value_parser = parse_window)]
        trace: Option<std::time::Duration>,
        /// How long to measure hardware metrics (with kernel records): as
        /// --trace.
        #[arg(long, value_name = "DURATION", value_parser = parse_window)]
        metrics: Option<std::time::Duration>,
    },
}

/// A table width within [`gpuscope_report::TABLE_WIDTHS`].
fn parse_width(s: &str) -> Result<usize, String> {
    let w = gpuscope_report::TABLE_WIDTHS;
    s.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| w.contains(n))
        .ok_or_else(|| format!("{s:?} is not a table width; allowed: {} to {} columns", w.start(), w.end()))
}

/// `5`, `5s`, `2.5s` or `500ms`, 10 ms to 600 s.
fn parse_window(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, scale) = match (t.strip_suffix("ms"), t.strip_suffix('s')) {
        (Some(n), _) => (n, 1e-3),
        (None, Some(n)) => (n, 1.0),
        _ => (t, 1.0),
    };
    let d = num
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(|v| std::time::Duration::from_secs_f64(v * scale))
        .filter(|d| gpuscope::control::DEMAND_WINDOWS.contains(d));
    d.ok_or_else(|| format!("{s:?}: a duration of 10 ms to 600 s, in seconds (5, 5s) or milliseconds (500ms)"))
}

/// `run`'s setting flags, one for each setting of gpuscope's registry that
/// has one (and a hidden one for each older name): each sets its variable
/// for the program. The arguments' ids are the variables.
struct RunSettings {
    /// (setting, variable, flag, value) of each flag given.
    given: Vec<(&'static Setting, &'static str, &'static str, String)>,
}

/// Each setting flag of `run` and the variable it sets: `--lib` is `run`'s
/// own (it picks the library to inject).
fn setting_flags() -> impl Iterator<Item = (&'static Setting, &'static str, &'static str, bool)> {
    SETTINGS.iter().filter(|s| s.name != "lib").flat_map(|s| {
        let current = s.env.zip(s.flag).map(|(env, flag)| (s, env, flag, false));
        current.into_iter().chain(s.older.iter().map(move |o| (s, o.env, o.flag, true)))
    })
}

impl clap::FromArgMatches for RunSettings {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let given = setting_flags()
            .filter_map(|(s, env, flag, _)| Some((s, env, flag, m.get_one::<String>(env)?.clone())))
            .collect();
        Ok(RunSettings { given })
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for RunSettings {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        setting_flags().fold(cmd, |cmd, (s, env, flag, older)| {
            let mut a = clap::Arg::new(env).long(&flag[2..]).value_name(s.value_name);
            a = match s.bare {
                // `--quiet`, `--device-memory off`: the value may be left out.
                Some(bare) => a.num_args(0..=1).default_missing_value(bare),
                // A value starting with `-` reaches the checks, which say
                // what is allowed (`--launch-count -1`).
                None => a.allow_hyphen_values(true),
            };
            if let Some(c) = s.short {
                a = a.short(c);
            }
            if older {
                let current = s.flag.unwrap_or_default();
                a = a.hide(true).conflicts_with(s.env.unwrap_or_default());
                a = a.help(format!("An older name of {current}"));
            } else {
                let default = s.default.map(|d| format!(" [default: {d}]")).unwrap_or_default();
                a = a.help(format!("{}{default}", s.meaning));
                a = a.long_help(format!("{}.\nValues: {}.{default} [env: {env}]", s.meaning, s.values));
            }
            cmd.arg(a)
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// Columns for tables: `COLUMNS`, else the terminal's width when standard
/// output is one, else 100.
fn terminal_width() -> usize {
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()).filter(|c| *c > 0) {
        return c;
    }
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one winsize into the valid pointer; on a
    // descriptor that is not a terminal it fails and writes nothing.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_col > 0 {
        ws.ws_col as usize
    } else {
        100
    }
}

/// The reports of `--merge`: the files given, or every `.json` file of a
/// folder given alone, each labelled by its file name without `.json`.
fn rank_reports(
    files: &[PathBuf],
    read: &dyn Fn(&Path) -> Result<Report, String>,
) -> Result<Vec<(String, Report)>, String> {
    let files: Vec<PathBuf> = match files {
        [dir] if dir.is_dir() => {
            let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
                .map_err(|e| format!("{}: {e}", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(format!("{}: no .json reports in this folder", dir.display()));
            }
            found
        }
        _ => files.to_vec(),
    };
    files
        .iter()
        .map(|p| {
            let name = p.file_stem().map_or_else(|| p.display().to_string(), |s| s.to_string_lossy().into_owned());
            read(p).map(|r| (name, r))
        })
        .collect()
}

fn load(path: &Path) -> Result<Report, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let gzip = e.as_bytes().starts_with(&[0x1f, 0x8b]);
        format!(
            "{}: not a gpuscope report: {}",
            path.display(),
            if gzip { "gzip-compressed (gunzip it first)" } else { "not JSON text (binary data)" }
        )
    })?;
    Report::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `--flops` and `--work` checked as their `GPUSCOPE_*` variables are.
fn declarations(flops: Option<String>, work: Option<String>) -> Result<Vec<Declared>, String> {
    let vars = |k: &str| match k {
        "GPUSCOPE_FLOPS" => flops.clone(),
        "GPUSCOPE_WORK" => work.clone(),
        _ => None,
    };
    let cfg = gpuscope::config::EnvConfig::from_vars(&vars, 0)
        .map_err(|e| e.to_string().replace("GPUSCOPE_FLOPS=", "--flops ").replace("GPUSCOPE_WORK=", "--work "))?;
    Ok(cfg.declared)
}

/// Adds declarations to a loaded report, replacing those of the same range.
fn declare(r: &mut Report, declared: &[Declared]) {
    for d in declared {
        match r.declared.iter_mut().find(|x| x.range == d.range) {
            Some(x) => {
                x.flops = d.flops.or(x.flops);
                if d.work.is_some() {
                    (x.work, x.unit) = (d.work, d.unit.clone());
                }
            }
            None => r.declared.push(d.clone()),
        }
    }
}

/// Whether file name `n` is one `template` (a file name) gives: `{pid}` and
/// `{rank}` match anything; a fixed name also matches itself with a process
/// id before the extension (`run.1234.json`), which a process writes when
/// another wrote the name first.
fn names_a_report(template: &str, n: &str) -> bool {
    let parts: Vec<&str> = template.split("{pid}").flat_map(|s| s.split("{rank}")).collect();
    let wild = n.starts_with(parts.first().copied().unwrap_or(""))
        && n.ends_with(parts.last().copied().unwrap_or(""))
        && parts.iter().all(|p| n.contains(p));
    if wild || parts.len() > 1 {
        return wild;
    }
    let (stem, ext) = match template.rsplit_once('.') {
        Some((s, e)) => (s, format!(".{e}")),
        None => (template, String::new()),
    };
    n.strip_prefix(stem)
        .and_then(|r| r.strip_prefix('.'))
        .and_then(|r| r.strip_suffix(ext.as_str()))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// Reports that `template` names and that appeared since `since`.
fn written_reports(template: &str, since: std::time::SystemTime) -> Vec<PathBuf> {
    let path = Path::new(template);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            let fresh = e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t >= since);
            fresh && names_a_report(&name, &n)
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

fn run(cmd: Cmd) -> Result<ExitCode, String> {
    match cmd {
        // Exit 1 when the process refused or has no session (2 is a usage
        // error, as elsewhere).
        Cmd::Trigger { pid, trace, metrics } => match gpuscope::control::request(
            pid,
            match (trace, metrics) {
                (Some(t), _) => gpuscope::control::Demand::Trace(t),
                (None, Some(m)) => gpuscope::control::Demand::Metrics(m),
                (None, None) => return Err("--trace or --metrics is needed".into()),
            },
        ) {
            Ok(done) => {
                println!("gpuscope: process {pid}: {done}");
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("gpuscope: process {pid}: {e}");
                Ok(ExitCode::from(1))
            }
        },
        Cmd::Run { settings, lib, cmd } => {
            let lib = library::find(lib)?;
            let lib_s = lib.display().to_string();
            let mut c = Command::new(&cmd[0]);
            c.args(&cmd[1..]);
            let preload = match std::env::var("LD_PRELOAD") {
                Ok(p) if !p.is_empty() => format!("{lib_s}:{p}"),
                _ => lib_s.clone(),
            };
            c.env("LD_PRELOAD", preload).env("CUDA_INJECTION64_PATH", &lib_s).env("NVTX_INJECTION64_PATH", &lib_s);
            // `run` reads the reports back as JSON.
            match std::env::var("GPUSCOPE_FORMAT") {
                Ok(f) if !f.is_empty() && f != "json" => {
                    return Err(format!(
                        "GPUSCOPE_FORMAT={f:?} is set, but gpuscope run writes JSON reports (it reads them back); \
                         unset it, and render other formats with gpuscope report FILE --format {f}"
                    ))
                }
                _ => c.env("GPUSCOPE_FORMAT", "json"),
            };
            // A flag, else the user's variable, else the default (the
            // shim's). A flag wins over every name of its setting.
            for (s, var, _, value) in &settings.given {
                for other in s.env_names() {
                    c.env_remove(other);
                }
                c.env(var, value);
            }
            // The checks the shim makes, before anything runs, over every
            // variable the program will see; errors name what was typed.
            let child_env = |k: &str| match c.get_envs().find(|(n, _)| *n == k) {
                Some((_, v)) => v.map(|v| v.to_string_lossy().into_owned()),
                None => std::env::var(k).ok(),
            };
            gpuscope::config::EnvConfig::from_vars(&child_env, 0).map_err(|e| {
                let mut m = e.to_string();
                for (s, var, flag, value) in &settings.given {
                    let said = format!("{var}={value:?}");
                    // A flag whose value may be left out took the program's
                    // name: `--torch-ranges python3 train.py`.
                    if s.bare.is_some() && m.contains(&said) && !value.contains('=') {
                        m.push_str(&format!(
                            "\n(to give {flag} no value and run {value}, put -- before the program: gpuscope run \
                             {flag} -- {value} ...)"
                        ));
                    }
                    m = m.replace(&format!("{var}="), &format!("{flag} "));
                }
                // What a message says to set, as the flag that sets it.
                for s in gpuscope::config::SETTINGS {
                    if let (Some(var), Some(flag)) = (s.env, s.flag) {
                        m = m.replace(&format!("({var}="), &format!("({flag} "));
                    }
                }
                m
            })?;
            // A misspelt variable would do nothing: said once, before the run.
            let names: Vec<String> = std::env::vars_os()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .chain(c.get_envs().filter(|(_, v)| v.is_some()).map(|(k, _)| k.to_string_lossy().into_owned()))
                .collect();
            let said = gpuscope::config::unknown_variables_said(names.iter().map(String::as_str));
            if let Some(said) = &said {
                eprintln!("{said}");
            }
            // PyTorch's automatic ranges: a sitecustomize that installs the
            // hooks once the program imports torch.
            let torch = child_env("GPUSCOPE_TORCH_RANGES");
            // Empty is the default, as the library reads it.
            let output = child_env("GPUSCOPE_OUTPUT")
                .filter(|v| !v.trim().is_empty())
                .or(gpuscope::config::setting("output").and_then(|s| s.default).map(String::from))
                .unwrap_or_default();
            // The preloaded library says the same of a process started
            // without `gpuscope run`; here it is said already.
            if let Some(said) = &said {
                c.env("GPUSCOPE_SAID", gpuscope::config::said_key(said));
            }
            let hooks = match torch {
                Some(v) if gpuscope::config::torch_ranges_on(&v).unwrap_or(false) => {
                    let dir = torch_hooks::write()?;
                    let path = match std::env::var("PYTHONPATH") {
                        Ok(p) if !p.is_empty() => format!("{}:{p}", dir.display()),
                        _ => dir.display().to_string(),
                    };
                    c.env("PYTHONPATH", path).env("GPUSCOPE_LIB", &lib_s);
                    Some(dir)
                }
                _ => None,
            };
            let since = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
            let status = c.status().map_err(|e| format!("cannot run {}: {e}", cmd[0]));
            if let Some(dir) = hooks {
                let _ = std::fs::remove_dir_all(dir);
            }
            let status = status?;
            let reports = written_reports(&output, since);
            if reports.is_empty() && !gpuscope::driver_present() {
                eprintln!(
                    "gpuscope: {}: the program ran unprofiled. Run it on a machine with an NVIDIA GPU and its \
                     driver.",
                    gpuscope::NO_DRIVER
                );
            } else if reports.is_empty() {
                eprintln!("gpuscope: no report was written (did the program use CUDA? stderr above says why if not)");
            }
            // Processes that never launched write no report; any report
            // without kernels is skipped the same way.
            let mut used = Vec::new();
            for r in &reports {
                match load(r) {
                    Ok(rep) if rep.launched_nothing() => {
                        eprintln!("gpuscope: {} ran no kernel; not shown", r.display())
                    }
                    Ok(rep) => used.push((r, rep)),
                    Err(e) => eprintln!("gpuscope: {e}"),
                }
            }
            if used.len() > 1 {
                // A job of several ranks (a launcher): one answer for the
                // job and the ranks side by side; each rank's report stays
                // on disk.
                let names: Vec<String> = used.iter().map(|(p, _)| p.display().to_string()).collect();
                eprintln!(
                    "gpuscope: {} processes used the GPU; each one's report: gpuscope report FILE ({})",
                    used.len(),
                    names.join(", ")
                );
                let ranks: Vec<(String, Report)> = used
                    .into_iter()
                    .map(|(p, r)| {
                        (p.file_stem().map_or_else(|| p.display().to_string(), |s| s.to_string_lossy().into_owned()), r)
                    })
                    .collect();
                let width = terminal_width();
                let job = JobReport::merge(&ranks);
                let answer = gpuscope_report::analysis::job::answer(&ranks).map(|a| a.to_table(width) + "\n");
                stdout(&format!("{}{}", answer.unwrap_or_default(), job.to_table(width)))?;
            } else {
                for (path, rep) in &used {
                    stdout(&format!("== {}\n{}\n", path.display(), rep.to_table(terminal_width())))?;
                }
            }
            // The program's exit status, passed through.
            Ok(match status.code() {
                Some(code) => ExitCode::from(code as u8),
                None => ExitCode::from(128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0) as u8),
            })
        }
        Cmd::Report { files, merge, format, output, width, flops, work } => {
            // A file gets the usual 100 columns, a terminal its own width.
            let width = width.unwrap_or(if output.is_some() { 100 } else { terminal_width() });
            let declared = declarations(flops, work)?;
            let read = |p: &Path| -> Result<Report, String> {
                let mut r = load(p)?;
                declare(&mut r, &declared);
                Ok(r)
            };
            let text = if merge {
                let ranks = rank_reports(&files, &read)?;
                let job = JobReport::merge(&ranks);
                let answer = gpuscope_report::analysis::job::answer(&ranks);
                match format.as_str() {
                    "table" => match &answer {
                        Some(a) => format!("{}\n{}", a.to_table(width), job.to_table(width)),
                        None => job.to_table(width),
                    },
                    "json" => job.to_json_with(answer.as_ref()),
                    other => return Err(format!("--format {other}: --merge writes table or json")),
                }
            } else if files.len() > 2 {
                return Err(format!(
                    "{} reports given: one renders, two compare, more need --merge (one job from its ranks)",
                    files.len()
                ));
            } else if files.len() == 2 {
                if format != "table" {
                    return Err(format!("--format {format}: comparing two reports prints a table only"));
                }
                read(&files[0])?.compare(&read(&files[1])?, width)
            } else {
                let f: Format = format.parse().map_err(|e: gpuscope_report::Error| e.to_string())?;
                let r = read(&files[0])?;
                if let (Some(p), false) = (&output, f == Format::Table) {
                    r.write(p, f).map_err(|e| e.to_string())?;
                    return Ok(ExitCode::SUCCESS);
                }
                if f == Format::Table {
                    r.to_table(width)
                } else {
                    r.render(f)
                }
            };
            match output {
                Some(p) => {
                    std::fs::write(&p, text).map_err(|e| format!("cannot write report to {}: {e}", p.display()))?
                }
                None => stdout(&text)?,
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Writes to standard output. A reader that went away (`| head`) is a
/// normal end: nothing more to print, no error.
fn stdout(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("writing to standard output: {e}")),
        _ => Ok(()),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gpuscope: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{names_a_report, Cli, SETTINGS};
    use clap::CommandFactory;

    /// The flags of a subcommand, long and short, hidden ones too.
    fn flags(sub: &str) -> Vec<String> {
        let cmd = Cli::command();
        let sub = cmd.find_subcommand(sub).unwrap();
        sub.get_arguments()
            .filter(|a| a.get_id() != "help" && !a.is_positional())
            .flat_map(|a| {
                let short = a.get_short().map(|c| format!("-{c}"));
                short.into_iter().chain(a.get_long().map(|l| format!("--{l}")))
            })
            .collect()
    }

    #[test]
    fn every_flag_of_run_is_a_setting_s_and_every_setting_s_flag_is_run_s() {
        Cli::command().debug_assert();
        let run = flags("run");
        for f in &run {
            let known = SETTINGS.iter().any(|s| {
                s.flag == Some(f.as_str())
                    || s.short.is_some_and(|c| *f == format!("-{c}"))
                    || s.older.iter().any(|o| o.flag == f)
            });
            assert!(known, "gpuscope run {f} is no setting's flag (gpuscope::config::SETTINGS)");
        }
        for s in SETTINGS {
            for f in s.flag.into_iter().chain(s.older.iter().map(|o| o.flag)) {
                assert!(run.iter().any(|r| r == f), "{}: gpuscope run has no {f}", s.name);
            }
        }
    }

    #[test]
    fn every_flag_of_report_is_in_the_configuration_reference() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/reference/configuration.md"))
            .unwrap();
        let section = &doc[doc.find("## `gpuscope report`").expect("a gpuscope report section")..];
        for f in flags("report") {
            assert!(section.contains(&format!("`{f}`")), "docs/reference/configuration.md: gpuscope report {f}");
        }
    }

    #[test]
    fn report_names_match_their_template_and_a_fixed_name_with_a_pid() {
        assert!(names_a_report("gpuscope-{pid}.json", "gpuscope-123.json"));
        assert!(!names_a_report("gpuscope-{pid}.json", "other-123.json"));
        assert!(names_a_report("run.json", "run.json"));
        assert!(names_a_report("run.json", "run.4567.json"), "a second process's report");
        assert!(!names_a_report("run.json", "run.x.json"));
        assert!(!names_a_report("run.json", "run.json.bak"));
        assert!(names_a_report("out", "out.99"));
    }
}
