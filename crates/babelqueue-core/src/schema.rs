//! Per-URN payload validation with the JSON-Schema (draft-07) subset every BabelQueue SDK
//! shares: `type`, `required`, `properties`, `additionalProperties: false`, `items`, `enum`,
//! `const`, `minLength` (in Unicode code points) and `minimum`. Other keywords are ignored;
//! `x-gdpr-sensitive` marks fields for encryption and never changes a verdict.
//!
//! ```
//! use babelqueue_core::schema::{MapProvider, SchemaProvider, check};
//! use serde_json::json;
//!
//! let provider = MapProvider::new([(
//!     "urn:babel:orders:created".to_owned(),
//!     json!({"type": "object", "required": ["order_id"],
//!            "properties": {"order_id": {"type": "integer", "minimum": 1}}}),
//! )]);
//! assert_eq!(check(&provider, "urn:babel:orders:created", &json!({"order_id": 7}))?, None);
//! assert_eq!(
//!     check(&provider, "urn:babel:orders:created", &json!({"order_id": 0}))?.as_deref(),
//!     Some("order_id: below_minimum")
//! );
//! # Ok::<(), babelqueue_core::Error>(())
//! ```

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use crate::error::Error;
use crate::handler::{Context, Handler, HandlerError, HandlerFuture};

/// A source of `data` schemas, by URN.
pub trait SchemaProvider: Send + Sync {
    /// The schema registered for `urn`, or `None` (then nothing is validated).
    fn schema_for(&self, urn: &str) -> Result<Option<Arc<Value>>, Error>;
}

/// Schemas held in memory.
#[derive(Debug, Default, Clone)]
pub struct MapProvider {
    schemas: HashMap<String, Arc<Value>>,
}

impl MapProvider {
    /// From `(urn, schema)` pairs.
    pub fn new(schemas: impl IntoIterator<Item = (String, Value)>) -> MapProvider {
        MapProvider {
            schemas: schemas.into_iter().map(|(k, v)| (k, Arc::new(v))).collect(),
        }
    }

    /// From `(urn, schema JSON text)` pairs; each must be a JSON object.
    pub fn from_json<'a>(
        schemas: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<MapProvider, Error> {
        let mut out = HashMap::new();
        for (urn, text) in schemas {
            let value: Value = serde_json::from_str(text)
                .map_err(|e| Error::Schema(format!("invalid JSON schema for {urn:?}: {e}")))?;
            if !value.is_object() {
                return Err(Error::Schema(format!(
                    "the schema for {urn:?} is not a JSON object"
                )));
            }
            out.insert(urn.to_owned(), Arc::new(value));
        }
        Ok(MapProvider { schemas: out })
    }
}

impl SchemaProvider for MapProvider {
    fn schema_for(&self, urn: &str) -> Result<Option<Arc<Value>>, Error> {
        Ok(self.schemas.get(urn).cloned())
    }
}

/// Schemas from a babelqueue-registry manifest (`{"schemas":[{"urn":…,"schema":"file.json"}]}`):
/// read eagerly; schema files are resolved next to the manifest, loaded lazily and cached.
#[derive(Debug)]
pub struct DirProvider {
    dir: PathBuf,
    files: HashMap<String, String>,
    cache: Mutex<HashMap<String, Arc<Value>>>,
}

impl DirProvider {
    /// Reads the manifest at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<DirProvider, Error> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::Schema(format!(
                "cannot read the registry manifest {}: {e}",
                path.display()
            ))
        })?;
        let manifest: Value = serde_json::from_str(&text).map_err(|e| {
            Error::Schema(format!("invalid registry manifest {}: {e}", path.display()))
        })?;
        let Some(manifest) = manifest.as_object() else {
            return Err(Error::Schema(format!(
                "the registry manifest {} is not a JSON object",
                path.display()
            )));
        };
        let mut files = HashMap::new();
        for entry in manifest
            .get("schemas")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let urn = entry
                .get("urn")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            let file = entry
                .get("schema")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            if let (Some(urn), Some(file)) = (urn, file) {
                files.insert(urn.to_owned(), file.to_owned());
            }
        }
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(DirProvider {
            dir,
            files,
            cache: Mutex::new(HashMap::new()),
        })
    }
}

