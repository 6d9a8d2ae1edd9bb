//! The closed ASCII whitespace set of the contract: space, `\t`, `\n`, `\v` (0x0B), `\f` (0x0C)
//! and `\r`.
//!
//! `str::trim` strips Unicode spaces (U+00A0, U+2003, U+3000 are *content* here) and
//! `str::trim_ascii` / `u8::is_ascii_whitespace` omit `\v`, so neither fits. Both helpers are
//! linear in the input.

/// Whether `b` is one of the six ASCII whitespace bytes.
#[inline]
pub fn is_ascii_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// `s` without leading and trailing ASCII whitespace (Unicode spaces are kept).
pub fn trim(s: &str) -> &str {
    let b = s.as_bytes();
    let start = b.iter().position(|&c| !is_ascii_ws(c)).unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|&c| !is_ascii_ws(c))
        .map_or(start, |i| i + 1);
    // Both ends sit next to ASCII bytes, so they are char boundaries.
    &s[start..end]
}

/// Whether `s` is empty or made only of ASCII whitespace.
pub fn is_blank(s: &str) -> bool {
    s.bytes().all(is_ascii_ws)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_the_six_ascii_characters_only() {
        assert_eq!(trim(" \t\n\u{b}\u{c}\rurn:a \u{b}"), "urn:a");
        assert_eq!(trim("\u{a0}urn:a\u{3000}"), "\u{a0}urn:a\u{3000}");
        assert_eq!(trim(" \u{2003} "), "\u{2003}");
        assert_eq!(trim("   "), "");
        assert!(is_blank(" \t\n\u{b}\u{c}\r"));
        assert!(!is_blank("\u{85}"));
        assert!(!is_blank("\u{feff}"));
    }

    #[test]
    fn trimming_is_linear() {
        let padded = alloc::format!("{0}urn:a{0}", " ".repeat(200_000));
        assert_eq!(trim(&padded), "urn:a");
    }
}
