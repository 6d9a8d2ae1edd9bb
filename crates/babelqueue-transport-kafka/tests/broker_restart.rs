//! A live test that restarts the Kafka broker (`scripts/brokers.sh`) under a running worker.
//!
//! It is a test target of its own, not a module of `it`: cargo runs one test binary at a time,
//! so taking the broker down here never breaks the `it` tests, which run concurrently with each
//! other. The broker URL and the skip rules are those of `it` (`BQ_KAFKA_URL`,
//! `BQ_REQUIRE_BROKERS`).

#![allow(
    missing_docs,
    unreachable_pub,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::missing_panics_doc
)]

#[path = "it/broker_restart.rs"]
mod broker_restart;
#[allow(dead_code)]
#[path = "it/common.rs"]
mod common;
