//! Safe wrapper over CUPTI's PM sampling (`cupti_pmsampling.h`) on one
//! device: sampling into a hardware buffer, decoded into counter data
//! images on gpuscope's decoder thread. PM sampling takes single-pass
//! configurations only: the counters of [`FIGURES`] are packed into as few
//! as the chip allows ([`plan`]), and when there are several they are taken
//! in turn (multiplexing), each held for a while before the next. Disabled
//! on drop.

use crate::collect::cupti::{pm, tolerate};
use crate::collect::debug::debug;
use crate::collect::metrics::rangeprof::{self, HostObject};
use crate::error::{Error, ErrorKind, Result};
use crate::model::sampled::{Sample, EVERY_CONFIG, FIGURES, SAMPLED_METRICS, SM_CYCLES_ACTIVE};
use cupti_sys::{self as sys, Cupti};
use std::ffi::CString;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Samples one counter data image holds: decoded, read and reset (a copy
/// of its blank state) for the next. ~33 KB per sample on an H100 with 5
/// metrics. Reading a sample cost about the same with images of 32, 256 or
/// 2048 samples, and CUPTI's decode ~30-40 us per sample with 64 or 256
/// (measured on an H100).
const IMAGE_SAMPLES: u32 = 256;

/// Samples due before the sampler decodes: CUPTI's decode has a cost per
/// call besides its cost per sample (at 1 ms intervals, decoding every 5 ms
/// took 457 us per sample on gpuscope's thread, every 32 ms 275 us).
const SAMPLES_PER_DECODE: u64 = 32;

/// How often the sampler decodes at `interval_ns`: when
/// [`SAMPLES_PER_DECODE`] samples are due, and not more often than the
/// decoder's 5 ms poll.
pub(crate) fn decode_every(interval_ns: u64) -> Duration {
    Duration::from_nanos(interval_ns.saturating_mul(SAMPLES_PER_DECODE).max(5_000_000))
}

/// Images decoded per [`PmDevice::decode`] call at most: bounds how long
/// the sampler's lock is held; the rest waits for the next call.
const IMAGES_PER_DECODE: usize = 16;

/// Images decoded after sampling stopped at most: 1M samples, more than
/// the hardware buffer holds at any interval gpuscope allows between
/// decodes.
const IMAGES_AT_STOP: usize = 4096;

/// Bytes of the device's buffer of raw samples: room for seconds of samples
/// at 10 us between decodes a few ms apart, and at intervals of 10 us and
/// more a smaller buffer, which a device sets up and switches configurations
/// faster with (H200, CUPTI 13.0: 547 ms with 256 MB, 220 ms with 32 MB).
fn hardware_buffer(interval_ns: u64) -> usize {
    if interval_ns >= 10_000 {
        32 << 20
    } else {
        256 << 20
    }
}

/// A configuration is held at least this long before the next is taken,
/// and at least [`HOLD_PER_SWITCH`] times as long as the last switch took:
/// switching (stop, decode to the end, a new sampling object, configure,
/// start: ~0.2 s on an H200) leaves time unsampled, which stays under a
/// twentieth of the time sampled.
const MIN_HOLD: Duration = Duration::from_millis(500);
/// See [`MIN_HOLD`].
const HOLD_PER_SWITCH: u32 = 20;

/// The pause before a failed switch is tried again.
const SWITCH_RETRY_PAUSE: Duration = Duration::from_millis(20);

/// Switches in a row that may fail (each ending back on the configuration
/// it left) before a device stops taking its configurations in turn.
const MAX_FAILED_SWITCHES: u32 = 3;

/// The single-pass configurations a chip's figures are sampled with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Each configuration's counters.
    pub configs: Vec<Vec<String>>,
    /// Figures no configuration could hold (a counter the chip lacks, or
    /// one that needs several passes alone).
    pub missing: Vec<&'static str>,
}

