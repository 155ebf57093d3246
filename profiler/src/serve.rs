//! The in-process Prometheus endpoint (`GPUSCOPE_PROMETHEUS=host:port`): a
//! thread of gpuscope's own answering `GET /metrics` with the running
//! session's figures so far, as OpenMetrics text. Minimal HTTP/1.1: one
//! request per connection, answered and closed; anything else is 404. It
//! changes nothing in the session: trace windows on demand go through the
//! per-user control socket ([`crate::control`]), not through an endpoint
//! that may be bound to every interface. The text comes from a function
//! the session hands in, so this module knows nothing of sessions.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// OpenMetrics' content type, which Prometheus asks for.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// A client gets this long, in all, to send its request, and as long to
/// read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Request bytes read at most.
const MAX_REQUEST: usize = 8 << 10;

/// Makes the body of `/metrics`: the text, or why there is none (503).
pub(crate) type Render = Box<dyn Fn() -> Result<String, String> + Send>;

/// Scrapes closer together than this get the last figures again: each
/// fresh answer flushes CUPTI's buffers and analyses the session so far,
/// which a scraper polling in a loop must not make continuous.
pub(crate) const MIN_REFRESH: Duration = Duration::from_secs(1);

/// `render`, run at most once per `every`: calls in between answer what
/// the last run answered.
pub(crate) fn throttled(render: Render, every: Duration) -> Render {
    let last: std::cell::RefCell<Option<(std::time::Instant, Result<String, String>)>> = Default::default();
    Box::new(move || {
        if let Some((at, answer)) = &*last.borrow() {
            if at.elapsed() < every {
                return answer.clone();
            }
        }
        let answer = render();
        *last.borrow_mut() = Some((std::time::Instant::now(), answer.clone()));
        answer
    })
}

/// A running endpoint; stopped (its thread joined) by [`MetricsServer::stop`]
/// or on drop.
pub(crate) struct MetricsServer {
    addr: SocketAddr,
    listening: crate::control::Listening,
}

impl MetricsServer {
    /// Listens on `addr` and serves `render`'s text. Fails when the address
    /// cannot be bound (the caller says so and profiles on).
    pub(crate) fn start(addr: &str, render: Render) -> Result<Self, String> {
        let listener = TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let bound = listener.local_addr().map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let listening = crate::control::listen(
            "gpuscope-prometheus",
            move || listener.accept().map(|(c, _)| c),
            move |c| answer(c, &render),
        )?;
        Ok(MetricsServer { addr: bound, listening })
    }

    /// The address it listens on (the port chosen when `:0` was asked).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops listening and waits for the answer in progress, if any.
    pub(crate) fn stop(mut self) {
        self.listening.halt();
    }
}

/// The request's method and path, from its first line.
fn request_line(raw: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(raw).ok()?;
    let mut parts = text.lines().next()?.split_whitespace();
    Some((parts.next()?.to_string(), parts.next()?.to_string()))
}

fn answer(mut conn: TcpStream, render: &Render) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_write_timeout(Some(CLIENT_TIMEOUT));
    // One deadline for the whole request: a client trickling bytes cannot
    // hold the endpoint (and the session's stop, which joins it).
    let deadline = std::time::Instant::now() + CLIENT_TIMEOUT;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 1024];
    while raw.len() < MAX_REQUEST && !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        let Some(left) = deadline.checked_duration_since(std::time::Instant::now()).filter(|d| !d.is_zero()) else {
            break;
        };
        let _ = conn.set_read_timeout(Some(left));
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
        }
    }
    let (status, content_type, body) = match request_line(&raw) {
        Some((m, p)) if m == "GET" && (p == "/metrics" || p.starts_with("/metrics?")) => match render() {
            Ok(text) => ("200 OK", CONTENT_TYPE, text),
            Err(why) => ("503 Service Unavailable", "text/plain; charset=utf-8", format!("{why}\n")),
        },
        Some(_) => ("404 Not Found", "text/plain; charset=utf-8", "gpuscope serves /metrics only\n".to_string()),
        None => ("400 Bad Request", "text/plain; charset=utf-8", "not an HTTP request\n".to_string()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes()).and_then(|_| conn.write_all(body.as_bytes()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn a_post_changes_nothing_and_is_not_found() {
        let server = MetricsServer::start("127.0.0.1:0", Box::new(|| Ok("x\n".into()))).unwrap();
        let mut c = TcpStream::connect(server.addr()).unwrap();
        write!(c, "POST /trace?seconds=5 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 404"), "{out}");
    }

    #[test]
    fn serves_the_text_at_metrics_and_nothing_else() {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = calls.clone();
        let render: Render = Box::new(move || {
            let n = seen.fetch_add(1, Ordering::Relaxed);
            if n == 0 {
                Ok("gpuscope_up 1\n# EOF\n".to_string())
            } else {
                Err("no gpuscope session is running".into())
            }
        });
        let server = MetricsServer::start("127.0.0.1:0", render).unwrap();
        let ok = get(server.addr(), "/metrics");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains(&format!("Content-Type: {CONTENT_TYPE}\r\n")), "{ok}");
        assert!(ok.contains("Content-Length: 20\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\ngpuscope_up 1\n# EOF\n"), "{ok}");
        let gone = get(server.addr(), "/metrics");
        assert!(gone.starts_with("HTTP/1.1 503"), "{gone}");
        assert!(gone.ends_with("no gpuscope session is running\n"), "{gone}");
        assert!(get(server.addr(), "/").starts_with("HTTP/1.1 404"));
        assert_eq!(calls.load(Ordering::Relaxed), 2, "render runs only for /metrics");
        server.stop();
    }

    #[test]
    fn scrapes_in_quick_succession_get_the_last_figures_without_a_new_render() {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = calls.clone();
        let counting: Render = Box::new(move || Ok(format!("render {}\n", seen.fetch_add(1, Ordering::Relaxed))));
        let render = throttled(counting, Duration::from_millis(200));
        for _ in 0..20 {
            assert_eq!(render().unwrap(), "render 0\n");
        }
        assert_eq!(calls.load(Ordering::Relaxed), 1, "twenty scrapes, one render");
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(render().unwrap(), "render 1\n", "fresh figures once the interval passed");
        // Through the endpoint too.
        let server =
            MetricsServer::start("127.0.0.1:0", throttled(Box::new(|| Ok("x\n".into())), MIN_REFRESH)).unwrap();
        assert!(get(server.addr(), "/metrics").ends_with("\r\n\r\nx\n"));
        server.stop();
    }

    #[test]
    fn a_taken_address_is_refused_with_the_address_named() {
        let first = MetricsServer::start("127.0.0.1:0", Box::new(|| Ok(String::new()))).unwrap();
        let addr = first.addr().to_string();
        let e = MetricsServer::start(&addr, Box::new(|| Ok(String::new()))).err().unwrap();
        assert!(e.starts_with(&format!("cannot listen on {addr}: ")), "{e}");
    }

    #[test]
    fn a_client_that_sends_nothing_does_not_stop_the_server() {
        let server = MetricsServer::start("127.0.0.1:0", Box::new(|| Ok("x\n".into()))).unwrap();
        let silent = TcpStream::connect(server.addr()).unwrap();
        drop(silent);
        assert!(get(server.addr(), "/metrics").ends_with("\r\n\r\nx\n"));
    }
}

