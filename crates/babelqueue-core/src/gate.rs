//! The schema-version gate every property-carrying transport's deliveries go through before a
//! body is decoded (the rule itself, [`gated`], lives in the envelope crate), and the escaped
//! form of a declared version the runtime logs and routes with.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// The longest declared version kept in logs and routes (longer ones are cut and `...` added).
pub const DECLARED_VERSION_MAX_CHARS: usize = 64;

pub use babelqueue_envelope::gate::{GateValue, gated};

/// The declared version cut to 64 characters plus `...` when `cap`, then percent-escaped with
/// only the RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`) left as they are.
pub fn escape(declared: &str, cap: bool) -> String {
    let capped: String = if cap && declared.chars().count() > DECLARED_VERSION_MAX_CHARS {
        let mut cut: String = declared.chars().take(DECLARED_VERSION_MAX_CHARS).collect();
        cut.push_str("...");
        cut
    } else {
        declared.to_owned()
    };
    utf8_percent_encode(&capped, NOT_UNRESERVED).to_string()
}

/// Every byte but the RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`).
const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The one warning the runtime logs for a gated delivery: the queue and the declared version,
/// capped and escaped ([`escape`]), so a hostile value can neither flood nor forge a log line.
pub fn warning(queue: &str, declared: &str) -> String {
    format!(
        "A message on queue {queue:?} declares an unsupported schema version {} (supported: {}); \
         it is not decoded",
        escape(declared, true),
        babelqueue_envelope::SCHEMA_VERSION
    )
}

/// Percent-decoding (the inverse of [`escape`] without the cap).
///
/// A `%` that starts no escape stays as it is, bytes that are not UTF-8 become U+FFFD, and a
/// `+` is a plus sign (see [`options`](crate::options) for the rule of URL queries).
pub fn unescape(escaped: &str) -> String {
    crate::options::decode_lossy(escaped, crate::options::Component::Path)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_gate_warning_names_the_queue_and_a_capped_escaped_version() {
        assert_eq!(
            warning("orders", "2"),
            "A message on queue \"orders\" declares an unsupported schema version 2 (supported: 1); it is not decoded"
        );
        let long = format!("{}\n", "9".repeat(70));
        let said = warning("orders", &long);
        assert!(said.contains(&format!("{}...", "9".repeat(64))), "{said}");
        assert!(
            !said.contains('\n'),
            "no line break reaches the log: {said}"
        );
        assert!(warning("q", "1 2").contains("1%202"));
    }

    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(escape("2", true), "2");
        assert_eq!(escape("x y", true), "x%20y");
        assert_eq!(escape("é", true), "%C3%A9");
        assert_eq!(escape("a/b?c=d&e", true), "a%2Fb%3Fc%3Dd%26e");
        assert_eq!(escape(" 1", true), "%201");
        assert_eq!(escape("%", true), "%25");
        let long = "v".repeat(70);
        assert_eq!(escape(&long, true), format!("{}...", "v".repeat(64)));
        assert_eq!(escape(&long, false), long);
        assert_eq!(unescape(&escape("a/b é%", false)), "a/b é%");
    }
}
