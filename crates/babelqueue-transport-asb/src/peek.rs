//! Browsing without locking: Service Bus's `com.microsoft:peek-message` management operation,
//! encoded and decoded here without any I/O (the client sends it on the entity's
//! `<entity>/$management` node).
//!
//! * The request's application property `operation` is [`PEEK_OPERATION`]; its body is an AMQP
//!   map `{"from-sequence-number": long, "message-count": int}`.
//! * The answer's `statusCode` is 200 with the body `{"messages": [{"message": binary}, …]}`,
//!   each binary a whole encoded AMQP message whose message annotation
//!   `x-opt-sequence-number` is its sequence number; 204 when no message is at or after the
//!   asked sequence number.
//! * [`browse_pages`] asks page after page, each from the last sequence number seen + 1, until
//!   `max` bodies (all when 0) or an empty page.
//!
//! The dead-letter sub-queue of queue `Q` is the entity `Q/$deadletterqueue`.

use std::future::Future;

use fe2o3_amqp::types::messaging::annotations::OwnedKey;
use fe2o3_amqp::types::messaging::message::__private::{Deserializable, Serializable};
use fe2o3_amqp::types::messaging::{Body, Message, MessageAnnotations};
use fe2o3_amqp::types::primitives::{Binary, OrderedMap, Value};

use crate::error::AsbError;

/// The management operation that reads messages without locking them.
pub const PEEK_OPERATION: &str = "com.microsoft:peek-message";

/// The message annotation carrying a message's sequence number.
pub const SEQUENCE_NUMBER: &str = "x-opt-sequence-number";

/// How many messages one peek asks for at most.
pub const PAGE: usize = 100;

/// The path of a queue's dead-letter sub-queue.
///
/// ```
/// assert_eq!(babelqueue_transport_asb::peek::dead_letter_path("orders"), "orders/$deadletterqueue");
/// ```
pub fn dead_letter_path(queue: &str) -> String {
    format!("{queue}/$deadletterqueue")
}

/// One peek: `message_count` messages from `from_sequence_number` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeekRequest {
    /// The first sequence number wanted.
    pub from_sequence_number: i64,
    /// How many messages, at most.
    pub message_count: i32,
}

impl PeekRequest {
    /// The request body: `{"from-sequence-number": long, "message-count": int}`.
    pub fn body(&self) -> OrderedMap<Value, Value> {
        let mut map = OrderedMap::new();
        map.insert(
            Value::String("from-sequence-number".into()),
            Value::Long(self.from_sequence_number),
        );
        map.insert(
            Value::String("message-count".into()),
            Value::Int(self.message_count),
        );
        map
    }

    /// Reads a request body back (what a namespace, or a test, sees).
    pub fn from_body(body: &Value) -> Option<PeekRequest> {
        let Value::Map(map) = body else { return None };
        let from_sequence_number = match field(map, "from-sequence-number")? {
            Value::Long(n) => *n,
            _ => return None,
        };
        let message_count = match field(map, "message-count")? {
            Value::Int(n) => *n,
            _ => return None,
        };
        Some(PeekRequest {
            from_sequence_number,
            message_count,
        })
    }
}

/// A map's value under a string or symbol key.
fn field<'a>(map: &'a OrderedMap<Value, Value>, key: &str) -> Option<&'a Value> {
    map.iter().find_map(|(k, v)| match k {
        Value::String(s) if s == key => Some(v),
        Value::Symbol(s) if s.as_str() == key => Some(v),
        _ => None,
    })
}

/// One peeked message: its sequence number and its body bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peeked {
    /// `x-opt-sequence-number`.
    pub sequence_number: i64,
    /// The body (the data sections, concatenated).
    pub body: Vec<u8>,
}

/// Encodes a message as the peek answer carries it: `body` in one data section, and the
/// sequence number annotation (the inverse of [`decode_message`], for tests and fakes).
pub fn encode_message(sequence_number: i64, body: &[u8]) -> Result<Vec<u8>, AsbError> {
    let mut annotations = MessageAnnotations::default();
    annotations.insert(SEQUENCE_NUMBER.into(), Value::Long(sequence_number));
    let message = Message::builder()
        .message_annotations(annotations)
        .data(Binary::from(body.to_vec()))
        .build();
    serde_amqp::to_vec(&Serializable(message))
        .map_err(|e| AsbError::Client(format!("encoding a message: {e}")))
}

