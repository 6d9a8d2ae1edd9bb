//! UTC timestamps for the results file.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, as `YYYY-MM-DDThh:mm:ssZ`.
pub(crate) fn rfc3339_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// Seconds since the epoch as `YYYY-MM-DDThh:mm:ssZ` (proleptic Gregorian, UTC). An instant
/// past the year 9999, which `time` does not represent, is shown as the epoch.
pub(crate) fn rfc3339(secs: u64) -> String {
    // `::time`, the crate: this module is `time` too.
    let at = i64::try_from(secs)
        .ok()
        .and_then(|secs| ::time::OffsetDateTime::from_unix_timestamp(secs).ok())
        .unwrap_or(::time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_instants() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_749_132_727), "2025-06-05T14:12:07Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(super::rfc3339(1_798_675_200), "2026-12-31T00:00:00Z");
        assert_eq!(super::rfc3339(1_709_208_000), "2024-02-29T12:00:00Z");
        assert_eq!(super::rfc3339(4_107_542_399), "2100-02-28T23:59:59Z");
        assert_eq!(super::rfc3339(4_107_542_400), "2100-03-01T00:00:00Z");
        assert_eq!(super::rfc3339(253_402_300_799), "9999-12-31T23:59:59Z");
    }
}
