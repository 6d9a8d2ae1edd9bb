use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use super::raw::{JsonKind, RawJson};
use super::scan::{self, Scanner};
use super::text::Text;
use super::write;

/// The member names of the envelope and of its `meta`, as written by every SDK.
const WELL_KNOWN: [&str; 10] = [
    "id",
    "job",
    "data",
    "meta",
    "lang",
    "queue",
    "trace_id",
    "attempts",
    "created_at",
    "schema_version",
];

/// The names of [`WELL_KNOWN`], in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    Id,
    Job,
    Data,
    Meta,
    Lang,
    Queue,
    TraceId,
    Attempts,
    CreatedAt,
    SchemaVersion,
}

const KNOWN: [Known; 10] = [
    Known::Id,
    Known::Job,
    Known::Data,
    Known::Meta,
    Known::Lang,
    Known::Queue,
    Known::TraceId,
    Known::Attempts,
    Known::CreatedAt,
    Known::SchemaVersion,
];

/// The members an object being decoded holds so far, as far as telling a new member from a
/// repeated one without comparing its key to every member: a member whose key is a plain
/// well-known name not seen before, when every member before it had such a key too, is new.
/// Any other key is compared to every member, as repeated names resolve last-wins.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    known: u16,
    other: bool,
}

impl Seen {
    /// Whether `key` certainly names no member seen before (then it is appended as is).
    pub(crate) fn is_new(&mut self, key: &Key) -> bool {
        if key.known == 0 {
            self.other = true;
            return false;
        }
        let bit = 1u16 << key.known;
        let new = !self.other && self.known & bit == 0;
        self.known |= bit;
        new
    }
}

/// The position in [`WELL_KNOWN`] of `name`, plus one.
fn well_known(name: &[u8]) -> Option<u8> {
    // Compared as fixed-size arrays: a word or two each, where a slice compare calls memcmp.
    fn is<const N: usize>(name: &[u8], index: u8) -> Option<u8> {
        let candidate: &[u8; N] = WELL_KNOWN[usize::from(index)].as_bytes().try_into().ok()?;
        (<&[u8; N]>::try_from(name).ok()? == candidate).then_some(index + 1)
    }
    match name.len() {
        2 => is::<2>(name, 0),
        3 => is::<3>(name, 1),
        4 => is::<4>(name, 2)
            .or_else(|| is::<4>(name, 3))
            .or_else(|| is::<4>(name, 4)),
        5 => is::<5>(name, 5),
        8 => is::<8>(name, 6).or_else(|| is::<8>(name, 7)),
        10 => is::<10>(name, 8),
        14 => is::<14>(name, 9),
        _ => None,
    }
}

/// A member name being looked up, with its position in [`WELL_KNOWN`] found once.
pub(crate) struct Name<'n> {
    text: &'n str,
    known: Option<u8>,
}

impl<'n> Name<'n> {
    pub(crate) fn new(text: &'n str) -> Name<'n> {
        Name {
            text,
            known: well_known(text.as_bytes()),
        }
    }
}

/// An object member name, kept as its escaped JSON text so it re-emits byte for byte.
///
/// Names compare by the UTF-16 code units they stand for (`"job"` and `"\u006aob"` are the same
/// member; `"\ud800"` and `"\udc00"`, two different lone surrogates, are not, although both
/// decode lossily to U+FFFD) and are case-sensitive (`"JOB"` is not `"job"`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Key {
    raw: Text,
    /// Whether `raw` holds no escape (then it is the name itself), found once at construction.
    plain: bool,
    /// For a plain key that is one of [`WELL_KNOWN`], its position plus one (else 0): two
    /// such keys are the same member exactly when their positions are, and such a key is
    /// never the same member as another plain key.
    known: u8,
}

impl Key {
    /// A key for `name` (escaped the way the codec writes strings).
    pub fn new(name: &str) -> Key {
        // One of the envelope's own names (plain ASCII, nothing to escape): its static text,
        // as a parse keeps it, with no allocation.
        if let Some(known) = well_known(name.as_bytes()) {
            return Key {
                raw: Text::from_static(WELL_KNOWN[usize::from(known - 1)]),
                plain: true,
                known,
            };
        }
        let mut raw = String::with_capacity(name.len());
        write::push_escaped(&mut raw, name);
        Key::from_text(Text::owned(raw))
    }

