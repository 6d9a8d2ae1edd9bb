use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::ascii;
use crate::json::scan::{self, Scanner};
use crate::json::{JsonKind, Key, Name, Object, RawJson, Seen};
use crate::{Error, SCHEMA_VERSION, SOURCE_LANG};

mod builder;
pub use builder::Builder;

/// The core `meta` keys, in canonical order.
pub const CORE_META_KEYS: [&str; 5] = ["id", "queue", "lang", "schema_version", "created_at"];

/// The forbidden `meta` keys (non-canonical legacy fields), in the order encode checks them.
pub const FORBIDDEN_META_KEYS: [&str; 4] = ["max_retries", "attempts", "source", "ts"];

/// The keys encode refuses to write, as RFC 6901 pointers, in the order they are checked.
pub const FORBIDDEN_POINTERS: [&str; 6] = [
    "/timestamp",
    "/meta/max_retries",
    "/meta/attempts",
    "/meta/source",
    "/meta/ts",
    "/urn",
];

#[derive(Clone, PartialEq, Eq)]
enum Member {
    Raw(RawJson),
    /// `meta`, when it is an object (the only nested level the codec edits).
    Meta(Object),
}

impl Member {
    fn write_into(&self, out: &mut String) {
        match self {
            Member::Raw(raw) => out.push_str(raw.as_str()),
            Member::Meta(object) => object.write_into(out),
        }
    }
}

/// A BabelQueue message envelope: `{job, trace_id, data, meta, attempts}`.
///
/// Members keep their order and their JSON text; unknown members (top-level and in `meta`)
/// ride along untouched, so a message from a newer producer survives a retry hop. Build new
/// envelopes with [`Envelope::builder`]; read bodies with [`Envelope::decode`] (strict) or
/// [`Envelope::decode_lenient`] (what the runtime uses).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Envelope {
    members: Vec<(Key, Member)>,
    /// Known to pass the consumers' verdict as it stands (see [`Envelope::encode_checked`]).
    verified: Verified,
}

/// Whether an envelope is known to pass the consumers' strict verdict without a scan: set by
/// the builder when every number of its `data` is a finite double (its other members are its
/// own, of the right types by construction), cleared by any change but `set_attempts`. Not part
/// of the envelope's value: two envelopes compare equal whatever their flags say.
#[derive(Clone, Copy, Default)]
struct Verified(bool);

impl PartialEq for Verified {
    fn eq(&self, _: &Verified) -> bool {
        true
    }
}

impl Eq for Verified {}

/// What decoding produced: the envelope and the warnings the decode emitted (also logged through
/// `tracing` on target `babelqueue::codec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The normalised envelope (forbidden keys dropped, the `urn` alias folded into `job`).
    pub envelope: Envelope,
    /// One entry per warning, in the order they were raised.
    pub warnings: Vec<DecodeWarning>,
}

/// A decode warning. The decode never fails for these; it reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeWarning {
    /// RFC 6901 pointer of the key concerned (`/meta/ts`, `/urn`, `/job` …).
    pub pointer: &'static str,
    /// What happened.
    pub kind: WarningKind,
}

/// The kinds of [`DecodeWarning`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WarningKind {
    /// A forbidden key (or the `urn` alias next to a valid `job`) was removed and will never be
    /// re-emitted.
    DroppedForbiddenKey,
    /// `job` is not a string, so it cannot be the identity.
    NonStringJob {
        /// The JSON type found.
        found: JsonKind,
        /// Whether a valid `urn` alias takes over.
        falls_back_to_urn: bool,
    },
}

impl fmt::Display for DecodeWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            WarningKind::DroppedForbiddenKey => write!(
                f,
                "dropped forbidden envelope key {} (non-canonical; it is never re-emitted)",
                self.pointer
            ),
            WarningKind::NonStringJob {
                found,
                falls_back_to_urn,
            } => {
                write!(
                    f,
                    "ignored the envelope key {} because it is a {found}, not a string",
                    self.pointer
                )?;
                if falls_back_to_urn {
                    f.write_str("; falling back to the urn alias")?;
                }
                Ok(())
            }
        }
    }
}

/// Whether a value is a usable identity: a string that is not ASCII-blank.
pub(crate) fn is_valid_urn(value: Option<&RawJson>) -> bool {
    value
        .and_then(RawJson::as_string)
        .is_some_and(|s| !ascii::is_blank(&s))
}

impl Envelope {
    /// Starts building a new envelope for `urn`.
    pub fn builder(urn: impl Into<String>) -> Builder {
        Builder::new(urn)
    }