/// Packs [`FIGURES`] into configurations, in order: each figure's counters
/// join the first configuration they fit into in one pass (`fits`), or
/// start a new one with [`EVERY_CONFIG`] (just the active-cycle weight
/// when the chip lacks the engine's counters).
pub(crate) fn pack(fits: &mut dyn FnMut(&[String]) -> bool) -> Plan {
    let owned = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    let base = if fits(&owned(&EVERY_CONFIG)) { owned(&EVERY_CONFIG) } else { owned(&[SM_CYCLES_ACTIVE]) };
    let mut plan = Plan { configs: Vec::new(), missing: Vec::new() };
    for f in FIGURES {
        let with = |c: &[String]| extended(c, f.metrics);
        if plan.configs.iter().any(|c| with(c).len() == c.len()) {
            continue; // held already (the engine's counters are in every one)
        }
        let fitting = (0..plan.configs.len()).find(|&i| fits(&with(&plan.configs[i])));
        match fitting {
            Some(i) => plan.configs[i] = with(&plan.configs[i]),
            None if fits(&with(&base)) => plan.configs.push(with(&base)),
            None => plan.missing.push(f.name),
        }
    }
    plan
}

/// `c` with those of `metrics` it lacks.
fn extended(c: &[String], metrics: &[&str]) -> Vec<String> {
    let mut c = c.to_vec();
    for m in metrics {
        if !c.iter().any(|n| n == m) {
            c.push(m.to_string());
        }
    }
    c
}

/// The plan for `chip`, made once per chip in the process (it creates a
/// host object per try, a few ms each).
fn plan_of(cupti: &'static Cupti, chip: &CString, availability: &[u8]) -> Result<Plan> {
    static PLANS: Mutex<Vec<(CString, Plan)>> = Mutex::new(Vec::new());
    if let Some((_, p)) = PLANS.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(c, _)| c == chip) {
        return Ok(p.clone());
    }
    let kind = sys::CUPTI_PROFILER_TYPE_PM_SAMPLING;
    let mut fits =
        |m: &[String]| HostObject::of_type(cupti, kind, chip, availability, m).is_ok_and(|h| h.passes() == 1);
    let plan = pack(&mut fits);
    if plan.configs.is_empty() {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!("PM sampling on {chip:?} takes none of gpuscope's counters in one pass"),
        ));
    }
    PLANS.lock().unwrap_or_else(|e| e.into_inner()).push((chip.clone(), plan.clone()));
    Ok(plan)
}

/// One configuration of a device's sampler, with its counter data image.
struct Config {
    host: HostObject,
    image: Vec<u8>,
    /// The image as initialised: copied back after each decode (cheaper
    /// than initialising again).
    blank: Vec<u8>,
    /// Positions of [`SAMPLED_METRICS`] among the host object's metrics.
    slot: Vec<Option<usize>>,
}

/// PM sampling on one device.
pub(crate) struct PmDevice {
    cupti: &'static Cupti,
    device: u32,
    object: pm::Object,
    interval_ns: u64,
    /// Bytes of the hardware buffer of raw samples.
    hardware_buffer: usize,
    configs: Vec<Config>,
    /// The configuration sampling now.
    active: usize,
    started: bool,
    /// The first sample after a start spans the start to the first
    /// trigger: dropped.
    first_seen: bool,
    /// When the active configuration was started, and how long it is held.
    since: Instant,
    hold: Duration,
    /// Switches in a row that ended back on the configuration they left.
    failed_in_a_row: u32,
    missing: Vec<&'static str>,
}

// SAFETY: used by the decoder thread under the sampler's mutex only.
unsafe impl Send for PmDevice {}

/// What one decode found.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    /// Samples completed since the last decode.
    pub samples: Vec<Sample>,
    /// Of which per configuration.
    pub per_config: Vec<u64>,
    /// The hardware buffer overflowed: samples were lost.
    pub overflow: bool,
    /// Time in `cuptiPmSamplingDecodeData`, ns.
    pub decode_ns: u64,
    /// Time reading samples out of the image (sample info, evaluation), ns.
    pub evaluate_ns: u64,
    /// Switches to the next configuration, and the time sampling was
    /// stopped for them, ns.
    pub switches: u64,
    /// See `switches`.
    pub switch_ns: u64,
    /// Tries to configure and start a sampling object that failed (each
    /// retried or given up, see [`PmDevice::switch`]).
    pub failed_switches: u64,
    /// Decoding stopped at its deadline with samples left (at exit).
    pub cut_short: bool,
}

impl PmDevice {
    /// Enables PM sampling on `device`, a sample every `interval_ns`, with
    /// the configurations of its chip's [`Plan`].
    pub(crate) fn new(cupti: &'static Cupti, device: u32, interval_ns: u64) -> Result<Self> {
        Self::with_buffer(cupti, device, interval_ns, hardware_buffer(interval_ns))
    }