    fn from_text(raw: Text) -> Key {
        let plain = !raw.as_bytes().contains(&b'\\');
        let known = if plain {
            well_known(raw.as_bytes()).unwrap_or(0)
        } else {
            0
        };
        Key { raw, plain, known }
    }

    /// The key `s` read between `start` and `end` (a slice of its shared text, when it has one).
    ///
    /// A plain key that is one of the envelope's own names is kept as its static text instead:
    /// every body repeats the same ten or so, and a static name costs no reference count on the
    /// shared text (two atomic operations per key, for its life).
    pub(crate) fn scanned(s: &Scanner<'_>, span: scan::StrSpan) -> Key {
        if !span.escaped
            && let Some(known) = well_known(&s.text().as_bytes()[span.start..span.end])
        {
            return Key {
                raw: Text::from_static(WELL_KNOWN[usize::from(known - 1)]),
                plain: true,
                known,
            };
        }
        Key {
            raw: s.text_of(span.start, span.end),
            plain: !span.escaped,
            known: 0,
        }
    }

    /// For a plain key that is one of the envelope's own names, which one: the decode
    /// dispatches on it without comparing text again. `None` for any other key, and for an
    /// escaped spelling of an own name (`"\u006aob"`), which callers match by [`Key::name`].
    pub(crate) fn known(&self) -> Option<Known> {
        KNOWN.get(usize::from(self.known).checked_sub(1)?).copied()
    }

    /// The decoded member name.
    pub fn name(&self) -> Cow<'_, str> {
        if self.plain {
            Cow::Borrowed(&self.raw)
        } else {
            scan::unescape(&self.raw)
        }
    }

    /// The escaped text between the quotes, as written on the wire.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// [`Key::is`] for a name looked up among many keys, read once ([`Name::new`]): a plain
    /// key and a well-known name compare by their positions, without comparing text.
    pub(crate) fn is_name(&self, name: &Name<'_>) -> bool {
        match name.known {
            Some(known) if self.plain => self.known == known,
            _ => self.is(name.text),
        }
    }

    /// Whether this key names `name` (case-sensitive, after unescaping).
    pub fn is(&self, name: &str) -> bool {
        if self.plain {
            self.raw.as_str() == name
        } else {
            scan::code_units(&self.raw).eq(name.encode_utf16())
        }
    }

    /// Whether this key and `other` name the same member (equal code units).
    pub fn same_member(&self, other: &Key) -> bool {
        if self.plain && other.plain {
            if self.known != 0 || other.known != 0 {
                return self.known == other.known;
            }
            self.raw == other.raw
        } else {
            scan::code_units(&self.raw).eq(scan::code_units(&other.raw))
        }
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.raw.as_str())
    }
}

/// A JSON object as an ordered list of members, values kept as [`RawJson`].
///
/// Inserting a name that is already present replaces its value in place (the *last* value of a
/// repeated member wins, at the position of the first), which is how every BabelQueue SDK
/// resolves duplicate keys.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Object {
    entries: Vec<(Key, RawJson)>,
}

impl Object {
    /// An empty object.
    pub fn new() -> Object {
        Object {
            entries: Vec::new(),
        }
    }

    /// Parses a JSON object text; repeated names resolve last-wins.
    pub fn parse(text: &str) -> Result<Object, crate::Error> {
        let mut s = Scanner::new(text);
        s.start().map_err(crate::Error::InvalidJson)?;
        if s.peek() != Some(b'{') {
            let kind = scan::validate(text)
                .map_err(crate::Error::InvalidJson)?
                .kind;
            return Err(crate::Error::NotAnObject { found: kind });
        }
        s.pos += 1;
        let object = Object::read_members(&mut s, 1).map_err(crate::Error::InvalidJson)?;
        s.finish().map_err(crate::Error::InvalidJson)?;
        Ok(object)
    }

    /// Reads the members of an object whose `{` was consumed, at nesting level `depth`.
    pub(crate) fn read_members(
        s: &mut Scanner<'_>,
        depth: usize,
    ) -> Result<Object, scan::SyntaxError> {
        Object::read_members_visiting(s, depth, &mut |_, _| {})
    }