impl SchemaProvider for DirProvider {
    fn schema_for(&self, urn: &str) -> Result<Option<Arc<Value>>, Error> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(hit) = cache.get(urn) {
            return Ok(Some(hit.clone()));
        }
        let Some(file) = self.files.get(urn) else {
            return Ok(None);
        };
        let path = if Path::new(file).is_absolute() {
            PathBuf::from(file)
        } else {
            self.dir.join(file)
        };
        let text = std::fs::read_to_string(&path).map_err(|e| {
            Error::Schema(format!(
                "cannot read the schema for {urn:?} ({}): {e}",
                path.display()
            ))
        })?;
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| Error::Schema(format!("invalid schema for {urn:?} ({file}): {e}")))?;
        if !value.is_object() {
            return Err(Error::Schema(format!(
                "the schema for {urn:?} ({file}) is not a JSON object"
            )));
        }
        let value = Arc::new(value);
        cache.insert(urn.to_owned(), value.clone());
        Ok(Some(value))
    }
}

/// The first violation of `value` against `schema`, as `<path>: <reason>`, or `None`.
///
/// Paths: `<root>` for the value itself, dotted keys below it, `[i]` for array items.
pub fn validate(schema: &Value, value: &Value) -> Option<String> {
    validate_at(schema, value, "")
}

fn violation(path: &str, reason: &str) -> Option<String> {
    Some(format!(
        "{}: {reason}",
        if path.is_empty() { "<root>" } else { path }
    ))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Type-aware equality: `true` ≠ 1, and an integer never equals a float.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let int = |n: &serde_json::Number| n.is_i64() || n.is_u64();
            int(x) == int(y) && x == y
        }
        _ => a == b,
    }
}

fn validate_at(schema: &Value, value: &Value, path: &str) -> Option<String> {
    let node = schema.as_object()?;
    if let Some(constant) = node.get("const")
        && !same(value, constant)
    {
        return violation(path, "wrong_const");
    }
    if let Some(Value::Array(options)) = node.get("enum")
        && !options.iter().any(|o| same(value, o))
    {
        return violation(path, "not_in_enum");
    }
    match node.get("type").and_then(Value::as_str) {
        Some("object") => check_object(node, value, path),
        Some("array") => {
            let Some(items) = value.as_array() else {
                return violation(path, "not_an_array");
            };
            let item_schema = node.get("items").filter(|s| s.is_object())?;
            items
                .iter()
                .enumerate()
                .find_map(|(i, item)| validate_at(item_schema, item, &format!("{path}[{i}]")))
        }
        Some("string") => {
            let Some(text) = value.as_str() else {
                return violation(path, "not_a_string");
            };
            match node.get("minLength").and_then(Value::as_f64) {
                Some(min) if (text.chars().count() as f64) < min.trunc() => {
                    violation(path, "below_min_length")
                }
                _ => None,
            }
        }
        Some("integer") => {
            let integral = match value {
                Value::Number(n) => {
                    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
                }
                _ => false,
            };
            if !integral {
                return violation(path, "not_an_integer");
            }
            check_minimum(node, value, path)
        }
        Some("number") => {
            if !value.is_number() {
                return violation(path, "not_a_number");
            }
            check_minimum(node, value, path)
        }
        Some("boolean") => {
            if value.is_boolean() {
                None
            } else {
                violation(path, "not_a_boolean")
            }
        }
        Some("null") => {
            if value.is_null() {
                None
            } else {
                violation(path, "not_null")
            }
        }
        _ => None,
    }
}

