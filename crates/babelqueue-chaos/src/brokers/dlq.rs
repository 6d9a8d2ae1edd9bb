//! Breaking and fixing a queue's dead-letter writes for the `dlq-failure` rows, per broker.

use super::*;

/// Makes the dead-letter write of `queue` fail; says how.
pub(crate) async fn break_dlq(
    env: &Env,
    broker: Broker,
    url: &str,
    queue: &str,
) -> Result<String, String> {
    let dlq = broker.dlq(queue);
    match broker {
        Broker::Redis | Broker::RedisLaravel => {
            let key = redis_ready_key(url, &dlq)?;
            redis_cli(env, url, &["SET", &key, "notalist"]).await?;
            Ok(format!(
                "SET {key} notalist (a string where the DLQ list goes: WRONGTYPE)"
            ))
        }
        Broker::Rabbitmq => {
            let mut cmd = env.command("rabbitmqctl");
            cmd.args([
                "set_policy",
                "--apply-to",
                "queues",
                "--priority",
                "100",
                &rabbit_policy(queue),
                &format!("^{}$", dlq.replace('.', "\\.")),
                "{\"max-length\":0,\"overflow\":\"reject-publish\"}",
            ]);
            run(cmd, Duration::from_secs(60)).await?;
            Ok(format!(
                "policy {}: {dlq} max-length 0, overflow reject-publish (publisher confirms are nacked)",
                rabbit_policy(queue)
            ))
        }
        Broker::Sqs => Ok(format!(
            "{dlq} is not created (GetQueueUrl fails: NonExistentQueue)"
        )),
        Broker::Kafka => {
            use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
            let admin = kafka_admin(url)?;
            let topic =
                NewTopic::new(&dlq, 1, TopicReplication::Fixed(1)).set("max.message.bytes", "64");
            let results = admin
                .create_topics([&topic], &AdminOptions::new())
                .await
                .map_err(|e| e.to_string())?;
            for r in results {
                r.map_err(|(t, e)| format!("create topic {t}: {e}"))?;
            }
            Ok(format!(
                "{dlq} created with max.message.bytes=64 (MESSAGE_TOO_LARGE)"
            ))
        }
        Broker::Pulsar => {
            let base = pulsar_admin(env, url);
            curl(env, "PUT", &format!("{base}/{dlq}")).await?;
            curl(env, "POST", &format!("{base}/{dlq}/terminate")).await?;
            Ok(format!(
                "{dlq} created and terminated (TopicTerminated on every send)"
            ))
        }
        Broker::Nats => nats::break_dlq(url, &dlq).await,
        Broker::Artemis => {
            // An address setting through the management address: at most 1 KiB on the DLQ
            // address, and FAIL (reject) a send once it is full. One filler message fills it;
            // a second must then be refused, which proves the DLQ write will fail.
            let settings = "{\"maxSizeBytes\":1024,\"pageSizeBytes\":512,\"addressFullMessagePolicy\":\"FAIL\"}";
            artemis_manage(
                env,
                "addAddressSettings",
                &serde_json::json!([dlq, settings]),
            )
            .await?;
            let transport = connect(env, broker, url).await?;
            let mut refused = None;
            let filler = artemis_filler();
            for _ in 0..3 {
                if let Err(e) = transport.publish(&dlq, &filler).await {
                    refused = Some(e.to_string());
                    break;
                }
            }
            let _ = transport.close().await;
            match refused {
                Some(e) => Ok(format!(
                    "address setting on {dlq} (through the management address): max-size-bytes \
                     1024, address-full-policy FAIL, filled by a filler message (a send is \
                     refused: {e})"
                )),
                None => Err(format!(
                    "the address setting on {dlq} did not make a send fail (the management \
                     operation addAddressSettings had no effect)"
                )),
            }
        }
    }
}

/// Undoes [`break_dlq`].
pub(crate) async fn fix_dlq(
    env: &Env,
    broker: Broker,
    url: &str,
    queue: &str,
) -> Result<(), String> {
    let dlq = broker.dlq(queue);
    match broker {
        Broker::Redis | Broker::RedisLaravel => {
            let key = redis_ready_key(url, &dlq)?;
            redis_cli(env, url, &["DEL", &key]).await.map(|_| ())
        }
        Broker::Rabbitmq => {
            let mut cmd = env.command("rabbitmqctl");
            cmd.args(["clear_policy", &rabbit_policy(queue)]);
            run(cmd, Duration::from_secs(60)).await.map(|_| ())
        }
        Broker::Sqs => sqs_create(env, &dlq).await,
        Broker::Kafka => {
            use rdkafka::admin::{AdminOptions, AlterConfig, ResourceSpecifier};
            let admin = kafka_admin(url)?;
            let change = AlterConfig::new(ResourceSpecifier::Topic(&dlq))
                .set("max.message.bytes", "1048588");
            let results = admin
                .alter_configs([&change], &AdminOptions::new())
                .await
                .map_err(|e| e.to_string())?;
            for r in results {
                r.map_err(|(_, e)| format!("alter {dlq}: {e}"))?;
            }
            Ok(())
        }
        Broker::Pulsar => curl(
            env,
            "DELETE",
            &format!("{}/{dlq}?force=true", pulsar_admin(env, url)),
        )
        .await
        .map(|_| ()),
        // Not `removeAddressSettings`: Artemis then starts paging the address (its size is
        // above the default limit it falls back to in that instant) and the paged records are
        // not delivered to a consumer. A large limit with the same policy never pages.
        Broker::Nats => nats::fix_dlq(url, &dlq).await,
        Broker::Artemis => {
            let settings = "{\"maxSizeBytes\":104857600,\"pageSizeBytes\":10485760,\
                            \"addressFullMessagePolicy\":\"FAIL\"}";
            artemis_manage(
                env,
                "addAddressSettings",
                &serde_json::json!([dlq, settings]),
            )
            .await
        }
    }
}

fn rabbit_policy(queue: &str) -> String {
    format!("bq-chaos-{queue}")
}

/// The body of the filler message that fills a broken Artemis DLQ (skipped when the DLQ is read):
/// larger than the 1 KiB the address is allowed.
pub(crate) fn artemis_filler() -> Vec<u8> {
    format!("{{\"bq_chaos_filler\":\"{}\"}}", "x".repeat(2048)).into_bytes()
}

/// Invokes a broker management operation through Artemis' management address (AMQP): the
/// operation and resource ride as application properties, the parameters as a JSON array body.
pub(super) async fn artemis_manage(
    env: &Env,
    operation: &str,
    params: &serde_json::Value,
) -> Result<(), String> {
    let base = env.base_url(Broker::Artemis)?;
    let sep = if base.contains('?') { '&' } else { '?' };
    let transport = babelqueue::connect(&format!("{base}{sep}queue_capability=false"))
        .await
        .map_err(|e| e.to_string())?;
    if !transport.capabilities().send_parts().headers {
        return Err("the Artemis transport cannot publish headers".to_owned());
    }
    let mut headers = babelqueue::Headers::new();
    headers.insert("_AMQ_ResourceName".into(), "broker".into());
    headers.insert("_AMQ_OperationName".into(), operation.into());
    let body = params.to_string();
    let result = transport
        .send(&babelqueue::Outgoing::new("activemq.management", body.as_bytes()).headers(&headers))
        .await
        .map_err(|e| format!("management {operation}: {e}"));
    let _ = transport.close().await;
    // The operation runs when the broker routes the message; give it a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    result
}
