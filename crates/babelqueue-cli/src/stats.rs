//! `babelqueue stats`: what the broker says of each queue (ready, in flight, delayed, dead
//! letters, consumers), through the transport's `Stats` capability. Nothing is consumed.

use babelqueue::QueueStats;
use babelqueue::envelope::RawJson;

use crate::args::{Output, StatsArgs};
use crate::{CliResult, Session, close};

/// A figure as JSON: a number, or `null` when the broker does not say.
fn json_figure(n: Option<u64>) -> String {
    n.map_or_else(|| "null".to_owned(), |n| n.to_string())
}

/// A figure for people: the number, or `-` when the broker does not say.
fn human_figure(n: Option<u64>) -> String {
    n.map_or_else(|| "-".to_owned(), |n| n.to_string())
}

/// One JSON line for `queue`.
pub(crate) fn json_line(transport: &str, queue: &str, stats: &QueueStats) -> String {
    format!(
        "{{\"queue\":{},\"transport\":{},\"ready\":{},\"in_flight\":{},\"delayed\":{},\
         \"dead_letter\":{},\"consumers\":{},\"oldest_ready_age_secs\":{},\"source\":{}}}",
        RawJson::string(queue),
        RawJson::string(transport),
        json_figure(stats.ready),
        json_figure(stats.in_flight),
        json_figure(stats.delayed),
        json_figure(stats.dead_letter),
        json_figure(stats.consumers),
        stats.oldest_ready_age.map_or_else(
            || "null".to_owned(),
            |age| format!("{:.3}", age.as_secs_f64())
        ),
        RawJson::string(&stats.source),
    )
}

/// One table row for `queue`.
pub(crate) fn human_row(queue: &str, stats: &QueueStats) -> Vec<String> {
    vec![
        queue.to_owned(),
        human_figure(stats.ready),
        human_figure(stats.in_flight),
        human_figure(stats.delayed),
        human_figure(stats.dead_letter),
        human_figure(stats.consumers),
        stats.oldest_ready_age.map_or_else(
            || "-".to_owned(),
            |age| format!("{:.1}s", age.as_secs_f64()),
        ),
        stats.source.clone(),
    ]
}

/// Why a transport has no `Stats`, and what would give it one.
fn without_stats(transport: &str) -> String {
    let hint = match transport {
        "pulsar" => {
            ": Pulsar counts a subscription's backlog on its admin API; set BQ_PULSAR_ADMIN_URL \
             (e.g. http://127.0.0.1:8080)"
        }
        _ => "",
    };
    format!("the {transport} transport does not report queue stats{hint}")
}

pub(crate) async fn run(session: &Session, args: StatsArgs) -> CliResult {
    let transport = session.connect(&args.url.url).await?;
    let result = async {
        let capabilities = transport.capabilities();
        let reader = capabilities
            .stats_reader()
            .ok_or_else(|| without_stats(transport.name()))?;
        let json = args.json || args.output.output == Output::Json;
        let mut rows = Vec::new();
        for queue in &args.queues {
            let stats = tokio::select! {
                stats = reader.stats(queue) => stats.map_err(|e| format!("stats of {queue}: {e}"))?,
                () = session.shutdown().wait() => return Err("interrupted".to_owned()),
            };
            if json {
                session
                    .io()
                    .line(json_line(transport.name(), queue, &stats));
            } else {
                rows.push(human_row(queue, &stats));
            }
        }
        if !json {
            session.io().table(
                &[
                    "QUEUE",
                    "READY",
                    "IN FLIGHT",
                    "DELAYED",
                    "DEAD LETTER",
                    "CONSUMERS",
                    "OLDEST",
                    "SOURCE",
                ],
                rows,
            );
        }
        Ok(())
    }
    .await;
    close(session.io(), transport.as_ref()).await;
    result
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn unknown_figures_are_null_in_json_and_a_dash_for_people() {
        let stats = QueueStats::new("LLEN \"x\"")
            .ready(2)
            .in_flight(1)
            .oldest_ready_age(Duration::from_millis(1500));
        assert_eq!(
            json_line("redis", "orders", &stats),
            "{\"queue\":\"orders\",\"transport\":\"redis\",\"ready\":2,\"in_flight\":1,\
             \"delayed\":null,\"dead_letter\":null,\"consumers\":null,\
             \"oldest_ready_age_secs\":1.500,\"source\":\"LLEN \\\"x\\\"\"}"
        );
        assert_eq!(
            human_row("orders", &stats),
            ["orders", "2", "1", "-", "-", "-", "1.5s", "LLEN \"x\""]
        );
    }

    #[test]
    fn a_transport_without_stats_is_named() {
        assert!(without_stats("azure").contains("azure transport"));
        assert!(without_stats("pulsar").contains("BQ_PULSAR_ADMIN_URL"));
    }
}
