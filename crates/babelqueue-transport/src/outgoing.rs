//! [`Outgoing`]: one request to send a body, with every part a broker may carry beside it, and
//! [`Sends`]: which of those parts a transport honours.
//!
//! The runtime builds one request for every write (a producer's publish, a retry copy, a
//! dead-letter record, a redrive) and sends it through [`Transport::send`](crate::Transport::send).
//! It reads the transport's [`Sends`] first and leaves out, or refuses, every part the transport
//! does not honour, so a transport's `send` only ever sees parts it declared: it carries them
//! all together, in any combination.

use std::time::Duration;

use crate::delivery::{Facts, Headers};

/// A body to append to a queue, and what should ride with it.
///
/// Built with [`Outgoing::new`] and the setters; a transport reads the fields.
///
/// ```
/// use std::time::Duration;
/// use babelqueue_transport::{Headers, Outgoing};
///
/// let headers = Headers::from([("traceparent".to_owned(), "00-…-01".to_owned())]);
/// let request = Outgoing::new("orders", b"{}").headers(&headers).delay(Duration::from_secs(5));
/// assert_eq!(request.queue, "orders");
/// assert!(request.headers.is_some() && request.facts.is_none() && request.key.is_none());
/// assert!(!request.is_plain());
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Outgoing<'a> {
    /// The queue to append to.
    pub queue: &'a str,
    /// The body, sent byte for byte.
    pub body: &'a [u8],
    /// Out-of-band headers beside the body (`traceparent`, `bq-replay-bypass` …); never inside
    /// it. `None` when there are none.
    pub headers: Option<&'a Headers>,
    /// The out-of-band facts a consumed delivery carried (its `bq-job` URN, its schema-version
    /// property), to carry again as the broker carried them, so the next hop reads the copy the
    /// same way.
    pub facts: Option<&'a Facts>,
    /// Deliverable only after this delay.
    pub delay: Option<Duration>,
    /// The record key, as the consumed record carried it (`Some(b"")` stays empty).
    pub key: Option<&'a [u8]>,
}

impl<'a> Outgoing<'a> {
    /// `body` for `queue`, with nothing beside it.
    pub fn new(queue: &'a str, body: &'a [u8]) -> Outgoing<'a> {
        Outgoing {
            queue,
            body,
            headers: None,
            facts: None,
            delay: None,
            key: None,
        }
    }

    /// With out-of-band headers.
    #[must_use]
    pub fn headers(mut self, headers: &'a Headers) -> Outgoing<'a> {
        self.headers = Some(headers);
        self
    }

    /// Carrying the out-of-band facts of a consumed delivery.
    #[must_use]
    pub fn facts(mut self, facts: &'a Facts) -> Outgoing<'a> {
        self.facts = Some(facts);
        self
    }

    /// Deliverable after `delay`.
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Outgoing<'a> {
        self.delay = Some(delay);
        self
    }

    /// With a record key (`None` keeps a null key null).
    #[must_use]
    pub fn key(mut self, key: Option<&'a [u8]>) -> Outgoing<'a> {
        self.key = key;
        self
    }

    /// Nothing beside the body: what [`Transport::publish`](crate::Transport::publish) sends.
    pub fn is_plain(&self) -> bool {
        self.headers.is_none() && self.facts.is_none() && self.delay.is_none() && self.key.is_none()
    }
}

/// The parts of an [`Outgoing`] request a transport honours, declared with
/// [`Capabilities::sends`](crate::Capabilities::sends). Nothing but the body by default.
///
/// A part declared is a promise to carry it in every combination with the other declared
/// parts. The runtime decides what happens to a part that is not declared (left out, or the
/// request refused before anything is sent); the transport never sees it.
///
/// ```
/// use babelqueue_transport::Sends;
///
/// let sends = Sends::body_only().headers().delay();
/// assert!(sends.headers && sends.delay && !sends.facts && !sends.key && !sends.confirmed);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sends {
    /// Out-of-band headers ride beside the body and reach the consumer.
    pub headers: bool,
    /// A body can be made deliverable after a delay. A delay the broker cannot honour (too
    /// long, finer than its unit, on a queue kind without delays) is refused by the transport
    /// with an error, before anything is sent, never truncated.
    pub delay: bool,
    /// The out-of-band facts of a consumed delivery are carried again as the broker carried
    /// them (Pulsar's `bq-job` property, a schema-version property).
    pub facts: bool,
    /// A record key is carried as given (null stays null, empty stays empty).
    pub key: bool,
    /// Every send returns only once the broker confirmed the write (a publisher confirm, an
    /// `acks=all` produce). The runtime then writes a copy on behalf of a delivery as a settle
    /// write: straight to the queue named, at once, with the delivery's key where keys are
    /// honoured and without its carried facts. Brokers whose acknowledgement is a position
    /// (Kafka) need it: the original is committed only after that write.
    pub confirmed: bool,
}

impl Sends {
    /// The body alone: what [`Transport::publish`](crate::Transport::publish) carries.
    pub fn body_only() -> Sends {
        Sends::default()
    }

    /// Declares headers ([`Sends::headers`]).
    #[must_use]
    pub fn headers(mut self) -> Sends {
        self.headers = true;
        self
    }

    /// Declares delays ([`Sends::delay`]).
    #[must_use]
    pub fn delay(mut self) -> Sends {
        self.delay = true;
        self
    }

    /// Declares carried facts ([`Sends::facts`]).
    #[must_use]
    pub fn facts(mut self) -> Sends {
        self.facts = true;
        self
    }

    /// Declares record keys ([`Sends::key`]).
    #[must_use]
    pub fn key(mut self) -> Sends {
        self.key = true;
        self
    }

    /// Declares confirmed settle writes ([`Sends::confirmed`]).
    #[must_use]
    pub fn confirmed(mut self) -> Sends {
        self.confirmed = true;
        self
    }

    /// The first part of `outgoing` these declarations do not cover, named for an error
    /// message; `None` when every part is honoured.
    pub fn first_unhonoured(&self, outgoing: &Outgoing<'_>) -> Option<&'static str> {
        [
            (outgoing.headers.is_some() && !self.headers, "headers"),
            (outgoing.delay.is_some() && !self.delay, "a delay"),
            (outgoing.facts.is_some() && !self.facts, "carried facts"),
            (outgoing.key.is_some() && !self.key, "a record key"),
        ]
        .into_iter()
        .find_map(|(missing, part)| missing.then_some(part))
    }
}
