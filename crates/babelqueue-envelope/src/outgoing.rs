//! The producer's half of the strict verdict: a body goes out only if every consumer would read
//! it.
//!
//! A consumer classifies each delivery with [`poison_cause`] and dead-letters a poison body
//! without ever handing it to a handler; on the Laravel layout a Laravel worker's own scripts
//! even lose such a job. So a producer runs the same verdict before it sends, and a refusal
//! names the member at fault (`data.x: 1e400 is not a finite number`).

use alloc::string::String;
use core::fmt;

use crate::json::path;
use crate::json::{JsonKind, is_finite_double};
use crate::verdict::{PoisonCause, poison_cause};

/// Why a body may not be published: the cause the consumers' verdict would report, and for a
/// number that is not a finite double, which member holds it and its literal.
///
/// ```
/// use babelqueue_envelope::check_publishable;
///
/// let refused = check_publishable(br#"{"job":"urn:x","data":{"x":1e400}}"#).unwrap_err();
/// assert_eq!(refused.to_string(), "data.x: 1e400 is not a finite number");
/// assert_eq!(refused.member(), Some("data.x"));
/// assert!(check_publishable(br#"{"job":"urn:x","data":{"x":1e300}}"#).is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpublishable {
    cause: PoisonCause,
    /// The member's dotted path and its literal.
    at: Option<(String, String)>,
}

impl Unpublishable {
    /// The cause a consumer's verdict reports for this body.
    pub fn cause(&self) -> &PoisonCause {
        &self.cause
    }

    /// The dotted path of the member at fault (`data.items[2].n`), when one member is.
    pub fn member(&self) -> Option<&str> {
        match (&self.cause, &self.at) {
            (_, Some((member, _))) => Some(member),
            (PoisonCause::WrongType { member, .. }, None) => Some(member),
            _ => None,
        }
    }

    /// The member's literal, for a number that is not a finite double (`1e400`).
    pub fn literal(&self) -> Option<&str> {
        self.at.as_ref().map(|(_, literal)| literal.as_str())
    }
}

impl fmt::Display for Unpublishable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.at {
            Some((member, literal)) => write!(f, "{member}: {literal} is not a finite number"),
            None => fmt::Display::fmt(&self.cause, f),
        }
    }
}

/// Whether `body` may be published: `Ok` exactly when the consumers' strict verdict
/// ([`poison_cause`] with an identity required) finds nothing, else what it found, with the
/// member named.
pub fn check_publishable(body: &[u8]) -> Result<(), Unpublishable> {
    match poison_cause(body, true) {
        None => Ok(()),
        Some(PoisonCause::NonFiniteNumber) => Err(Unpublishable {
            at: first_non_finite(body),
            cause: PoisonCause::NonFiniteNumber,
        }),
        Some(cause) => Err(Unpublishable { cause, at: None }),
    }
}

