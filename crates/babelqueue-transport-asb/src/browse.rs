//! [`AmqpServiceBus`]'s peek: the [`peek`](crate::peek) request sent on the entity's
//! `<entity>/$management` node with `fe2o3-amqp-management`, page after page.
//!
//! Each browse attaches a management link pair of its own (after putting the entity's token on
//! `$cbs`) and closes it at the end: a browse is rare (`babelqueue dlq list`), and no lock or
//! receiver of the consume path is touched.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fe2o3_amqp::types::messaging::{ApplicationProperties, Message};
use fe2o3_amqp::types::primitives::{OrderedMap, SimpleValue, Value};
use fe2o3_amqp_management::client::MgmtClient;
use fe2o3_amqp_management::error::{Error as MgmtError, InvalidType, StatusCodeNotFound};
use fe2o3_amqp_management::mgmt_ext::AmqpMessageManagementExt;
use fe2o3_amqp_management::request::Request;
use fe2o3_amqp_management::response::Response;

use crate::client::AmqpServiceBus;
use crate::error::AsbError;
use crate::peek::{self, PEEK_OPERATION, PeekRequest, Peeked};

/// How long the namespace may take to answer one page.
const PAGE_TIMEOUT: Duration = Duration::from_secs(60);

/// Distinguishes the reply addresses of concurrent browses.
static NEXT_BROWSE: AtomicU64 = AtomicU64::new(1);

struct PeekCall(PeekRequest);

impl Request for PeekCall {
    const OPERATION: &'static str = PEEK_OPERATION;
    type Response = PeekAnswer;
    type Body = OrderedMap<Value, Value>;

    fn encode_application_properties(&mut self) -> Option<ApplicationProperties> {
        let millis = u32::try_from(PAGE_TIMEOUT.as_millis()).unwrap_or(u32::MAX);
        let mut map = OrderedMap::new();
        map.insert(
            "com.microsoft:server-timeout".to_owned(),
            SimpleValue::Uint(millis),
        );
        Some(ApplicationProperties(map))
    }

    fn encode_body(self) -> Self::Body {
        self.0.body()
    }
}

/// The answer as received: its status (200 and 204 are both answers), description and body.
struct PeekAnswer {
    status: u16,
    description: Option<String>,
    body: Value,
}

impl Response for PeekAnswer {
    const STATUS_CODE: u16 = 200;
    type Body = Value;
    type Error = MgmtError;

    fn decode_message(message: Message<Value>) -> Result<Self, Self::Error> {
        PeekAnswer::from_message(message)
    }

    fn from_message(mut message: Message<Value>) -> Result<Self, Self::Error> {
        let status = match message.remove_status_code() {
            Some(Ok(code)) => code.0.get(),
            Some(Err(actual)) => {
                return Err(InvalidType {
                    expected: "status code".into(),
                    actual: format!("{actual:?}"),
                }
                .into());
            }
            None => return Err(StatusCodeNotFound {}.into()),
        };
        let description = message.remove_status_description().and_then(Result::ok);
        Ok(PeekAnswer {
            status,
            description,
            body: message.body,
        })
    }
}

impl AmqpServiceBus {
    /// Up to `max` bodies of `queue` (all when 0), peeked without locking.
    pub(crate) async fn peek_bodies(
        &self,
        queue: &str,
        max: usize,
    ) -> Result<Vec<Vec<u8>>, AsbError> {
        let client = {
            let mut link = self.link.lock().await;
            self.authorize(&mut link, queue).await?;
            let n = NEXT_BROWSE.fetch_add(1, Ordering::Relaxed);
            MgmtClient::builder()
                .management_node_address(format!("{queue}/$management"))
                .client_node_addr(format!("babelqueue-peek-{}-{n}", std::process::id()))
                .attach(&mut link.session)
                .await
                .map_err(|e| AsbError::Rejected(format!("attaching to {queue}/$management: {e}")))?
        };
        let client = tokio::sync::Mutex::new(client);
        let result = peek::browse_pages(max, |request| {
            let client = &client;
            async move { page(&mut *client.lock().await, queue, request).await }
        })
        .await;
        let _ = client.into_inner().close().await;
        result
    }
}

async fn page(
    client: &mut MgmtClient,
    queue: &str,
    request: PeekRequest,
) -> Result<Vec<Peeked>, AsbError> {
    let answer: PeekAnswer = tokio::time::timeout(PAGE_TIMEOUT, client.call(PeekCall(request)))
        .await
        .map_err(|_| AsbError::Timeout(format!("peeking {queue}")))?
        .map_err(|e| AsbError::Connection(format!("peeking {queue}: {e}")))?;
    peek::decode_response(
        answer.status,
        answer.description.as_deref(),
        Some(&answer.body),
    )
    .map_err(|e| match e {
        AsbError::Rejected(why) => AsbError::Rejected(format!("peeking {queue}: {why}")),
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_message_names_the_operation_and_carries_the_map() {
        let request = PeekRequest {
            from_sequence_number: 42,
            message_count: 10,
        };
        let message = PeekCall(request).into_message();
        let properties = message.application_properties.as_ref().unwrap();
        assert_eq!(
            properties.get("operation"),
            Some(&SimpleValue::String(PEEK_OPERATION.into()))
        );
        assert_eq!(
            properties.get("com.microsoft:server-timeout"),
            Some(&SimpleValue::Uint(60_000))
        );
        assert_eq!(
            PeekRequest::from_body(&Value::Map(message.body)),
            Some(request)
        );
    }

    fn answer(status: i32, body: Value) -> Message<Value> {
        let mut properties = OrderedMap::new();
        properties.insert("statusCode".to_owned(), SimpleValue::Int(status));
        properties.insert(
            "statusDescription".to_owned(),
            SimpleValue::String("why".into()),
        );
        Message::builder()
            .application_properties(ApplicationProperties(properties))
            .body(body)
            .build()
    }

    #[test]
    fn answers_keep_their_status_and_body() {
        let encoded = peek::encode_message(7, b"body").unwrap();
        let ok = PeekAnswer::from_message(answer(200, peek::response_body(&[encoded]))).unwrap();
        assert_eq!(ok.status, 200);
        let peeked = peek::decode_response(ok.status, None, Some(&ok.body)).unwrap();
        assert_eq!(peeked[0].body, b"body");
        // 204 and a refusal are answers too, not transport errors
        let none = PeekAnswer::from_message(answer(204, Value::Null)).unwrap();
        assert_eq!(none.status, 204);
        let missing = PeekAnswer::from_message(answer(404, Value::Null)).unwrap();
        assert_eq!(
            (missing.status, missing.description.as_deref()),
            (404, Some("why"))
        );
        let no_status = Message::builder().body(Value::Null).build();
        assert!(PeekAnswer::from_message(no_status).is_err());
    }
}
