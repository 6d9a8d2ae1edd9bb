//! What Redis can say of a delivery, for tools that show the wire ([`Inspector`]).
//!
//! Redis keeps jobs as values in lists and sorted sets: a message has no id of its own, and
//! Redis never says whether it handed a value out before. What a delivery can show is its
//! reservation, all of it already in the delivery's handle and only formatted here:
//!
//! | property | layout | value |
//! |---|---|---|
//! | `layout` | both | `reliable` or `laravel` |
//! | `processing_list` | reliable | the list holding the reserved value (`<queue>:processing`) |
//! | `deadlines_set` | reliable | the sorted set scoring `<token>:<value>` by its deadline |
//! | `reservation_token` | reliable | the 32 hex digits before the `:` of that member |
//! | `reserved_set` | laravel | the sorted set scoring the reserved member by its deadline |
//! | `reservation_deadline` | both | the member's score: whole epoch seconds, when known |
//!
//! The deadline is left out when the reservation never lapses (recovery off, a score of
//! `+inf`), lapses in the second it is made (`retry_after=0`), or was not made by this
//! transport ([`RedisTransport::reservation`]). The view has no id and no `redelivered`.

use babelqueue_core::{BrokerView, Delivery, Inspector};

use crate::{Handle, Held, RedisTransport};

impl Inspector for RedisTransport {
    fn inspect(&self, delivery: &Delivery) -> BrokerView {
        let Some(held) = delivery.handle::<Held>() else {
            return BrokerView::new();
        };
        let (o, queue) = (&self.options, delivery.queue());
        let view = match &held.handle {
            Handle::Reliable { token, .. } => BrokerView::new()
                .property("layout", "reliable")
                .property("processing_list", o.processing(queue))
                .property("deadlines_set", o.deadlines(queue))
                .property("reservation_token", token.as_str()),
            Handle::Laravel { .. } => BrokerView::new()
                .property("layout", "laravel")
                .property("reserved_set", o.reserved(queue)),
        };
        match held.deadline {
            Some(deadline) => view.property("reservation_deadline", deadline.to_string()),
            None => view,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use async_trait::async_trait;
    use babelqueue_core::Transport;

    use super::*;
    use crate::client::{RedisClient, Reply};
    use crate::layout::{Layout, RedisOptions};
    use crate::scripts::LuaScript;
    use crate::{RedisError, scripts};

    /// A Redis that answers each reserve script with one reservation, as the server would, and
    /// keeps the reliable reserve's arguments (the deadline score and the tokens).
    #[derive(Debug, Default)]
    struct OneReservation {
        reserve_args: Mutex<Vec<Vec<u8>>>,
    }

    #[async_trait]
    impl RedisClient for OneReservation {
        async fn eval(
            &self,
            script: &'static LuaScript,
            _keys: Vec<Vec<u8>>,
            args: Vec<Vec<u8>>,
        ) -> Result<Reply, RedisError> {
            Ok(if std::ptr::eq(script, &scripts::RESERVE_LEGACY) {
                *self.reserve_args.lock().unwrap() = args;
                Reply::Array(vec![Reply::Bytes(br#"{"job":"urn:x"}"#.to_vec())])
            } else if std::ptr::eq(script, &scripts::RESERVE_ZSET) {
                Reply::Array(vec![
                    Reply::Bytes(br#"{"job":"urn:x","attempts":1}"#.to_vec()),
                    Reply::Bytes(br#"{"job":"urn:x","attempts":1}"#.to_vec()),
                ])
            } else {
                Reply::Int(0)
            })
        }
        async fn rpush(&self, _: &[u8], _: &[u8]) -> Result<(), RedisError> {
            Ok(())
        }
        async fn zadd(&self, _: &[u8], _: i64, _: &[u8]) -> Result<(), RedisError> {
            Ok(())
        }
        async fn zrem(&self, _: &[u8], _: &[u8]) -> Result<i64, RedisError> {
            Ok(0)
        }
        async fn lrange(&self, _: &[u8], _: i64, _: i64) -> Result<Vec<Vec<u8>>, RedisError> {
            Ok(Vec::new())
        }
        async fn blpop(&self, _: &[u8], _: Duration) -> Result<(), RedisError> {
            Ok(())
        }
        async fn quit(&self) -> Result<(), RedisError> {
            Ok(())
        }
    }

    fn transport(
        layout: Layout,
        retry_after: Option<u64>,
    ) -> (RedisTransport, Arc<OneReservation>) {
        let client = Arc::new(OneReservation::default());
        let options = RedisOptions {
            layout,
            retry_after,
            ..RedisOptions::default()
        };
        let transport = RedisTransport::with_client(client.clone(), options)
            .with_clock(Arc::new(|| 1_749_132_727.25));
        (transport, client)
    }

    fn text(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[tokio::test]
    async fn a_reliable_reservation_shows_its_keys_token_and_deadline() {
        let (t, client) = transport(Layout::Reliable, Some(90));
        let inspector = t.capabilities().inspector().expect("an Inspector");
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        let args = client.reserve_args.lock().unwrap().clone();
        let (score, token) = (
            String::from_utf8(args[0].clone()).unwrap(),
            String::from_utf8(args[1].clone()).unwrap(),
        );
        assert_eq!(score, "1749132817", "floor(now) + retry_after");
        let view = inspector.inspect(&d);
        assert_eq!((view.id, view.redelivered), (None, None));
        assert_eq!(
            view.properties,
            text(&[
                ("layout", "reliable"),
                ("processing_list", "orders:processing"),
                ("deadlines_set", "orders:processing:deadlines"),
                ("reservation_token", &token),
                ("reservation_deadline", &score),
            ])
        );
    }

    #[tokio::test]
    async fn a_laravel_reservation_shows_its_set_and_deadline() {
        let (t, _) = transport(Layout::Laravel, Some(60));
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        let view = t
            .capabilities()
            .inspector()
            .expect("an Inspector")
            .inspect(&d);
        assert_eq!((view.id, view.redelivered), (None, None));
        assert_eq!(
            view.properties,
            text(&[
                ("layout", "laravel"),
                ("reserved_set", "queues:orders:reserved"),
                ("reservation_deadline", "1749132787"),
            ])
        );
    }

    #[tokio::test]
    async fn a_reservation_that_never_lapses_has_no_deadline_and_a_foreign_delivery_nothing() {
        let (t, _) = transport(Layout::Laravel, None);
        let d = t.pop("orders", Duration::ZERO).await.unwrap().unwrap();
        let inspector = t.capabilities().inspector().expect("an Inspector");
        assert_eq!(
            inspector.inspect(&d).properties,
            text(&[
                ("layout", "laravel"),
                ("reserved_set", "queues:orders:reserved")
            ])
        );
        let foreign = Delivery::new("orders", b"{}".to_vec());
        assert_eq!(inspector.inspect(&foreign), BrokerView::new());
    }
}