    /// [`PmDevice::new`] with a hardware buffer of `hardware_buffer` bytes.
    fn with_buffer(cupti: &'static Cupti, device: u32, interval_ns: u64, hardware_buffer: usize) -> Result<Self> {
        let began = Instant::now();
        rangeprof::initialize(cupti)?;
        rangeprof::api_supported(cupti, device as i32, sys::CUPTI_PROFILER_PM_SAMPLING, "PM sampling")?;
        let chip = rangeprof::chip_name(cupti, device as usize)?;
        let availability = pm::get_counter_availability(cupti, device)?;
        let plan = plan_of(cupti, &chip, &availability)?;
        let planned = began.elapsed();
        let kind = sys::CUPTI_PROFILER_TYPE_PM_SAMPLING;
        let mut configs = Vec::with_capacity(plan.configs.len());
        for metrics in &plan.configs {
            let host = HostObject::of_type(cupti, kind, &chip, &availability, metrics)?;
            let names = host.names();
            let slot =
                SAMPLED_METRICS.iter().map(|m| names.iter().position(|n| n.as_bytes() == m.as_bytes())).collect();
            configs.push(Config { host, image: Vec::new(), blank: Vec::new(), slot });
        }
        let object = pm::enable(cupti, device)?;
        // Owned from here: disabled on drop, on every error below too.
        let mut me = PmDevice {
            cupti,
            device,
            object,
            interval_ns,
            hardware_buffer,
            configs,
            active: 0,
            started: false,
            first_seen: false,
            since: Instant::now(),
            hold: MIN_HOLD,
            failed_in_a_row: 0,
            missing: plan.missing,
        };
        me.configure(0)?;
        debug(&format!(
            "sampling: device {device} set up in {:.0} ms ({} configurations, planned in {:.0} ms)",
            began.elapsed().as_secs_f64() * 1e3,
            me.configs.len(),
            planned.as_secs_f64() * 1e3
        ));
        Ok(me)
    }

    /// The device sampled.
    pub(crate) fn device(&self) -> u32 {
        self.device
    }

    /// Makes configuration `i` the one sampled from the next start: its
    /// config image and a counter data image initialised for it. CUPTI
    /// 13.0 kept the first configuration an object was given (device: later
    /// ones were ignored and their images decoded no sample), so a
    /// configuration after the first takes a new object.
    fn configure(&mut self, i: usize) -> Result<()> {
        let cupti = self.cupti;
        let c = &mut self.configs[i];
        // SAFETY: our object, enabled until drop, not started; the config
        // outlives the call.
        unsafe { pm::set_config(cupti, self.object, c.host.config(), self.hardware_buffer, self.interval_ns) }?;
        // SAFETY: our object, enabled until drop.
        let size = unsafe { pm::get_counter_data_size(cupti, self.object, c.host.names(), IMAGE_SAMPLES) }?;
        c.image = vec![0u8; size];
        // SAFETY: as above.
        unsafe { pm::counter_data_image_initialize(cupti, self.object, &mut c.image) }?;
        c.blank = c.image.clone();
        self.active = i;
        Ok(())
    }

    /// Disables the object and enables a new one on the same device (not
    /// started, not configured).
    fn renew(&mut self) -> Result<()> {
        if !self.object.is_null() {
            tolerate(self.stop(), "stopping a device's PM sampling");
            // SAFETY: our object, stopped, disabled once here and replaced.
            tolerate(unsafe { pm::disable(self.cupti, self.object) }, "disabling a device's PM sampling");
        }
        // Until the new one is enabled, drop must not disable the old again.
        self.object = std::ptr::null_mut();
        self.object = pm::enable(self.cupti, self.device)?;
        Ok(())
    }

    /// Starts sampling.
    pub(crate) fn start(&mut self) -> Result<()> {
        // SAFETY: our object, configured by `new`, enabled until drop.
        unsafe { pm::start(self.cupti, self.object) }?;
        self.started = true;
        self.first_seen = false;
        self.since = Instant::now();
        Ok(())
    }