    /// [`Object::read_members`], showing `visit` each member's key and value as they are read
    /// (every occurrence of a repeated name, in order).
    pub(crate) fn read_members_visiting(
        s: &mut Scanner<'_>,
        depth: usize,
        visit: &mut dyn FnMut(&Key, &RawJson),
    ) -> Result<Object, scan::SyntaxError> {
        let mut object = Object {
            entries: Vec::with_capacity(8),
        };
        let mut first = true;
        let mut seen = Seen::default();
        while let Some(key) = s.next_key(first)? {
            first = false;
            let span = s.value(depth, &mut |_| {})?;
            let key = Key::scanned(s, key);
            let value = RawJson::scanned(s, span);
            visit(&key, &value);
            if seen.is_new(&key) {
                object.entries.push((key, value));
            } else {
                object.insert_key(key, value);
            }
        }
        Ok(object)
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the object has no member.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value of member `name`.
    pub fn get(&self, name: &str) -> Option<&RawJson> {
        let name = Name::new(name);
        self.entries
            .iter()
            .find(|(k, _)| k.is_name(&name))
            .map(|(_, v)| v)
    }

    /// Whether member `name` is present.
    pub fn contains_key(&self, name: &str) -> bool {
        let name = Name::new(name);
        self.entries.iter().any(|(k, _)| k.is_name(&name))
    }

    /// Sets member `name`: replaces its value in place when present, else appends it.
    /// Returns the previous value.
    pub fn insert(&mut self, name: &str, value: RawJson) -> Option<RawJson> {
        let known = Name::new(name);
        if let Some(slot) = self.entries.iter_mut().find(|(k, _)| k.is_name(&known)) {
            return Some(core::mem::replace(&mut slot.1, value));
        }
        self.entries.push((Key::new(name), value));
        None
    }

    pub(crate) fn insert_key(&mut self, key: Key, value: RawJson) {
        if let Some(slot) = self.entries.iter_mut().find(|(k, _)| k.same_member(&key)) {
            slot.1 = value;
            return;
        }
        self.entries.push((key, value));
    }

    /// Removes member `name`, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<RawJson> {
        let name = Name::new(name);
        let index = self.entries.iter().position(|(k, _)| k.is_name(&name))?;
        Some(self.entries.remove(index).1)
    }

