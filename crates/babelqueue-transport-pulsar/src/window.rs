//! The batch send's window, apart from the `pulsar` crate so it is tested offline: messages are
//! handed to the producer in order, up to a window of receipts in flight; when the producer's
//! outbound queue is full the receipts in flight are awaited and the same message is handed over
//! again, in its place, so a full queue neither drops nor reorders a message.

use std::future::Future;
use std::time::Duration;

use crate::error::PulsarError;

/// What handing one message to the producer did.
pub(crate) enum Handed<R> {
    /// Taken: its receipt, to await.
    Sent(R),
    /// The outbound queue is full (the client's `SlowDown`): nothing was taken.
    Full,
    /// Refused: the batch stops here.
    Failed(PulsarError),
}

/// How long a full queue with no receipt in flight is left to drain before the next try.
const EMPTY_WAIT: Duration = Duration::from_millis(10);

/// Hands messages `0..count` over with `hand`, in order, keeping up to `window` receipts in
/// flight. A full queue is waited out (the receipts in flight awaited, or [`EMPTY_WAIT`] when
/// there are none) and the same message handed over again, at most `full_limit` times in all;
/// past that, `full_error` ends the batch. Returns the first error: a refused message or a
/// failed receipt. The receipts already in flight are awaited in every case, and no message
/// after a refused one is handed over.
pub(crate) async fn send<R, F>(
    count: usize,
    window: usize,
    full_limit: usize,
    mut hand: impl FnMut(usize) -> F,
    full_error: impl Fn() -> PulsarError,
) -> Result<(), PulsarError>
where
    F: Future<Output = Handed<R>>,
    R: Future<Output = Result<(), PulsarError>>,
{
    let mut first_error = None;
    let mut receipts: Vec<R> = Vec::with_capacity(window.min(count));
    let mut full = 0usize;
    let mut next = 0;
    while next < count {
        let drain = match hand(next).await {
            Handed::Sent(receipt) => {
                receipts.push(receipt);
                next += 1;
                receipts.len() >= window
            }
            Handed::Full if full < full_limit => {
                full += 1;
                if receipts.is_empty() {
                    tokio::time::sleep(EMPTY_WAIT).await;
                }
                true
            }
            Handed::Full => {
                first_error = Some(full_error());
                break;
            }
            Handed::Failed(e) => {
                first_error = Some(e);
                break;
            }
        };
        if drain {
            for receipt in receipts.drain(..) {
                if let Err(e) = receipt.await {
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    for receipt in receipts {
        if let Err(e) = receipt.await {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A producer whose queue is full on the calls listed, and whose receipts record the
    /// message they stand for when awaited (the broker taking it) or fail for the listed ones.
    #[derive(Default)]
    struct Producer {
        calls: usize,
        full_on: Vec<usize>,
        refuse: Option<usize>,
        failing_receipt: Option<usize>,
        /// Receipts not yet awaited, at most.
        in_flight: Arc<Mutex<(usize, usize)>>,
        taken: Arc<Mutex<Vec<usize>>>,
    }

    type Receipt = std::pin::Pin<Box<dyn Future<Output = Result<(), PulsarError>>>>;

    impl Producer {
        fn hand(&mut self, message: usize) -> Handed<Receipt> {
            let call = self.calls;
            self.calls += 1;
            if self.full_on.contains(&call) {
                return Handed::Full;
            }
            if self.refuse == Some(message) {
                return Handed::Failed(PulsarError::Connection(format!("refused {message}")));
            }
            {
                let mut flight = self.in_flight.lock().unwrap();
                flight.0 += 1;
                flight.1 = flight.1.max(flight.0);
            }
            let (taken, in_flight) = (self.taken.clone(), self.in_flight.clone());
            let fails = self.failing_receipt == Some(message);
            Handed::Sent(Box::pin(async move {
                in_flight.lock().unwrap().0 -= 1;
                if fails {
                    return Err(PulsarError::Connection(format!("no receipt for {message}")));
                }
                taken.lock().unwrap().push(message);
                Ok(())
            }))
        }
    }

    async fn run(
        producer: &mut Producer,
        count: usize,
        full_limit: usize,
    ) -> Result<(), PulsarError> {
        let producer = Mutex::new(producer);
        send(
            count,
            4,
            full_limit,
            |i| {
                let handed = producer.lock().unwrap().hand(i);
                async move { handed }
            },
            || PulsarError::Connection("still full".to_owned()),
        )
        .await
    }

    #[tokio::test]
    async fn a_full_queue_is_waited_out_and_the_same_message_goes_again_in_its_place() {
        let mut producer = Producer {
            full_on: vec![0, 3, 4, 9],
            ..Producer::default()
        };
        run(&mut producer, 10, 100).await.unwrap();
        assert_eq!(*producer.taken.lock().unwrap(), (0..10).collect::<Vec<_>>());
        assert_eq!(producer.calls, 14, "ten messages and four full answers");
        assert!(
            producer.in_flight.lock().unwrap().1 <= 4,
            "never more than the window"
        );
        assert_eq!(
            producer.in_flight.lock().unwrap().0,
            0,
            "every receipt awaited"
        );
    }

    #[tokio::test]
    async fn receipts_are_awaited_window_by_window() {
        let mut producer = Producer::default();
        run(&mut producer, 10, 100).await.unwrap();
        assert_eq!(*producer.taken.lock().unwrap(), (0..10).collect::<Vec<_>>());
        assert_eq!(producer.in_flight.lock().unwrap().1, 4);
    }

    #[tokio::test]
    async fn a_queue_that_stays_full_ends_the_batch_with_its_error() {
        let mut producer = Producer {
            full_on: (2..100).collect(),
            ..Producer::default()
        };
        let e = run(&mut producer, 10, 5).await.unwrap_err();
        assert!(e.to_string().contains("still full"), "{e}");
        assert_eq!(
            *producer.taken.lock().unwrap(),
            [0, 1],
            "what was taken stays taken"
        );
        assert_eq!(
            producer.calls,
            2 + 6,
            "five waits, then the sixth full answer ends it"
        );
    }

    #[tokio::test]
    async fn a_refusal_stops_the_batch_after_the_receipts_in_flight() {
        let mut producer = Producer {
            refuse: Some(6),
            ..Producer::default()
        };
        let e = run(&mut producer, 10, 100).await.unwrap_err();
        assert!(e.to_string().contains("refused 6"), "{e}");
        assert_eq!(*producer.taken.lock().unwrap(), [0, 1, 2, 3, 4, 5]);
        assert_eq!(
            producer.calls, 7,
            "nothing after the refused message is handed over"
        );
        assert_eq!(producer.in_flight.lock().unwrap().0, 0);
    }

    #[tokio::test]
    async fn a_failed_receipt_is_the_batch_error_and_the_rest_still_goes() {
        let mut producer = Producer {
            failing_receipt: Some(2),
            ..Producer::default()
        };
        let e = run(&mut producer, 10, 100).await.unwrap_err();
        assert!(e.to_string().contains("no receipt for 2"), "{e}");
        let taken = producer.taken.lock().unwrap().clone();
        assert_eq!(taken, [0, 1, 3, 4, 5, 6, 7, 8, 9]);
    }

    /// One send (`App::publish`) is a batch of one with a window of one: a full queue is
    /// waited out and the message handed over again, and the receipt is awaited.
    #[tokio::test]
    async fn a_single_send_waits_out_a_full_queue() {
        let producer = Mutex::new(Producer {
            full_on: vec![0, 1, 2],
            ..Producer::default()
        });
        send(
            1,
            1,
            100,
            |i| {
                let handed = producer.lock().unwrap().hand(i);
                async move { handed }
            },
            || PulsarError::Connection("still full".to_owned()),
        )
        .await
        .unwrap();
        let producer = producer.into_inner().unwrap();
        assert_eq!(*producer.taken.lock().unwrap(), [0]);
        assert_eq!(producer.calls, 4, "three full answers, then taken");
    }
}
