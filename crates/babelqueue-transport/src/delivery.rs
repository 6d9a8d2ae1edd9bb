//! [`Delivery`]: one message a transport handed out, and the [`Facts`] its broker reported
//! about it.
//!
//! A transport describes; it never decides. It says what the broker carried beside the body
//! (an out-of-band URN, the schema-version property, a delivery count and how that count relates
//! to the body's `attempts`, the queue a retried record was first published to …) and the
//! runtime alone turns those facts into a verdict and a settle plan.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

use babelqueue_envelope::gate::GateValue;

/// Out-of-band headers that ride beside the envelope (never inside it): `traceparent`,
/// `bq-replay-bypass`, … String keys and values.
pub type Headers = BTreeMap<String, String>;

/// The schema-version property as the broker carried it: the input of the version gate, which
/// the runtime applies before anything decodes the body.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub enum Declared {
    /// The broker carries no such property (the default; also every header-less broker).
    #[default]
    Absent,
    /// A present property holding null.
    Null,
    /// A string property, exactly as carried (never trimmed).
    Text(String),
    /// An integral property (any AMQP width, signed or unsigned).
    Integer(i128),
    /// A floating-point property.
    Float(f64),
    /// A boolean property.
    Bool(bool),
}

impl Declared {
    /// The value the gate reads.
    pub fn gate_value(&self) -> GateValue<'_> {
        match self {
            Declared::Absent => GateValue::Absent,
            Declared::Null => GateValue::Null,
            Declared::Text(text) => GateValue::Text(text),
            Declared::Integer(n) => GateValue::Integer(*n),
            Declared::Float(f) => GateValue::Float(*f),
            Declared::Bool(b) => GateValue::Bool(*b),
        }
    }

    /// The declared version the gate rejects, or `None` when the delivery may be decoded (see
    /// [`gated`](babelqueue_envelope::gate::gated)).
    pub fn rejected(&self) -> Option<String> {
        babelqueue_envelope::gate::gated(self.gate_value())
    }
}

/// What the broker knows about how often a message was delivered, and how that count
/// reconciles with the body's `attempts` (the runtime applies the rule, see
/// `babelqueue_core::attempts`).
///
/// A closed set, not `#[non_exhaustive]`: the runtime applies a rule to every variant, so a new
/// kind of count is a change of the contract, made in both crates at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// The broker counts earlier deliveries, 0 on the first (SQS `ApproximateReceiveCount - 1`,
    /// Service Bus `DeliveryCount - 1`, Artemis `delivery-count`): `attempts` is raised to at
    /// least this count, never lowered.
    Redelivered(i64),
    /// The broker carries an authoritative attempts count out of band (the Kafka `bq-attempts`
    /// header): `attempts` is set to it, whatever the body says.
    Carried(i64),
    /// A carried count when there is a valid one, else the body's integer `attempts`, then
    /// raised to the broker's redelivery count (Pulsar: `bq-attempts` and the redelivery
    /// count). A body without an integer `attempts` is left as it is.
    CarriedOrBody {
        /// The carried count, when valid.
        carried: Option<i64>,
        /// The broker's redelivery count (0 on the first delivery).
        redelivered: i64,
    },
}

impl Count {
    /// The deliveries the broker knows of without reading the body: what a poison body is
    /// counted by, and what the handler context's `native_attempts`
    /// reports.
    pub fn native(&self) -> i64 {
        match *self {
            Count::Redelivered(n) | Count::Carried(n) => n,
            Count::CarriedOrBody {
                carried,
                redelivered,
            } => carried.unwrap_or(0).max(redelivered),
        }
        .max(0)
    }
}

/// Everything a transport reports about a delivery beside its body and headers. Each fact has
/// a neutral default, so a transport whose broker says nothing sets none of them.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Facts {
    /// A URN the broker carried out of band (the Pulsar `bq-job` property): a readable body is
    /// routed by it instead of its own `job`. Never rescues an unreadable body.
    pub urn: Option<String>,
    /// The schema-version property, for the gate.
    pub declared_version: Declared,
    /// The broker's delivery count and its reconciliation rule.
    pub count: Option<Count>,
    /// The queue the message was first published to, when the broker carried it (the Kafka
    /// `bq-original-topic` header of a record re-injected from a retry tier): the
    /// `original_queue` of its poison record. The consumed queue when `None`.
    pub original_queue: Option<String>,
    /// The binding dead-letters a poison body in every configuration: neither
    /// `on_unknown_urn = delete` nor dead-lettering off drops it, and it is never retried (a
    /// Redis reservation has nowhere else to go).
    pub poison_always_dead_lettered: bool,
    /// The broker could not count this delivery's attempt (the Laravel reserve script reserved
    /// the raw job because cjson could not read its `attempts`): the delivery is treated as
    /// poison whatever its body says.
    pub attempts_not_counted: bool,
}