/// A real Prometheus server (Debian's `prometheus` package: the binary at
/// `PROMETHEUS_BIN`, or `prometheus` on PATH) scrapes the endpoint, and
/// PromQL reads the series back. Skipped without the binary, unless
/// `GPUSCOPE_CI=1` (CI fetches it).
#[cfg(test)]
mod prometheus_server {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    fn binary() -> Option<String> {
        if let Ok(p) = std::env::var("PROMETHEUS_BIN") {
            return Some(p);
        }
        let found = Command::new("prometheus").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
        found.is_ok_and(|s| s.success()).then(|| "prometheus".to_string())
    }

    /// `GET path` on `addr`, the body.
    fn get(addr: SocketAddr, path: &str) -> Option<String> {
        let mut c = TcpStream::connect(addr).ok()?;
        write!(c, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").ok()?;
        let mut out = String::new();
        c.read_to_string(&mut out).ok()?;
        out.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
    }

    /// Kills the server when the test ends, however it ends.
    struct Server(std::process::Child);
    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_prometheus_server_scrapes_the_endpoint_and_reads_the_series_back() {
        let Some(prometheus) = binary() else {
            assert!(std::env::var("GPUSCOPE_CI").is_err(), "GPUSCOPE_CI=1 but no prometheus binary");
            eprintln!("skipped: no prometheus binary (PROMETHEUS_BIN or PATH)");
            return;
        };
        let report = crate::report_tests::openmetrics::always_on(3);
        let labels = vec![("hpc_job".to_string(), "4242".to_string())];
        let text = report.to_openmetrics_labelled(&labels);
        let endpoint = MetricsServer::start("127.0.0.1:0", Box::new(move || Ok(text.clone()))).expect("endpoint");
        let dir = std::env::temp_dir().join(format!("gpuscope-prometheus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        let config = format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gpuscope\n    static_configs:\n      - \
             targets: ['{}']\n",
            endpoint.addr()
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("the config");
        // A free port for Prometheus's own API.
        let api = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port");
        let child = Command::new(&prometheus)
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={api}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).expect("a log"))
            .spawn()
            .expect("prometheus starts");
        let _server = Server(child);
        let query = "/api/v1/query?query=gpuscope_range_gpu_busy_ratio";
        let began = Instant::now();
        let mut last = None;
        while began.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(500));
            last = get(api, query);
            if last.as_deref().is_some_and(|b| b.contains("om-step")) {
                break;
            }
        }
        let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
        let body = last.unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}\n{log}"));
        let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
        let step = result.iter().find(|r| r["metric"]["path"] == "om-step").unwrap_or_else(|| panic!("{body}\n{log}"));
        assert_eq!(step["metric"]["source"], "sampled");
        assert_eq!(step["metric"]["hpc_job"], "4242", "the fleet label survives the scrape: {step}");
        assert_eq!(step["metric"]["job"], "gpuscope", "Prometheus's own job label: {step}");
        let value: f64 = step["value"][1].as_str().and_then(|s| s.parse().ok()).expect("a value");
        assert!((value - 0.22).abs() < 1e-9, "{step}");
        // A counter, read with PromQL arithmetic.
        let q = "/api/v1/query?query=sum(gpuscope_range_untraced_calls_total%7Bpath%3D%22om-step%22%7D)";
        let calls = get(api, q).unwrap_or_default();
        assert!(calls.contains("\"10\""), "{calls}");
        endpoint.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
