//! Integration tests against a real Apache Kafka broker (`scripts/brokers.sh up kafka`), the
//! reference Python SDK (`$BQ_PYTHON`) and the `babelqueue` CLI.
//!
//! The broker URL comes from `BQ_KAFKA_URL` (default `kafka://127.0.0.1:9092`). When the broker
//! is unreachable the tests fail if `BQ_REQUIRE_BROKERS` is set, and otherwise return early
//! after printing `SKIPPED: kafka not reachable`.

#![allow(
    missing_docs,
    unreachable_pub,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::missing_panics_doc
)]

#[path = "it/auth.rs"]
mod auth;
#[path = "it/cli.rs"]
mod cli;
#[path = "it/common.rs"]
mod common;
#[path = "it/interop.rs"]
mod interop;
#[path = "it/live.rs"]
mod live;
#[path = "it/restart.rs"]
mod restart;