    /// Stops sampling; what was sampled can still be decoded.
    pub(crate) fn stop(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.started) {
            return Ok(());
        }
        // SAFETY: our object, started, enabled until drop.
        unsafe { pm::stop(self.cupti, self.object) }
    }

    /// Decodes the samples the hardware buffer holds (several images' worth
    /// if need be); `to_end`: sampling has stopped, decode until CUPTI says
    /// the records end, or until `deadline`. While sampling, the next
    /// configuration is taken once the active one has been held long
    /// enough.
    pub(crate) fn decode(&mut self, to_end: bool, deadline: Option<Instant>) -> Result<Decoded> {
        let mut out = Decoded { per_config: vec![0; self.configs.len()], ..Default::default() };
        if self.object.is_null() {
            return Ok(out); // suspended
        }
        self.decode_into(&mut out, to_end, deadline)?;
        if !to_end
            && self.configs.len() > 1
            && self.failed_in_a_row < MAX_FAILED_SWITCHES
            && self.started
            && self.since.elapsed() >= self.hold
        {
            self.switch(&mut out)?;
        }
        Ok(out)
    }

    fn decode_into(&mut self, out: &mut Decoded, to_end: bool, deadline: Option<Instant>) -> Result<()> {
        // Bounded: a buffer that keeps refilling faster than it decodes
        // waits for the next call. Once sampling has stopped, the buffer
        // holds a finite number of samples: all of them are read (the
        // bound only guards against a decode that never ends).
        let images = if to_end { IMAGES_AT_STOP } else { IMAGES_PER_DECODE };
        let a = self.active;
        let mut ended = false;
        for _ in 0..images {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                out.cut_short = true;
                break;
            }
            let t = Instant::now();
            // SAFETY: our object, enabled until drop, and the active
            // configuration's image.
            let r = unsafe { pm::decode_data(self.cupti, self.object, &mut self.configs[a].image) };
            out.decode_ns += t.elapsed().as_nanos() as u64;
            let d = match r {
                Err(e) if e.cupti_code() == Some(sys::CUPTI_ERROR_OUT_OF_MEMORY) => {
                    // The hardware buffer overflowed; what it held is lost.
                    out.overflow = true;
                    let c = &mut self.configs[a];
                    c.image.copy_from_slice(&c.blank);
                    ended = true;
                    break;
                }
                r => r?,
            };
            out.overflow |= d.overflow;
            let t = Instant::now();
            let before = out.samples.len();
            self.read_samples(&mut out.samples)?;
            out.per_config[a] += (out.samples.len() - before) as u64;
            out.evaluate_ns += t.elapsed().as_nanos() as u64;
            let c = &mut self.configs[a];
            c.image.copy_from_slice(&c.blank);
            let more = if to_end {
                d.stop_reason != sys::CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS
            } else {
                d.stop_reason == sys::CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
            };
            if !more {
                ended = true;
                break;
            }
        }
        // Decoding to the end, the bound reached with records left: those
        // are lost.
        out.cut_short |= to_end && !ended;
        Ok(())
    }

    /// Takes the next configuration: stops, decodes what the active one
    /// sampled, configures the next and starts again. The time between the
    /// stop and the start has no sample. A switch that fails (CUPTI 13.0
    /// on an H100 returned `CUPTI_ERROR_UNKNOWN` from `SetConfig` or
    /// `Start` now and then while a program ran) is tried once more, then
    /// the active configuration is taken back; after
    /// [`MAX_FAILED_SWITCHES`] failures in a row the device keeps its
    /// configuration and the figures only the others hold stay unsampled.
    fn switch(&mut self, out: &mut Decoded) -> Result<()> {
        let t = Instant::now();
        self.stop()?;
        self.decode_into(out, true, None)?;
        let (left, next) = (self.active, (self.active + 1) % self.configs.len());
        let mut last = None;
        for (attempt, i) in [next, next, self.active].into_iter().enumerate() {
            if attempt > 0 {
                std::thread::sleep(SWITCH_RETRY_PAUSE);
            }
            match self.restart_with(i) {
                Ok(()) => {
                    last = None;
                    break;
                }
                Err(e) => {
                    debug(&format!("sampling: device {}: switching to configuration {i}: {e}", self.device));
                    out.failed_switches += 1;
                    last = Some(e);
                }
            }
        }
        if let Some(e) = last {
            return Err(e);
        }
        let took = t.elapsed();
        // A switch that ended back where it began took no turn; its time
        // unsampled still counts.
        out.switches += u64::from(self.active != left);
        out.switch_ns += took.as_nanos() as u64;
        debug(&format!(
            "sampling: device {}: configuration {} taken in {:.1} ms",
            self.device,
            self.active,
            took.as_secs_f64() * 1e3
        ));
        self.failed_in_a_row = if out.failed_switches >= 2 { self.failed_in_a_row + 1 } else { 0 };
        // Back off after a failure: each try costs a stop and a start.
        self.hold = MIN_HOLD.max(took * HOLD_PER_SWITCH) * (1 << self.failed_in_a_row.min(4));
        Ok(())
    }

    /// Stops sampling, decodes what was sampled and gives the device's
    /// counters back (the range profiler cannot run beside PM sampling);
    /// [`PmDevice::resume`] takes them again.
    pub(crate) fn suspend(&mut self) -> Result<Decoded> {
        let mut out = Decoded { per_config: vec![0; self.configs.len()], ..Default::default() };
        if self.object.is_null() {
            return Ok(out);
        }
        self.stop()?;
        self.decode_into(&mut out, true, None)?;
        // SAFETY: our object, stopped, disabled once here.
        tolerate(unsafe { pm::disable(self.cupti, self.object) }, "disabling a device's PM sampling");
        self.object = std::ptr::null_mut();
        Ok(out)
    }

    /// Samples again, in the configuration it had, after
    /// [`PmDevice::suspend`].
    pub(crate) fn resume(&mut self) -> Result<()> {
        if !self.object.is_null() {
            return Ok(());
        }
        self.restart_with(self.active)
    }

    /// A new sampling object with configuration `i`, started.
    fn restart_with(&mut self, i: usize) -> Result<()> {
        self.renew()?;
        self.configure(i)?;
        self.start()
    }

    /// Appends the completed samples of the active configuration's decoded
    /// image.
    fn read_samples(&mut self, out: &mut Vec<Sample>) -> Result<()> {
        let c = &self.configs[self.active];
        // SAFETY: our image, initialised for our object.
        let completed = unsafe { pm::get_counter_data_info(self.cupti, &c.image) }?;
        for i in 0..completed {
            // SAFETY: our object, enabled until drop, and its image.
            let (start, end) = unsafe { pm::counter_data_get_sample_info(self.cupti, self.object, &c.image, i) }?;
            if !std::mem::replace(&mut self.first_seen, true) {
                continue;
            }
            // SAFETY: our image, decoded by CUPTI.
            let raw = unsafe { c.host.evaluate(&c.image, i) }?;
            let values: Vec<f64> = c.slot.iter().map(|p| p.map_or(f64::NAN, |p| raw[p])).collect();
            out.push(Sample::from_values(self.device, start, end, &values));
        }
        Ok(())
    }

    /// Each configuration's counters.
    pub(crate) fn configs(&self) -> Vec<Vec<String>> {
        let name = |n: &CString| n.to_string_lossy().into_owned();
        self.configs.iter().map(|c| c.host.names().iter().map(name).collect()).collect()
    }

    /// Figures no configuration holds.
    pub(crate) fn missing(&self) -> &[&'static str] {
        &self.missing
    }
}

