//! Table names: validated once, always quoted in SQL.

use std::fmt;

use crate::error::Error;

/// A table name, optionally schema-qualified (`babelqueue_outbox`, `app.outbox`).
///
/// Each part is an identifier of ASCII letters, digits and underscores that does not start
/// with a digit, at most 63 bytes (PostgreSQL's limit). Names are always double-quoted in SQL,
/// so their case is kept.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Table {
    schema: Option<String>,
    name: String,
}

fn identifier(part: &str, whole: &str) -> Result<String, Error> {
    let valid = !part.is_empty()
        && part.len() <= 63
        && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !part.as_bytes()[0].is_ascii_digit();
    if valid {
        Ok(part.to_owned())
    } else {
        Err(Error::Config(format!(
            "table name {whole:?}: use [schema.]name, each part made of ASCII letters, digits and \
             underscores, not starting with a digit, at most 63 bytes"
        )))
    }
}

impl Table {
    /// Parses `[schema.]name`.
    pub fn parse(text: &str) -> Result<Table, Error> {
        match text.split_once('.') {
            Some((schema, name)) => Ok(Table {
                schema: Some(identifier(schema, text)?),
                name: identifier(name, text)?,
            }),
            None => Ok(Table {
                schema: None,
                name: identifier(text, text)?,
            }),
        }
    }

    /// The table name without its schema.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name of a companion object (an index) in the same schema: `<name>_<suffix>`, cut to
    /// PostgreSQL's 63-byte limit.
    pub(crate) fn companion(&self, suffix: &str) -> String {
        let mut name = format!("{}_{suffix}", self.name);
        name.truncate(63);
        format!("\"{name}\"")
    }
}

impl fmt::Display for Table {
    /// The quoted name, as it goes into SQL.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.schema {
            Some(schema) => write!(f, "\"{schema}\".\"{}\"", self.name),
            None => write!(f, "\"{}\"", self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_and_quoted() {
        assert_eq!(
            Table::parse("babelqueue_outbox").unwrap().to_string(),
            "\"babelqueue_outbox\""
        );
        let t = Table::parse("App.Outbox_2").unwrap();
        assert_eq!(t.to_string(), "\"App\".\"Outbox_2\"");
        assert_eq!(t.companion("pending_idx"), "\"Outbox_2_pending_idx\"");
        for bad in [
            "",
            "a.b.c",
            "1abc",
            "a-b",
            "a\"b",
            "x;drop table y",
            ".x",
            "x.",
            "é",
        ] {
            assert!(Table::parse(bad).is_err(), "{bad:?}");
        }
        assert!(Table::parse(&"a".repeat(63)).is_ok());
        assert!(Table::parse(&"a".repeat(64)).is_err());
        assert_eq!(
            Table::parse(&"a".repeat(63))
                .unwrap()
                .companion("idx")
                .len(),
            65
        );
    }
}
