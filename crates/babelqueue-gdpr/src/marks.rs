//! The `x-gdpr-sensitive` marks of one payload schema, compiled into a tree that
//! [`protect`](crate::protect) and [`unprotect`](crate::unprotect) walk alongside `data`.

use babelqueue_core::schema::SensitivePath;
use serde_json::Value;

/// The schema keyword that marks a field sensitive.
pub const KEYWORD: &str = "x-gdpr-sensitive";

/// The mark on one schema node: `true` (category `""`) or a non-empty category string.
/// `false`, `""`, numbers and anything else do not mark.
fn mark_of(node: &serde_json::Map<String, Value>) -> Option<String> {
    match node.get(KEYWORD) {
        Some(Value::Bool(true)) => Some(String::new()),
        Some(Value::String(category)) if !category.is_empty() => Some(category.clone()),
        _ => None,
    }
}

/// One node of the tree: either marked (the whole value here is protected as one ciphertext, so
/// nothing below it is looked at), or a way down to marked nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    /// Protect the value at this node.
    Marked(String),
    /// Look further down.
    Branch {
        /// Object members (by decoded name) leading to marks, in schema order.
        fields: Vec<(String, Node)>,
        /// The array item schema, when it leads to marks.
        items: Option<Box<Node>>,
    },
}

/// Compiles a schema node; `None` when nothing at or below it is marked.
fn compile(schema: &Value) -> Option<Node> {
    let node = schema.as_object()?;
    if let Some(category) = mark_of(node) {
        return Some(Node::Marked(category));
    }
    branch(node)
}

fn branch(node: &serde_json::Map<String, Value>) -> Option<Node> {
    let fields: Vec<(String, Node)> = node
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(name, sub)| compile(sub).map(|n| (name.clone(), n)))
        .collect();
    let items = node.get("items").and_then(compile).map(Box::new);
    if fields.is_empty() && items.is_none() {
        None
    } else {
        Some(Node::Branch { fields, items })
    }
}

/// The compiled `x-gdpr-sensitive` marks of one `data` schema.
///
/// A mark protects the whole value under it, whatever its JSON type (a *container mark* on an
/// object or array protects it as one ciphertext, and marks below it are covered by it). Marks
/// are found through `properties` (object members) and `items` (every element of an array, at
/// any depth). Malformed nodes are skipped, never an error.
///
/// A mark on the schema root protects nothing by itself: `data` must stay a JSON object, so it
/// cannot become a ciphertext string. The marks below the root still apply. This is the
/// reference SDK's rule; [`Marks::root_category`] tells whether the root is marked.
///
/// ```
/// use babelqueue_gdpr::Marks;
///
/// let marks = Marks::from_schema(&serde_json::json!({
///     "type": "object",
///     "properties": {
///         "email": {"type": "string", "x-gdpr-sensitive": "contact"},
///         "addresses": {"type": "array", "items": {
///             "type": "object",
///             "properties": {"line": {"type": "string", "x-gdpr-sensitive": true}}
///         }},
///         "order_id": {"type": "integer"}
///     }
/// }));
/// let paths: Vec<String> = marks.paths().into_iter().map(|p| p.path).collect();
/// assert_eq!(paths, ["addresses[].line", "email"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Marks {
    pub(crate) root: Option<Node>,
    root_category: Option<String>,
}

impl Marks {
    /// Compiles the marks of a `data` schema (a JSON-Schema object).
    pub fn from_schema(schema: &Value) -> Marks {
        let Some(node) = schema.as_object() else {
            return Marks::default();
        };
        Marks {
            root: branch(node),
            root_category: mark_of(node),
        }
    }

    /// Whether no field is protected.
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }

    /// The category of a mark on the schema root (`Some("")` for `true`), which protects nothing
    /// by itself (see the type docs).
    pub fn root_category(&self) -> Option<&str> {
        self.root_category.as_deref()
    }

    /// The protected fields as `(path, category)`, sorted by path, in the notation the other SDKs
    /// and the registry use: dotted member names, `[]` for "every item of this array". Marks below
    /// a container mark are covered by it and not listed; a root mark is not listed.
    pub fn paths(&self) -> Vec<SensitivePath> {
        fn walk(node: &Node, path: &str, out: &mut Vec<SensitivePath>) {
            match node {
                Node::Marked(category) => out.push(SensitivePath {
                    path: path.to_owned(),
                    category: category.clone(),
                }),
                Node::Branch { fields, items } => {
                    for (name, sub) in fields {
                        let next = if path.is_empty() {
                            name.clone()
                        } else {
                            format!("{path}.{name}")
                        };
                        walk(sub, &next, out);
                    }
                    if let Some(items) = items {
                        walk(items, &format!("{path}[]"), out);
                    }
                }
            }
        }
        let mut out = Vec::new();
        if let Some(root) = &self.root {
            walk(root, "", &mut out);
        }
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(schema: &Value) -> Vec<(String, String)> {
        Marks::from_schema(schema)
            .paths()
            .into_iter()
            .map(|p| (p.path, p.category))
            .collect()
    }

    #[test]
    fn marks_are_true_or_a_non_empty_category() {
        let got = paths(&json!({"properties": {
            "a": {"x-gdpr-sensitive": true},
            "b": {"x-gdpr-sensitive": "email"},
            "c": {"x-gdpr-sensitive": false},
            "d": {"x-gdpr-sensitive": ""},
            "e": {"x-gdpr-sensitive": 1},
            "f": {"x-gdpr-sensitive": null},
            "g": "not a schema",
        }}));
        assert_eq!(
            got,
            [
                ("a".to_owned(), String::new()),
                ("b".to_owned(), "email".to_owned())
            ]
        );
    }

    #[test]
    fn nested_objects_arrays_and_containers() {
        let got = paths(&json!({"properties": {
            "profile": {"properties": {"name": {"x-gdpr-sensitive": true}}},
            "addresses": {"items": {"properties": {"line": {"x-gdpr-sensitive": "address"}}}},
            "phones": {"items": {"x-gdpr-sensitive": "phone"}},
            "grid": {"items": {"items": {"x-gdpr-sensitive": true}}},
            "card": {"x-gdpr-sensitive": "payment",
                     "properties": {"number": {"x-gdpr-sensitive": true}}},
        }}));
        let want: Vec<(String, String)> = [
            ("addresses[].line", "address"),
            ("card", "payment"),
            ("grid[][]", ""),
            ("phones[]", "phone"),
            ("profile.name", ""),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_root_mark_is_reported_but_protects_nothing_itself() {
        let m = Marks::from_schema(&json!({"x-gdpr-sensitive": "customer"}));
        assert_eq!(m.root_category(), Some("customer"));
        assert!(m.is_empty());
        let m = Marks::from_schema(
            &json!({"x-gdpr-sensitive": true, "properties": {"e": {"x-gdpr-sensitive": true}}}),
        );
        assert_eq!(m.root_category(), Some(""));
        assert_eq!(m.paths().len(), 1);
        assert!(Marks::from_schema(&json!(["not", "an", "object"])).is_empty());
        assert!(Marks::from_schema(&json!({"properties": {"a": {}}})).is_empty());
    }
}
