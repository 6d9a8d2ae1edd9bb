//! The schema-version gate every property-carrying transport applies before decoding a body
//! (SQS, ASB, Pulsar, Kafka, Artemis), and the reserved route it hands the delivery over with.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// The longest declared version kept in logs and routes (longer ones are cut and `...` added).
pub const DECLARED_VERSION_MAX_CHARS: usize = 64;

/// A schema-version property as the broker carried it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GateValue<'a> {
    /// No such property.
    Absent,
    /// A present property holding null.
    Null,
    /// A string property.
    Text(&'a str),
    /// An integral property (any AMQP width, signed or unsigned).
    Integer(i128),
    /// A floating-point property.
    Float(f64),
    /// A boolean property.
    Bool(bool),
}

/// Whether the gate rejects a delivery, and the declared version it rejects.
///
/// Absent, null or ASCII-blank: not gated. Exactly the text `1` (untrimmed), or the integer 1:
/// not gated. Anything else (`2`, `01`, ` 1`, `1.0`, U+00A0, a float, a boolean): gated.
pub fn gated(value: GateValue<'_>) -> Option<String> {
    match value {
        GateValue::Absent | GateValue::Null => None,
        GateValue::Text(text) if babelqueue_envelope::ascii::is_blank(text) || text == "1" => None,
        GateValue::Text(text) => Some(text.to_owned()),
        GateValue::Integer(1) => None,
        GateValue::Integer(n) => Some(n.to_string()),
        GateValue::Float(f) => Some(format!("{f:?}")),
        GateValue::Bool(b) => Some(b.to_string()),
    }
}

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
    fn trigger() {
        for blank in ["", " \t", " ", "\n\u{b}\u{c}\r"] {
            assert_eq!(gated(GateValue::Text(blank)), None);
        }
        assert_eq!(gated(GateValue::Text("1")), None);
        assert_eq!(gated(GateValue::Absent), None);
        assert_eq!(gated(GateValue::Null), None);
        assert_eq!(gated(GateValue::Integer(1)), None);
        for rejected in [
            "2",
            "01",
            " 1",
            "1 ",
            "\t1\n",
            "\u{a0}",
            "\u{85}",
            "\u{3000}",
            "\u{feff}",
            "\u{a0}1",
            "1\u{3000}",
            "x",
        ] {
            assert_eq!(
                gated(GateValue::Text(rejected)),
                Some(rejected.to_owned()),
                "{rejected:?}"
            );
        }
        assert!(gated(GateValue::Integer(2)).is_some());
        assert!(gated(GateValue::Integer(0)).is_some());
        assert!(gated(GateValue::Float(1.0)).is_some());
        assert!(gated(GateValue::Float(1.5)).is_some());
        assert!(gated(GateValue::Bool(true)).is_some());
    }

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