/// Decodes one encoded AMQP message of a peek answer.
pub fn decode_message(bytes: &[u8]) -> Result<Peeked, AsbError> {
    let Deserializable(message): Deserializable<Message<Body<Value>>> =
        serde_amqp::from_slice(bytes).map_err(|e| {
            AsbError::Client(format!("a peeked message is not an AMQP message: {e}"))
        })?;
    let sequence_number = message
        .message_annotations
        .as_ref()
        .and_then(|a| {
            a.iter().find_map(|(k, v)| match (k, v) {
                (OwnedKey::Symbol(key), Value::Long(n)) if key.as_str() == SEQUENCE_NUMBER => {
                    Some(*n)
                }
                _ => None,
            })
        })
        .ok_or_else(|| {
            AsbError::Client(format!("a peeked message carries no {SEQUENCE_NUMBER}"))
        })?;
    Ok(Peeked {
        sequence_number,
        body: crate::client::body_bytes(message.body),
    })
}

/// The answer's body for `messages` (the inverse of [`decode_response`]'s 200 case).
pub fn response_body(messages: &[Vec<u8>]) -> Value {
    let list = messages
        .iter()
        .map(|m| {
            let mut entry = OrderedMap::new();
            entry.insert(
                Value::String("message".into()),
                Value::Binary(Binary::from(m.clone())),
            );
            Value::Map(entry)
        })
        .collect();
    let mut body = OrderedMap::new();
    body.insert(Value::String("messages".into()), Value::List(list));
    Value::Map(body)
}

/// Reads a peek answer: `status` (`statusCode`), `description` (`statusDescription`) and the
/// body. 200: the messages in order; 204: none; 401/403: an auth error; 404: the entity does
/// not exist (refused); 5xx, 429: transient; anything else refused.
pub fn decode_response(
    status: u16,
    description: Option<&str>,
    body: Option<&Value>,
) -> Result<Vec<Peeked>, AsbError> {
    let what = || {
        format!(
            "{PEEK_OPERATION} answered {status}: {}",
            description.unwrap_or("")
        )
    };
    match status {
        200 => {}
        204 => return Ok(Vec::new()),
        401 | 403 => return Err(AsbError::Auth(what())),
        429 | 500.. => return Err(AsbError::Connection(what())),
        _ => return Err(AsbError::Rejected(what())),
    }
    let Some(Value::Map(map)) = body else {
        return Err(AsbError::Client(format!(
            "{PEEK_OPERATION} answered 200 without a map body"
        )));
    };
    let Some(Value::List(messages)) = field(map, "messages") else {
        return Err(AsbError::Client(format!(
            "{PEEK_OPERATION} answered 200 without a messages list"
        )));
    };
    messages
        .iter()
        .map(|entry| match entry {
            Value::Map(entry) => match field(entry, "message") {
                Some(Value::Binary(bytes)) => decode_message(bytes.as_ref()),
                _ => Err(AsbError::Client(
                    "a peeked entry has no message binary".into(),
                )),
            },
            _ => Err(AsbError::Client("a peeked entry is not a map".into())),
        })
        .collect()
}

