//! Attribute reads through Artemis's management address, for [`Client::read_attributes`].
//!
//! A request is a message to [`MANAGEMENT_ADDRESS`] with the application properties
//! `_AMQ_ResourceName` (`queue.<name>`) and `_AMQ_Attribute`, and a `reply-to` address. The
//! reply-to is a dynamic receiver this read attaches for itself (Artemis creates a temporary
//! queue for it and deletes it when the link closes), so replies never mix with another
//! client's. The sender link to the management address is attached for the read too, without
//! the `queue` capability (the management address is not a queue the transport owns), and both
//! links are closed after it, also when it fails or times out.

use fe2o3_amqp::types::messaging::{ApplicationProperties, Header, Message, Properties};
use fe2o3_amqp::types::primitives::SimpleValue;

use super::*;
use crate::client::ManagementReply;

/// Artemis's default management address.
pub(crate) const MANAGEMENT_ADDRESS: &str = "activemq.management";

/// The reply property that says whether the request succeeded.
const SUCCEEDED_PROPERTY: &str = "_AMQ_OperationSucceeded";

impl AmqpClient {
    /// See [`Client::read_attributes`]: the whole exchange is bounded by the operation timeout.
    pub(super) async fn management_read(
        &self,
        resource: &str,
        attributes: &[&str],
    ) -> Result<Vec<ManagementReply>, ArtemisError> {
        let live = self.live().await?;
        let (sender, receiver) = self.management_links(&live).await?;
        let mut links = (Some(sender), Some(receiver));
        let exchange = async {
            let (Some(sender), Some(receiver)) = (links.0.as_mut(), links.1.as_mut()) else {
                return Err(self.connection_error("the management links are gone"));
            };
            let reply_to = receiver
                .source()
                .as_ref()
                .and_then(|source| source.address.clone())
                .ok_or_else(|| ArtemisError::Management {
                    request: resource.to_owned(),
                    reason: "the broker gave the dynamic reply receiver no address".to_owned(),
                })?;
            let credit = u32::try_from(attributes.len()).unwrap_or(u32::MAX);
            receiver
                .set_credit(credit)
                .await
                .map_err(|e| self.connection_error(format!("granting reply credit: {e}")))?;
            for (n, attribute) in attributes.iter().enumerate() {
                let request = request(resource, attribute, &reply_to, n as u64);
                let sendable = Sendable::builder().message(request).settled(false).build();
                let outcome = sender.send_ref(&sendable).await.map_err(|e| {
                    self.connection_error(format!("sending a management request: {e}"))
                })?;
                if !matches!(outcome, Outcome::Accepted(_)) {
                    return Err(ArtemisError::NotAccepted {
                        address: MANAGEMENT_ADDRESS.to_owned(),
                        outcome: format!("{outcome:?}"),
                    });
                }
            }
            let mut replies: Vec<Option<ManagementReply>> = vec![None; attributes.len()];
            for _ in attributes {
                let delivery = receiver
                    .recv::<Body<Value>>()
                    .await
                    .map_err(|e| self.connection_error(format!("receiving a reply: {e}")))?;
                receiver
                    .accept(&delivery)
                    .await
                    .map_err(|e| self.connection_error(format!("accepting a reply: {e}")))?;
                let (_, message) = delivery.into_parts();
                let (index, reply) = reply(&message);
                if let Some(slot) = index.and_then(|i| replies.get_mut(i)) {
                    *slot = Some(reply);
                }
            }
            replies
                .into_iter()
                .zip(attributes)
                .map(|(reply, attribute)| {
                    reply.ok_or_else(|| ArtemisError::Management {
                        request: format!("{resource}.{attribute}"),
                        reason: "no reply carried this request's correlation id".to_owned(),
                    })
                })
                .collect()
        };
        let result = match tokio::time::timeout(OPERATION_TIMEOUT, exchange).await {
            Ok(result) => result,
            Err(_) => Err(ArtemisError::Timeout(OPERATION_TIMEOUT)),
        };
        // Closing the reply receiver deletes its temporary queue; a close that does not
        // finish in time is left to the broker (it deletes the queue with the connection).
        let closing = async {
            if let Some(receiver) = links.1.take() {
                let _ = receiver.close().await;
            }
            if let Some(sender) = links.0.take() {
                let _ = sender.close().await;
            }
        };
        if tokio::time::timeout(OPERATION_TIMEOUT, closing)
            .await
            .is_err()
        {
            tracing::debug!(target: LOG, "closing the management links timed out");
        }
        if matches!(result, Err(ArtemisError::Connection { .. })) {
            live.mark_broken("a management request failed");
        }
        result
    }

