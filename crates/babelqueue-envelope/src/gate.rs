//! The schema-version gate: whether a delivery whose broker carried a schema-version property
//! may be decoded at all. Every property-carrying transport reports the property as it came
//! (SQS, Service Bus, Pulsar, Kafka, Artemis); the runtime applies this one rule before
//! anything reads the body.

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};

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
///
/// ```
/// use babelqueue_envelope::gate::{GateValue, gated};
///
/// assert_eq!(gated(GateValue::Text("1")), None);
/// assert_eq!(gated(GateValue::Text(" 1")), Some(" 1".to_owned()));
/// assert_eq!(gated(GateValue::Integer(2)), Some("2".to_owned()));
/// ```
pub fn gated(value: GateValue<'_>) -> Option<String> {
    match value {
        GateValue::Absent | GateValue::Null => None,
        GateValue::Text(text) if crate::ascii::is_blank(text) || text == "1" => None,
        GateValue::Text(text) => Some(text.to_owned()),
        GateValue::Integer(1) => None,
        GateValue::Integer(n) => Some(n.to_string()),
        GateValue::Float(f) => Some(format!("{f:?}")),
        GateValue::Bool(b) => Some(b.to_string()),
    }
}

#[cfg(test)]
mod tests {
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
}
