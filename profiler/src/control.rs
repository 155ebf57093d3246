//! Depth on demand from a live always-on session: a trace window of S
//! seconds asked for while the process runs, through a local control socket
//! (`gpuscope trigger PID --trace 5s`) or the Prometheus endpoint
//! (`POST /trace?seconds=5`). The socket lives in a directory only the
//! process's user can enter (`$XDG_RUNTIME_DIR/gpuscope`, else
//! `/tmp/gpuscope-UID`, mode 0700): other users cannot ask. One line in,
//! one line out: `trace SECONDS` answered by `ok: ...` or `refused: ...`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Asks the running session for a trace window of the given length: what
/// was done, or (`Err`) why not.
pub(crate) type Trigger = Box<dyn Fn(Duration) -> Result<String, String> + Send>;

/// Trace windows asked for on demand may be this long.
pub const DEMAND_WINDOWS: std::ops::RangeInclusive<Duration> = Duration::from_millis(10)..=Duration::from_secs(600);

/// How often a listener looks for a stop (it does not block in accept).
const POLL: Duration = Duration::from_millis(50);

/// A listener's thread and the flag that stops it.
pub(crate) type Listening = (Arc<AtomicBool>, JoinHandle<()>);

/// A thread of gpuscope's, named `name`, that answers each connection
/// `accept` gives (non-blocking: an error is "nothing waiting") with
/// `answer`, until the flag it returns is set. A panic in one answer ends
/// that answer only.
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
    Ok((stop, thread))
}
/// A client gets this long to send its line and read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The directory of this user's control sockets.
fn socket_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("gpuscope"),
        // SAFETY: getuid cannot fail and touches no memory.
        None => std::env::temp_dir().join(format!("gpuscope-{}", unsafe { libc::getuid() })),
    }
}

/// Where process `pid`'s control socket is (for this user).
pub fn socket_path(pid: u32) -> PathBuf {
    socket_dir().join(format!("{pid}.sock"))
}

/// Makes `dir` (mode 0700) or checks it is this user's alone: a directory
/// others can enter would let them ask for trace windows.
fn private_dir(dir: &Path) -> Result<(), String> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot make {}: {e}", dir.display())),
    }
    let m = std::fs::metadata(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    // SAFETY: getuid cannot fail and touches no memory.
    let me = unsafe { libc::getuid() };
    if !m.is_dir() || m.uid() != me || m.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "{} is not a directory only this user can enter (owner uid {}, mode {:o}): no control socket",
            dir.display(),
            m.uid(),
            m.permissions().mode() & 0o777
        ));
    }
    Ok(())
}

/// What a request line asks for: a trace window of that length.
pub(crate) fn parse_request(line: &str) -> Result<Duration, String> {
    let mut words = line.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("trace"), Some(secs), None) => {
            let d = secs
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(Duration::from_secs_f64)
                .filter(|d| DEMAND_WINDOWS.contains(d));
            d.ok_or_else(|| format!("trace {secs:?}: the window's length is 0.01 to 600 seconds"))
        }
        _ => Err(format!("{:?} is no request: the one request is \"trace SECONDS\"", line.trim())),
    }
}

/// A running control socket; removed (and its thread joined) on
/// [`ControlSocket::stop`] or drop.
pub(crate) struct ControlSocket {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlSocket {
    /// Listens at `path` (its directory made private first) and answers
    /// requests with `trigger`.
    pub(crate) fn start(path: PathBuf, trigger: Trigger) -> Result<Self, String> {
        if let Some(dir) = path.parent() {
            private_dir(dir)?;
        }
        // A socket left by a process of the same id that did not stop.
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(|e| format!("cannot listen at {}: {e}", path.display()))?;
        listener.set_nonblocking(true).map_err(|e| format!("cannot listen at {}: {e}", path.display()))?;
        let (stop, thread) =
            listen("gpuscope-control", move || listener.accept().map(|(c, _)| c), move |c| answer(c, &trigger))?;
        Ok(ControlSocket { path, stop, thread: Some(thread) })
    }

    /// Stops listening and removes the socket.
    pub(crate) fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.halt();
    }
}

fn answer(conn: UnixStream, trigger: &Trigger) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(CLIENT_TIMEOUT));
    let _ = conn.set_write_timeout(Some(CLIENT_TIMEOUT));
    let mut line = String::new();
    // One line, at most 1 KB.
    let _ = BufReader::new((&conn).take(1024)).read_line(&mut line);
    let reply = match parse_request(&line).and_then(trigger) {
        Ok(done) => format!("ok: {done}\n"),
        Err(why) => format!("refused: {why}\n"),
    };
    let _ = (&conn).write_all(reply.as_bytes());
}

/// Asks process `pid`'s session for a trace window of `window`: its
/// answer (`Err`: refused, or no such session).
pub fn request_trace(pid: u32, window: Duration) -> Result<String, String> {
    let path = socket_path(pid);
    let mut conn = UnixStream::connect(&path).map_err(|e| {
        format!(
            "no always-on gpuscope session answers in process {pid} ({}: {e}); one runs with --mode sampling \
             --trace-windows WINDOW/PERIOD, as the same user",
            path.display()
        )
    })?;
    let _ = conn.set_read_timeout(Some(CLIENT_TIMEOUT));
    writeln!(conn, "trace {}", window.as_secs_f64()).map_err(|e| format!("cannot ask process {pid}: {e}"))?;
    let mut reply = String::new();
    BufReader::new(conn).read_line(&mut reply).map_err(|e| format!("no answer from process {pid}: {e}"))?;
    let reply = reply.trim_end();
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
        assert_eq!(parse_request("trace 5\n"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_request("trace 0.25"), Ok(Duration::from_millis(250)));
        for bad in ["trace 0", "trace 601", "trace -1", "trace NaN", "trace", "trace 5 6", "metrics 5", ""] {
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
                Ok(format!("tracing for {d:?}"))
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
            BufReader::new(c).read_line(&mut reply).unwrap();
            reply
        };
        assert_eq!(ask("trace 5"), "ok: tracing for 5s\n");
        assert_eq!(ask("trace 2"), "refused: a window is open already\n");
        assert!(ask("trace 9999").starts_with("refused: trace \"9999\""));
        assert_eq!(asked.lock().unwrap().len(), 2, "a bad request never reaches the session");
        socket.stop();
        assert!(!path.exists(), "the socket is removed at stop");
        let _ = std::fs::remove_dir_all(&dir);
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
        let e = request_trace(u32::MAX, Duration::from_secs(1)).unwrap_err();
        assert!(e.contains("--trace-windows"), "{e}");
    }
}