/// One message a transport handed out, held until the runtime settles it.
pub struct Delivery {
    body: Bytes,
    queue: Arc<str>,
    headers: Headers,
    /// What the broker reported beside the body, boxed (`None`: no fact and no key, as from
    /// memory://): a delivery is moved several times on its way through the runtime, and a
    /// pointer moves faster than the hundred-odd bytes of `Facts` (one allocation per
    /// delivery that has any, against a `memcpy` call per move).
    rare: Option<Box<Rare>>,
    handle: Box<dyn Any + Send + Sync>,
}

/// The parts of a [`Delivery`] a transport may leave at their default.
#[derive(Default)]
struct Rare {
    facts: Facts,
    key: Option<Vec<u8>>,
}

/// The facts of a delivery its transport reported none of.
static NO_FACTS: Facts = Facts {
    urn: None,
    declared_version: Declared::Absent,
    count: None,
    original_queue: None,
    poison_always_dead_lettered: false,
    attempts_not_counted: false,
};

impl Delivery {
    /// A delivery of `body` consumed from `queue`, with no headers and no facts. A `Vec<u8>`
    /// or a [`Bytes`] is taken without a copy, and so is an `Arc<str>` queue name (a transport
    /// that keeps its queue's name in one hands out clones of it: no allocation per message).
    pub fn new(queue: impl Into<Arc<str>>, body: impl Into<Bytes>) -> Delivery {
        Delivery {
            body: body.into(),
            queue: queue.into(),
            headers: Headers::new(),
            rare: None,
            handle: Box::new(()),
        }
    }

    /// Attaches the out-of-band headers the broker carried.
    #[must_use]
    pub fn with_headers(mut self, headers: Headers) -> Delivery {
        self.headers = headers;
        self
    }

    /// Attaches every fact at once.
    #[must_use]
    pub fn with_facts(mut self, facts: Facts) -> Delivery {
        self.rare_mut().facts = facts;
        self
    }

    /// Sets the URN the broker carried out of band ([`Facts::urn`]), as carried (the runtime
    /// trims it when it routes); blank is none.
    #[must_use]
    pub fn with_urn(mut self, urn: impl Into<String>) -> Delivery {
        let urn = urn.into();
        self.rare_mut().facts.urn = (!babelqueue_envelope::ascii::is_blank(&urn)).then_some(urn);
        self
    }

    /// Sets the schema-version property as carried ([`Facts::declared_version`]).
    #[must_use]
    pub fn with_declared_version(mut self, declared: Declared) -> Delivery {
        self.rare_mut().facts.declared_version = declared;
        self
    }

    /// Sets the broker's delivery count ([`Facts::count`]).
    #[must_use]
    pub fn with_count(mut self, count: Count) -> Delivery {
        self.rare_mut().facts.count = Some(count);
        self
    }

    /// Sets the queue the message was first published to ([`Facts::original_queue`]).
    #[must_use]
    pub fn with_original_queue(mut self, queue: impl Into<String>) -> Delivery {
        self.rare_mut().facts.original_queue = Some(queue.into());
        self
    }

    /// Marks a poison body as dead-lettered in every configuration
    /// ([`Facts::poison_always_dead_lettered`]).
    #[must_use]
    pub fn poison_always_dead_lettered(mut self) -> Delivery {
        self.rare_mut().facts.poison_always_dead_lettered = true;
        self
    }

    /// Marks the delivery's attempt as one the broker could not count
    /// ([`Facts::attempts_not_counted`]).
    #[must_use]
    pub fn attempts_not_counted(mut self) -> Delivery {
        self.rare_mut().facts.attempts_not_counted = true;
        self
    }

    /// Sets the broker record key (`None` = a null key; an empty key is a key).
    #[must_use]
    pub fn with_key(mut self, key: Option<Vec<u8>>) -> Delivery {
        if key.is_some() || self.rare.is_some() {
            self.rare_mut().key = key;
        }
        self
    }

    fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// Attaches the transport's own settle handle (a receipt, a delivery tag, an offset …).
    #[must_use]
    pub fn with_handle<T: Any + Send + Sync>(mut self, handle: T) -> Delivery {
        self.handle = Box::new(handle);
        self
    }

    /// The body, byte for byte as the broker carried it.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body as shared bytes (a cheap clone, no copy).
    pub fn bytes(&self) -> &Bytes {
        &self.body
    }

    /// The queue the delivery was consumed from.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The queue's name, shared (a clone is a reference-count increment).
    pub fn queue_shared(&self) -> &Arc<str> {
        &self.queue
    }

    /// The out-of-band headers.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// What the broker reported about the delivery.
    pub fn facts(&self) -> &Facts {
        self.rare.as_ref().map_or(&NO_FACTS, |rare| &rare.facts)
    }

    /// The broker record key, when the broker has keys.
    pub fn key(&self) -> Option<&[u8]> {
        self.rare.as_ref().and_then(|rare| rare.key.as_deref())
    }

    /// The transport's settle handle, when it is a `T`.
    pub fn handle<T: Any>(&self) -> Option<&T> {
        self.handle.downcast_ref()
    }
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("queue", &self.queue)
            .field("body", &String::from_utf8_lossy(&self.body))
            .field("headers", &self.headers)
            .field("facts", self.facts())
            .field("key", &self.key())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_counts_never_go_below_zero() {
        assert_eq!(Count::Redelivered(2).native(), 2);
        assert_eq!(Count::Carried(-3).native(), 0);
        let pulsar = |carried, redelivered| Count::CarriedOrBody {
            carried,
            redelivered,
        };
        assert_eq!(pulsar(Some(4), 1).native(), 4);
        assert_eq!(pulsar(None, 3).native(), 3);
        assert_eq!(pulsar(Some(1), 5).native(), 5);
    }

    #[test]
    fn a_delivery_without_facts_reads_the_defaults_and_stays_small() {
        let plain = Delivery::new("q", b"{}".to_vec()).with_key(None);
        assert_eq!(plain.facts(), &Facts::default());
        assert_eq!(plain.key(), None);
        assert!(plain.rare.is_none(), "no fact and no key: nothing boxed");
        // Moved from the transport to the runtime and through a dispatch several times: kept
        // within the size a move copies inline, without a call to memcpy.
        assert!(
            std::mem::size_of::<Delivery>() <= 128,
            "{} bytes",
            std::mem::size_of::<Delivery>()
        );
    }

    #[test]
    fn facts_and_key_set_in_any_order_are_all_kept() {
        let d = Delivery::new("q", b"{}".to_vec())
            .with_key(Some(b"k".to_vec()))
            .with_count(Count::Redelivered(2))
            .with_original_queue("first")
            .attempts_not_counted();
        assert_eq!(d.key(), Some(&b"k"[..]));
        assert_eq!(d.facts().count, Some(Count::Redelivered(2)));
        assert_eq!(d.facts().original_queue.as_deref(), Some("first"));
        assert!(d.facts().attempts_not_counted);
        let d = d.with_facts(Facts::default()).with_key(None);
        assert_eq!(d.facts(), &Facts::default());
        assert_eq!(d.key(), None);
        let d = Delivery::new("q", b"{}".to_vec())
            .with_urn("urn:x")
            .with_key(Some(Vec::new()));
        assert_eq!(d.key(), Some(&b""[..]), "an empty key is a key");
        assert_eq!(d.facts().urn.as_deref(), Some("urn:x"));
    }

    #[test]
    fn blank_out_of_band_urns_are_none() {
        let d = Delivery::new("q", b"{}".to_vec()).with_urn(" \t");
        assert_eq!(d.facts().urn, None);
        let d = Delivery::new("q", b"{}".to_vec()).with_urn("urn:x");
        assert_eq!(d.facts().urn.as_deref(), Some("urn:x"));
    }

    #[test]
    fn the_declared_version_goes_through_the_one_gate() {
        assert_eq!(Declared::Absent.rejected(), None);
        assert_eq!(Declared::Text("1".into()).rejected(), None);
        assert_eq!(Declared::Integer(1).rejected(), None);
        assert_eq!(Declared::Text(" 1".into()).rejected(), Some(" 1".into()));
        assert_eq!(Declared::Integer(2).rejected(), Some("2".into()));
    }
}