/// The path and literal of the first number inside a top-level `data` member that is not a
/// finite double (every occurrence of a repeated `data` is looked at, as the verdict does).
fn first_non_finite(body: &[u8]) -> Option<(String, String)> {
    let text = core::str::from_utf8(body).ok()?;
    let in_data = |p: &str| {
        p.strip_prefix("data")
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    };
    path::walk(text, "", &mut |v| {
        (v.kind == JsonKind::Number && in_data(v.path) && !is_finite_double(v.literal.as_bytes()))
            .then(|| (String::from(v.path), String::from(v.literal)))
    })
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Expected;
    use alloc::string::ToString;

    #[test]
    fn the_refusal_names_the_member_and_its_literal() {
        let rows: [(&str, &str, &str); 6] = [
            (r#"{"job":"urn:x","data":{"x":1e400}}"#, "data.x", "1e400"),
            (
                r#"{"job":"urn:x","data":{"items":[1,{"n":-1E+309}]}}"#,
                "data.items[1].n",
                "-1E+309",
            ),
            (
                r#"{"job":"urn:x","data":{"a b":{"c":[[1e999]]}}}"#,
                r#"data["a b"].c[0][0]"#,
                "1e999",
            ),
            // Every occurrence of a repeated `data` is checked, the first one too.
            (
                r#"{"job":"urn:x","data":{"x":1e400},"data":{}}"#,
                "data.x",
                "1e400",
            ),
            // A number outside `data` is the contract's business, not this rule's.
            (
                r#"{"job":"urn:x","meta":{"n":1e400},"data":{"y":2e400}}"#,
                "data.y",
                "2e400",
            ),
            (
                r#"{"job":"urn:x","data":{"ok":1e308,"big":123456789012345678901234567890,"no":1.8e308}}"#,
                "data.no",
                "1.8e308",
            ),
        ];
        for (body, member, literal) in rows {
            let refused = check_publishable(body.as_bytes()).expect_err(body);
            assert_eq!(refused.member(), Some(member), "{body}");
            assert_eq!(refused.literal(), Some(literal), "{body}");
            assert_eq!(
                refused.to_string(),
                alloc::format!("{member}: {literal} is not a finite number")
            );
        }
    }

    #[test]
    fn every_other_poison_cause_is_refused_with_the_verdicts_words() {
        let rows: [(&[u8], Option<&str>); 5] = [
            (br#"{"job":"urn:x","attempts":1.0}"#, Some("attempts")),
            (
                br#"{"job":"urn:x","meta":{"created_at":"now"}}"#,
                Some("meta.created_at"),
            ),
            (br#"{"data":{}}"#, None),
            (b"\xff{}", None),
            (br#"{"job":"urn:x","data":{"x":1e400}"#, None),
        ];
        for (body, member) in rows {
            let refused = check_publishable(body).expect_err("poison");
            assert_eq!(
                Some(refused.cause()),
                poison_cause(body, true).as_ref(),
                "{refused}"
            );
            assert_eq!(refused.member(), member);
            assert_eq!(refused.to_string(), refused.cause().to_string());
        }
        let wrong = check_publishable(br#"{"job":"urn:x","attempts":"1"}"#).unwrap_err();
        assert_eq!(
            wrong.cause(),
            &PoisonCause::WrongType {
                member: "attempts",
                expected: Expected::Int64
            }
        );
    }

    #[test]
    fn a_built_envelope_is_checked_again_once_it_changed() {
        use crate::{Envelope, Error, RawJson};
        let built = || {
            Envelope::builder("urn:x")
                .data_raw(RawJson::parse(r#"{"n":1}"#).expect("JSON"))
                .build_with(&mut || [7; 16], 1)
                .expect("built")
        };
        let refused = |envelope: &Envelope| match envelope.encode_checked() {
            Err(Error::Unpublishable(refused)) => refused.to_string(),
            other => panic!("not refused: {other:?}"),
        };
        let mut attempts = built();
        attempts.set_attempts(3);
        assert!(attempts.encode_checked().is_ok());

        let mut data = built();
        data.set("data", RawJson::parse(r#"{"n":1e400}"#).expect("JSON"));
        assert_eq!(refused(&data), "data.n: 1e400 is not a finite number");

        let mut meta = built();
        if let Some(meta) = meta.meta_mut() {
            meta.insert("queue", RawJson::integer(7));
        }
        assert_eq!(
            refused(&meta),
            "member 'meta.queue' must be a string or null"
        );

        let mut removed = built();
        removed.remove("job");
        assert_eq!(
            refused(&removed),
            "the body carries no valid 'job' or 'urn' identity"
        );

        let poisoned = Envelope::builder("urn:x")
            .data_raw(RawJson::parse(r#"{"a":[1,-2e308]}"#).expect("JSON"))
            .build_with(&mut || [7; 16], 1)
            .expect("the codec itself accepts the object");
        assert_eq!(
            refused(&poisoned),
            "data.a[1]: -2e308 is not a finite number"
        );
    }

    #[test]
    fn what_a_consumer_reads_may_be_published() {
        for body in [
            r#"{"job":"urn:x"}"#,
            r#"{"job":"urn:x","data":{"x":1e-400,"y":-0,"z":12345678901234567890}}"#,
            r#"{"urn":"urn:x","data":null,"attempts":null}"#,
        ] {
            assert_eq!(check_publishable(body.as_bytes()), Ok(()), "{body}");
        }
    }
}
