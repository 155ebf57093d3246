//! Safe wrapper over CUPTI's PM sampling (`cupti_pmsampling.h`) on one
//! device: enabled with a single-pass config, sampling into a hardware
//! buffer, decoded into a counter data image on gpuscope's decoder thread.
//! Disabled on drop.

use crate::collect::cupti::{pm, tolerate};
use crate::collect::metrics::rangeprof::{self, HostObject};
use crate::error::{Error, ErrorKind, Result};
use crate::model::sampled::{Sample, REQUIRED_METRICS, SAMPLED_METRICS};
use cupti_sys::{self as sys, Cupti};

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
pub(crate) fn decode_every(interval_ns: u64) -> std::time::Duration {
    std::time::Duration::from_nanos(interval_ns.saturating_mul(SAMPLES_PER_DECODE).max(5_000_000))
}

/// Images decoded per [`PmDevice::decode`] call at most: bounds how long
/// the sampler's lock is held; the rest waits for the next call.
const IMAGES_PER_DECODE: usize = 16;

/// Images decoded after sampling stopped at most: 1M samples, more than
/// the hardware buffer holds at any interval gpuscope allows between
/// decodes.
const IMAGES_AT_STOP: usize = 4096;

/// Bytes of the device's buffer of raw samples: room for seconds of samples
/// at 10 us between decodes a few ms apart.
const HARDWARE_BUFFER: usize = 256 << 20;

/// PM sampling on one device.
pub(crate) struct PmDevice {
    cupti: &'static Cupti,
    device: u32,
    object: pm::Object,
    host: HostObject,
    image: Vec<u8>,
    /// The image as initialised: copied back after each decode (cheaper
    /// than initialising again).
    blank: Vec<u8>,
    started: bool,
    /// The first sample spans enable to the first trigger: dropped.
    first_seen: bool,
}

// SAFETY: used by the decoder thread under the sampler's mutex only.
unsafe impl Send for PmDevice {}

/// What one decode found.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    /// Samples completed since the last decode.
    pub samples: Vec<Sample>,
    /// The hardware buffer overflowed: samples were lost.
    pub overflow: bool,
    /// Time in `cuptiPmSamplingDecodeData`, ns.
    pub decode_ns: u64,
    /// Time reading samples out of the image (sample info, evaluation), ns.
    pub evaluate_ns: u64,
}

impl PmDevice {
    /// Enables PM sampling on `device` for [`SAMPLED_METRICS`] (those the
    /// chip has that fit one pass), a sample every `interval_ns`.
    pub(crate) fn new(cupti: &'static Cupti, device: u32, interval_ns: u64) -> Result<Self> {
        rangeprof::initialize(cupti)?;
        rangeprof::api_supported(cupti, device as i32, sys::CUPTI_PROFILER_PM_SAMPLING, "PM sampling")?;
        let chip = rangeprof::chip_name(cupti, device as usize)?;
        let availability = availability(cupti, device)?;
        // The pipe counters are the ones a chip may lack or not fit in one
        // pass with the rest; without them the rest still samples.
        let all: Vec<String> = SAMPLED_METRICS.iter().map(|m| m.to_string()).collect();
        let kind = sys::CUPTI_PROFILER_TYPE_PM_SAMPLING;
        let host = match HostObject::of_type(cupti, kind, &chip, &availability, &all) {
            Ok(h) if h.passes() == 1 => h,
            _ => {
                let h = HostObject::of_type(cupti, kind, &chip, &availability, &all[..REQUIRED_METRICS])?;
                if h.passes() != 1 {
                    return Err(Error::new(
                        ErrorKind::Unsupported,
                        format!(
                            "PM sampling on device {device} needs {} passes for its counters; it takes one",
                            h.passes()
                        ),
                    ));
                }
                h
            }
        };
        let object = pm::enable(cupti, device)?;
        // Owned from here: disabled on drop, on every error below too.
        let mut me = PmDevice {
            cupti,
            device,
            object,
            host,
            image: Vec::new(),
            blank: Vec::new(),
            started: false,
            first_seen: false,
        };
        me.set_config(interval_ns)?;
        me.init_image()?;
        Ok(me)
    }

    /// The device sampled.
    pub(crate) fn device(&self) -> u32 {
        self.device
    }