    /// An envelope with no member (what an unreadable body decodes to leniently).
    pub fn empty() -> Envelope {
        Envelope::default()
    }

    /// Whether the envelope has no member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    // ----------------------------------------------------------------------------------------
    // Decode

    /// Decodes a body strictly: it must be a UTF-8 JSON object with a valid identity (a
    /// non-blank string `job`, or failing that a non-blank string `urn` alias).
    ///
    /// Forbidden keys are dropped and reported as warnings; the `urn` alias is folded into
    /// `job`; repeated members resolve last-wins; names are case-sensitive; unknown members are
    /// kept. Values are never trimmed.
    pub fn decode(body: &[u8]) -> Result<Decoded, Error> {
        let decoded = Envelope::decode_checked(body)?;
        if !is_valid_urn(decoded.envelope.raw("job")) {
            return Err(Error::NoIdentity);
        }
        Ok(decoded)
    }

    /// Decodes a body without requiring an identity, and without failing: an unreadable body
    /// (not UTF-8, not JSON, not an object) gives an empty envelope.
    ///
    /// The warnings and the normalisation are the same as [`Envelope::decode`]. The runtime uses
    /// this after the poison check, so it only ever sees readable bodies.
    pub fn decode_lenient(body: &[u8]) -> Decoded {
        Envelope::decode_checked(body).unwrap_or(Decoded {
            envelope: Envelope::empty(),
            warnings: Vec::new(),
        })
    }

    /// Decodes a readable object body (any identity), reporting why an unreadable one is not.
    pub fn decode_checked(body: &[u8]) -> Result<Decoded, Error> {
        let mut envelope = Envelope::parse_object(body)?;
        let mut warnings = Vec::new();
        envelope.normalise(&mut warnings);
        for warning in &warnings {
            tracing::warn!(target: "babelqueue::codec", pointer = warning.pointer, "{warning}");
        }
        Ok(Decoded { envelope, warnings })
    }

    /// The one-pass decode of the consume path: the strict verdict of [`poison_cause`] (with an
    /// identity required) and the lenient decode of [`Envelope::decode_lenient`] out of a
    /// single scan of the body. `Err` carries exactly the cause `poison_cause(body, true)`
    /// reports; `Ok` carries exactly what `decode_lenient(body)` gives (the warnings logged
    /// the same way).
    ///
    /// ```
    /// use babelqueue_envelope::{Envelope, PoisonCause};
    ///
    /// let decoded = Envelope::decode_classified(br#"{"job":"urn:x","attempts":2}"#)?;
    /// assert_eq!(decoded.envelope.attempts(), 2);
    /// assert_eq!(
    ///     Envelope::decode_classified(br#"{"x":1}"#).unwrap_err(),
    ///     PoisonCause::NoIdentity
    /// );
    /// # Ok::<(), PoisonCause>(())
    /// ```
    ///
    /// [`poison_cause`]: crate::poison_cause
    pub fn decode_classified(body: &[u8]) -> Result<Decoded, crate::PoisonCause> {
        let (mut envelope, normalise) = crate::verdict::parse_checked(body)?;
        let mut warnings = Vec::new();
        if normalise {
            envelope.normalise(&mut warnings);
        }
        for warning in &warnings {
            tracing::warn!(target: "babelqueue::codec", pointer = warning.pointer, "{warning}");
        }
        Ok(Decoded { envelope, warnings })
    }

    /// An empty envelope with room for `members` top-level members.
    pub(crate) fn with_capacity(members: usize) -> Envelope {
        Envelope {
            members: Vec::with_capacity(members),
            verified: Verified(false),
        }
    }

    /// Builds an envelope from members already read (the one-pass decode).
    pub(crate) fn push_raw(&mut self, key: Key, value: RawJson, seen: &mut Seen) {
        self.push_member(key, Member::Raw(value), seen);
    }

    /// Builds an envelope from an object `meta` already read (the one-pass decode).
    pub(crate) fn push_meta(&mut self, key: Key, meta: Object, seen: &mut Seen) {
        self.push_member(key, Member::Meta(meta), seen);
    }

    fn push_member(&mut self, key: Key, member: Member, seen: &mut Seen) {
        if seen.is_new(&key) {
            self.members.push((key, member));
        } else {
            self.insert_member(key, member);
        }
    }