impl Drop for PmDevice {
    fn drop(&mut self) {
        if self.object.is_null() {
            return; // a switch failed between disable and enable
        }
        tolerate(self.stop(), "stopping a device's PM sampling");
        // SAFETY: our object, disabled once, here.
        tolerate(unsafe { pm::disable(self.cupti, self.object) }, "disabling a device's PM sampling");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::metrics::{ACHIEVED_OCCUPANCY, DRAM_READ, SM_EFFICIENCY};
    use crate::model::sampled::{ISSUE_CYCLES, TENSOR_CYCLES};

    /// The figures pack as H200's PM sampling took them (device probe,
    /// CUPTI 13.0): the SM figures, DRAM and the engine fit one pass; the
    /// tensor pipe or the issue slots with them need two, together with
    /// the engine's counters one.
    #[test]
    fn figures_pack_into_single_pass_configurations_in_order() {
        let second = [TENSOR_CYCLES, ISSUE_CYCLES];
        let mut tried = 0;
        let mut fits = |m: &[String]| {
            tried += 1;
            let has = |x: &str| m.iter().any(|n| n == x);
            !(second.iter().any(|s| has(s)) && (has(SM_EFFICIENCY) || has(ACHIEVED_OCCUPANCY) || has(DRAM_READ)))
        };
        let plan = pack(&mut fits);
        assert_eq!(plan.configs.len(), 2, "{plan:?}");
        let (a, b) = (&plan.configs[0], &plan.configs[1]);
        for m in EVERY_CONFIG {
            assert!(a.iter().any(|n| n == m) && b.iter().any(|n| n == m), "{m} in both: {plan:?}");
        }
        assert!(a.iter().any(|n| n == SM_EFFICIENCY) && a.iter().any(|n| n == DRAM_READ));
        assert!(b.iter().any(|n| n == TENSOR_CYCLES) && b.iter().any(|n| n == ISSUE_CYCLES));
        assert!(plan.missing.is_empty());
        assert!(tried < 12, "{tried} host objects");
        // Everything in one pass: one configuration, no switching.
        let plan = pack(&mut |_: &[String]| true);
        assert_eq!((plan.configs.len(), plan.missing.len()), (1, 0));
        assert_eq!(plan.configs[0].len(), SAMPLED_METRICS.len());
    }

    /// A chip without the engine's counters, whose tensor counter needs
    /// two passes even alone: the rest is sampled, the figures missing are
    /// named. A counter whose peak per cycle cannot be had is missing too,
    /// not a share of a guessed peak.
    #[test]
    fn figures_a_chip_cannot_give_are_named_not_faked() {
        let plan = pack(&mut |m: &[String]| !m.iter().any(|n| n.starts_with("gr__") || n == TENSOR_CYCLES));
        assert_eq!(plan.missing, vec!["GPU busy", "tensor-pipe activity"]);
        assert_eq!(plan.configs.len(), 1);
        assert!(!plan.configs[0].iter().any(|n| n.starts_with("gr__")));
        assert!(plan.configs[0].iter().any(|n| n == ISSUE_CYCLES));
        let plan = pack(&mut |m: &[String]| !m.iter().any(|n| n.ends_with(".peak_sustained")));
        assert_eq!(plan.missing, vec!["tensor-pipe activity", "issue-slot activity"]);
        assert!(!plan.configs.iter().flatten().any(|n| n == TENSOR_CYCLES));
    }
}

#[cfg(test)]
mod gpu {
    use super::*;

