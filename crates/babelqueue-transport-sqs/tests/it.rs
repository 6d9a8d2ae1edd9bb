//! Integration tests against a live SQS endpoint (moto's server, `scripts/brokers.sh up sqs`),
//! the reference Python SDK, and the `babelqueue` CLI.
//!
//! `BQ_SQS_URL` names the endpoint (default `sqs://us-east-1?endpoint=http://127.0.0.1:5000`),
//! `BQ_PYTHON` the reference SDK's interpreter (default `../cache/venv/bin/python`). When the
//! broker or the SDK is missing, each test prints `SKIPPED: …` and passes, unless
//! `BQ_REQUIRE_BROKERS` is set: then it fails.

#![allow(missing_docs, clippy::print_stderr, unreachable_pub)]

#[path = "it/cli.rs"]
mod cli;
#[path = "it/interop.rs"]
mod interop;
#[path = "it/live.rs"]
mod live;
#[path = "it/support.rs"]
mod support;
