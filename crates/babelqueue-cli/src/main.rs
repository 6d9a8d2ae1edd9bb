//! `babelqueue`: the command-line tool for people who operate BabelQueue queues.
//!
//! ```text
//! babelqueue demo
//! babelqueue publish [URL] --queue Q --urn URN [--data JSON] [--trace-id ID] [--count N] [--delay SECS] [--header K=V]...
//! babelqueue consume [URL] [--queue Q] [--urn URN]... [--fail-urn URN]... [--max N] [--idle-timeout SECS]
//!                    [--max-attempts N] [--dead-letter] [--on-unknown-urn fail|delete|release|dead_letter]
//!                    [--retry-backoff SECS] [--concurrency N] [--prefetch N]
//! babelqueue dlq list [URL] --queue Q [--dlq NAME] [--max N] [--output json|human]
//! babelqueue dlq show   [--url URL] --queue Q [--dlq NAME] [--output json|human] ID...
//! babelqueue dlq retry  [--url URL] --queue Q [--dlq NAME] [--output json|human] [--to QUEUE] ID...
//! babelqueue dlq remove [--url URL] --queue Q [--dlq NAME] [--output json|human] ID...
//! babelqueue dlq redrive [URL] --queue Q [--dlq NAME] [--max N] [--dry-run] [--select URN] [--to QUEUE] [--output json|human]
//! babelqueue stats [URL] --queue Q [--queue Q2]... [--output json|human] [--json]
//! babelqueue inspect [FILE|-] [--output json|human]
//! babelqueue serve URL... --queue Q [--queue Q2]... [--listen 127.0.0.1:8025] [--read-only] [--sample-every SECS] [--worker-metrics HOST:PORT]...
//! babelqueue completions bash|zsh|fish|elvish|powershell
//! babelqueue kafka reinject [URL] --topic T [--topic T2]... [--tiers MS,...] [--max N] [--idle-timeout SECS]
//! ```
//!
//! - The broker URL defaults to `$BABELQUEUE_URL`, so a password need not sit in the process
//!   list. `ID` is a message's `meta.id`.
//! - `consume` reads every worker setting from the environment (`BABELQUEUE_QUEUE`,
//!   `BABELQUEUE_MAX_ATTEMPTS`, …) and from the TOML file `$BABELQUEUE_CONFIG`, so a container
//!   runs it with no flag; a flag wins over both (docs/settings.md).
//! - Machine output goes to standard output whether or not it is a terminal: JSON Lines (one
//!   compact JSON object per line) by default, an aligned table with `--output human`. Notes,
//!   logs (`BABELQUEUE_LOG=debug|info|warn|error`, no colour unless a terminal) and progress
//!   bars (only on a terminal) go to standard error.
//! - `dlq list` and `dlq show` leave the dead-letter queue unchanged: Redis, NATS, Artemis, Kafka,
//!   Pulsar (with `BQ_PULSAR_ADMIN_URL`), Azure Service Bus and memory:// read it in place, the other brokers drain it and restore every message (said on standard
//!   error when it happens).
//! - Exit status: 0 done, 1 failed, 2 usage error, 3 `inspect` found a poison body, 130 after
//!   SIGINT, 143 after SIGTERM (a consumer first finishes its in-flight messages; a dead-letter
//!   operation first restores what it drained; a second signal exits at once).
//! - Every broker is built in by default; `--no-default-features` builds a lean binary
//!   (memory:// only) to which `--features redis,amqp,…` adds brokers by name.

use std::process::ExitCode;

fn main() -> ExitCode {
    babelqueue_cli::main()
}
