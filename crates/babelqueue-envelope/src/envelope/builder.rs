//! [`Builder`]: a new envelope, its identity minted (URN and `trace_id` trimmed, `meta.id`, the
//! creation time, `meta.lang`).

use super::*;

/// Builds a new envelope: `Envelope::builder(urn)…build()`.
///
/// The URN and `trace_id` are trimmed of the six ASCII whitespace characters (never Unicode
/// spaces); a blank URN is refused; a missing or blank `trace_id` is minted; `meta.id` is a
/// fresh UUIDv4; `created_at` is now in milliseconds; `meta.lang` is `"rust"`.
///
/// ```
/// use babelqueue_envelope::Envelope;
///
/// let envelope = Envelope::builder(" urn:babel:orders:created ")
///     .queue("orders")
///     .data(&serde_json::json!({"order_id": 1042}))
///     .meta("ext", &serde_json::json!({"acme": {"tier": "gold"}}))
///     .build()?;
/// assert_eq!(envelope.urn(), "urn:babel:orders:created");
/// assert_eq!(envelope.data().unwrap().as_str(), r#"{"order_id":1042}"#);
/// # Ok::<(), babelqueue_envelope::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    urn: String,
    trace_id: Option<String>,
    queue: String,
    data: Result<RawJson, Error>,
    /// Whether every number of `data` is known to be a finite double (`None`: not known yet).
    data_finite: Option<bool>,
    meta: Vec<(String, Result<RawJson, Error>)>,
    id: Option<String>,
    created_at: Option<i64>,
}

impl Builder {
    /// A builder for `urn`, queue `"default"`, empty `data`.
    pub fn new(urn: impl Into<String>) -> Builder {
        Builder {
            urn: urn.into(),
            trace_id: None,
            queue: String::from("default"),
            data: Ok(RawJson::empty_object()),
            data_finite: Some(true),
            meta: Vec::new(),
            id: None,
            created_at: None,
        }
    }

    /// A builder from a typed [`Message`](crate::Message): its URN, its serialized payload and,
    /// when it has one, its trace id.
    pub fn from_message<M: crate::Message + ?Sized>(message: &M) -> Builder {
        let mut builder = Builder::new(M::URN).data(message);
        if let Some(trace_id) = message.trace_id() {
            builder = builder.trace_id(trace_id);
        }
        builder
    }

    /// The queue written to `meta.queue` (default `"default"`).
    pub fn queue(mut self, queue: impl Into<String>) -> Builder {
        self.queue = queue.into();
        self
    }

    /// Continues an existing trace. A blank value (after ASCII trimming) mints a new one.
    pub fn trace_id(mut self, trace_id: impl Into<String>) -> Builder {
        self.trace_id = Some(trace_id.into());
        self
    }

    /// Sets `data` from any serializable value; it must serialize to a JSON object.
    pub fn data<T: serde::Serialize + ?Sized>(mut self, data: &T) -> Builder {
        match RawJson::from_serialize_finite(data) {
            Ok((raw, finite)) => {
                self.data = Ok(raw);
                self.data_finite = Some(finite);
            }
            Err(e) => self.data = Err(e),
        }
        self
    }

    /// Sets `data` from raw JSON; it must be an object.
    pub fn data_raw(mut self, data: RawJson) -> Builder {
        self.data = Ok(data);
        self.data_finite = None;
        self
    }

    /// Adds one producer `meta` extension entry (e.g. `ext` with a vendor block).
    ///
    /// Core keys, forbidden keys and a key given twice make [`Builder::build`] fail with the
    /// key's pointer.
    pub fn meta<T: serde::Serialize + ?Sized>(
        mut self,
        key: impl Into<String>,
        value: &T,
    ) -> Builder {
        self.meta.push((key.into(), RawJson::from_serialize(value)));
        self
    }

    /// Adds one producer `meta` extension entry from raw JSON.
    pub fn meta_raw(mut self, key: impl Into<String>, value: RawJson) -> Builder {
        self.meta.push((key.into(), Ok(value)));
        self
    }

