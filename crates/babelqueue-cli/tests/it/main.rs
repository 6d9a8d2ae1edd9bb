//! The CLI's integration tests, one test binary (`cargo test -p babelqueue-cli --test it`; one
//! file: `--test it serve::`). One binary instead of one per file: each links the whole facade
//! with every transport, and thirteen copies of it cost a gigabyte of disk and a link apiece.
//!
//! The tests run in parallel threads of one process: a test names its broker queues with
//! `babelqueue_testkit::unique_queue` and never changes this process's environment (the
//! binary's environment is set on the child it starts).

mod common;

mod args;
mod cli;
mod dlq;
mod kafka_cluster;
mod metrics;
mod nats_cluster;
mod process;
mod publish;
mod redis_ha;
mod serve;
mod settings_env;
mod stats;
mod wire;
