//! Live tests against a real RabbitMQ (`scripts/brokers.sh up rabbitmq`), one binary.
//!
//! The broker URL comes from `BQ_AMQP_URL` (default `amqp://guest:guest@127.0.0.1:5672/%2f`).
//! When RabbitMQ is unreachable the tests fail if `BQ_REQUIRE_BROKERS` is set (CI sets it),
//! and otherwise return early after printing `SKIPPED: rabbitmq not reachable`.
//!
//! The broker-restart test stops the RabbitMQ application, so it takes a write lock that every
//! other test holds for reading: it never runs beside them.
//!
//! The failover tests run on the three-node cluster of `scripts/brokers.sh up rabbitmq-cluster`
//! (`BQ_AMQP_CLUSTER_URL`): they skip without it, and fail instead with `BQ_REQUIRE_HA` set.
//! They take turns (each kills a node).

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    missing_docs,
    unreachable_pub
)]

#[path = "it/common.rs"]
mod common;

#[path = "it/auth.rs"]
mod auth;
#[path = "it/cli.rs"]
mod cli;
#[path = "it/cluster.rs"]
mod cluster;
#[path = "it/failover.rs"]
mod failover;
#[path = "it/interop.rs"]
mod interop;
#[path = "it/live.rs"]
mod live;
#[path = "it/quorum.rs"]
mod quorum;
