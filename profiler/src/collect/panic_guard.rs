//! The panic boundary around everything gpuscope runs on the program's
//! threads (CUPTI's and NVTX's callbacks) and on its own threads.
//!
//! A panic there must not unwind into C (undefined behaviour, an abort in
//! practice), must not take the program down, and must not print on the
//! program's stderr as if the program had panicked. [`catch`] catches it
//! and counts it (the report's `drops.callback_panics`). The message is
//! silenced by a panic hook installed once and chained: it stays quiet
//! only while the panicking thread is inside [`catch`] (a thread-local
//! depth), logs the panic with `GPUSCOPE_DEBUG=1`, and hands every other
//! panic to the hook that was installed before it, so the program's own
//! panics print as they always did. A hook the program installs after
//! gpuscope's replaces it; gpuscope's panics then reach that hook, still
//! caught and counted.

use super::debug::debug;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

/// Panics caught by [`catch`] in this process.
static CAUGHT: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// How many [`catch`] calls this thread is inside (callbacks nest: a
    /// flush made in a callback runs the buffer callbacks).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Runs `f`; a panic in it is caught and counted, and the panic hook says
/// nothing about it. `None`: `f` panicked.
///
/// `f` is treated as unwind safe: what it shares with other code is behind
/// locks whose poisoning gpuscope ignores, or atomics.
pub(crate) fn catch<T>(f: impl FnOnce() -> T) -> Option<T> {
    // Installing the hook while this thread unwinds (a program's NVTX
    // range popped by a destructor during its own panic) would panic again
    // and abort: then only the default message of that one panic is lost.
    if !std::thread::panicking() {
        install_hook();
    }
    let _inside = Inside::enter();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(_) => {
            CAUGHT.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

/// Panics caught so far in this process.
pub(crate) fn caught() -> u64 {
    CAUGHT.load(Ordering::Relaxed)
}

/// Installs the chained hook (once per process): collection start calls
/// this before any callback can run; [`catch`] too, for NVTX events that
/// come before any session.
pub(crate) fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if inside() {
                debug(&format!("caught inside gpuscope: {info}"));
            } else {
                previous(info);
            }
        }));
    });
}

/// Whether this thread is inside [`catch`] (false while its thread-locals
/// are being torn down).
fn inside() -> bool {
    DEPTH.try_with(|d| d.get() > 0).unwrap_or(false)
}

/// This thread is inside [`catch`] while one lives.
struct Inside;

impl Inside {
    fn enter() -> Self {
        let _ = DEPTH.try_with(|d| d.set(d.get() + 1));
        Inside
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        let _ = DEPTH.try_with(|d| d.set(d.get().saturating_sub(1)));
    }
}

#[cfg(test)]
thread_local! {
    /// The callback [`fault`] panics in, on this thread.
    static FAULT: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Panics here when a test asked for a fault at `site` on this thread.
#[cfg(test)]
pub(crate) fn fault(site: &'static str) {
    if FAULT.with(|f| f.get()) == Some(site) {
        panic!("gpuscope test fault in {site}");
    }
}

/// Panics here when a test asked for a fault at `site` on this thread.
#[cfg(not(test))]
#[inline(always)]
pub(crate) fn fault(_site: &'static str) {}

/// Makes [`fault`] panic at `site` on this thread (`None`: nowhere).
#[cfg(test)]
pub(crate) fn inject(site: Option<&'static str>) {
    FAULT.with(|f| f.set(site));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hook is the process's: a child process of this test binary
    /// runs [`child`] with a hook of its own installed first.
    const CHILD: &str = "GPUSCOPE_PANIC_GUARD_CHILD";

    #[test]
    fn a_panic_inside_is_caught_and_counted() {
        let before = caught();
        assert_eq!(catch(|| 7), Some(7));
        assert_eq!(catch(|| -> u32 { panic!("inside") }), None);
        // Nested boundaries: the inner one catches.
        assert_eq!(catch(|| catch(|| -> u32 { panic!("nested") }).is_none()), Some(true));
        assert!(caught() >= before + 2, "both panics counted");
        assert!(!inside(), "the boundary is left after a panic");
    }

    #[test]
    fn the_hook_silences_panics_inside_and_chains_the_others() {
        let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args(["collect::panic_guard::tests::child", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env_remove("GPUSCOPE_DEBUG")
            .output()
            .expect("the test binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
        assert!(stdout.contains("child ran"), "the child test ran:\n{stdout}");
        assert!(!stderr.contains("inside-the-boundary"), "a caught panic printed:\n{stderr}");
        assert!(!stderr.contains("gpuscope test fault"), "a callback's caught panic printed:\n{stderr}");
        assert!(
            stderr.contains("previous hook: ") && stderr.contains("outside-the-boundary"),
            "the program's own panic reached its hook:\n{stderr}"
        );
    }

    /// Runs only as the child of the test above.
    #[test]
    fn child() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        std::panic::set_hook(Box::new(|info| eprintln!("previous hook: {info}")));
        install_hook();
        let before = caught();
        assert_eq!(catch(|| -> u32 { panic!("inside-the-boundary") }), None);
        // Every callback has its boundary.
        crate::collect::callbacks::tests::call_each_callback_with_a_fault();
        crate::collect::nvtx::tests::event_with_a_fault();
        assert!(caught() > before + 4, "each caught panic counted: {}", caught() - before);
        assert!(std::panic::catch_unwind(|| panic!("outside-the-boundary")).is_err());
        println!("child ran");
    }
}