fn check_object(node: &Map<String, Value>, value: &Value, path: &str) -> Option<String> {
    let Some(object) = value.as_object() else {
        return violation(path, "not_an_object");
    };
    for key in node
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !object.contains_key(key) {
            return violation(&join(path, key), "missing_required");
        }
    }
    let properties = node.get("properties").and_then(Value::as_object);
    let closed = node.get("additionalProperties") == Some(&Value::Bool(false));
    for (key, item) in object {
        match properties.and_then(|p| p.get(key)) {
            Some(sub) if sub.is_object() => {
                if let Some(v) = validate_at(sub, item, &join(path, key)) {
                    return Some(v);
                }
            }
            _ if closed => return violation(&join(path, key), "additional_not_allowed"),
            _ => {}
        }
    }
    None
}

fn check_minimum(node: &Map<String, Value>, value: &Value, path: &str) -> Option<String> {
    let minimum = node.get("minimum").and_then(Value::as_f64)?;
    match value.as_f64() {
        Some(v) if v < minimum => violation(path, "below_minimum"),
        _ => None,
    }
}

/// One field a schema marks `x-gdpr-sensitive`, by its dotted path (`addresses[].line`; `""`
/// for the root), with its category (`""` when the mark is `true`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SensitivePath {
    /// Dotted path; a `[]` segment means "every item of this array".
    pub path: String,
    /// The category string, or `""`.
    pub category: String,
}

/// Every `x-gdpr-sensitive` mark of `schema`, sorted by path. Malformed nodes are skipped.
pub fn sensitive_paths(schema: &Value) -> Vec<SensitivePath> {
    fn collect(node: &Value, path: &str, out: &mut Vec<SensitivePath>) {
        let Some(node) = node.as_object() else { return };
        match node.get("x-gdpr-sensitive") {
            Some(Value::Bool(true)) => out.push(SensitivePath {
                path: path.to_owned(),
                category: String::new(),
            }),
            Some(Value::String(c)) if !c.is_empty() => out.push(SensitivePath {
                path: path.to_owned(),
                category: c.clone(),
            }),
            _ => {}
        }
        if let Some(properties) = node.get("properties").and_then(Value::as_object) {
            for (name, sub) in properties {
                collect(sub, &join(path, name), out);
            }
        }
        if let Some(items) = node.get("items").filter(|i| i.is_object()) {
            collect(items, &format!("{path}[]"), out);
        }
    }
    let mut out = Vec::new();
    collect(schema, "", &mut out);
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The first violation of `data` against the schema registered for `urn` (`None` when valid or
/// when no schema is registered).
pub fn check(
    provider: &dyn SchemaProvider,
    urn: &str,
    data: &Value,
) -> Result<Option<String>, Error> {
    Ok(provider
        .schema_for(urn)?
        .and_then(|schema| validate(&schema, data)))
}

/// Validates `data` against the schema registered for `urn` (producer side, before publishing).
pub fn require_valid(provider: &dyn SchemaProvider, urn: &str, data: &Value) -> Result<(), Error> {
    match check(provider, urn, data)? {
        None => Ok(()),
        Some(violation) => Err(Error::InvalidPayload {
            urn: urn.to_owned(),
            violation,
        }),
    }
}

/// A handler that validates `data` against the schema of its URN before running `inner`; an
/// invalid payload fails the message (retry, then dead-letter).
pub struct Validated<H> {
    provider: Arc<dyn SchemaProvider>,
    urn: String,
    inner: Arc<H>,
}

impl<H> fmt::Debug for Validated<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Validated")
            .field("urn", &self.urn)
            .finish_non_exhaustive()
    }
}

/// Wraps `handler` with validation against `urn`'s schema.
pub fn validated<H: Handler>(
    provider: Arc<dyn SchemaProvider>,
    urn: impl Into<String>,
    handler: H,
) -> Validated<H> {
    Validated {
        provider,
        urn: urn.into(),
        inner: Arc::new(handler),
    }
}

