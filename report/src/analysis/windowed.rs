//! The steady state's idle time with periodic trace windows (kernel records
//! on for the first `window_ns` of every `period_ns`): it is known inside
//! the windows only, and there only between kernels that both fell in one.
//! Its split by cause stands for the whole steady state where the windows
//! classified most of the idle time the PM samples put in them; a gap that
//! crosses a window's edge (a step's long wait for its data) is not
//! classified, so where those make most of it the short gaps inside the
//! windows would pass for all of it. GPU busy itself comes from the samples
//! where the engine's counter was sampled (`answer::sampled`); the scaled
//! idle time stands in for it where not, and for the findings.

use crate::model::idle::{IdleSplit, CAUSES, PROFILER};
use crate::model::sampled::traced_between;
use crate::report::Report;

/// Under this share of their idle time classified, the windows' split is
/// not the steady state's.
pub(crate) const MIN_CLASSIFIED_PCT: f64 = 50.0;

/// What the steady state's idle time stands for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum WindowedIdle {
    /// Kernel records all along (trace mode, windows that covered the
    /// session), windows of 0, or no steady state: nothing to scale.
    Whole,
    /// Scaled to the steady state's wall time from the `traced_ns` of it
    /// the windows held, and by how much (`factor`).
    Scaled { split: IdleSplit, traced_ns: u64, factor: f64 },
    /// The windows classified `classified_pct` of the idle time the samples
    /// put in the `traced_ns` of the steady state they held (none: 0%):
    /// too little to stand for it.
    TooLittle { classified_pct: f64, traced_ns: u64 },
}

/// What `r`'s steady state's idle time stands for.
pub(crate) fn windowed_idle(r: &Report) -> WindowedIdle {
    let (Some(w), Some(s)) = (r.sampling.as_ref().and_then(|m| m.trace_windows.as_ref()), r.session_steady.as_ref())
    else {
        return WindowedIdle::Whole;
    };
    if !w.periodic() {
        return WindowedIdle::Whole;
    }
    // Windows close when the decoder switches records off, a little past
    // their nominal length: their mean length.
    let window = w.traced_ns.checked_div(w.windows).map_or(w.window_ns, |m| m.clamp(w.window_ns, w.period_ns));
    let traced_ns = traced_between(r.start_ns, window, w.period_ns, s.start_ns, s.end_ns);
    // No window in the steady state: nothing of it classified.
    if traced_ns == 0 {
        return WindowedIdle::TooLittle { classified_pct: 0.0, traced_ns };
    }
    let wall = s.wall_ns();
    let idle = s.idle.total().saturating_sub(s.idle.profiler_ns);
    // The samples' busy time is every device's mean, the idle time the
    // time no device ran a kernel: they compare on one device only (with
    // several, the windows' split stands as it is).
    let one_device = r.device_time.len() < 2 && r.devices.len() < 2;
    // The kernels' busy share, as the windows' idle time counts it (the
    // engine's activity reads a few points over it).
    let share = s.kernel_share();
    if let Some(busy) =
        s.sampled.and_then(|f| f.gpu_busy_pct).map(|b| super::answer::kernels_busy(b, share)).filter(|_| one_device)
    {
        let expected = traced_ns as f64 * (100.0 - busy).max(0.0) / 100.0;
        let classified_pct = if expected > 0.0 { (100.0 * idle as f64 / expected).min(100.0) } else { 100.0 };
        if classified_pct < MIN_CLASSIFIED_PCT {
            return WindowedIdle::TooLittle { classified_pct, traced_ns };
        }
    }
    let factor = wall as f64 / traced_ns as f64;
    let a = s.idle.to_array();
    let mut scaled = [0u64; CAUSES];
    for (i, (x, y)) in scaled.iter_mut().zip(a).enumerate() {
        // gpuscope's own measurements are counted where they were made.
        *x = if i == PROFILER { y } else { ((y as f64 * factor) as u64).min(wall) };
    }
    WindowedIdle::Scaled { split: IdleSplit::from_array(scaled), traced_ns, factor }
}
