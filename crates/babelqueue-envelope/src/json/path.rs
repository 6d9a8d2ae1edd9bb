//! Member paths (`data.items[2].n`) and a walk over the values of a JSON text that names each
//! one by its path: what a refusal or a warning points a person at.

use alloc::string::String;
use core::fmt::Write as _;

use super::JsonKind;
use super::scan::{Scanner, SyntaxError, SyntaxErrorKind};

/// What [`walk`] shows its visitor of one value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Visit<'t> {
    /// The dotted path of the value (`data.items[2].n`).
    pub(crate) path: &'t str,
    /// The value's JSON type.
    pub(crate) kind: JsonKind,
    /// The value's text: the whole literal for a scalar, `{}` or `[]` for an empty container,
    /// the opening bracket alone for a container with members.
    pub(crate) literal: &'t str,
}

/// Appends the path step of a member to `path`: `.name` (decoded) when the name reads back
/// unambiguously from a dotted path, else `[written]`, the name's JSON string as written,
/// quotes and escapes included (an empty name, or one holding `.`, `[`, `]`, a quote, a
/// backslash, U+FFFD (a lone surrogate escape reads as one), whitespace or a control
/// character).
pub(crate) fn push_member(path: &mut String, name: &str, written: &str) {
    let plain = !name.is_empty()
        && !name.chars().any(|c| {
            matches!(c, '.' | '[' | ']' | '"' | '\\' | '\u{FFFD}')
                || c.is_control()
                || c.is_whitespace()
        });
    if plain {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(name);
    } else {
        path.push('[');
        path.push_str(written);
        path.push(']');
    }
}

/// Appends the path step of array element `index` to `path` (`[index]`).
pub(crate) fn push_index(path: &mut String, index: usize) {
    let _ = write!(path, "[{index}]");
}

/// Walks every value of the JSON value `text` (one strict JSON value), calling `visit` for each
/// in document order, containers before their members, with its path under `root`. The walk
/// stops at the first visit that returns `Some`, and returns that.
pub(crate) fn walk<T>(
    text: &str,
    root: &str,
    visit: &mut dyn FnMut(Visit<'_>) -> Option<T>,
) -> Result<Option<T>, SyntaxError> {
    let mut s = Scanner::new(text);
    s.start()?;
    let mut path = String::from(root);
    let found = value(&mut s, 0, &mut path, visit)?;
    if found.is_none() {
        s.finish()?;
    }
    Ok(found)
}

fn value<T>(
    s: &mut Scanner<'_>,
    depth: usize,
    path: &mut String,
    visit: &mut dyn FnMut(Visit<'_>) -> Option<T>,
) -> Result<Option<T>, SyntaxError> {
    let text = s.text();
    let start = s.pos;
    match s.peek() {
        Some(open @ (b'{' | b'[')) => {
            if depth + 1 > super::MAX_DEPTH {
                return Err(SyntaxError {
                    kind: SyntaxErrorKind::TooDeep,
                    offset: start,
                });
            }
            s.pos += 1;
            s.skip_ws();
            let object = open == b'{';
            let close = if object { b'}' } else { b']' };
            let empty = s.peek() == Some(close);
            let kind = if object {
                JsonKind::Object
            } else {
                JsonKind::Array
            };
            let literal = if empty {
                if object { "{}" } else { "[]" }
            } else {
                &text[start..=start]
            };
            if let Some(found) = visit(Visit {
                path,
                kind,
                literal,
            }) {
                return Ok(Some(found));
            }
            if empty {
                s.pos += 1;
                return Ok(None);
            }
            let base = path.len();
            if object {
                let mut first = true;
                while let Some(key) = s.next_key(first)? {
                    first = false;
                    push_member(path, &key.decoded(text), &text[key.start - 1..=key.end]);
                    let found = value(s, depth + 1, path, visit)?;
                    path.truncate(base);
                    if found.is_some() {
                        return Ok(found);
                    }
                }
            } else {
                let mut index = 0;
                loop {
                    push_index(path, index);
                    let found = value(s, depth + 1, path, visit)?;
                    path.truncate(base);
                    if found.is_some() {
                        return Ok(found);
                    }
                    index += 1;
                    s.skip_ws();
                    match s.peek() {
                        Some(b',') => {
                            s.pos += 1;
                            s.skip_ws();
                        }
                        Some(b']') => {
                            s.pos += 1;
                            break;
                        }
                        None => {
                            return Err(SyntaxError {
                                kind: SyntaxErrorKind::UnexpectedEnd,
                                offset: s.pos,
                            });
                        }
                        Some(_) => {
                            return Err(SyntaxError {
                                kind: SyntaxErrorKind::UnexpectedCharacter,
                                offset: s.pos,
                            });
                        }
                    }
                }
            }
            Ok(None)
        }
        _ => {
            let span = s.value(depth, &mut |_| {})?;
            Ok(visit(Visit {
                path,
                kind: span.kind,
                literal: &text[span.start..span.end],
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::vec::Vec;

    fn all(text: &str) -> Vec<String> {
        let mut seen = Vec::new();
        let none: Option<()> = walk(text, "data", &mut |v| {
            seen.push(format!("{} {} {}", v.path, v.kind, v.literal));
            None
        })
        .expect("valid JSON");
        assert!(none.is_none());
        seen
    }

    #[test]
    fn every_value_is_named_by_its_path_in_document_order() {
        assert_eq!(
            all(r#"{"a":1,"b":{"c":[true,{"d":"x"},[]],"e":{}},"a":null}"#),
            [
                "data object {",
                "data.a number 1",
                "data.b object {",
                "data.b.c array [",
                "data.b.c[0] boolean true",
                "data.b.c[1] object {",
                r#"data.b.c[1].d string "x""#,
                "data.b.c[2] array []",
                "data.b.e object {}",
                "data.a null null",
            ]
        );
    }

    #[test]
    fn names_that_are_not_plain_identifiers_are_quoted() {
        assert_eq!(
            all(r#"{"we.ird":1,"":2,"caf\u00e9":3,"k_-9":4,"a b":5}"#)[1..],
            [
                r#"data["we.ird"] number 1"#,
                r#"data[""] number 2"#,
                "data.caf\u{e9} number 3",
                "data.k_-9 number 4",
                r#"data["a b"] number 5"#,
            ]
        );
    }

    #[test]
    fn the_walk_stops_at_the_first_find_and_reports_bad_json() {
        let first_number = walk(r#"{"a":[1,2],"b":3}"#, "", &mut |v| {
            (v.kind == JsonKind::Number).then(|| String::from(v.path))
        });
        assert_eq!(first_number, Ok(Some(String::from("a[0]"))));
        assert!(walk(r#"{"a":[1,}"#, "", &mut |_| None::<()>).is_err());
        assert!(walk(r#"[1] x"#, "", &mut |_| None::<()>).is_err());
    }
}
