//! [`protect`] and [`unprotect`]: rewrite the marked values of `data` in its raw JSON text and
//! copy everything else through unchanged.
//!
//! `data` arrives as [`RawJson`], the codec's compact text, which is always valid JSON. The
//! walker finds the byte span of every value a mark points at (following the mark tree through
//! object members and array items), asks the cipher for each one in document order, and splices
//! the results into a copy of the text. Bytes outside those spans (number literals of any size,
//! string escapes, key order, repeated members) are never decoded or re-encoded.

use babelqueue_envelope::{JsonKind, RawJson};

use crate::cipher::Cipher;
use crate::error::{Error, Result};
use crate::marks::{Marks, Node};

/// One step of a field path, for error messages.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    Member(&'a str),
    Item(usize),
}

/// A value to rewrite: its byte span in the text and its path.
#[derive(Debug)]
struct Target {
    start: usize,
    end: usize,
    path: String,
}

fn render(path: &[Step<'_>]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Member(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Step::Item(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

/// The end (exclusive) of the string starting at `i` (`b[i] == b'"'`).
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        match *b.get(j)? {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
}

/// The end (exclusive) of the compact JSON value starting at `i`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match *b.get(j)? {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while let Some(c) = b.get(j) {
                if matches!(c, b',' | b']' | b'}') {
                    break;
                }
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// Whether the member name written as `raw` (with its quotes) is `name`.
fn key_is(raw: &str, name: &str) -> bool {
    let inner = &raw[1..raw.len() - 1];
    if inner.contains('\\') {
        RawJson::parse(raw)
            .ok()
            .and_then(|k| k.as_string().map(|s| s == name))
            .unwrap_or(false)
    } else {
        inner == name
    }
}

/// Collects the spans the mark tree `node` points at inside the value starting at `i`.
fn collect<'m>(
    text: &str,
    i: usize,
    node: &'m Node,
    path: &mut Vec<Step<'m>>,
    out: &mut Vec<Target>,
) -> Option<()> {
    let b = text.as_bytes();
    let Node::Branch { fields, items } = node else {
        // Marked nodes are handled by the caller, which knows the value's end.
        return Some(());
    };
    match *b.get(i)? {
        b'{' if !fields.is_empty() => {
            let mut j = i + 1;
            if *b.get(j)? == b'}' {
                return Some(());
            }
            loop {
                let key_end = string_end(b, j)?;
                let key = text.get(j..key_end)?;
                let start = key_end + 1; // past ':'
                let end = value_end(b, start)?;
                // Every occurrence of a repeated member is visited, so none stays in clear.
                if let Some((name, sub)) = fields.iter().find(|(name, _)| key_is(key, name)) {
                    path.push(Step::Member(name));
                    visit(text, start, end, sub, path, out)?;
                    path.pop();
                }
                j = end;
                match *b.get(j)? {
                    b',' => j += 1,
                    _ => return Some(()),
                }
            }
        }
        b'[' => {
            let Some(items) = items else {
                return Some(());
            };
            let mut j = i + 1;
            if *b.get(j)? == b']' {
                return Some(());
            }
            let mut index = 0;
            loop {
                let end = value_end(b, j)?;
                path.push(Step::Item(index));
                visit(text, j, end, items, path, out)?;
                path.pop();
                index += 1;
                j = end;
                match *b.get(j)? {
                    b',' => j += 1,
                    _ => return Some(()),
                }
            }
        }
        // The schema expects an object or an array and the message has something else: this
        // message does not carry the field; skip it (the reference SDKs do the same).
        _ => Some(()),
    }
}

fn visit<'m>(
    text: &str,
    start: usize,
    end: usize,
    node: &'m Node,
    path: &mut Vec<Step<'m>>,
    out: &mut Vec<Target>,
) -> Option<()> {
    match node {
        Node::Marked(_) => {
            out.push(Target {
                start,
                end,
                path: render(path),
            });
            Some(())
        }
        Node::Branch { .. } => collect(text, start, node, path, out),
    }
}

/// The spans to rewrite in `data`, in document order (never overlapping: a marked value is not
/// looked into).
fn targets(data: &RawJson, marks: &Marks) -> Result<Vec<Target>> {
    let mut out = Vec::new();
    let Some(root) = &marks.root else {
        return Ok(out);
    };
    if data.kind() != JsonKind::Object {
        return Ok(out);
    }
    collect(data.as_str(), 0, root, &mut Vec::new(), &mut out)
        .ok_or_else(|| Error::InvalidData("the data text is not compact JSON".into()))?;
    Ok(out)
}

/// Copies `text`, replacing each target's span with its replacement.
fn splice(text: &str, replaced: &[(&Target, String)]) -> Result<RawJson> {
    let extra: usize = replaced.iter().map(|(_, r)| r.len()).sum();
    let mut out = String::with_capacity(text.len() + extra);
    let mut last = 0;
    for (target, replacement) in replaced {
        out.push_str(&text[last..target.start]);
        out.push_str(replacement);
        last = target.end;
    }
    out.push_str(&text[last..]);
    RawJson::parse(&out).map_err(|e| Error::InvalidData(e.to_string()))
}

