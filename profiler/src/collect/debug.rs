//! `GPUSCOPE_DEBUG=1`: where start, stop and metrics setup spend their time.

/// `GPUSCOPE_DEBUG=1`: each step of start, stop and metrics setup on
/// stderr, with milliseconds since the first step, to tell where a hang or
/// failure inside CUPTI happens and what the program waits for.
pub(crate) fn debug(step: &str) {
    static ON: std::sync::OnceLock<Option<std::time::Instant>> = std::sync::OnceLock::new();
    let on = ON.get_or_init(|| std::env::var("GPUSCOPE_DEBUG").is_ok_and(|v| v == "1").then(std::time::Instant::now));
    if let Some(t0) = on {
        eprintln!("gpuscope[debug] {:>9.3} ms: {step}", t0.elapsed().as_secs_f64() * 1e3);
    }
}