    /// Parses an object body as-is: no key dropped, no alias folded, no warning.
    ///
    /// For read-only projections of a body that is forwarded unchanged (a transport deriving
    /// broker properties from it), where reporting a "dropped" key would be false.
    pub fn parse_object(body: &[u8]) -> Result<Envelope, Error> {
        let text = core::str::from_utf8(body).map_err(|e| Error::InvalidUtf8 {
            offset: e.valid_up_to(),
        })?;
        // One copy of the body, shared by every key and value read from it.
        let source: alloc::sync::Arc<str> = alloc::sync::Arc::from(text);
        let mut s = Scanner::shared(&source);
        s.start().map_err(Error::InvalidJson)?;
        if s.peek() != Some(b'{') {
            let span = scan::validate(text).map_err(Error::InvalidJson)?;
            return Err(Error::NotAnObject { found: span.kind });
        }
        s.pos += 1;
        let mut envelope = Envelope::with_capacity(8);
        let mut first = true;
        while let Some(key) = s.next_key(first).map_err(Error::InvalidJson)? {
            first = false;
            let key = Key::scanned(&s, key);
            let member = if key.is("meta") && s.peek() == Some(b'{') {
                s.pos += 1;
                Member::Meta(Object::read_members(&mut s, 2).map_err(Error::InvalidJson)?)
            } else {
                let span = s.value(1, &mut |_| {}).map_err(Error::InvalidJson)?;
                Member::Raw(RawJson::scanned(&s, span))
            };
            envelope.insert_member(key, member);
        }
        s.finish().map_err(Error::InvalidJson)?;
        Ok(envelope)
    }

    /// Drops forbidden keys and folds the `urn` alias into `job`.
    fn normalise(&mut self, warnings: &mut Vec<DecodeWarning>) {
        let dropped = |pointer| DecodeWarning {
            pointer,
            kind: WarningKind::DroppedForbiddenKey,
        };
        if self.remove("timestamp") {
            warnings.push(dropped("/timestamp"));
        }
        if let Some(meta) = self.meta_mut() {
            for (key, pointer) in FORBIDDEN_META_KEYS.iter().zip(&FORBIDDEN_POINTERS[1..5]) {
                if meta.remove(key).is_some() {
                    warnings.push(dropped(pointer));
                }
            }
        }
        let alias_valid = is_valid_urn(self.raw("urn"));
        if let Some(job) = self.raw("job")
            && job.kind() != JsonKind::String
        {
            warnings.push(DecodeWarning {
                pointer: "/job",
                kind: WarningKind::NonStringJob {
                    found: job.kind(),
                    falls_back_to_urn: alias_valid,
                },
            });
        }
        if let Some(alias) = self.take_raw("urn") {
            if is_valid_urn(self.raw("job")) {
                warnings.push(dropped("/urn"));
            } else if alias_valid {
                self.set("job", alias);
            }
        }
    }

    // ----------------------------------------------------------------------------------------
    // Encode

