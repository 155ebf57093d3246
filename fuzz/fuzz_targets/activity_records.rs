//! A completed CUPTI activity buffer of arbitrary bytes: walked record by
//! record and every record decoded, as the decoder thread does, then folded
//! into a report and rendered (`Replay::buffer` takes any bytes: it follows
//! no pointer read from them). Must end in `Ok(None)` or an error, never a
//! panic or an out-of-bounds read.
#![no_main]

use gpuscope::activity::{decode, LayoutCursor, RecordCursor};
use gpuscope::occupancy::SmLimits;
use gpuscope::report::DeviceInfo;
use gpuscope::testing::Replay;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|buf: &[u8]| {
    // Records are 8-byte aligned in CUPTI's buffers; copy into such a buffer.
    let mut words = vec![0u64; buf.len().div_ceil(8)];
    for (i, b) in buf.iter().enumerate() {
        words[i / 8] |= (*b as u64) << ((i % 8) * 8);
    }
    // SAFETY: the u64 buffer is `buf.len()` initialised bytes and more.
    let bytes = unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, buf.len()) };
    let mut cursor = LayoutCursor::new(bytes);
    while let Ok(Some(record)) = cursor.next_record() {
        let _ = decode(record);
    }
    // And a record alone, whatever its length.
    let _ = decode(buf);
    // Folded: every field of every record reaches the aggregation.
    let mut rp = Replay::new(vec![DeviceInfo::new(0, "NVIDIA H100", 132, SmLimits::SM_90)], 16);
    rp.buffer(bytes);
    let r = rp.finish(0, 1_000_000);
    let _ = (r.to_table(100), r.to_chrome_trace());
});