    /// On this GPU every figure is sampled, in as few single-pass
    /// configurations as fit, each taking its turn while kernels run; the
    /// switches' cost is printed.
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn every_figure_is_sampled_in_turn_on_this_gpu() {
        let mut tiny = crate::collect::sampling::Tiny::new();
        let cupti = crate::collect::cupti::lib().expect("CUPTI");
        for mb in [256usize, 32] {
            let t = Instant::now();
            let p = PmDevice::with_buffer(cupti, 0, 100_000, mb << 20).expect("PM sampling set up");
            println!("hardware buffer {mb} MB: set up in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
            drop(p);
        }
        let mut p = PmDevice::new(cupti, 0, 100_000).expect("PM sampling set up");
        println!("sampling configurations: {:?}; missing: {:?}", p.configs(), p.missing());
        assert!(p.missing().is_empty(), "{:?}", p.missing());
        p.start().expect("sampling starts");
        let mut all = Decoded { per_config: vec![0; p.configs.len()], ..Default::default() };
        let began = Instant::now();
        while began.elapsed() < Duration::from_millis(1500) {
            for _ in 0..200 {
                tiny.launch(132, 256);
            }
            tiny.sync();
            let d = p.decode(false, None).expect("decodes");
            all.samples.extend(d.samples);
            for (a, b) in all.per_config.iter_mut().zip(d.per_config) {
                *a += b;
            }
            all.switches += d.switches;
            all.switch_ns += d.switch_ns;
        }
        p.stop().expect("stops");
        let d = p.decode(true, None).expect("decodes to the end");
        all.samples.extend(d.samples);
        let busy: Vec<f32> = all.samples.iter().map(|s| s.gr_active_pct).filter(|v| v.is_finite()).collect();
        println!(
            "samples per configuration {:?}, {} switches, {:.2} ms each; GPU busy mean {:.1}%",
            all.per_config,
            all.switches,
            all.switch_ns as f64 / all.switches.max(1) as f64 / 1e6,
            busy.iter().sum::<f32>() / busy.len().max(1) as f32
        );
        assert!(all.per_config.iter().all(|&n| n > 0), "each configuration sampled: {:?}", all.per_config);
        assert!(p.configs.len() == 1 || all.switches > 0);
        assert!(busy.len() > 100 && busy.iter().all(|b| (0.0..=100.0).contains(b)), "{} busy values", busy.len());
    }
}
