//! What of an outgoing request reaches the transport: one pure table ([`shape`]), and the two
//! ways the runtime sends through it ([`publish`] for a producer, [`on_behalf`] for a copy of a
//! consumed delivery).
//!
//! A transport declares the parts of an [`Outgoing`] request it honours ([`Sends`]); the
//! runtime, never the transport, decides what happens to a part it does not: left out, or the
//! request refused before anything is sent. The transport's `send` then only sees parts it
//! declared.

use std::fmt;
use std::time::Duration;

use crate::delivery::{Declared, Delivery, Facts};
use crate::error::{Error, TransportError};
use crate::transport::{Outgoing, Sends, Transport};

/// Why a request is sent: the rules differ for a producer's message and a copy the runtime
/// writes while settling a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A producer's publish (`App::publish*`, the outbox, the CLI, a redrive's bypass).
    Publish,
    /// A copy written on behalf of a consumed delivery: a retry, a release, a dead-letter
    /// record, a redrive (or its restore).
    OnBehalf,
}

/// A request refused before anything was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A producer asked for a delay and the transport declares none: sending the message at
    /// once would deliver it early.
    Delay,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Delay => f.write_str("cannot delay a message (it declares no delay)"),
        }
    }
}

/// Whether `facts` hold anything that rides out of band and must ride again on a copy: an
/// out-of-band URN or a schema-version property. A delivery without either is copied as a
/// plain body, exactly as it would be published.
pub fn carries_facts(facts: &Facts) -> bool {
    facts.urn.is_some() || facts.declared_version != Declared::Absent
}

/// Whether a copy on behalf of a delivery (a retry as a copy, a release) keeps its delay on a
/// transport that declares `sends`: it must declare delays and not write copies as confirmed
/// settle writes ([`shape`]). The runtime warns at start-up when it does not and a back-off is
/// configured.
pub fn copies_delayed(sends: Sends) -> bool {
    sends.delay && !sends.confirmed
}

/// The request to send for `asked`, given what the transport declares, or why none is sent.
///
/// | purpose | part asked | declared | result |
/// |---|---|---|---|
/// | any | headers | yes | carried |
/// | any | headers | no | left out (a header never enters the body) |
/// | publish | delay (zero included) | yes | carried (the transport refuses one its broker cannot honour) |
/// | publish | delay | no | [`Refused::Delay`] |
/// | on behalf | delay | yes, not `confirmed` | carried; a zero delay is left out |
/// | on behalf | delay | no, or `confirmed` | left out: the copy goes at once |
/// | any | facts carrying nothing ([`carries_facts`]) | - | left out |
/// | publish | facts | yes | carried |
/// | on behalf | facts | yes, not `confirmed` | carried |
/// | any | facts | no, or `confirmed` on behalf | left out |
/// | any | key | yes | carried as given |
/// | any | key | no | left out |
///
/// A `confirmed` transport writes a copy on behalf of a delivery as a settle write, straight to
/// the queue named and at once (see [`Sends::confirmed`]): the original is committed only after
/// that write, so it must be the record itself on the queue named, where Kafka's delay would
/// park it on a retry tier instead.
pub fn shape<'a>(
    purpose: Purpose,
    asked: &Outgoing<'a>,
    sends: Sends,
) -> Result<Outgoing<'a>, Refused> {
    let settle_write = purpose == Purpose::OnBehalf && sends.confirmed;
    let mut out = Outgoing::new(asked.queue, asked.body);
    if let Some(headers) = asked.headers.filter(|_| sends.headers) {
        out = out.headers(headers);
    }
    if let Some(delay) = asked.delay {
        match purpose {
            Purpose::Publish if sends.delay => out = out.delay(delay),
            Purpose::Publish => return Err(Refused::Delay),
            Purpose::OnBehalf if copies_delayed(sends) && !delay.is_zero() => {
                out = out.delay(delay);
            }
            Purpose::OnBehalf => {}
        }
    }
    if let Some(facts) = asked.facts
        && sends.facts
        && !settle_write
        && carries_facts(facts)
    {
        out = out.facts(facts);
    }
    if sends.key {
        out = out.key(asked.key);
    }
    Ok(out)
}

/// Sends a producer's request through `transport`, with the parts it does not honour left out
/// or the request refused ([`shape`]), as an [`Error::Config`] naming the transport.
pub async fn publish(transport: &dyn Transport, asked: &Outgoing<'_>) -> Result<(), Error> {
    let outgoing = shape(
        Purpose::Publish,
        asked,
        transport.capabilities().send_parts(),
    )
    .map_err(|refused| Error::Config(format!("the {} transport {refused}", transport.name())))?;
    Ok(transport.send(&outgoing).await?)
}

/// Sends `body` to `queue` on behalf of `delivery` (a retry, a release, a dead-letter record, a
/// redrive or its restore): with the out-of-band facts the delivery carried and its key, and
/// deliverable after `delay`, as far as the transport honours them ([`shape`]). A transport
/// that cannot delay sends the copy at once (the runtime warns about it at start-up when a
/// back-off is configured).
pub async fn on_behalf(
    transport: &dyn Transport,
    delivery: &Delivery,
    queue: &str,
    body: &[u8],
    delay: Option<Duration>,
) -> Result<(), TransportError> {
    let mut asked = Outgoing::new(queue, body)
        .facts(delivery.facts())
        .key(delivery.key());
    if let Some(delay) = delay {
        asked = asked.delay(delay);
    }
    copy(transport, &asked).await
}

/// Sends `asked` as a copy on behalf of a consumed delivery ([`Purpose::OnBehalf`]), with the
/// parts the transport does not honour left out ([`shape`]).
pub async fn copy(transport: &dyn Transport, asked: &Outgoing<'_>) -> Result<(), TransportError> {
    let outgoing = shape(
        Purpose::OnBehalf,
        asked,
        transport.capabilities().send_parts(),
    )
    .map_err(|refused| {
        TransportError::unsupported(format!("the {} transport {refused}", transport.name()))
    })?;
    transport.send(&outgoing).await
}

#[cfg(test)]
mod tests;
