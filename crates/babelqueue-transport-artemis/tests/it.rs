//! Integration tests against a real Apache ActiveMQ Artemis (`scripts/brokers.sh up artemis`).
//!
//! The broker URL comes from `BQ_ARTEMIS_URL` (default `artemis://bq:bq@127.0.0.1:5673`). When
//! the broker is not reachable, each test fails if `BQ_REQUIRE_BROKERS` is set, and otherwise
//! prints `SKIPPED: artemis not reachable` and returns. Every test uses its own queues.

#![allow(missing_docs, clippy::print_stdout, clippy::print_stderr)]

#[path = "it/broker.rs"]
mod broker;
#[path = "it/browse.rs"]
mod browse;
#[path = "it/cli.rs"]
mod cli;
#[path = "it/common.rs"]
mod common;
#[path = "it/full.rs"]
mod full;
#[path = "it/interop.rs"]
mod interop;
#[path = "it/restart.rs"]
mod restart;
#[path = "it/tls.rs"]
mod tls;
