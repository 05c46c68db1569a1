//! The time a writer stamps into a file (WTXT `ts=`, FOLD `created`) when the caller
//! gives none: now, or `SOURCE_DATE_EPOCH` when that is set, so that a conversion
//! repeated later, or on another machine, writes the same bytes (the
//! reproducible-builds convention: <https://reproducible-builds.org/specs/source-date-epoch/>).
//! A `SOURCE_DATE_EPOCH` that is not a decimal number of seconds is an error rather
//! than silently "now": whoever set it wants reproducible output.

use crate::error::{Error, Result};

/// Seconds since the Unix epoch to stamp: `SOURCE_DATE_EPOCH` if set, else now.
pub fn stamp_secs() -> Result<u64> {
    match std::env::var_os("SOURCE_DATE_EPOCH") {
        Some(v) => parse_epoch(&v.to_string_lossy()),
        None => Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)),
    }
}

fn parse_epoch(v: &str) -> Result<u64> {
    let t = v.trim();
    // At most 11 digits: up to year 5138, and no overflow in the date arithmetic.
    if t.is_empty() || t.len() > 11 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::invalid_input(format!(
            "SOURCE_DATE_EPOCH={v:?} is not a number of seconds since 1970-01-01"
        )));
    }
    t.parse()
        .map_err(|_| Error::invalid_input(format!("SOURCE_DATE_EPOCH={v:?} is out of range")))
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn utc_string(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_strings() {
        assert_eq!(utc_string(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_string(951_825_600), "2000-02-29T12:00:00Z");
        assert_eq!(utc_string(1_795_653_010), "2026-11-26T00:30:10Z");
        assert_eq!(parse_epoch(" 1700000000\n").unwrap(), 1_700_000_000);
        for bad in ["", "-1", "1.5", "12345678901234", "\u{1b}[31m"] {
            let e = parse_epoch(bad).unwrap_err().to_string();
            assert!(e.contains("SOURCE_DATE_EPOCH"), "{bad:?}: {e}");
            assert!(!e.contains('\u{1b}'), "{e}");
        }
    }
}
