//! The cause fingerprint of a failure: its error text with what varies from one occurrence to
//! the next masked (UUIDs, hexadecimal ids, numbers), so the dead letters of one cause group
//! together whatever order, user or amount they failed on.
//!
//! ```
//! use babelqueue_console::fingerprint;
//!
//! assert_eq!(
//!     fingerprint("order 1234 failed: timeout after 30s"),
//!     fingerprint("order 98 failed: timeout after 5s"),
//! );
//! assert_eq!(fingerprint("order 1234 failed"), "order # failed");
//! ```

/// What a UUID becomes.
const UUID: &str = "<uuid>";
/// What a hexadecimal id (8 digits or more, or `0x…`) becomes.
const HEX: &str = "<hex>";
/// What a number becomes.
const NUMBER: &str = "#";

/// `text` with UUIDs, hexadecimal ids and numbers masked, and runs of white space folded to one
/// space. A pure function: the same text gives the same fingerprint on every run and host.
pub fn fingerprint(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.trim().chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // Only at the start of a word: `abc123` keeps its letters, `v2` its digit.
        let word_start = i == 0 || !is_word(chars[i - 1]);
        if c.is_whitespace() {
            while i < chars.len() && chars[i].is_whitespace() {
                i += 1;
            }
            out.push(' ');
            continue;
        }
        if word_start {
            if let Some(len) = uuid_at(&chars[i..]) {
                out.push_str(UUID);
                i += len;
                continue;
            }
            if let Some(len) = hex_at(&chars[i..]) {
                out.push_str(HEX);
                i += len;
                continue;
            }
        }
        if c.is_ascii_digit() && word_start {
            while i < chars.len() && (chars[i].is_ascii_digit() || decimal_point(&chars, i)) {
                i += 1;
            }
            out.push_str(NUMBER);
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// A `.` or `,` between two digits (`1.5`, `1,000`).
fn decimal_point(chars: &[char], i: usize) -> bool {
    matches!(chars[i], '.' | ',')
        && i > 0
        && chars[i - 1].is_ascii_digit()
        && chars.get(i + 1).is_some_and(char::is_ascii_digit)
}

/// The length of a UUID (8-4-4-4-12 hexadecimal digits) at the head of `chars`, ending a word.
fn uuid_at(chars: &[char]) -> Option<usize> {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let mut i = 0;
    for (n, len) in GROUPS.iter().enumerate() {
        if n > 0 {
            if chars.get(i) != Some(&'-') {
                return None;
            }
            i += 1;
        }
        for _ in 0..*len {
            if !chars.get(i).is_some_and(char::is_ascii_hexdigit) {
                return None;
            }
            i += 1;
        }
    }
    ends_word(chars, i).then_some(i)
}

/// The length of a hexadecimal id at the head of `chars`: `0x` and hex digits, or a word of 8
/// or more hex digits with at least one digit (so `deadbeefcafe` and `a1b2c3d4e5` are ids,
/// `accepted` is a word).
fn hex_at(chars: &[char]) -> Option<usize> {
    if chars.first() == Some(&'0') && matches!(chars.get(1), Some('x' | 'X')) {
        let len = 2 + chars[2..]
            .iter()
            .take_while(|c| c.is_ascii_hexdigit())
            .count();
        return (len > 2 && ends_word(chars, len)).then_some(len);
    }
    let len = chars.iter().take_while(|c| c.is_ascii_hexdigit()).count();
    let has_digit = chars[..len].iter().any(char::is_ascii_digit);
    (len >= 8 && has_digit && ends_word(chars, len)).then_some(len)
}

fn ends_word(chars: &[char], at: usize) -> bool {
    chars.get(at).is_none_or(|c| !is_word(*c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_varies_is_masked_row_by_row() {
        let rows = [
            ("boom", "boom"),
            ("", ""),
            ("order 1234 failed", "order # failed"),
            ("timeout after 2.5s", "timeout after #s"),
            ("charged 1,000 EUR", "charged # EUR"),
            (
                "user 0192c1d2-7a0e-7c3f-9b1a-5d4e3f2a1b0c not found",
                "user <uuid> not found",
            ),
            (
                "USER 0192C1D2-7A0E-7C3F-9B1A-5D4E3F2A1B0C gone",
                "USER <uuid> gone",
            ),
            ("object deadbeef01 missing", "object <hex> missing"),
            ("pointer 0x7ffd12ab", "pointer <hex>"),
            (
                "sha256:e3b0c44298fc1c14 is poison",
                "sha256:<hex> is poison",
            ),
            // Words of hex letters without a digit are words.
            ("accepted deadbeef", "accepted deadbeef"),
            // Digits inside a word stay.
            ("http2 error on v1 api", "http2 error on v1 api"),
            ("abc123 x", "abc123 x"),
            ("  spread\n\tout   text ", "spread out text"),
            (
                "port 5432: connection refused",
                "port #: connection refused",
            ),
            ("<script>alert(1)</script>", "<script>alert(#)</script>"),
            ("é 12 ü", "é # ü"),
        ];
        for (text, expected) in rows {
            assert_eq!(fingerprint(text), expected, "{text:?}");
        }
    }

    #[test]
    fn occurrences_of_one_cause_share_a_fingerprint() {
        assert_eq!(
            fingerprint("payment 77 declined for 3f2a1b0c-0192-4c1d-9b1a-5d4e3f2a1b0c"),
            fingerprint("payment 12345 declined for 0192c1d2-7a0e-7c3f-9b1a-5d4e3f2a1b0c"),
        );
        assert_ne!(
            fingerprint("payment declined"),
            fingerprint("payment refused")
        );
    }
}
