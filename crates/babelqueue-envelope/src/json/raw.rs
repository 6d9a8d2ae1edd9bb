use alloc::borrow::Cow;
use alloc::string::{String, ToString};
use core::fmt;

use super::scan::{self, Scanner};
use super::text::Text;
use super::write;

/// The JSON type of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JsonKind {
    /// `null`
    Null,
    /// `true` or `false`
    Bool,
    /// A number literal.
    Number,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

impl JsonKind {
    /// The lower-case JSON type name (`"null"`, `"boolean"`, `"number"`, `"string"`, `"array"`,
    /// `"object"`).
    pub fn name(self) -> &'static str {
        match self {
            JsonKind::Null => "null",
            JsonKind::Bool => "boolean",
            JsonKind::Number => "number",
            JsonKind::String => "string",
            JsonKind::Array => "array",
            JsonKind::Object => "object",
        }
    }
}

impl fmt::Display for JsonKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One JSON value, held as its compact text.
///
/// The text is exactly what was read, minus insignificant whitespace: number literals
/// (`1e400`, a 30-digit integer, `-0`), string escapes (`\u00e9`, `\/`), key order and repeated
/// members are all kept byte for byte. This is how `data` and unknown members survive a
/// decode → re-encode hop without passing through a float-converting tree.
///
/// ```
/// use babelqueue_envelope::{JsonKind, RawJson};
///
/// let raw = RawJson::parse(r#"{ "n": 12345678901234567890123, "s": "caf\u00e9" }"#)?;
/// assert_eq!(raw.as_str(), r#"{"n":12345678901234567890123,"s":"caf\u00e9"}"#);
/// assert_eq!(raw.kind(), JsonKind::Object);
/// # Ok::<(), babelqueue_envelope::Error>(())
/// ```
///
/// A value decoded from a body shares that body's text (see [`Envelope`](crate::Envelope)):
/// cloning it copies nothing.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RawJson {
    text: Text,
    kind: JsonKind,
}

impl RawJson {
    /// Parses and minifies one JSON value (surrounding whitespace allowed).
    pub fn parse(text: &str) -> Result<RawJson, crate::Error> {
        let span = scan::validate(text).map_err(crate::Error::InvalidJson)?;
        Ok(Self::from_span(text, span))
    }

    pub(crate) fn from_span(text: &str, span: scan::ValueSpan) -> RawJson {
        let slice = &text[span.start..span.end];
        let text = if span.spaced {
            let mut out = String::with_capacity(slice.len());
            scan::minify_into(slice, &mut out);
            out
        } else {
            slice.to_string()
        };
        RawJson {
            text: Text::owned(text),
            kind: span.kind,
        }
    }

    /// A value `s` read: a slice of the scanner's shared text when it has one and the value
    /// holds no insignificant whitespace, else its own minified copy.
    pub(crate) fn scanned(s: &Scanner<'_>, span: scan::ValueSpan) -> RawJson {
        if span.spaced {
            return RawJson::from_span(s.text(), span);
        }
        RawJson {
            text: s.text_of(span.start, span.end),
            kind: span.kind,
        }
    }

    pub(crate) fn from_owned(text: String, kind: JsonKind) -> RawJson {
        RawJson {
            text: Text::owned(text),
            kind,
        }
    }

    /// Serializes a value with `serde_json` (compact).
    pub fn from_serialize<T: serde::Serialize + ?Sized>(
        value: &T,
    ) -> Result<RawJson, crate::Error> {
        RawJson::from_serialize_finite(value).map(|(raw, _)| raw)
    }

    /// [`RawJson::from_serialize`], and whether every number it wrote is a finite double
    /// (serde_json writes a non-finite float as `null`, but an arbitrary-precision number or a
    /// raw value may carry any literal): the one scan that checks the text says both.
    pub(crate) fn from_serialize_finite<T: serde::Serialize + ?Sized>(
        value: &T,
    ) -> Result<(RawJson, bool), crate::Error> {
        let text =
            serde_json::to_string(value).map_err(|e| crate::Error::Serialize(e.to_string()))?;
        let mut finite = true;
        let span = scan::validate_visiting(&text, &mut |literal| {
            finite &= super::is_finite_double(literal);
        })
        .map_err(crate::Error::InvalidJson)?;
        let raw = if span.spaced || span.start != 0 || span.end != text.len() {
            RawJson::from_span(&text, span)
        } else {
            // Compact output, the whole text: kept as it is, not copied.
            RawJson {
                text: Text::owned(text),
                kind: span.kind,
            }
        };
        Ok((raw, finite))
    }

    /// `null`.
    pub fn null() -> RawJson {
        RawJson {
            text: Text::from_static("null"),
            kind: JsonKind::Null,
        }
    }

