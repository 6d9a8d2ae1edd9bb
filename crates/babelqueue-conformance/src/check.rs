//! Comparison helpers the cases share: RFC 6901 pointers, the suite's type-strict equality,
//! and a tolerant scanner for records a JSON parser cannot represent.

use serde_json::Value;

/// Resolves an RFC 6901 pointer (`~1` is `/`, `~0` is `~`; array indexes are all digits).
/// `None` means absent, which differs from a present `null`.
pub fn pointer<'v>(root: &'v Value, pointer: &str) -> Option<&'v Value> {
    if pointer.is_empty() {
        return Some(root);
    }
    let rest = pointer.strip_prefix('/')?;
    let mut node = root;
    for raw in rest.split('/') {
        let token = raw.replace("~1", "/").replace("~0", "~");
        node = match node {
            Value::Object(map) => map.get(&token)?,
            Value::Array(items) => {
                if token.is_empty() || !token.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                items.get(token.parse::<usize>().ok()?)?
            }
            _ => return None,
        };
    }
    Some(node)
}

/// The suite's equality: same JSON type (`true` ≠ 1, `"1"` ≠ 1, `{}` ≠ `[]`), objects by key set
/// and values, arrays by position, numbers numerically (1 equals 1.0).
pub fn strict_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x == y
            } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                x == y
            } else {
                x.as_f64() == y.as_f64()
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| strict_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| strict_equal(v, w)))
        }
        _ => false,
    }
}

/// Asserts a pointer holds a value (type-strict), with a readable failure.
pub fn expect_at(doc: &Value, ptr: &str, want: &Value) -> Result<(), String> {
    match pointer(doc, ptr) {
        None => Err(format!("{ptr} is absent, expected {want}")),
        Some(got) if strict_equal(got, want) => Ok(()),
        Some(got) => Err(format!("{ptr} is {got}, expected {want}")),
    }
}

/// The top-level member names of a JSON object text, with the raw text of each value, found by
/// a tolerant scan (it does not parse numbers or collapse repeated names, and has no depth limit).
/// `None` when the text is not an object as far as this scanner can tell.
pub fn top_level_members(text: &str) -> Option<Vec<(String, String)>> {
    let b = text.as_bytes();
    let ws = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r');
    let mut i = b.iter().position(|&c| !ws(c))?;
    if b[i] != b'{' {
        return None;
    }
    i += 1;
    let mut members = Vec::new();
    loop {
        while i < b.len() && (ws(b[i]) || b[i] == b',') {
            i += 1;
        }
        if i >= b.len() {
            return None;
        }
        if b[i] == b'}' {
            return Some(members);
        }
        let key_end = string_end(b, i)?;
        let key: String = serde_json::from_str(&text[i..key_end]).ok()?;
        i = key_end;
        while i < b.len() && (ws(b[i]) || b[i] == b':') {
            i += 1;
        }
        let start = i;
        let mut depth = 0usize;
        while i < b.len() {
            match b[i] {
                b'"' => {
                    i = string_end(b, i)?;
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' if depth == 0 => break,
                b'}' | b']' => depth -= 1,
                b',' if depth == 0 => break,
                _ => {}
            }
            i += 1;
        }
        members.push((
            key,
            text[start..i]
                .trim_end_matches(|c: char| c.is_ascii_whitespace())
                .to_string(),
        ));
    }
}

/// The index just past the string literal starting at `start` (a `"`).
fn string_end(b: &[u8], start: usize) -> Option<usize> {
    if b.get(start) != Some(&b'"') {
        return None;
    }
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// Standard base64 decoding (padded or not), for `body_base64` case fields.
pub fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const PADDED_OR_NOT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    PADDED_OR_NOT
        .decode(text)
        .map_err(|e| format!("invalid base64: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strict_equality_is_type_strict_but_numeric() {
        assert!(strict_equal(&json!(1), &json!(1.0)));
        assert!(!strict_equal(&json!(true), &json!(1)));
        assert!(!strict_equal(&json!("1"), &json!(1)));
        assert!(!strict_equal(&json!({}), &json!([])));
        assert!(strict_equal(
            &json!({"a":[1,{"b":null}]}),
            &json!({"a":[1.0,{"b":null}]})
        ));
    }

    #[test]
    fn pointers() {
        let doc = json!({"a/b": {"~x": [10, 20]}});
        assert_eq!(pointer(&doc, "/a~1b/~0x/1"), Some(&json!(20)));
        assert_eq!(pointer(&doc, "/a~1b/~0x/2"), None);
        assert_eq!(pointer(&json!({"n": null}), "/n"), Some(&Value::Null));
        assert_eq!(pointer(&json!({"n": null}), "/m"), None);
    }

    #[test]
    fn tolerant_scan_keeps_repeats_and_literals() {
        let members =
            top_level_members(r#"{"job":"a","job":5, "n" : 1e400 ,"d":{"k":[1,"}"]}}"#).unwrap();
        let names: Vec<_> = members.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["job", "job", "n", "d"]);
        assert_eq!(members[2].1, "1e400");
    }

    #[test]
    fn base64() {
        assert_eq!(base64_decode("/w==").unwrap(), [0xff]);
        assert_eq!(base64_decode("9JCAgA==").unwrap(), [0xf4, 0x90, 0x80, 0x80]);
        assert_eq!(base64_decode("9JCAgA").unwrap(), [0xf4, 0x90, 0x80, 0x80]);
        assert!(base64_decode("9JC*gA==").is_err());
    }
}
