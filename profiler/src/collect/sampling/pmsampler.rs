//! Safe wrapper over CUPTI's PM sampling (`cupti_pmsampling.h`) on one
//! device: enabled with a single-pass config, sampling into a hardware
//! buffer, decoded into a counter data image on gpuscope's decoder thread.
//! Disabled on drop.

use crate::collect::cupti::{self, check};
use crate::collect::metrics::rangeprof::{self, counters, struct_size, HostObject};
use crate::error::{Error, ErrorKind, Result};
use crate::model::sampled::{Sample, REQUIRED_METRICS, SAMPLED_METRICS};
use cupti_sys::{self as sys, sym, Cupti};
use std::ffi::CString;

/// Samples one counter data image holds: decoded, read and reset (a copy
/// of its blank state) for the next. ~33 KB per sample on an H100 with 5
/// metrics. Reading a sample cost about the same with images of 32, 256 or
/// 2048 samples, and CUPTI's decode ~30-40 us per sample with 64 or 256
/// (device, issue 11).
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
    object: *mut sys::CUpti_PmSampling_Object,
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
        let mut en = sys::CUpti_PmSampling_Enable_Params {
            structSize: struct_size!(sys::CUpti_PmSampling_Enable_Params, pPmSamplingObject: *mut sys::CUpti_PmSampling_Object),
            pPriv: std::ptr::null_mut(),
            deviceIndex: device as usize,
            pPmSamplingObject: std::ptr::null_mut(),
        };
        let f = sym!(cupti, cuptiPmSamplingEnable).map_err(cupti::missing)?;
        // SAFETY: valid params struct.
        counters(cupti, unsafe { f(&mut en) }, "cuptiPmSamplingEnable")?;
        let mut me = PmDevice {
            cupti,
            device,
            object: en.pPmSamplingObject,
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
        let config = self.host.config();
        let mut p = sys::CUpti_PmSampling_SetConfig_Params {
            structSize: struct_size!(
                sys::CUpti_PmSampling_SetConfig_Params,
                hwBufferAppendMode: sys::CUpti_PmSampling_HardwareBuffer_AppendMode
            ),
            pPriv: std::ptr::null_mut(),
            pPmSamplingObject: self.object,
            configSize: config.len(),
            pConfig: config.as_ptr(),
            hardwareBufferSize: HARDWARE_BUFFER,
            samplingInterval: interval_ns,
            triggerMode: sys::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL,
            // Oldest kept: an overflow is reported, not silently replaced.
            hwBufferAppendMode: sys::CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST,
        };
        let f = sym!(self.cupti, cuptiPmSamplingSetConfig).map_err(cupti::missing)?;
        // SAFETY: valid params; the config image outlives the call.
        counters(self.cupti, unsafe { f(&mut p) }, "cuptiPmSamplingSetConfig")
    }

    fn init_image(&mut self) -> Result<()> {
        let names: Vec<CString> = self.host.names().to_vec();
        let mut ptrs: Vec<*const std::ffi::c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let mut sz = sys::CUpti_PmSampling_GetCounterDataSize_Params {
            structSize: struct_size!(sys::CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize: usize),
            pPriv: std::ptr::null_mut(),
            pPmSamplingObject: self.object,
            pMetricNames: ptrs.as_mut_ptr(),
            numMetrics: ptrs.len(),
            maxSamples: IMAGE_SAMPLES,
            counterDataSize: 0,
        };
        let f = sym!(self.cupti, cuptiPmSamplingGetCounterDataSize).map_err(cupti::missing)?;
        // SAFETY: valid params; names outlive the call.
        check(self.cupti, unsafe { f(&mut sz) }, "cuptiPmSamplingGetCounterDataSize")?;
        self.image = vec![0u8; sz.counterDataSize];
        let mut init = sys::CUpti_PmSampling_CounterDataImage_Initialize_Params {
            structSize: struct_size!(sys::CUpti_PmSampling_CounterDataImage_Initialize_Params, pCounterData: *mut u8),
            pPriv: std::ptr::null_mut(),
            pPmSamplingObject: self.object,
            counterDataSize: self.image.len(),
            pCounterData: self.image.as_mut_ptr(),
        };
        let f = sym!(self.cupti, cuptiPmSamplingCounterDataImageInitialize).map_err(cupti::missing)?;
        // SAFETY: the image holds counterDataSize bytes.
        check(self.cupti, unsafe { f(&mut init) }, "cuptiPmSamplingCounterDataImageInitialize")?;
        self.blank = self.image.clone();
        Ok(())
    }

    /// Starts sampling.
    pub(crate) fn start(&mut self) -> Result<()> {
        let mut p = sys::CUpti_PmSampling_Start_Params {
            structSize: struct_size!(sys::CUpti_PmSampling_Start_Params, pPmSamplingObject: *mut sys::CUpti_PmSampling_Object),
            pPriv: std::ptr::null_mut(),
            pPmSamplingObject: self.object,
        };
        let f = sym!(self.cupti, cuptiPmSamplingStart).map_err(cupti::missing)?;
        // SAFETY: valid params.
        counters(self.cupti, unsafe { f(&mut p) }, "cuptiPmSamplingStart")?;
        self.started = true;
        Ok(())
    }

    /// Stops sampling; what was sampled can still be decoded.
    pub(crate) fn stop(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.started) {
            return Ok(());
        }
        let mut p = sys::CUpti_PmSampling_Stop_Params {
            structSize: struct_size!(sys::CUpti_PmSampling_Stop_Params, pPmSamplingObject: *mut sys::CUpti_PmSampling_Object),
            pPriv: std::ptr::null_mut(),
            pPmSamplingObject: self.object,
        };
        let f = sym!(self.cupti, cuptiPmSamplingStop).map_err(cupti::missing)?;
        // SAFETY: valid params.
        check(self.cupti, unsafe { f(&mut p) }, "cuptiPmSamplingStop")
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
            let mut d = sys::CUpti_PmSampling_DecodeData_Params {
                structSize: struct_size!(sys::CUpti_PmSampling_DecodeData_Params, overflow: u8),
                pPriv: std::ptr::null_mut(),
                pPmSamplingObject: self.object,
                pCounterDataImage: self.image.as_mut_ptr(),
                counterDataImageSize: self.image.len(),
                decodeStopReason: 0,
                overflow: 0,
            };
            let f = sym!(self.cupti, cuptiPmSamplingDecodeData).map_err(cupti::missing)?;
            // SAFETY: valid params over our image.
            let r = unsafe { f(&mut d) };
            out.decode_ns += t.elapsed().as_nanos() as u64;
            if r == sys::CUPTI_ERROR_OUT_OF_MEMORY {
                // The hardware buffer overflowed; what it held is lost.
                out.overflow = true;
                self.image.copy_from_slice(&self.blank);
                break;
            }
            check(self.cupti, r, "cuptiPmSamplingDecodeData")?;
            out.overflow |= d.overflow != 0;
            let t = std::time::Instant::now();
            self.read_samples(&mut out.samples)?;
            out.evaluate_ns += t.elapsed().as_nanos() as u64;
            self.image.copy_from_slice(&self.blank);
            let more = if to_end {
                d.decodeStopReason != sys::CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS
            } else {
                d.decodeStopReason == sys::CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
            };
            if !more {
                break;
            }
        }
        Ok(out)
    }

    /// Appends the completed samples of the decoded image.
    fn read_samples(&mut self, out: &mut Vec<Sample>) -> Result<()> {
        let mut info = sys::CUpti_PmSampling_GetCounterDataInfo_Params {
            structSize: struct_size!(sys::CUpti_PmSampling_GetCounterDataInfo_Params, numCompletedSamples: usize),
            pPriv: std::ptr::null_mut(),
            pCounterDataImage: self.image.as_ptr(),
            counterDataImageSize: self.image.len(),
            numTotalSamples: 0,
            numPopulatedSamples: 0,
            numCompletedSamples: 0,
        };
        let f = sym!(self.cupti, cuptiPmSamplingGetCounterDataInfo).map_err(cupti::missing)?;
        // SAFETY: valid params over our image.
        check(self.cupti, unsafe { f(&mut info) }, "cuptiPmSamplingGetCounterDataInfo")?;
        let get = sym!(self.cupti, cuptiPmSamplingCounterDataGetSampleInfo).map_err(cupti::missing)?;
        // Positions of SAMPLED_METRICS among the metrics the host object has.
        let names = self.host.names();
        let slot: Vec<Option<usize>> =
            SAMPLED_METRICS.iter().map(|m| names.iter().position(|n| n.as_bytes() == m.as_bytes())).collect();
        for i in 0..info.numCompletedSamples {
            let mut s = sys::CUpti_PmSampling_CounterData_GetSampleInfo_Params {
                structSize: struct_size!(sys::CUpti_PmSampling_CounterData_GetSampleInfo_Params, endTimestamp: u64),
                pPriv: std::ptr::null_mut(),
                pPmSamplingObject: self.object,
                pCounterDataImage: self.image.as_ptr(),
                counterDataImageSize: self.image.len(),
                sampleIndex: i,
                startTimestamp: 0,
                endTimestamp: 0,
            };
            // SAFETY: valid params over our image.
            check(self.cupti, unsafe { get(&mut s) }, "cuptiPmSamplingCounterDataGetSampleInfo")?;
            if !std::mem::replace(&mut self.first_seen, true) {
                continue;
            }
            let raw = self.host.evaluate(&self.image, i)?;
            let values: Vec<f64> = slot.iter().map(|p| p.map_or(f64::NAN, |p| raw[p])).collect();
            out.push(Sample::from_values(self.device, s.startTimestamp, s.endTimestamp, &values));
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
        let _ = self.stop();
        let mut p = sys::CUpti_PmSampling_Disable_Params {
            structSize: struct_size!(sys::CUpti_PmSampling_Disable_Params, pPmSamplingObject: *mut sys::CUpti_PmSampling_Object),
            pPriv: std::ptr::null_mut(),
            pPmSamplingObject: self.object,
        };
        if let Ok(f) = sym!(self.cupti, cuptiPmSamplingDisable) {
            // SAFETY: our object, disabled once.
            unsafe { f(&mut p) };
        }
    }
}

/// The counter availability image of `device` for PM sampling.
fn availability(cupti: &Cupti, device: u32) -> Result<Vec<u8>> {
    let mut p = sys::CUpti_PmSampling_GetCounterAvailability_Params {
        structSize: struct_size!(sys::CUpti_PmSampling_GetCounterAvailability_Params, pCounterAvailabilityImage: *mut u8),
        pPriv: std::ptr::null_mut(),
        deviceIndex: device as usize,
        counterAvailabilityImageSize: 0,
        pCounterAvailabilityImage: std::ptr::null_mut(),
    };
    let f = sym!(cupti, cuptiPmSamplingGetCounterAvailability).map_err(cupti::missing)?;
    // SAFETY: first call asks for the size (null image).
    counters(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingGetCounterAvailability")?;
    let mut image = vec![0u8; p.counterAvailabilityImageSize];
    p.pCounterAvailabilityImage = image.as_mut_ptr();
    // SAFETY: the image holds the size CUPTI asked for.
    counters(cupti, unsafe { f(&mut p) }, "cuptiPmSamplingGetCounterAvailability")?;
    Ok(image)
}
