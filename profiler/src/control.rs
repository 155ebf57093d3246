//! Depth on demand from a live always-on session: a trace window of S
//! seconds, or a metrics pass over S seconds of launches, asked for while
//! the process runs, through a local control socket (`gpuscope trigger PID
//! --trace 5s`, `--metrics 5s`). The socket lives in a directory only
//! the process's user can enter (`$XDG_RUNTIME_DIR/gpuscope`, else
//! `$TMPDIR/gpuscope-UID`, mode 0700, not a symbolic link), and both ends
//! check the other's user (`SO_PEERCRED`): other users can neither ask nor
//! answer. One line in, one line out: `trace SECONDS` or `metrics SECONDS`
//! answered by `ok: ...` or `refused: ...`.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What a live session is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Demand {
    /// A trace window of this length: kernel records.
    Trace(Duration),
    /// A metrics pass of this length: kernel records, and hardware metrics
    /// of the first launches of each kernel launched in it (PM sampling
    /// pauses meanwhile: the two cannot share a GPU).
    Metrics(Duration),
}

impl Demand {
    /// How long it lasts.
    pub fn window(self) -> Duration {
        match self {
            Demand::Trace(d) | Demand::Metrics(d) => d,
        }
    }

    /// The request line's word.
    fn word(self) -> &'static str {
        match self {
            Demand::Trace(_) => "trace",
            Demand::Metrics(_) => "metrics",
        }
    }
}

/// Asks the running session for what a request demands: what was done, or
/// (`Err`) why not.
pub(crate) type Trigger = Box<dyn Fn(Demand) -> Result<String, String> + Send>;

/// Windows asked for on demand may be this long.
pub const DEMAND_WINDOWS: std::ops::RangeInclusive<Duration> = Duration::from_millis(10)..=Duration::from_secs(600);

/// How often a listener looks for a stop (it does not block in accept).
const POLL: Duration = Duration::from_millis(50);

/// A listener's thread, stopped (and joined) by [`Listening::halt`] or on
/// drop.
pub(crate) struct Listening {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Listening {
    /// Stops listening and waits for the answer in progress, if any.
    pub(crate) fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.halt();
    }
}

/// A thread of gpuscope's, named `name`, that answers each connection
/// `accept` gives (non-blocking: an error is "nothing waiting") with
/// `answer`, until halted. A panic in one answer ends that answer only.
pub(crate) fn listen<C: 'static>(
    name: &str,
    mut accept: impl FnMut() -> std::io::Result<C> + Send + 'static,
    answer: impl Fn(C) + Send + 'static,
) -> Result<Listening, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match accept() {
                    Ok(conn) => {
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| answer(conn)));
                    }
                    Err(_) => std::thread::sleep(POLL),
                }
            }
        })
        .map_err(|e| format!("cannot start the {name} thread: {e}"))?;
    Ok(Listening { stop, thread: Some(thread) })
}
/// A connection gets this long, in all, to send its line and read the
/// answer: a slow one cannot hold the listener (and the session's stop).
const CONNECTION_TIME: Duration = Duration::from_secs(5);
/// Bytes of a request or an answer read at most.
const MAX_LINE: usize = 1024;

