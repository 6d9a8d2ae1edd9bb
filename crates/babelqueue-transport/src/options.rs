//! Reading the options of broker URLs: one boolean rule and one percent-decoding rule for
//! every transport.
//!
//! # Booleans
//!
//! [`parse_bool`] reads `1`, `true`, `yes`, `on` as `true` and `0`, `false`, `no`, `off` as
//! `false` (ASCII case-insensitive, nothing else). The reference SDK tests
//! `value.lower() in ("1", "true", "yes", "on")`; a transport that must read every other word
//! as `false` for that reason uses [`is_true`], one that refuses typos matches on
//! [`parse_bool`] and names [`BOOLEAN_WORDS`] in its error.
//!
//! # Percent-decoding and `+`
//!
//! Where a `+` stands decides what it means ([`Component`]):
//!
//! * in the userinfo (user name, password) and the path (AMQP vhost), a `+` is a plus sign:
//!   RFC 3986 percent-encoding, as Python's `urllib.parse.unquote` (redis-py, pika) and Go's
//!   `url.PathUnescape` read them. A password `a+b` works as written; a space is `%20`.
//! * in the query (keys and values), a `+` is a space: `application/x-www-form-urlencoded`, as
//!   Python's `parse_qs` (the reference SDK's Redis and SQS options, pika's), Go's
//!   `url.ParseQuery`, Java's `URLDecoder`, the WHATWG `URLSearchParams` and the `url` crate's
//!   `query_pairs` read them. A literal plus in a query value is `%2B`.
//!
//! [`decode`] refuses a `%` not followed by two hex digits and bytes that are not UTF-8;
//! [`decode_lossy`] keeps such a `%` as it is and replaces bad bytes with U+FFFD (for values
//! the reference SDK also reads leniently). Neither ever quotes its input, which may be a
//! password.
//!
//! ```
//! use babelqueue_transport::options::{Component, decode, decode_lossy, is_true, parse_bool};
//!
//! assert_eq!(parse_bool("Yes"), Some(true));
//! assert_eq!(parse_bool("off"), Some(false));
//! assert_eq!(parse_bool("maybe"), None);
//! assert!(!is_true("maybe"));
//!
//! assert_eq!(decode("p%40ss+word", Component::Userinfo).as_deref(), Some("p@ss+word"));
//! assert_eq!(decode("a+b%2Bc", Component::Query).as_deref(), Some("a b+c"));
//! assert_eq!(decode("100%", Component::Query), None);
//! assert_eq!(decode_lossy("100%", Component::Query), "100%");
//! ```

use std::borrow::Cow;

use percent_encoding::percent_decode_str;

/// The words [`parse_bool`] accepts, for error messages.
pub const BOOLEAN_WORDS: &str = "1/true/yes/on or 0/false/no/off";

/// `true` for `1`/`true`/`yes`/`on`, `false` for `0`/`false`/`no`/`off` (ASCII
/// case-insensitive), `None` for anything else (the empty text included).
pub fn parse_bool(value: &str) -> Option<bool> {
    const TRUE: [&str; 4] = ["1", "true", "yes", "on"];
    const FALSE: [&str; 4] = ["0", "false", "no", "off"];
    if TRUE.iter().any(|w| value.eq_ignore_ascii_case(w)) {
        Some(true)
    } else if FALSE.iter().any(|w| value.eq_ignore_ascii_case(w)) {
        Some(false)
    } else {
        None
    }
}

/// Whether `value` is one of the `true` words of [`parse_bool`]; every other text is `false`
/// (the reference SDK's reading of its boolean URL options).
pub fn is_true(value: &str) -> bool {
    parse_bool(value) == Some(true)
}

/// The part of a URL a text comes from, which decides what a `+` in it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Component {
    /// The user name or password: `+` is a plus sign.
    Userinfo,
    /// The path: `+` is a plus sign.
    Path,
    /// A query key or value: `+` is a space (a plus sign is `%2B`).
    Query,
}

/// `text` with `+` read as [`Component`] says, before percent-decoding.
fn plus(text: &str, component: Component) -> Cow<'_, str> {
    if component == Component::Query && text.contains('+') {
        Cow::Owned(text.replace('+', " "))
    } else {
        Cow::Borrowed(text)
    }
}

/// `text` percent-decoded (and `+` read as `component` says); `None` when a `%` is not followed
/// by two hex digits or the bytes are not UTF-8.
pub fn decode(text: &str, component: Component) -> Option<String> {
    let bytes = text.as_bytes();
    let escapes_ok = bytes.iter().enumerate().all(|(i, &b)| {
        b != b'%'
            || (bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    if !escapes_ok {
        return None;
    }
    percent_decode_str(&plus(text, component))
        .decode_utf8()
        .ok()
        .map(Cow::into_owned)
}

/// `text` percent-decoded (and `+` read as `component` says), leniently: a `%` that starts no
/// escape stays as it is, bytes that are not UTF-8 become U+FFFD.
pub fn decode_lossy(text: &str, component: Component) -> String {
    percent_decode_str(&plus(text, component))
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans() {
        for word in ["1", "true", "TRUE", "Yes", "on", "ON"] {
            assert_eq!(parse_bool(word), Some(true), "{word}");
            assert!(is_true(word), "{word}");
        }
        for word in ["0", "false", "False", "no", "NO", "off"] {
            assert_eq!(parse_bool(word), Some(false), "{word}");
            assert!(!is_true(word), "{word}");
        }
        for word in ["", " true", "true ", "2", "y", "n", "maybe", "null", "tru"] {
            assert_eq!(parse_bool(word), None, "{word:?}");
            assert!(!is_true(word), "{word:?}");
        }
    }

    #[test]
    fn plus_is_literal_outside_the_query_and_a_space_in_it() {
        for component in [Component::Userinfo, Component::Path] {
            assert_eq!(decode("a+b", component).as_deref(), Some("a+b"));
            assert_eq!(decode_lossy("a+b", component), "a+b");
        }
        assert_eq!(decode("a+b", Component::Query).as_deref(), Some("a b"));
        assert_eq!(decode_lossy("a+b", Component::Query), "a b");
        // An encoded plus is a plus everywhere, an encoded space a space.
        for component in [Component::Userinfo, Component::Path, Component::Query] {
            assert_eq!(decode("a%2Bb%20c", component).as_deref(), Some("a+b c"));
            assert_eq!(decode_lossy("a%2bb%20c", component), "a+b c");
        }
    }

    #[test]
    fn strict_and_lossy_decoding() {
        let cases: &[(&str, Option<&str>, &str)] = &[
            ("", Some(""), ""),
            ("plain", Some("plain"), "plain"),
            ("p%40ss%3Aw%2F", Some("p@ss:w/"), "p@ss:w/"),
            ("%2f", Some("/"), "/"),
            ("%C3%A9", Some("é"), "é"),
            ("100%", None, "100%"),
            ("%zz", None, "%zz"),
            ("%4", None, "%4"),
            ("a%g0", None, "a%g0"),
            ("%ff", None, "\u{fffd}"),
        ];
        for &(text, strict, lossy) in cases {
            assert_eq!(
                decode(text, Component::Userinfo).as_deref(),
                strict,
                "{text:?}"
            );
            assert_eq!(decode_lossy(text, Component::Userinfo), lossy, "{text:?}");
        }
    }
}