    fn set_config(&mut self, interval_ns: u64) -> Result<()> {
        // SAFETY: our object, enabled until drop; the config outlives the call.
        unsafe { pm::set_config(self.cupti, self.object, self.host.config(), HARDWARE_BUFFER, interval_ns) }
    }

    fn init_image(&mut self) -> Result<()> {
        // SAFETY: our object, enabled until drop.
        let size = unsafe { pm::get_counter_data_size(self.cupti, self.object, self.host.names(), IMAGE_SAMPLES) }?;
        self.image = vec![0u8; size];
        // SAFETY: as above.
        unsafe { pm::counter_data_image_initialize(self.cupti, self.object, &mut self.image) }?;
        self.blank = self.image.clone();
        Ok(())
    }

    /// Starts sampling.
    pub(crate) fn start(&mut self) -> Result<()> {
        // SAFETY: our object, configured by `new`, enabled until drop.
        unsafe { pm::start(self.cupti, self.object) }?;
        self.started = true;
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
    /// the records end.
    pub(crate) fn decode(&mut self, to_end: bool) -> Result<Decoded> {
        let mut out = Decoded::default();
        // Bounded: a buffer that keeps refilling faster than it decodes
        // waits for the next call. Once sampling has stopped, the buffer
        // holds a finite number of samples: all of them are read (the
        // bound only guards against a decode that never ends).
        let images = if to_end { IMAGES_AT_STOP } else { IMAGES_PER_DECODE };
        for _ in 0..images {
            let t = std::time::Instant::now();
            // SAFETY: our object, enabled until drop, and its image.
            let r = unsafe { pm::decode_data(self.cupti, self.object, &mut self.image) };
            out.decode_ns += t.elapsed().as_nanos() as u64;
            let d = match r {
                Err(e) if e.cupti_code() == Some(sys::CUPTI_ERROR_OUT_OF_MEMORY) => {
                    // The hardware buffer overflowed; what it held is lost.
                    out.overflow = true;
                    self.image.copy_from_slice(&self.blank);
                    break;
                }
                r => r?,
            };
            out.overflow |= d.overflow;
            let t = std::time::Instant::now();
            self.read_samples(&mut out.samples)?;
            out.evaluate_ns += t.elapsed().as_nanos() as u64;
            self.image.copy_from_slice(&self.blank);
            let more = if to_end {
                d.stop_reason != sys::CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS
            } else {
                d.stop_reason == sys::CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
            };
            if !more {
                break;
            }
        }
        Ok(out)
    }

    /// Appends the completed samples of the decoded image.
    fn read_samples(&mut self, out: &mut Vec<Sample>) -> Result<()> {
        // SAFETY: our image, initialised for our object.
        let completed = unsafe { pm::get_counter_data_info(self.cupti, &self.image) }?;
        // Positions of SAMPLED_METRICS among the metrics the host object has.
        let names = self.host.names();
        let slot: Vec<Option<usize>> =
            SAMPLED_METRICS.iter().map(|m| names.iter().position(|n| n.as_bytes() == m.as_bytes())).collect();
        for i in 0..completed {
            // SAFETY: our object, enabled until drop, and its image.
            let (start, end) = unsafe { pm::counter_data_get_sample_info(self.cupti, self.object, &self.image, i) }?;
            if !std::mem::replace(&mut self.first_seen, true) {
                continue;
            }
            // SAFETY: our image, decoded by CUPTI.
            let raw = unsafe { self.host.evaluate(&self.image, i) }?;
            let values: Vec<f64> = slot.iter().map(|p| p.map_or(f64::NAN, |p| raw[p])).collect();
            out.push(Sample::from_values(self.device, start, end, &values));
        }
        Ok(())
    }

    /// The counters sampled.
    pub(crate) fn metrics(&self) -> Vec<String> {
        self.host.names().iter().map(|n| n.to_string_lossy().into_owned()).collect()
    }
}

impl Drop for PmDevice {
    fn drop(&mut self) {
        tolerate(self.stop(), "stopping a device's PM sampling");
        // SAFETY: our object, disabled once, here.
        tolerate(unsafe { pm::disable(self.cupti, self.object) }, "disabling a device's PM sampling");
    }
}

/// The counter availability image of `device` for PM sampling.
fn availability(cupti: &Cupti, device: u32) -> Result<Vec<u8>> {
    pm::get_counter_availability(cupti, device)
}
