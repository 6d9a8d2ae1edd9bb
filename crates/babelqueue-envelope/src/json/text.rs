//! [`Text`]: the storage behind [`RawJson`](super::RawJson) and [`Key`](super::Key).
//!
//! A decode copies the body once into one shared buffer, and every member, key and value read
//! from it is a slice of that buffer: cloning one is a reference-count increment, not a copy.
//! Values the codec builds itself (an `attempts` counted up, a minified value) own their text,
//! and the names and literals the codec writes most are static.

use alloc::string::String;
use alloc::sync::Arc;
use core::hash::{Hash, Hasher};
use core::ops::Deref;

/// Immutable UTF-8 text: static, owned, or a slice of a shared decoded body.
#[derive(Clone)]
pub(crate) struct Text(Repr);

#[derive(Clone)]
enum Repr {
    Static(&'static str),
    Owned(String),
    Slice {
        source: Arc<str>,
        start: usize,
        end: usize,
    },
}

impl Text {
    pub(crate) const fn from_static(text: &'static str) -> Text {
        Text(Repr::Static(text))
    }

    pub(crate) fn owned(text: String) -> Text {
        Text(Repr::Owned(text))
    }

    /// `source[start..end]`, sharing `source` (the range must lie on character boundaries).
    pub(crate) fn slice(source: &Arc<str>, start: usize, end: usize) -> Text {
        debug_assert!(source.is_char_boundary(start) && source.is_char_boundary(end));
        Text(Repr::Slice {
            source: Arc::clone(source),
            start,
            end,
        })
    }

    pub(crate) fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Static(text) => text,
            Repr::Owned(text) => text,
            Repr::Slice { source, start, end } => &source[*start..*end],
        }
    }

    pub(crate) fn into_string(self) -> String {
        match self.0 {
            Repr::Owned(text) => text,
            _ => String::from(self.as_str()),
        }
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Text {
    /// The bytes of the text: for a slice, without the character-boundary checks of `as_str`
    /// (comparing bytes needs none, and equal bytes are equal text).
    #[inline]
    fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Static(text) => text.as_bytes(),
            Repr::Owned(text) => text.as_bytes(),
            Repr::Slice { source, start, end } => {
                source.as_bytes().get(*start..*end).unwrap_or(&[])
            }
        }
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Text {}

impl Hash for Text {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_reads_and_compares_as_its_text() {
        let source: Arc<str> = Arc::from(r#"{"job":"urn:x"}"#);
        let slice = Text::slice(&source, 2, 5);
        assert_eq!(slice.as_str(), "job");
        assert!(slice == Text::from_static("job"));
        assert!(slice == Text::owned(String::from("job")));
        assert_eq!(slice.clone().into_string(), "job");
        assert_eq!(Arc::strong_count(&source), 2);
        drop(slice);
        assert_eq!(Arc::strong_count(&source), 1);
    }
}
