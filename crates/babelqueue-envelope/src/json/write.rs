//! The one JSON string writer of the codec: UTF-8 output, non-ASCII characters raw, `/` never
//! escaped, `"` and `\` escaped, control characters as `\b \f \n \r \t` or `\u00XX`.

use alloc::string::String;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string literal (with quotes).
pub(crate) fn push_string(out: &mut String, s: &str) {
    out.push('"');
    push_escaped(out, s);
    out.push('"');
}

/// Appends the escaped content of `s` (without quotes).
pub(crate) fn push_escaped(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[run..i]);
        if escape.is_empty() {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push_str(escape);
        }
        run = i + 1;
    }
    out.push_str(&s[run..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_the_reference_encoder() {
        let mut out = String::new();
        push_string(&mut out, "a\"b\\c/d\u{b}\u{1f}\n\té☕\u{2028}");
        assert_eq!(out, "\"a\\\"b\\\\c/d\\u000b\\u001f\\n\\té☕\u{2028}\"");
    }
}