    /// Uses this `meta.id` instead of minting one.
    pub fn message_id(mut self, id: impl Into<String>) -> Builder {
        self.id = Some(id.into());
        self
    }

    /// Uses this `meta.created_at` (epoch milliseconds) instead of the clock.
    pub fn created_at(mut self, millis: i64) -> Builder {
        self.created_at = Some(millis);
        self
    }

    /// Builds the envelope, minting ids with UUIDv4 and reading the system clock.
    #[cfg(feature = "std")]
    pub fn build(self) -> Result<Envelope, Error> {
        self.build_with(
            &mut || *uuid::Uuid::new_v4().as_bytes(),
            crate::now_millis(),
        )
    }

    /// Builds the envelope with a caller-supplied source of 16 random bytes (for UUIDv4 ids)
    /// and clock reading, for `no_std` targets and deterministic tests.
    pub fn build_with(
        self,
        random: &mut dyn FnMut() -> [u8; 16],
        now_millis: i64,
    ) -> Result<Envelope, Error> {
        let urn = ascii::trim(&self.urn);
        if urn.is_empty() {
            return Err(Error::BlankUrn);
        }
        let data = self.data?;
        if data.kind() != JsonKind::Object {
            return Err(Error::DataNotObject { found: data.kind() });
        }
        let mut extensions: Vec<(String, RawJson)> = Vec::with_capacity(self.meta.len());
        for (key, value) in self.meta {
            let pointer = || alloc::format!("/meta/{}", escape_pointer_token(&key));
            if CORE_META_KEYS.contains(&key.as_str()) || FORBIDDEN_META_KEYS.contains(&key.as_str())
            {
                return Err(Error::ReservedMetaKey { pointer: pointer() });
            }
            if extensions.iter().any(|(k, _)| *k == key) {
                return Err(Error::DuplicateMetaKey { pointer: pointer() });
            }
            extensions.push((key, value?));
        }
        let trace_id = match self.trace_id.as_deref().map(ascii::trim) {
            Some(t) if !t.is_empty() => String::from(t),
            _ => uuid_v4(random()),
        };
        let id = match self.id {
            Some(id) => id,
            None => uuid_v4(random()),
        };
        let mut meta = Object::new();
        meta.insert("id", RawJson::string(&id));
        meta.insert("queue", RawJson::string(&self.queue));
        meta.insert("lang", RawJson::string(SOURCE_LANG));
        meta.insert("schema_version", RawJson::integer(SCHEMA_VERSION));
        meta.insert(
            "created_at",
            RawJson::integer(self.created_at.unwrap_or(now_millis)),
        );
        for (key, value) in extensions {
            meta.insert(&key, value);
        }
        let mut envelope = Envelope::empty();
        let finite = self
            .data_finite
            .unwrap_or_else(|| crate::json::all_numbers_finite(data.as_str()));
        envelope.verified = Verified(finite);
        envelope.insert_member(Key::new("job"), Member::Raw(RawJson::string(urn)));
        envelope.insert_member(
            Key::new("trace_id"),
            Member::Raw(RawJson::string(&trace_id)),
        );
        envelope.insert_member(Key::new("data"), Member::Raw(data));
        envelope.insert_member(Key::new("meta"), Member::Meta(meta));
        envelope.insert_member(Key::new("attempts"), Member::Raw(RawJson::integer(0)));
        Ok(envelope)
    }
}

/// RFC 6901 token escaping: `~` → `~0`, `/` → `~1`.
pub(crate) fn escape_pointer_token(token: &str) -> Cow<'_, str> {
    if token.contains(['~', '/']) {
        Cow::Owned(token.replace('~', "~0").replace('/', "~1"))
    } else {
        Cow::Borrowed(token)
    }
}

/// A lowercase hyphenated UUIDv4 from 16 random bytes.
pub(crate) fn uuid_v4(bytes: [u8; 16]) -> String {
    let id = uuid::Builder::from_random_bytes(bytes).into_uuid();
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    String::from(id.hyphenated().encode_lower(&mut buf) as &str)
}
