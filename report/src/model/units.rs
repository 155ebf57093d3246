//! Durations and sizes as people read them.

/// Sum of counts or times that saturates instead of wrapping: reports read
/// from files can carry any value.
pub fn saturating_sum(values: impl IntoIterator<Item = u64>) -> u64 {
    values.into_iter().fold(0, u64::saturating_add)
}

/// `812 ns`, `12.3 us`, `4.56 ms`, `1.234 s`.
pub fn fmt_ns(ns: u64) -> String {
    let n = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} us", n / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", n / 1e6)
    } else {
        format!("{:.3} s", n / 1e9)
    }
}

/// `512 B`, `1.5 KiB`, `3.2 MiB`, `1.25 GiB`.
pub fn fmt_bytes(b: u64) -> String {
    let n = b as f64;
    if b < 1 << 10 {
        format!("{b} B")
    } else if b < 1 << 20 {
        format!("{:.1} KiB", n / 1024.0)
    } else if b < 1 << 30 {
        format!("{:.1} MiB", n / 1048576.0)
    } else {
        format!("{:.2} GiB", n / 1073741824.0)
    }
}

/// A percentage with the digits that matter: `0.75%`, `3.1%`, `42%`.
pub fn fmt_pct(v: f64) -> String {
    match v {
        v if v > 0.0 && v < 1.0 => format!("{v:.2}%"),
        v if v > 0.0 && v < 10.0 => format!("{v:.1}%"),
        v => format!("{v:.0}%"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_a_unit() {
        assert_eq!(fmt_ns(999), "999 ns");
        assert_eq!(fmt_ns(12_345), "12.3 us");
        assert_eq!(fmt_ns(4_560_000), "4.56 ms");
        assert_eq!(fmt_ns(1_234_000_000), "1.234 s");
    }

    #[test]
    fn percentages_keep_the_digits_that_matter() {
        assert_eq!(
            (fmt_pct(0.754), fmt_pct(3.21), fmt_pct(42.4), fmt_pct(0.0)),
            ("0.75%".into(), "3.2%".into(), "42%".into(), "0%".into())
        );
    }
}
