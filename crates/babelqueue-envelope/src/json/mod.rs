//! Lossless JSON building blocks: [`RawJson`] values kept as their (minified) text, and
//! [`Object`], an ordered member list with last-wins semantics.

mod object;
pub(crate) mod path;
mod raw;
pub(crate) mod scan;
pub(crate) mod text;
pub(crate) mod write;

pub use object::{Key, Object};
pub(crate) use object::{Known, Name, Seen};
pub use raw::{JsonKind, RawJson};
pub use scan::{MAX_DEPTH, SyntaxError, SyntaxErrorKind};

/// Whether a number literal (RFC 8259 grammar, already validated) is an integer literal that
/// fits a signed 64-bit integer: no fraction, no exponent. `-0` is the integer 0.
pub(crate) fn int64_literal(literal: &[u8]) -> Option<i64> {
    // Digit by digit, toward the literal's sign (so i64::MIN fits): the decode reads every
    // integer member this way, and `str::parse` costs several times more on such short input.
    let (negative, digits) = match literal.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, literal),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        value = value.checked_mul(10)?;
        value = if negative {
            value.checked_sub(d)?
        } else {
            value.checked_add(d)?
        };
    }
    Some(value)
}

/// Whether a number literal is an integer literal (no fraction, no exponent), of any size.
pub(crate) fn is_integer_literal(literal: &[u8]) -> bool {
    !literal.iter().any(|b| matches!(b, b'.' | b'e' | b'E'))
}

/// Whether every number of the JSON text `text` reads as a finite double (`false` for text that
/// is not one JSON value).
pub(crate) fn all_numbers_finite(text: &str) -> bool {
    let mut finite = true;
    let mut s = scan::Scanner::new(text);
    s.start().is_ok()
        && s.value(0, &mut |literal| finite &= is_finite_double(literal))
            .is_ok()
        && finite
}

/// Whether a number literal reads as a finite IEEE-754 double (`1e400` does not; `1e-400`
/// underflows to 0 and does).
pub(crate) fn is_finite_double(literal: &[u8]) -> bool {
    // Fast path: no exponent and at most 308 integer digits is always below f64::MAX.
    let has_exponent = literal.iter().any(|b| matches!(b, b'e' | b'E'));
    if !has_exponent {
        let int_digits = literal
            .iter()
            .take_while(|b| **b != b'.')
            .filter(|b| b.is_ascii_digit());
        if int_digits.count() <= 308 {
            return true;
        }
    }
    match core::str::from_utf8(literal)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
    {
        Some(v) => v.is_finite(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int64_literals() {
        assert_eq!(int64_literal(b"-0"), Some(0));
        assert_eq!(int64_literal(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(int64_literal(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(int64_literal(b"9223372036854775808"), None);
        assert_eq!(int64_literal(b"-9223372036854775809"), None);
        assert_eq!(int64_literal(b"1.0"), None);
        assert_eq!(int64_literal(b"1e3"), None);
        assert_eq!(int64_literal(b"1E2"), None);
        assert_eq!(int64_literal(b"0"), Some(0));
        assert_eq!(int64_literal(b"1796187692523"), Some(1_796_187_692_523));
        assert_eq!(int64_literal(b"-42"), Some(-42));
        assert_eq!(int64_literal(b""), None);
        assert_eq!(int64_literal(b"-"), None);
        // Agrees with the standard parse on every validated integer literal around the edges.
        for n in [
            i64::MIN,
            i64::MIN + 1,
            -10,
            -1,
            0,
            1,
            9,
            10,
            99,
            100,
            i64::MAX - 1,
            i64::MAX,
        ] {
            let text = alloc::format!("{n}");
            assert_eq!(int64_literal(text.as_bytes()), Some(n), "{text}");
        }
    }

    #[test]
    fn finite_doubles() {
        assert!(is_finite_double(b"12345678901234567890123"));
        assert!(is_finite_double(b"1e-400"));
        assert!(is_finite_double(b"1.7976931348623157e308"));
        assert!(!is_finite_double(b"1e400"));
        assert!(!is_finite_double(b"-1e400"));
        assert!(!is_finite_double(b"1.8e308"));
        let huge = alloc::format!("1{}", "0".repeat(400));
        assert!(!is_finite_double(huge.as_bytes()));
        let big_but_finite = alloc::format!("1{}", "0".repeat(300));
        assert!(is_finite_double(big_but_finite.as_bytes()));
    }
}
