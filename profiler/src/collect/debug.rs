//! `GPUSCOPE_DEBUG=1`: where start, stop and metrics setup spend their time,
//! and where a crash happened.

/// When `GPUSCOPE_DEBUG=1` was first read; `None`: debugging is off.
fn since() -> Option<std::time::Instant> {
    static ON: std::sync::OnceLock<Option<std::time::Instant>> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("GPUSCOPE_DEBUG").is_ok_and(|v| v == "1").then(std::time::Instant::now))
}

/// Whether `GPUSCOPE_DEBUG=1` is set (what is printed only then need not
/// be worked out otherwise).
pub(crate) fn on() -> bool {
    since().is_some()
}

/// `GPUSCOPE_DEBUG=1`: each step of start, stop and metrics setup on
/// stderr, with milliseconds since the first step, to tell where a hang or
/// failure inside CUPTI happens and what the program waits for.
pub(crate) fn debug(step: &str) {
    if let Some(t0) = since() {
        eprintln!("gpuscope[debug] {:>9.3} ms: {step}", t0.elapsed().as_secs_f64() * 1e3);
    }
}

/// `GPUSCOPE_DEBUG=1`: a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE)
/// first prints the native call stack on stderr, each frame's library and
/// offset, to tell a fault inside CUPTI or the driver from one in
/// gpuscope; then the signal takes the action it had before.
pub(crate) fn report_crashes() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if since().is_none() {
        return;
    }
    ONCE.call_once(|| {
        // glibc's <execinfo.h>.
        extern "C" {
            fn backtrace(buffer: *mut *mut libc::c_void, size: libc::c_int) -> libc::c_int;
            fn backtrace_symbols_fd(buffer: *const *mut libc::c_void, size: libc::c_int, fd: libc::c_int);
        }
        const SIGNALS: [libc::c_int; 4] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE];
        static PREVIOUS: std::sync::OnceLock<Vec<(libc::c_int, libc::sigaction)>> = std::sync::OnceLock::new();
        extern "C" fn on_fatal(sig: libc::c_int) {
            let mut frames = [std::ptr::null_mut(); 64];
            let msg = b"gpuscope[debug] fatal signal; native stack:\n";
            // SAFETY: async-signal-safe calls on buffers of ours (backtrace
            // was primed at install, so it does not load anything here).
            unsafe {
                libc::write(2, msg.as_ptr().cast(), msg.len());
                let n = backtrace(frames.as_mut_ptr(), frames.len() as libc::c_int);
                backtrace_symbols_fd(frames.as_ptr(), n, 2);
            }
            let previous = PREVIOUS.get().and_then(|p| p.iter().find(|(s, _)| *s == sig));
            // SAFETY: restores the action this signal had (or the default)
            // and delivers the signal again, as if gpuscope had not been here.
            unsafe {
                match previous {
                    Some((_, act)) => {
                        libc::sigaction(sig, act, std::ptr::null_mut());
                    }
                    None => {
                        libc::signal(sig, libc::SIG_DFL);
                    }
                }
                libc::raise(sig);
            }
        }
        let mut frames = [std::ptr::null_mut(); 4];
        // SAFETY: primes glibc's unwinder (its first call loads libgcc_s).
        unsafe { backtrace(frames.as_mut_ptr(), frames.len() as libc::c_int) };
        let mut previous = Vec::new();
        for sig in SIGNALS {
            // SAFETY: a zeroed sigaction is valid; the handler is a plain
            // extern "C" fn; the old action is written into ours.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_fatal as *const () as usize;
                libc::sigemptyset(&mut act.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &act, &mut old) == 0 {
                    previous.push((sig, old));
                }
            }
        }
        let _ = PREVIOUS.set(previous);
    });
}