impl<H: Handler> Handler for Validated<H> {
    fn call(&self, ctx: Context) -> HandlerFuture {
        let data: Value = match ctx.data().to_value() {
            Ok(v) => v,
            Err(e) => return Box::pin(async move { Err(HandlerError::from(e)) }),
        };
        if let Err(e) = require_valid(self.provider.as_ref(), &self.urn, &data) {
            let message = e.to_string();
            return Box::pin(async move {
                Err(HandlerError::new(message).with_exception("InvalidPayloadError"))
            });
        }
        self.inner.call(ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reasons_and_paths() {
        let s = json!({"type":"object","required":["a"],"properties":{
            "a":{"type":"integer","minimum":1},
            "tags":{"type":"array","items":{"type":"string","minLength":2}},
            "p":{"type":"object","properties":{"n":{"type":"null"}},"additionalProperties":false}},
            "additionalProperties":false});
        assert_eq!(
            validate(&s, &json!([])).as_deref(),
            Some("<root>: not_an_object")
        );
        assert_eq!(
            validate(&s, &json!({})).as_deref(),
            Some("a: missing_required")
        );
        assert_eq!(
            validate(&s, &json!({"a":1.5})).as_deref(),
            Some("a: not_an_integer")
        );
        assert_eq!(validate(&s, &json!({"a":1.0})), None);
        assert_eq!(
            validate(&s, &json!({"a":true})).as_deref(),
            Some("a: not_an_integer")
        );
        assert_eq!(
            validate(&s, &json!({"a":0})).as_deref(),
            Some("a: below_minimum")
        );
        assert_eq!(
            validate(&s, &json!({"a":1,"tags":["ok","x"]})).as_deref(),
            Some("tags[1]: below_min_length")
        );
        assert_eq!(
            validate(&s, &json!({"a":1,"p":{"n":1}})).as_deref(),
            Some("p.n: not_null")
        );
        assert_eq!(
            validate(&s, &json!({"a":1,"p":{"z":1}})).as_deref(),
            Some("p.z: additional_not_allowed")
        );
        assert_eq!(
            validate(&s, &json!({"a":1,"x":1})).as_deref(),
            Some("x: additional_not_allowed")
        );
        assert_eq!(
            validate(&json!({"type":"string","minLength":2}), &json!("😀")).as_deref(),
            Some("<root>: below_min_length")
        );
        assert_eq!(
            validate(&json!({"type":"string","minLength":2}), &json!("e\u{301}")),
            None
        );
        assert_eq!(
            validate(&json!({"const":1}), &json!(1.0)).as_deref(),
            Some("<root>: wrong_const")
        );
        assert_eq!(
            validate(&json!({"enum":[1,"a"]}), &json!(true)).as_deref(),
            Some("<root>: not_in_enum")
        );
        assert_eq!(
            validate(
                &json!({"type":["string"],"x-gdpr-sensitive":true}),
                &json!(5)
            ),
            None
        );
    }

    #[test]
    fn sensitive_paths_sorted() {
        let s = json!({"x-gdpr-sensitive": "root", "properties": {
            "email": {"x-gdpr-sensitive": "email"},
            "addresses": {"items": {"properties": {"line": {"x-gdpr-sensitive": true}}}},
            "off": {"x-gdpr-sensitive": false}, "blank": {"x-gdpr-sensitive": ""}, "n": {"x-gdpr-sensitive": 1}}});
        let got: Vec<(String, String)> = sensitive_paths(&s)
            .into_iter()
            .map(|p| (p.path, p.category))
            .collect();
        assert_eq!(
            got,
            [
                ("".into(), "root".into()),
                ("addresses[].line".into(), "".into()),
                ("email".into(), "email".into())
            ]
        );
    }

    #[test]
    fn dir_provider_reads_lazily() {
        let dir = std::env::temp_dir().join(format!("bq-schema-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("registry.json"), r#"{"schemas":[{"urn":"urn:a","schema":"a.json"},{"urn":"urn:gone","schema":"gone.json"},{"urn":"","schema":"x"}]}"#).unwrap();
        std::fs::write(dir.join("a.json"), r#"{"type":"object"}"#).unwrap();
        let p = DirProvider::open(dir.join("registry.json")).unwrap();
        assert!(p.schema_for("urn:a").unwrap().is_some());
        assert!(p.schema_for("urn:none").unwrap().is_none());
        assert!(p.schema_for("urn:gone").is_err());
        assert!(DirProvider::open(dir.join("missing.json")).is_err());
        std::fs::remove_dir_all(dir).ok();
    }
}
