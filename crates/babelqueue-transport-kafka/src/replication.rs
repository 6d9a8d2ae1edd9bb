//! What a confirmed write waits for, and the replication of the topics this crate creates.
//!
//! * [`Acks`]: how many replicas must have a record before the broker confirms it (librdkafka's
//!   `acks`). The default is [`Acks::All`]: a confirmed `publish` (and every settle write) is
//!   on every in-sync replica, at least the topic's `min.insync.replicas` of them, so losing
//!   the leader loses nothing confirmed. The idempotent producer (`enable.idempotence=true`,
//!   with `acks=all` only) is opt-in: it keeps librdkafka's retries across a leader change from
//!   writing a record twice or out of order, and it cut `publish_batch` from about 110 000 to
//!   17 000 messages/s on the single-node benchmark, so it is not the default.
//! * `replication_factor` / `min_insync_replicas`: for the topics
//!   [`RdKafkaClient::create_topics`](crate::RdKafkaClient::create_topics) creates. The
//!   transport itself creates no topic: the work, retry-tier and dead-letter topics are created
//!   by the broker on first use with its `default.replication.factor` and
//!   `min.insync.replicas`, or provisioned beforehand (see `docs/transports/kafka.md`).

use std::fmt;

use crate::error::KafkaError;

/// How many replicas must have a record before the broker confirms the write (`acks=`).
///
/// | `acks=` | confirmed once | what a confirmed write can still lose |
/// |---|---|---|
/// | `all` (default) | every in-sync replica has it, at least `min.insync.replicas` | nothing while fewer than `min.insync.replicas` replicas fail at once; with fewer alive the write fails (transient) instead of being confirmed |
/// | `1` | the partition leader has it | the records the followers had not copied yet when the leader died |
/// | `0` | the record left the client | anything: the broker never answers, a failed write looks confirmed |
///
/// ```
/// use babelqueue_transport_kafka::{Acks, KafkaOptions};
/// assert_eq!(KafkaOptions::default().acks, Acks::All);
/// assert_eq!(KafkaOptions::from_url("kafka://k1:9092?acks=1")?.acks, Acks::Leader);
/// assert_eq!(Acks::parse("-1")?, Acks::All);
/// # Ok::<(), babelqueue_transport_kafka::KafkaError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Acks {
    /// `acks=all` (`-1`): every in-sync replica (add `enable.idempotence=true` for the
    /// idempotent producer).
    #[default]
    All,
    /// `acks=1`: the leader alone.
    Leader,
    /// `acks=0`: no answer at all.
    None,
}

impl Acks {
    /// Reads `all`, `-1`, `1` or `0` (librdkafka's spellings).
    pub fn parse(text: &str) -> Result<Acks, KafkaError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "all" | "-1" => Ok(Acks::All),
            "1" => Ok(Acks::Leader),
            "0" => Ok(Acks::None),
            _ => Err(KafkaError::Config(format!(
                "acks must be all, 1 or 0, got {text:?}"
            ))),
        }
    }

    /// librdkafka's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Acks::All => "all",
            Acks::Leader => "1",
            Acks::None => "0",
        }
    }
}

impl fmt::Display for Acks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A replica count of a URL option (`replication_factor`, `min_insync_replicas`): 1 to
/// 32767 (Kafka's INT16).
pub(crate) fn replica_count(key: &str, value: &str) -> Result<u16, KafkaError> {
    value
        .trim()
        .parse::<u16>()
        .ok()
        .filter(|n| (1..=i16::MAX as u16).contains(n))
        .ok_or_else(|| {
            KafkaError::Config(format!(
                "{key} must be a replica count from 1 to 32767, got {value:?}"
            ))
        })
}

/// Whether a librdkafka boolean option's value is true (`true`, `1`, `yes`, `on`).
fn truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

/// The producer options that follow from `acks`: `acks` itself. A librdkafka `acks` /
/// `request.required.acks` among the client options (set by hand, not through the URL) is
/// applied after it and wins, as it would in librdkafka.
pub(crate) fn producer_options(acks: Acks) -> Vec<(&'static str, String)> {
    vec![("acks", acks.as_str().to_owned())]
}

/// The acks the producer runs with: a librdkafka `acks` / `request.required.acks` among
/// `client` (set by hand) wins over `acks`.
pub(crate) fn effective_acks(
    acks: Acks,
    client: &std::collections::BTreeMap<String, String>,
) -> Acks {
    ["acks", "request.required.acks"]
        .iter()
        .find_map(|k| client.get(*k))
        .and_then(|v| Acks::parse(v).ok())
        .unwrap_or(acks)
}