fn my_uid() -> u32 {
    // SAFETY: getuid cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

/// The directory of a user's control sockets, from a process's
/// `XDG_RUNTIME_DIR` and `TMPDIR`.
fn socket_dir_from(xdg_runtime_dir: Option<&str>, tmpdir: Option<&str>) -> PathBuf {
    match xdg_runtime_dir.filter(|d| !d.is_empty()) {
        Some(d) => Path::new(d).join("gpuscope"),
        None => Path::new(tmpdir.filter(|d| !d.is_empty()).unwrap_or("/tmp")).join(format!("gpuscope-{}", my_uid())),
    }
}

/// Where this process's control socket is, if it runs one.
pub fn socket_path(pid: u32) -> PathBuf {
    let var = |v: &str| std::env::var(v).ok();
    socket_dir_from(var("XDG_RUNTIME_DIR").as_deref(), var("TMPDIR").as_deref()).join(format!("{pid}.sock"))
}

/// Where process `pid` (of this user) put its control socket: by its own
/// environment, which a batch step or a service may have set apart from
/// the asker's; by the asker's where it cannot be read.
pub fn socket_path_of(pid: u32) -> PathBuf {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else { return socket_path(pid) };
    let var = |name: &str| {
        env.split(|&b| b == 0)
            .find_map(|kv| kv.strip_prefix(name.as_bytes()).and_then(|r| r.strip_prefix(b"=")))
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    socket_dir_from(var("XDG_RUNTIME_DIR").as_deref(), var("TMPDIR").as_deref()).join(format!("{pid}.sock"))
}

/// Whether `dir` is a directory (not a symbolic link) of this user's that
/// no one else can enter.
fn check_private(dir: &Path) -> Result<(), String> {
    let m = std::fs::symlink_metadata(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    if !m.is_dir() || m.uid() != my_uid() || m.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "{} is not a directory only this user can enter (owner uid {}, mode {:o}{})",
            dir.display(),
            m.uid(),
            m.permissions().mode() & 0o777,
            if m.file_type().is_symlink() { ", a symbolic link" } else { "" }
        ));
    }
    Ok(())
}

/// Makes `dir` (mode 0700) or checks it is this user's alone: a directory
/// others can enter would let them ask for trace windows, or stand in for
/// the socket.
fn private_dir(dir: &Path) -> Result<(), String> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => check_private(dir),
        Err(e) => Err(format!("cannot make {}: {e}", dir.display())),
    }
}

/// The user of the process at the other end of `conn`.
fn peer_uid(conn: &UnixStream) -> Option<u32> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid locals of the sizes passed; the fd
    // is the connection's, open while `conn` lives.
    let rc = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(cred.uid)
}

/// One line from `conn`, at most [`MAX_LINE`] bytes, within `deadline`.
fn read_line(mut conn: &UnixStream, deadline: std::time::Instant) -> Option<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 256];
    while buf.len() < MAX_LINE && !buf.contains(&b'\n') {
        let left = deadline.checked_duration_since(std::time::Instant::now()).filter(|d| !d.is_zero())?;
        conn.set_read_timeout(Some(left)).ok()?;
        match conn.read(&mut byte) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&byte[..n]),
            Err(_) => return None,
        }
    }
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    Some(String::from_utf8_lossy(&line[..line.len().min(MAX_LINE)]).into_owned())
}

/// What a request line asks for: a trace window or a metrics pass of that
/// length.
pub(crate) fn parse_request(line: &str) -> Result<Demand, String> {
    let mut words = line.split_whitespace();
    let (word, secs) = match (words.next(), words.next(), words.next()) {
        (Some(w @ ("trace" | "metrics")), Some(secs), None) => (w, secs),
        _ => {
            return Err(format!(
                "{:?} is no request: the requests are \"trace SECONDS\" and \"metrics SECONDS\"",
                line.trim()
            ))
        }
    };
    let d = secs
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
        .filter(|d| DEMAND_WINDOWS.contains(d))
        .ok_or_else(|| format!("{word} {secs:?}: the window's length is 0.01 to 600 seconds"))?;
    Ok(if word == "trace" { Demand::Trace(d) } else { Demand::Metrics(d) })
}

/// A running control socket; removed (and its thread joined) on
/// [`ControlSocket::stop`] or drop.
pub(crate) struct ControlSocket {
    path: PathBuf,
    /// The socket file's device and inode: removed at stop only if it is
    /// still this one.
    bound: Option<(u64, u64)>,
    listening: Listening,
}