/// Up to `max` bodies (all when 0), asking `page` for [`PAGE`] messages at most at a time, each
/// page from the sequence number after the last one seen; stops at an empty page, or at a page
/// that brings nothing past what was seen (so a namespace that repeats itself cannot loop).
pub async fn browse_pages<F, Fut>(max: usize, mut page: F) -> Result<Vec<Vec<u8>>, AsbError>
where
    F: FnMut(PeekRequest) -> Fut,
    Fut: Future<Output = Result<Vec<Peeked>, AsbError>>,
{
    let mut bodies = Vec::new();
    let mut from: i64 = 0;
    loop {
        let wanted = if max == 0 {
            PAGE
        } else {
            (max - bodies.len()).min(PAGE)
        };
        let request = PeekRequest {
            from_sequence_number: from,
            message_count: i32::try_from(wanted).unwrap_or(i32::MAX),
        };
        let mut progressed = false;
        for peeked in page(request).await? {
            if peeked.sequence_number < from {
                continue;
            }
            from = peeked.sequence_number.saturating_add(1);
            progressed = true;
            bodies.push(peeked.body);
            if max != 0 && bodies.len() >= max {
                return Ok(bodies);
            }
        }
        if !progressed {
            return Ok(bodies);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use babelqueue_core::TransportErrorKind;

    #[test]
    fn the_request_body_round_trips() {
        let request = PeekRequest {
            from_sequence_number: 1 << 40,
            message_count: 7,
        };
        let body = Value::Map(request.body());
        assert_eq!(PeekRequest::from_body(&body), Some(request));
        // through the wire encoding too, with the AMQP types kept (a long and an int)
        let bytes = serde_amqp::to_vec(&body).unwrap();
        let back: Value = serde_amqp::from_slice(&bytes).unwrap();
        assert_eq!(PeekRequest::from_body(&back), Some(request));
        let Value::Map(map) = &back else {
            panic!("{back:?}")
        };
        assert_eq!(
            field(map, "from-sequence-number"),
            Some(&Value::Long(1 << 40))
        );
        assert_eq!(field(map, "message-count"), Some(&Value::Int(7)));
        // an int where a long belongs is not this request
        let mut wrong = request.body();
        wrong.insert(Value::String("from-sequence-number".into()), Value::Int(1));
        assert_eq!(PeekRequest::from_body(&Value::Map(wrong)), None);
    }

    #[test]
    fn a_response_with_two_messages() {
        let bodies: [&[u8]; 2] = [br#"{"job":"urn:a"}"#, b"\xffnot json"];
        let encoded: Vec<Vec<u8>> = bodies
            .iter()
            .zip([17, 18])
            .map(|(b, n)| encode_message(n, b).unwrap())
            .collect();
        // the encoded message is a real AMQP message: annotations, then a data section
        assert_eq!(&encoded[0][..3], &[0x00, 0x53, 0x72]);
        let body = response_body(&encoded);
        let wire: Value = serde_amqp::from_slice(&serde_amqp::to_vec(&body).unwrap()).unwrap();
        let peeked = decode_response(200, None, Some(&wire)).unwrap();
        assert_eq!(
            peeked,
            [
                Peeked {
                    sequence_number: 17,
                    body: bodies[0].to_vec()
                },
                Peeked {
                    sequence_number: 18,
                    body: bodies[1].to_vec()
                },
            ]
        );
    }

    #[test]
    fn no_messages_and_refusals() {
        assert_eq!(decode_response(204, None, None).unwrap(), []);
        let missing = decode_response(
            404,
            Some("The messaging entity 'x' could not be found"),
            None,
        )
        .unwrap_err();
        assert_eq!(missing.kind(), TransportErrorKind::Rejected);
        assert!(
            missing.to_string().contains("could not be found"),
            "{missing}"
        );
        assert_eq!(
            decode_response(401, None, None).unwrap_err().kind(),
            TransportErrorKind::Auth
        );
        assert!(decode_response(503, None, None).unwrap_err().is_transient());
        assert!(decode_response(200, None, None).is_err());
        assert!(decode_response(200, None, Some(&Value::Map(OrderedMap::new()))).is_err());
        assert!(decode_message(b"garbage").is_err());
        // a message without its sequence number cannot be paged past
        let plain = serde_amqp::to_vec(&Serializable(
            Message::builder().data(Binary::from(b"x".to_vec())).build(),
        ))
        .unwrap();
        assert!(decode_message(&plain).is_err());
    }

    /// A namespace of `count` messages with sequence numbers 10, 11, …, answering each page
    /// by sequence number and recording the requests.
    fn namespace(count: i64) -> (Mutex<Vec<PeekRequest>>, impl Fn(PeekRequest) -> Vec<Peeked>) {
        let answer = move |request: PeekRequest| {
            (10..10 + count)
                .filter(|n| *n >= request.from_sequence_number)
                .take(usize::try_from(request.message_count).unwrap())
                .map(|n| Peeked {
                    sequence_number: n,
                    body: format!("m{n}").into_bytes(),
                })
                .collect()
        };
        (Mutex::new(Vec::new()), answer)
    }

    #[tokio::test]
    async fn pages_follow_the_sequence_numbers_until_max() {
        let (asked, answer) = namespace(250);
        let bodies = browse_pages(230, |r| {
            asked.lock().unwrap().push(r);
            let page = answer(r);
            async move { Ok(page) }
        })
        .await
        .unwrap();
        assert_eq!(bodies.len(), 230);
        assert_eq!(bodies[0], b"m10");
        assert_eq!(bodies[229], b"m239");
        let asked: Vec<(i64, i32)> = asked
            .lock()
            .unwrap()
            .iter()
            .map(|r| (r.from_sequence_number, r.message_count))
            .collect();
        assert_eq!(asked, [(0, 100), (110, 100), (210, 30)]);

        // 0 = all: until an empty page (the namespace's 204)
        let (asked, answer) = namespace(150);
        let bodies = browse_pages(0, |r| {
            asked.lock().unwrap().push(r);
            let page = answer(r);
            async move { Ok(page) }
        })
        .await
        .unwrap();
        assert_eq!(bodies.len(), 150);
        assert_eq!(
            asked.lock().unwrap().len(),
            3,
            "100, 50, then the empty page"
        );
    }

    #[tokio::test]
    async fn a_page_that_repeats_itself_ends_the_browse() {
        let mut calls = 0;
        let bodies = browse_pages(0, |_| {
            calls += 1;
            async {
                Ok(vec![Peeked {
                    sequence_number: 5,
                    body: b"same".to_vec(),
                }])
            }
        })
        .await
        .unwrap();
        assert_eq!(bodies, [b"same".to_vec()]);
        assert_eq!(calls, 2);
        let error = browse_pages(3, |_| async { Err(AsbError::Connection("down".into())) })
            .await
            .unwrap_err();
        assert!(error.is_transient());
    }
}