    /// The first key encode would refuse, as an RFC 6901 pointer.
    pub fn forbidden_key(&self) -> Option<&'static str> {
        if self.contains("timestamp") {
            return Some("/timestamp");
        }
        if let Some(meta) = self.meta() {
            for (key, pointer) in FORBIDDEN_META_KEYS.iter().zip(&FORBIDDEN_POINTERS[1..5]) {
                if meta.contains_key(key) {
                    return Some(pointer);
                }
            }
        }
        self.contains("urn").then_some("/urn")
    }

    /// Encodes compact UTF-8 JSON (no spaces, non-ASCII raw, `/` unescaped, no newline).
    ///
    /// Refuses an envelope that carries a forbidden key or the `urn` alias, naming the first
    /// one found; nothing else is validated. An envelope that came out of a decode always
    /// encodes.
    pub fn encode(&self) -> Result<String, Error> {
        let mut out = String::with_capacity(self.encoded_len_hint());
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Encodes for sending: [`Envelope::encode`], then the strict verdict every consumer runs
    /// on what it receives ([`check_publishable`](crate::check_publishable)). A body a consumer
    /// would dead-letter as poison is refused with [`Error::Unpublishable`], naming the member
    /// (`data.x: 1e400 is not a finite number`). Every publish path of the runtime sends what
    /// this returns.
    ///
    /// ```
    /// use babelqueue_envelope::{Envelope, RawJson};
    ///
    /// let envelope = Envelope::builder("urn:babel:orders:created")
    ///     .data_raw(RawJson::parse(r#"{"x":1e400}"#)?)
    ///     .build()?;
    /// let refused = envelope.encode_checked().unwrap_err();
    /// assert_eq!(refused.member(), Some("data.x"));
    /// assert!(refused.to_string().ends_with("data.x: 1e400 is not a finite number"));
    /// # Ok::<(), babelqueue_envelope::Error>(())
    /// ```
    pub fn encode_checked(&self) -> Result<String, Error> {
        let body = self.encode()?;
        // An envelope the builder made, unchanged since, was checked as it was built (only its
        // `data` could fail, and only that was scanned).
        if !self.verified.0 {
            crate::check_publishable(body.as_bytes()).map_err(Error::Unpublishable)?;
        }
        Ok(body)
    }

    /// Like [`Envelope::encode`], appending to `out` (which is left unchanged on error).
    pub fn encode_into(&self, out: &mut String) -> Result<(), Error> {
        if let Some(pointer) = self.forbidden_key() {
            return Err(Error::ForbiddenKey {
                pointer: String::from(pointer),
            });
        }
        self.write_into(out);
        Ok(())
    }

    pub(crate) fn write_into(&self, out: &mut String) {
        out.push('{');
        for (i, (key, value)) in self.members.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('"');
            out.push_str(key.raw());
            out.push_str("\":");
            value.write_into(out);
        }
        out.push('}');
    }

    fn encoded_len_hint(&self) -> usize {
        self.members
            .iter()
            .map(|(k, v)| {
                k.raw().len()
                    + 4
                    + match v {
                        Member::Raw(r) => r.as_str().len(),
                        Member::Meta(m) => m
                            .iter()
                            .map(|(k, v)| k.raw().len() + v.as_str().len() + 4)
                            .sum(),
                    }
            })
            .sum::<usize>()
            + 2
    }

    // ----------------------------------------------------------------------------------------
    // Members

    fn position(&self, name: &str) -> Option<usize> {
        let name = Name::new(name);
        self.members.iter().position(|(k, _)| k.is_name(&name))
    }

    fn insert_member(&mut self, key: Key, member: Member) {
        if let Some(slot) = self.members.iter_mut().find(|(k, _)| k.same_member(&key)) {
            slot.1 = member;
            return;
        }
        self.members.push((key, member));
    }

    /// Whether a top-level member `name` exists.
    pub fn contains(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    /// The raw value of a top-level member, except an object `meta` (see [`Envelope::meta`]).
    fn raw(&self, name: &str) -> Option<&RawJson> {
        let name = Name::new(name);
        match self.members.iter().find(|(k, _)| k.is_name(&name))?.1 {
            Member::Raw(ref raw) => Some(raw),
            Member::Meta(_) => None,
        }
    }

    fn take_raw(&mut self, name: &str) -> Option<RawJson> {
        let i = self.position(name)?;
        match self.members.remove(i).1 {
            Member::Raw(raw) => Some(raw),
            Member::Meta(object) => Some(object.to_raw()),
        }
    }

    /// The value of top-level member `name`.
    pub fn get(&self, name: &str) -> Option<Cow<'_, RawJson>> {
        let name = Name::new(name);
        match &self.members.iter().find(|(k, _)| k.is_name(&name))?.1 {
            Member::Raw(raw) => Some(Cow::Borrowed(raw)),
            Member::Meta(object) => Some(Cow::Owned(object.to_raw())),
        }
    }

    /// Sets top-level member `name` (in place when present, else appended).
    ///
    /// This is the low-level access the codec's own rules do not police: encode still refuses a
    /// forbidden key set this way.
    pub fn set(&mut self, name: &str, value: RawJson) {
        self.verified = Verified(false);
        let member = if name == "meta" && value.kind() == JsonKind::Object {
            // Parsing a minified object we produced cannot fail.
            Object::parse(value.as_str()).map_or(Member::Raw(value), Member::Meta)
        } else {
            Member::Raw(value)
        };
        self.insert_member(Key::new(name), member);
    }

    /// Removes top-level member `name`; returns whether it was present.
    pub fn remove(&mut self, name: &str) -> bool {
        self.verified = Verified(false);
        match self.position(name) {
            Some(i) => {
                self.members.remove(i);
                true
            }
            None => false,
        }
    }

    /// The top-level member names, in order.
    pub fn keys(&self) -> impl Iterator<Item = Cow<'_, str>> {
        self.members.iter().map(|(k, _)| k.name())
    }

    // ----------------------------------------------------------------------------------------
    // The contract's fields

    /// The URN: `job` when it is a valid identity, else the `urn` alias when valid, else `""`.
    /// Returned as written (never trimmed).
    pub fn urn(&self) -> Cow<'_, str> {
        for name in ["job", "urn"] {
            if let Some(value) = self.raw(name).and_then(RawJson::as_string)
                && !ascii::is_blank(&value)
            {
                return value;
            }
        }
        Cow::Borrowed("")
    }

    /// The raw `job` member, whatever its type.
    pub fn job(&self) -> Option<&RawJson> {
        self.raw("job")
    }

    /// `trace_id`, when it is a string.
    pub fn trace_id(&self) -> Option<Cow<'_, str>> {
        self.raw("trace_id").and_then(RawJson::as_string)
    }

    /// The raw `data` member.
    pub fn data(&self) -> Option<&RawJson> {
        self.raw("data")
    }

    /// Deserializes `data` into `T`. A missing or `null` `data` reads as `{}`.
    pub fn data_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, Error> {
        let text = match self.data() {
            Some(raw) if !raw.is_null() => raw.as_str(),
            _ => "{}",
        };
        serde_json::from_str(text)
            .map_err(|e| Error::Deserialize(alloc::string::ToString::to_string(&e)))
    }

    /// `meta`, when it is an object.
    pub fn meta(&self) -> Option<&Object> {
        self.members.iter().find_map(|(k, v)| match v {
            Member::Meta(object) if k.is("meta") => Some(object),
            _ => None,
        })
    }

    /// `meta`, mutably, when it is an object.
    pub fn meta_mut(&mut self) -> Option<&mut Object> {
        self.verified = Verified(false);
        self.members.iter_mut().find_map(|(k, v)| match v {
            Member::Meta(object) if k.is("meta") => Some(object),
            _ => None,
        })
    }

    fn meta_string(&self, key: &str) -> Option<Cow<'_, str>> {
        self.meta()?.get(key)?.as_string()
    }

    /// `meta.id`, the message id (the idempotency key), when it is a string.
    pub fn message_id(&self) -> Option<Cow<'_, str>> {
        self.meta_string("id")
    }

    /// `meta.queue`, the queue the producer addressed, when it is a string.
    pub fn queue(&self) -> Option<Cow<'_, str>> {
        self.meta_string("queue")
    }

    /// `meta.lang`, the producing SDK, when it is a string.
    pub fn lang(&self) -> Option<Cow<'_, str>> {
        self.meta_string("lang")
    }

    /// `meta.schema_version`, when it is an integer.
    pub fn schema_version(&self) -> Option<i64> {
        self.meta()?.get("schema_version")?.as_i64()
    }

    /// `meta.created_at` (epoch milliseconds), when it is an integer.
    pub fn created_at(&self) -> Option<i64> {
        self.meta()?.get("created_at")?.as_i64()
    }

    /// `attempts` as an integer: 0 when it is missing, `null`, or not a 64-bit integer.
    pub fn attempts(&self) -> i64 {
        self.raw("attempts").and_then(RawJson::as_i64).unwrap_or(0)
    }

    /// Sets `attempts`.
    pub fn set_attempts(&mut self, attempts: i64) {
        // An integer `attempts` keeps a verified envelope verified.
        let verified = self.verified;
        self.set("attempts", RawJson::integer(attempts));
        self.verified = verified;
    }

    /// The raw `dead_letter` block, on dead-letter copies.
    pub fn dead_letter(&self) -> Option<&RawJson> {
        self.raw("dead_letter")
    }

    /// Whether a consumer should accept this envelope: a URN resolves; `meta` is an object whose
    /// `schema_version` is the integer 1; `data` is an object; `attempts` is an integer;
    /// `trace_id` is a string that is not ASCII-blank.
    ///
    /// A library check: the runtime dispatches well-typed bodies without calling it (schema
    /// versions are gated by transport headers), as every BabelQueue SDK does.
    pub fn accepts(&self) -> bool {
        if self.urn().is_empty() {
            return false;
        }
        if self.schema_version() != Some(SCHEMA_VERSION) {
            return false;
        }
        if self.data().map(RawJson::kind) != Some(JsonKind::Object) {
            return false;
        }
        if !self.raw("attempts").is_some_and(RawJson::is_integer) {
            return false;
        }
        self.trace_id().is_some_and(|t| !ascii::is_blank(&t))
    }
}

impl fmt::Debug for Envelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = String::new();
        self.write_into(&mut text);
        write!(f, "Envelope({text})")
    }
}

// --------------------------------------------------------------------------------------------
// Builder