    /// A sender to the management address and a dynamic receiver for the replies.
    async fn management_links(&self, live: &Live) -> Result<(Sender, Receiver), ArtemisError> {
        let mut session = live.session.lock().await;
        let attaching = async {
            let sender = Sender::builder()
                .name(self.link_name("manage", MANAGEMENT_ADDRESS))
                .target(MANAGEMENT_ADDRESS)
                .attach(&mut session)
                .await
                .map_err(|e| {
                    self.attach_error(
                        live,
                        MANAGEMENT_ADDRESS,
                        &e.to_string(),
                        remote_refusal_sender(&e),
                    )
                })?;
            let receiver = Receiver::builder()
                .name(self.link_name("reply", MANAGEMENT_ADDRESS))
                .source(Source::builder().dynamic(true).build())
                .credit_mode(CreditMode::Manual)
                .auto_accept(false)
                .attach(&mut session)
                .await
                .map_err(|e| {
                    self.attach_error(
                        live,
                        "a dynamic reply queue",
                        &e.to_string(),
                        remote_refusal_receiver(&e),
                    )
                })?;
            Ok::<_, ArtemisError>((sender, receiver))
        };
        match tokio::time::timeout(OPERATION_TIMEOUT, attaching).await {
            Ok(links) => links,
            Err(_) => {
                live.mark_broken("attaching the management links timed out");
                Err(ArtemisError::Timeout(OPERATION_TIMEOUT))
            }
        }
    }
}

/// The request reading `attribute` of `resource`, its replies sent to `reply_to`, with message
/// id `n` (Artemis copies it into the reply's correlation id).
fn request(resource: &str, attribute: &str, reply_to: &str, n: u64) -> AmqpMessage {
    let mut application = ApplicationProperties::default();
    application.0.insert(
        "_AMQ_ResourceName".to_owned(),
        SimpleValue::String(resource.to_owned()),
    );
    application.0.insert(
        "_AMQ_Attribute".to_owned(),
        SimpleValue::String(attribute.to_owned()),
    );
    Message {
        header: Some(Header::default()),
        delivery_annotations: None,
        message_annotations: None,
        properties: Some(Properties {
            message_id: Some(fe2o3_amqp::types::messaging::MessageId::Ulong(n)),
            reply_to: Some(reply_to.to_owned()),
            ..Properties::default()
        }),
        application_properties: Some(application),
        body: Body::Empty,
        footer: None,
    }
}

/// The request index a reply answers (its correlation id) and what it says.
fn reply(message: &AmqpMessage) -> (Option<usize>, ManagementReply) {
    use fe2o3_amqp::types::messaging::MessageId;
    let index = match message
        .properties
        .as_ref()
        .and_then(|p| p.correlation_id.as_ref())
    {
        Some(MessageId::Ulong(n)) => usize::try_from(*n).ok(),
        Some(MessageId::String(text)) => text.parse().ok(),
        _ => None,
    };
    let succeeded = message
        .application_properties
        .as_ref()
        .and_then(|p| p.0.get(SUCCEEDED_PROPERTY))
        .is_some_and(|v| matches!(v, SimpleValue::Bool(true)));
    let body = String::from_utf8_lossy(&crate::projection::body_bytes(&message.body)).into_owned();
    (index, ManagementReply { succeeded, body })
}