impl ControlSocket {
    /// Listens at `path` (its directory made private first) and answers
    /// requests with `trigger`.
    pub(crate) fn start(path: PathBuf, trigger: Trigger) -> Result<Self, String> {
        if let Some(dir) = path.parent() {
            private_dir(dir)?;
        }
        // A socket left by a process of the same id that did not stop is
        // removed; one that answers is another process's (the same id in
        // another PID namespace sharing the directory): not touched.
        if UnixStream::connect(&path).is_ok() {
            return Err(format!("a live control socket is at {} already", path.display()));
        }
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(|e| format!("cannot listen at {}: {e}", path.display()))?;
        let bound = std::fs::symlink_metadata(&path).map(|m| (m.dev(), m.ino())).ok();
        listener.set_nonblocking(true).map_err(|e| format!("cannot listen at {}: {e}", path.display()))?;
        let listening =
            listen("gpuscope-control", move || listener.accept().map(|(c, _)| c), move |c| answer(c, &trigger))?;
        Ok(ControlSocket { path, bound, listening })
    }

    /// Stops listening and removes the socket.
    pub(crate) fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.listening.halt();
        let now = std::fs::symlink_metadata(&self.path).map(|m| (m.dev(), m.ino())).ok();
        if now.is_some() && now == self.bound {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.halt();
    }
}

fn answer(conn: UnixStream, trigger: &Trigger) {
    let deadline = std::time::Instant::now() + CONNECTION_TIME;
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_write_timeout(Some(CONNECTION_TIME));
    let reply = if peer_uid(&conn) != Some(my_uid()) {
        // The directory keeps other users out; this says so if it did not.
        "refused: another user's process may not ask\n".to_string()
    } else {
        let Some(line) = read_line(&conn, deadline) else { return };
        match parse_request(&line).and_then(trigger) {
            Ok(done) => format!("ok: {done}\n"),
            Err(why) => format!("refused: {why}\n"),
        }
    };
    let _ = (&conn).write_all(reply.as_bytes());
}

/// `s` with control characters (escape sequences included) left out.
fn printable(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).collect()
}