    /// The members in order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &RawJson)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Appends the compact JSON text of the object to `out`.
    pub fn write_into(&self, out: &mut String) {
        out.push('{');
        for (i, (key, value)) in self.entries.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('"');
            out.push_str(key.raw());
            out.push_str("\":");
            out.push_str(value.as_str());
        }
        out.push('}');
    }

    /// The object as a [`RawJson`] value.
    pub fn to_raw(&self) -> RawJson {
        let mut text = String::new();
        self.write_into(&mut text);
        RawJson::from_owned(text, JsonKind::Object)
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.entries.iter().map(|(k, v)| (k, v)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_looked_up_matches_exactly_the_keys_that_spell_it() {
        // (key as written, name looked up, same member)
        let rows: [(&str, &str, bool); 12] = [
            ("job", "job", true),
            ("job", "data", false),
            ("jobs", "job", false),
            ("Job", "job", false),
            (r"\u006aob", "job", true),
            (r"\u006aob", "data", false),
            ("order_id", "order_id", true),
            ("order_id", "job", false),
            ("job", "order_id", false),
            (r"order\u005fid", "order_id", true),
            ("", "", true),
            ("schema_version", "schema_version", true),
        ];
        for (written, looked_up, same) in rows {
            let key = Key::from_text(Text::owned(String::from(written)));
            assert_eq!(
                key.is_name(&Name::new(looked_up)),
                same,
                "{written} / {looked_up}"
            );
            assert_eq!(key.is(looked_up), same, "{written} / {looked_up}");
        }
    }

    #[test]
    fn a_key_made_from_a_name_is_the_key_a_parse_reads() {
        // Every well-known name (kept as static text) and others (escaped as the codec writes).
        let names = WELL_KNOWN.iter().copied().chain([
            "order_id",
            "Job",
            "jobs",
            "",
            "a\"b",
            "line\nbreak",
            "é",
        ]);
        for name in names {
            let made = Key::new(name);
            let mut text = String::from("{");
            write::push_string(&mut text, name);
            text.push_str(":1}");
            let parsed = Object::parse(&text).unwrap();
            let (read, _) = parsed.iter().next().unwrap();
            assert_eq!(made.raw(), read.raw(), "{name:?}");
            assert_eq!(made.name(), read.name(), "{name:?}");
            assert_eq!(made.plain, read.plain, "{name:?}");
            assert_eq!(made.known, read.known, "{name:?}");
            assert!(made.is(name) && read.is(name), "{name:?}");
        }
    }

    #[test]
    fn a_repeated_name_is_never_taken_for_a_new_one_whatever_its_spelling() {
        let members = |text: &str| -> Vec<(String, String)> {
            Object::parse(text)
                .unwrap()
                .iter()
                .map(|(k, v)| (k.name().into_owned(), v.as_str().into()))
                .collect()
        };
        let pair = |k: &str, v: &str| (String::from(k), String::from(v));
        // Plain own names, each once: appended in order.
        assert_eq!(
            members(r#"{"id":1,"queue":2,"lang":3}"#),
            [pair("id", "1"), pair("queue", "2"), pair("lang", "3")]
        );
        // Repeated, plainly or escaped, before or after: the last value, at the first position.
        assert_eq!(
            members(r#"{"id":1,"queue":2,"id":3}"#),
            [pair("id", "3"), pair("queue", "2")]
        );
        assert_eq!(members(r#"{"\u0069d":1,"id":2}"#), [pair("id", "2")]);
        assert_eq!(members(r#"{"id":1,"\u0069d":2}"#), [pair("id", "2")]);
        assert_eq!(
            members(r#"{"x":0,"id":1,"queue":2,"id":3}"#),
            [pair("x", "0"), pair("id", "3"), pair("queue", "2")]
        );
        let mut seen = Seen::default();
        assert!(seen.is_new(&Key::new("id")));
        assert!(!seen.is_new(&Key::new("id")));
        assert!(
            !seen.is_new(&Key::new("x")),
            "another name is compared, never assumed new"
        );
        assert!(
            !seen.is_new(&Key::new("queue")),
            "nor is any name after one"
        );
    }

    #[test]
    fn the_envelope_s_own_names_hold_no_reference_to_the_body() {
        let source: alloc::sync::Arc<str> =
            alloc::sync::Arc::from(r#"{"meta":1,"queue":2,"\u006aob":3,"order_id":4}"#);
        let mut s = Scanner::shared(&source);
        s.start().unwrap();
        s.pos += 1;
        let mut keys = Vec::new();
        let mut first = true;
        while let Some(span) = s.next_key(first).unwrap() {
            first = false;
            keys.push(Key::scanned(&s, span));
            s.value(1, &mut |_| {}).unwrap();
        }
        let names: Vec<_> = keys.iter().map(|k| k.name().into_owned()).collect();
        assert_eq!(names, ["meta", "queue", "job", "order_id"]);
        assert_eq!(
            keys[2].raw(),
            "\\u006aob",
            "an escaped name keeps its wire text"
        );
        // Only the escaped `job` and the unknown `order_id` share the body.
        assert_eq!(alloc::sync::Arc::strong_count(&source), 3);
        assert!(keys[0].is("meta") && keys[0] == Key::new("meta"));
        assert!(keys[2].same_member(&Key::new("job")));
    }

    #[test]
    fn last_value_wins_at_first_position() {
        let o = Object::parse(r#"{"a":1,"b":2,"a":{"x":[1]}}"#).unwrap();
        let mut out = String::new();
        o.write_into(&mut out);
        assert_eq!(out, r#"{"a":{"x":[1]},"b":2}"#);
    }

    #[test]
    fn escaped_names_match_their_decoded_form() {
        let o = Object::parse(r#"{"\u006aob":"urn:x","JOB":1}"#).unwrap();
        assert_eq!(o.get("job").unwrap().as_str(), "\"urn:x\"");
        assert!(o.get("Job").is_none());
        let mut out = String::new();
        o.write_into(&mut out);
        assert_eq!(out, r#"{"\u006aob":"urn:x","JOB":1}"#);
    }

    #[test]
    fn different_lone_surrogates_are_different_members() {
        let text = r#"{"job":"urn:x","\ud800":1,"\udc00":2,"\ud800":3}"#;
        let o = Object::parse(text).unwrap();
        assert_eq!(o.len(), 3);
        let mut out = String::new();
        o.write_into(&mut out);
        assert_eq!(out, r#"{"job":"urn:x","\ud800":3,"\udc00":2}"#);
        assert!(
            !o.contains_key("\u{FFFD}"),
            "a lone surrogate is not U+FFFD"
        );
    }

    #[test]
    fn rejects_non_objects() {
        assert!(matches!(
            Object::parse("[]"),
            Err(crate::Error::NotAnObject { .. })
        ));
        assert!(matches!(
            Object::parse("{"),
            Err(crate::Error::InvalidJson(_))
        ));
    }
}
