//! Section runners. Each one drives the public API of the crate that owns the behaviour.

use serde_json::Value;

use crate::{Case, Manifest};

mod amqp;
mod artemis;
mod asb;
mod codec;
mod core;
mod kafka;
mod otel;
mod own;
mod poison;
mod pulsar;
mod redis;
mod sqs;

/// What a case runner sees.
pub(crate) struct Ctx<'m> {
    pub(crate) manifest: &'m Manifest,
    #[allow(dead_code)]
    pub(crate) section: &'m str,
    pub(crate) data: Option<&'m Value>,
}

impl Ctx<'_> {
    /// Reads the fixture a case names in `field`.
    pub(crate) fn fixture(&self, case: &Value, field: &str) -> Result<Vec<u8>, String> {
        self.manifest.fixture(str_field(case, field)?)
    }
}

/// A registered section runner.
pub(crate) struct Runner {
    pub(crate) section: &'static str,
    /// `core`, or the binding the section belongs to.
    pub(crate) scope: &'static str,
    pub(crate) run: fn(&Ctx<'_>, &Case<'_>) -> Result<(), String>,
}

/// Every section this SDK can run.
pub(crate) fn registry() -> Vec<Runner> {
    let core = |section, run| Runner {
        section,
        scope: "core",
        run,
    };
    vec![
        core("cases", codec::cases),
        core("roundtrip", codec::roundtrip),
        core("data_shape", codec::data_shape),
        core("forbidden_keys", codec::forbidden_keys),
        core("extension_write", codec::extension_write),
        core("encode_reject", codec::encode_reject),
        core("trim", codec::trim),
        core("job_type", codec::job_type),
        core("idempotency", core::idempotency),
        core("payload_schema", core::payload_schema),
        core("payload_schema_unicode", core::payload_schema),
        core("retry_backoff", core::retry_backoff),
        core("poison_dlq", poison::poison_dlq),
        core("identity_verdict", poison::identity_verdict),
        Runner {
            section: "redis",
            scope: "redis",
            run: redis::redis,
        },
        Runner {
            section: "redis_delay",
            scope: "redis",
            run: redis::redis_delay,
        },
        Runner {
            section: "redis_layout",
            scope: "redis",
            run: redis::redis_layout,
        },
        // The project's own vector sections (conformance/manifest.json).
        core("codec_reemit", own::codec_reemit),
        core("verdict", own::verdict),
        core("make_shape", own::make_shape),
        // Apache Kafka (babelqueue-transport-kafka).
        Runner {
            section: "kafka",
            scope: "kafka",
            run: kafka::kafka,
        },
        Runner {
            section: "backoff",
            scope: "kafka",
            run: kafka::backoff,
        },
        Runner {
            section: "kafka_poison",
            scope: "kafka",
            run: kafka::kafka_poison,
        },
        // Scope artemis (babelqueue-transport-artemis).
        Runner {
            section: "artemis",
            scope: "artemis",
            run: artemis::artemis,
        },
        Runner {
            section: "version_gate_artemis",
            scope: "artemis",
            run: artemis::version_gate,
        },
        // Azure Service Bus (babelqueue-transport-asb): every section of the scope together.
        Runner {
            section: "asb",
            scope: "asb",
            run: asb::asb,
        },
        Runner {
            section: "version_gate_asb",
            scope: "asb",
            run: asb::version_gate_asb,
        },
        // Apache Pulsar (babelqueue-transport-pulsar): every section of the scope together.
        Runner {
            section: "pulsar",
            scope: "pulsar",
            run: pulsar::pulsar,
        },
        Runner {
            section: "pulsar_exhaustion",
            scope: "pulsar",
            run: pulsar::pulsar_exhaustion,
        },
        Runner {
            section: "version_gate_pulsar",
            scope: "pulsar",
            run: pulsar::version_gate_pulsar,
        },
        // RabbitMQ (AMQP 0-9-1): every section of scope `amqp`.
        Runner {
            section: "rabbitmq",
            scope: "amqp",
            run: amqp::property_projection,
        },
        // Scope `sqs`: all three sections together (carrying one puts every case in scope).
        Runner {
            section: "sqs",
            scope: "sqs",
            run: sqs::sqs,
        },
        Runner {
            section: "delay",
            scope: "sqs",
            run: sqs::delay,
        },
        Runner {
            section: "version_gate_sqs",
            scope: "sqs",
            run: sqs::version_gate_sqs,
        },
        // Scope `otel`: W3C traceparent extraction through babelqueue-otel's consumer wrapper.
        Runner {
            section: "traceparent",
            scope: "otel",
            run: otel::traceparent,
        },
    ]
}

pub(crate) fn str_field<'v>(case: &'v Value, field: &str) -> Result<&'v str, String> {
    case.get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("case has no string `{field}`"))
}

/// The case's `on_unknown_urn` strategy; `fail` when the case names none.
pub(crate) fn unknown_urn_field(case: &Value) -> Result<babelqueue_core::UnknownUrn, String> {
    case.get("on_unknown_urn")
        .and_then(Value::as_str)
        .unwrap_or("fail")
        .parse()
        .map_err(|e: babelqueue_core::Error| e.to_string())
}

/// A `version_gate_*` section's `incoming_bodies`, as `(name, body)` pairs; at least one.
pub(crate) fn incoming_bodies<'a>(ctx: &Ctx<'a>) -> Result<Vec<(&'a str, &'a str)>, String> {
    let bodies = ctx
        .data
        .and_then(|d| d.get("incoming_bodies"))
        .and_then(Value::as_array)
        .ok_or("the section has no incoming_bodies")?;
    if bodies.is_empty() {
        return Err("incoming_bodies is empty".into());
    }
    bodies
        .iter()
        .map(|b| Ok((str_field(b, "name")?, str_field(b, "body")?)))
        .collect()
}

pub(crate) fn int_field(case: &Value, field: &str) -> Result<i64, String> {
    case.get(field)
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("case has no integer `{field}`"))
}

pub(crate) fn bool_field(case: &Value, field: &str) -> Result<bool, String> {
    case.get(field)
        .and_then(Value::as_bool)
        .ok_or_else(|| format!("case has no boolean `{field}`"))
}

/// The raw body of a case: `body` (text) or `body_base64` (exact bytes).
pub(crate) fn body_of(case: &Value) -> Result<Vec<u8>, String> {
    if let Some(text) = case.get("body").and_then(Value::as_str) {
        return Ok(text.as_bytes().to_vec());
    }
    crate::check::base64_decode(str_field(case, "body_base64")?)
}

/// Parses JSON output the SDK produced.
pub(crate) fn parse_output(text: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(text).map_err(|e| {
        format!(
            "the SDK wrote text that is not JSON ({e}): {}",
            String::from_utf8_lossy(text)
        )
    })
}

/// Case-level and section-level checks of `expect_preserved` / `expect_absent_after_reencode`.
pub(crate) fn check_pointers(doc: &Value, case: &Value) -> Result<(), String> {
    if let Some(Value::Object(preserved)) = case.get("expect_preserved") {
        for (ptr, want) in preserved {
            crate::check::expect_at(doc, ptr, want)?;
        }
    }
    if let Some(Value::Array(absent)) = case.get("expect_absent_after_reencode") {
        for ptr in absent.iter().filter_map(Value::as_str) {
            if crate::check::pointer(doc, ptr).is_some() {
                return Err(format!(
                    "{ptr} is present after re-encode, expected it absent"
                ));
            }
        }
    }
    Ok(())
}