/// Encrypts every value of `data` that `marks` points at, returning the new `data`.
///
/// Each marked value (any JSON type; an object or array under a container mark is one value) is
/// handed to [`Cipher::encrypt`] as its exact JSON text and replaced by the ciphertext, as a JSON
/// string. Everything else is copied byte for byte. A marked field the message does not carry,
/// or whose parent is not the object/array the schema describes, is skipped. `data` that is not
/// an object, or marks that are empty, give `data` back unchanged.
///
/// A cipher failure fails the whole call ([`Error::Encrypt`]): nothing half-protected is
/// returned, so nothing half-protected can be published.
///
/// ```
/// use babelqueue_gdpr::{AesGcmCipher, AesKey, Marks, protect, unprotect};
/// use babelqueue_envelope::RawJson;
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let marks = Marks::from_schema(&serde_json::json!(
///     {"properties": {"email": {"x-gdpr-sensitive": "contact"}}}));
/// let cipher = AesGcmCipher::new(&AesKey::generate()?);
///
/// let data = RawJson::parse(r#"{"order_id":12345678901234567890123,"email":"alice@example.com"}"#)?;
/// let protected = protect(&data, &marks, &cipher).await?;
/// assert!(protected.as_str().starts_with(r#"{"order_id":12345678901234567890123,"email":""#));
/// assert!(!protected.as_str().contains("alice"));
///
/// assert_eq!(unprotect(&protected, &marks, &cipher).await?, data);
/// # Ok(()) }
/// ```
pub async fn protect(data: &RawJson, marks: &Marks, cipher: &dyn Cipher) -> Result<RawJson> {
    let targets = targets(data, marks)?;
    if targets.is_empty() {
        return Ok(data.clone());
    }
    let text = data.as_str();
    let mut replaced = Vec::with_capacity(targets.len());
    for target in &targets {
        let plaintext = &text.as_bytes()[target.start..target.end];
        let sealed = cipher
            .encrypt(plaintext)
            .await
            .map_err(|source| Error::Encrypt {
                path: target.path.clone(),
                source,
            })?;
        replaced.push((target, RawJson::string(&sealed).into_string()));
    }
    splice(text, &replaced)
}

/// Decrypts every value of `data` that `marks` points at, returning the new `data`: the inverse
/// of [`protect`].
///
/// A marked value that is a string is handed to [`Cipher::decrypt`] and replaced by the JSON
/// value it decrypts to. A marked value that is not a string was never protected (or is already
/// clear) and is left as it is. A marked field the message does not carry is skipped.
///
/// Fails, with nothing returned, when a protected value cannot be read: [`Error::Decrypt`] with
/// [`ErrorKind::Authentication`](crate::ErrorKind::Authentication) for a wrong key or an altered
/// value, [`ErrorKind::Malformed`](crate::ErrorKind::Malformed) for a string that is not a
/// ciphertext (a field a producer forgot to protect), and [`Error::NotJson`] when the plaintext
/// is not JSON.
pub async fn unprotect(data: &RawJson, marks: &Marks, cipher: &dyn Cipher) -> Result<RawJson> {
    let targets = targets(data, marks)?;
    let text = data.as_str();
    let mut replaced = Vec::with_capacity(targets.len());
    for target in &targets {
        let span = &text[target.start..target.end];
        if !span.starts_with('"') {
            continue;
        }
        let sealed = RawJson::parse(span)
            .ok()
            .and_then(|raw| raw.as_string().map(|s| s.into_owned()))
            .ok_or_else(|| Error::InvalidData("a protected value is not a JSON string".into()))?;
        let plaintext = cipher
            .decrypt(&sealed)
            .await
            .map_err(|source| Error::Decrypt {
                path: target.path.clone(),
                source,
            })?;
        let value = std::str::from_utf8(&plaintext)
            .ok()
            .and_then(|s| RawJson::parse(s).ok())
            .ok_or_else(|| Error::NotJson {
                path: target.path.clone(),
            })?;
        replaced.push((target, value.into_string()));
    }
    if replaced.is_empty() {
        return Ok(data.clone());
    }
    splice(text, &replaced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_ends() {
        let t = br#"{"a":"x\"}","b":[1,{"c":"]"}],"d":-1.5e3}"#;
        assert_eq!(value_end(t, 0), Some(t.len()));
        assert_eq!(value_end(t, 5), Some(11)); // "x\"}"
        assert_eq!(value_end(t, 16), Some(29)); // [1,{"c":"]"}]
        assert_eq!(value_end(t, 34), Some(40)); // -1.5e3
        assert_eq!(value_end(b"", 0), None);
        assert_eq!(value_end(b"\"open", 0), None);
    }

    #[test]
    fn escaped_member_names_match_by_value() {
        assert!(key_is(r#""em\u0061il""#, "email"));
        assert!(key_is(r#""email""#, "email"));
        assert!(!key_is(r#""Email""#, "email"));
    }

    #[test]
    fn paths_render_members_and_items() {
        assert_eq!(
            render(&[
                Step::Member("addresses"),
                Step::Item(2),
                Step::Member("line")
            ]),
            "addresses[2].line"
        );
        assert_eq!(
            render(&[Step::Member("grid"), Step::Item(0), Step::Item(1)]),
            "grid[0][1]"
        );
    }
}