/// Asks process `pid`'s session for a trace window or a metrics pass: its
/// answer (`Err`: refused, or no such session).
pub fn request(pid: u32, demand: Demand) -> Result<String, String> {
    let path = socket_path_of(pid);
    // A directory that does not exist holds no socket: connecting says so.
    if let Some(dir) = path.parent().filter(|d| std::fs::symlink_metadata(d).is_ok()) {
        // Another user's directory could hold a socket that answers lies.
        check_private(dir).map_err(|e| format!("{e}: not asking through it"))?;
    }
    let mut conn = UnixStream::connect(&path).map_err(|e| {
        format!(
            "no always-on gpuscope session answers in process {pid} ({}: {e}); one runs with --mode sampling \
             --trace-windows WINDOW/PERIOD, as the same user (the pid is the profiled process's, not gpuscope \
             run's)",
            path.display()
        )
    })?;
    if peer_uid(&conn) != Some(my_uid()) {
        return Err(format!("{} is another user's socket: not asking through it", path.display()));
    }
    let deadline = std::time::Instant::now() + CONNECTION_TIME;
    let _ = conn.set_write_timeout(Some(CONNECTION_TIME));
    writeln!(conn, "{} {}", demand.word(), demand.window().as_secs_f64())
        .map_err(|e| format!("cannot ask process {pid}: {e}"))?;
    let reply = read_line(&conn, deadline).ok_or_else(|| format!("no answer from process {pid}"))?;
    let reply = printable(&reply);
    match (reply.strip_prefix("ok: "), reply.strip_prefix("refused: ")) {
        (Some(done), _) => Ok(done.to_string()),
        (_, Some(why)) => Err(why.to_string()),
        _ => Err(format!("process {pid} answered {reply:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn requests_name_a_window_of_a_bounded_length() {
        assert_eq!(parse_request("trace 5\n"), Ok(Demand::Trace(Duration::from_secs(5))));
        assert_eq!(parse_request("trace 0.25"), Ok(Demand::Trace(Duration::from_millis(250))));
        assert_eq!(parse_request("metrics 5"), Ok(Demand::Metrics(Duration::from_secs(5))));
        for bad in ["trace 0", "trace 601", "trace -1", "trace NaN", "trace", "trace 5 6", "metric 5", "metrics", ""] {
            assert!(parse_request(bad).is_err(), "{bad:?}");
        }
        assert!(parse_request("trace 601").unwrap_err().contains("0.01 to 600"));
    }

    #[test]
    fn a_request_over_the_socket_reaches_the_session_and_its_answer_comes_back() {
        let dir = std::env::temp_dir().join(format!("gpuscope-control-test-{}", std::process::id()));
        let path = dir.join("1.sock");
        let asked = Arc::new(Mutex::new(Vec::new()));
        let seen = asked.clone();
        let trigger: Trigger = Box::new(move |d| {
            let mut v = seen.lock().unwrap();
            v.push(d);
            if v.len() == 1 {
                Ok(format!("tracing for {:?}", d.window()))
            } else {
                Err("a window is open already".to_string())
            }
        });
        let socket = ControlSocket::start(path.clone(), trigger).expect("the socket starts");
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "only this user may enter");
        let ask = |line: &str| {
            let mut c = UnixStream::connect(&path).unwrap();
            writeln!(c, "{line}").unwrap();
            let mut reply = String::new();
            c.read_to_string(&mut reply).unwrap();
            reply
        };
        assert_eq!(ask("trace 5"), "ok: tracing for 5s\n");
        assert_eq!(ask("trace 2"), "refused: a window is open already\n");
        assert!(ask("trace 9999").starts_with("refused: trace \"9999\""));
        assert_eq!(asked.lock().unwrap().len(), 2, "a bad request never reaches the session");
        // A client that sends nothing is let go at the deadline; the next
        // one is answered.
        let idle = UnixStream::connect(&path).unwrap();
        assert_eq!(ask("trace 1"), "refused: a window is open already\n");
        drop(idle);
        // A second socket at the same path while this one answers: refused.
        let second = ControlSocket::start(path.clone(), Box::new(|_| Ok(String::new())));
        assert!(second.err().is_some_and(|e| e.contains("live control socket")));
        socket.stop();
        assert!(!path.exists(), "the socket is removed at stop");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_process_s_socket_is_found_by_its_own_environment() {
        let uid = my_uid();
        assert_eq!(socket_dir_from(Some("/run/user/7"), Some("/scratch")), Path::new("/run/user/7/gpuscope"));
        assert_eq!(socket_dir_from(None, Some("/scratch/job")), Path::new(&format!("/scratch/job/gpuscope-{uid}")));
        assert_eq!(socket_dir_from(Some(""), None), Path::new(&format!("/tmp/gpuscope-{uid}")));
        // This process's own environment, read back through /proc.
        assert_eq!(socket_path_of(std::process::id()), socket_path(std::process::id()));
        assert_eq!(printable("ok: \u{1b}[2Jdone\u{7}"), "ok: [2Jdone");
    }

    #[test]
    fn a_symbolic_link_does_not_pass_for_a_private_directory() {
        let base = std::env::temp_dir().join(format!("gpuscope-control-link-{}", std::process::id()));
        let real = base.join("real");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = base.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(check_private(&real).is_ok());
        let e = check_private(&link).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_directory_others_can_enter_is_refused() {
        let dir = std::env::temp_dir().join(format!("gpuscope-control-open-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = ControlSocket::start(dir.join("1.sock"), Box::new(|_| Ok(String::new()))).err().expect("refused");
        assert!(e.contains("only this user"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn asking_a_process_without_a_session_says_how_to_start_one() {
        let e = request(u32::MAX, Demand::Trace(Duration::from_secs(1))).unwrap_err();
        assert!(e.contains("--trace-windows"), "{e}");
    }
}