    /// A boolean.
    pub fn bool(value: bool) -> RawJson {
        let text = if value { "true" } else { "false" };
        RawJson {
            text: Text::from_static(text),
            kind: JsonKind::Bool,
        }
    }

    /// An integer.
    pub fn integer(value: i64) -> RawJson {
        // The counts the runtime writes most (`attempts`) need no allocation.
        const SMALL: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
        let text = match usize::try_from(value) {
            Ok(digit) if digit < SMALL.len() => Text::from_static(SMALL[digit]),
            _ => Text::owned(value.to_string()),
        };
        RawJson {
            text,
            kind: JsonKind::Number,
        }
    }

    /// A string value (escaped the way the codec writes strings).
    pub fn string(value: &str) -> RawJson {
        let mut text = String::with_capacity(value.len() + 2);
        write::push_string(&mut text, value);
        RawJson {
            text: Text::owned(text),
            kind: JsonKind::String,
        }
    }

    /// The empty object `{}`.
    pub fn empty_object() -> RawJson {
        RawJson {
            text: Text::from_static("{}"),
            kind: JsonKind::Object,
        }
    }

    /// The compact JSON text.
    pub fn as_str(&self) -> &str {
        self.text.as_str()
    }

    /// The compact JSON text, by value.
    pub fn into_string(self) -> String {
        self.text.into_string()
    }

    /// The JSON type of the value.
    pub fn kind(&self) -> JsonKind {
        self.kind
    }

    /// Whether the value is `null`.
    pub fn is_null(&self) -> bool {
        self.kind == JsonKind::Null
    }

    /// The decoded string, when the value is a string.
    ///
    /// A lone surrogate escape (`"\ud800"`) reads as U+FFFD; the raw text keeps it.
    pub fn as_string(&self) -> Option<Cow<'_, str>> {
        if self.kind != JsonKind::String {
            return None;
        }
        Some(scan::unescape(&self.text[1..self.text.len() - 1]))
    }

    /// The value as a signed 64-bit integer, when it is an integer literal in range
    /// (`-0` is 0; `1.0`, `1e3` and 2^63 are not integers).
    pub fn as_i64(&self) -> Option<i64> {
        if self.kind != JsonKind::Number {
            return None;
        }
        super::int64_literal(self.text.as_bytes())
    }

    /// Whether the value is an integer literal (no fraction or exponent), of any size.
    pub fn is_integer(&self) -> bool {
        self.kind == JsonKind::Number && super::is_integer_literal(self.text.as_bytes())
    }

    /// The value as a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }

    /// Deserializes the value with `serde_json`.
    pub fn deserialize<'de, T: serde::Deserialize<'de>>(&'de self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.text)
    }

    /// Converts to a `serde_json::Value`. Lossy where `serde_json` is (numbers beyond 64 bits
    /// become floats, `1e400` fails, repeated members collapse).
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.text)
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawJson({})", self.as_str())
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl serde::Serialize for RawJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Round-trip through serde_json's value model only when asked to serialize into another
        // format; JSON callers should use `as_str` to keep the text exact.
        use serde::ser::Error as _;
        let value: serde_json::Value =
            serde_json::from_str(&self.text).map_err(|e| S::Error::custom(e.to_string()))?;
        value.serialize(serializer)
    }
}

impl From<i64> for RawJson {
    fn from(value: i64) -> Self {
        RawJson::integer(value)
    }
}

impl From<bool> for RawJson {
    fn from(value: bool) -> Self {
        RawJson::bool(value)
    }
}

impl From<&str> for RawJson {
    fn from(value: &str) -> Self {
        RawJson::string(value)
    }
}

impl core::str::FromStr for RawJson {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RawJson::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_literals_and_escapes() {
        let raw = RawJson::parse(" [ 1e400 , -0 , \"\\/\" ] ").unwrap();
        assert_eq!(raw.as_str(), "[1e400,-0,\"\\/\"]");
        assert_eq!(raw.kind(), JsonKind::Array);
    }

    #[test]
    fn typed_reads() {
        assert_eq!(RawJson::parse("-0").unwrap().as_i64(), Some(0));
        assert_eq!(RawJson::parse("1.0").unwrap().as_i64(), None);
        assert!(
            RawJson::parse("123456789012345678901234")
                .unwrap()
                .is_integer()
        );
        assert_eq!(
            RawJson::parse("\"a\\tb\"").unwrap().as_string().unwrap(),
            "a\tb"
        );
        assert_eq!(RawJson::string("x\"y").as_str(), "\"x\\\"y\"");
        assert!(RawJson::parse("nul").is_err());
    }
}