/// Refuses `enable.idempotence=true` with acks other than `all` (librdkafka would refuse to
/// create the producer, later and less clearly).
pub(crate) fn check(
    acks: Acks,
    client: &std::collections::BTreeMap<String, String>,
) -> Result<(), KafkaError> {
    let idempotent = client.get("enable.idempotence").is_some_and(|v| truthy(v));
    if idempotent && acks != Acks::All {
        return Err(KafkaError::Config(format!(
            "enable.idempotence=true needs acks=all, got acks={acks}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::KafkaOptions;

    fn producer(url: &str) -> BTreeMap<String, String> {
        let options = KafkaOptions::from_url(url).unwrap();
        let mut all: BTreeMap<String, String> = producer_options(options.acks)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        // the client options are applied after the defaults, as in `RdKafkaClient`
        all.extend(options.client);
        all
    }

    #[test]
    fn a_confirmed_write_waits_for_every_in_sync_replica_by_default() {
        let defaults = producer("kafka://k1:9092");
        assert_eq!(defaults["acks"], "all");
        assert!(!defaults.contains_key("enable.idempotence"), "opt-in");
        assert_eq!(KafkaOptions::default().acks, Acks::All);
    }

    #[test]
    fn acks_can_be_lowered_and_idempotence_goes_with_all() {
        for (query, acks, idempotent) in [
            ("acks=all", "all", None),
            ("acks=-1", "all", None),
            ("request.required.acks=all", "all", None),
            ("enable.idempotence=true", "all", Some("true")),
            ("acks=ALL&enable.idempotence=false", "all", Some("false")),
            ("acks=1", "1", None),
            ("acks=0", "0", None),
        ] {
            let options = KafkaOptions::from_url(&format!("kafka://k1:9092?{query}")).unwrap();
            assert!(!options.client.contains_key("acks"), "{query}");
            assert_eq!(effective_acks(options.acks, &options.client).as_str(), acks);
            assert!(
                !options.client.contains_key("request.required.acks"),
                "{query}"
            );
            let p = producer(&format!("kafka://k1:9092?{query}"));
            assert_eq!(p["acks"], acks, "{query}");
            assert_eq!(
                p.get("enable.idempotence").map(String::as_str),
                idempotent,
                "{query}"
            );
        }
        // an option set by hand wins
        let by_hand = KafkaOptions::new("k1:9092").with_client_option("acks", "1");
        assert_eq!(effective_acks(by_hand.acks, &by_hand.client), Acks::Leader);
    }

    #[test]
    fn bad_acks_and_idempotence_without_all_are_refused() {
        for (url, needle) in [
            ("kafka://k?acks=2", "acks must be all, 1 or 0"),
            ("kafka://k?acks=", "acks must be all, 1 or 0"),
            (
                "kafka://k?acks=1&enable.idempotence=true",
                "enable.idempotence=true needs acks=all",
            ),
            ("kafka://k?replication_factor=0", "replication_factor"),
            ("kafka://k?min_insync_replicas=x", "min_insync_replicas"),
            ("kafka://k?replication_factor=40000", "1 to 32767"),
        ] {
            let err = KafkaOptions::from_url(url).unwrap_err();
            assert!(err.to_string().contains(needle), "{url}: {err}");
        }
    }

    #[test]
    fn replication_of_created_topics_defaults_to_the_brokers() {
        let options = KafkaOptions::from_url("kafka://k1:9092").unwrap();
        assert_eq!(
            (options.replication_factor, options.min_insync_replicas),
            (None, None)
        );
        let options =
            KafkaOptions::from_url("kafka://k1:9092?replication_factor=3&min_insync_replicas=2")
                .unwrap();
        assert_eq!(
            (options.replication_factor, options.min_insync_replicas),
            (Some(3), Some(2))
        );
        assert!(options.client.is_empty(), "{:?}", options.client);
    }

    #[test]
    fn several_bootstrap_servers_in_one_url() {
        let options =
            KafkaOptions::from_url("kafka://h1:9092,h2:9095,h3:9096?acks=all&group_id=g").unwrap();
        assert_eq!(options.brokers, "h1:9092,h2:9095,h3:9096");
        assert_eq!(options.group_id, "g");
        assert_eq!(options.acks, Acks::All);
    }
}
