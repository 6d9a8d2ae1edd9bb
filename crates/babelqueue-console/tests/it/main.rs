//! The console's integration tests, one test binary (`cargo test -p babelqueue-console --test
//! it`; one file: `--test it workers::`). One binary instead of one per file: each links the
//! console with every transport, and seven copies of it cost half a gigabyte of disk.
//!
//! The tests run in parallel threads of one process: a test names its broker queues with
//! `babelqueue_testkit::unique_queue` and binds its servers to free loopback ports. A test that
//! installs the process-wide metrics recorder and asserts on everything it exports
//! (`tests/workers.rs`) keeps a process of its own.

mod common;

mod api;
mod audit;
mod browser;
mod every_broker;
mod live;
mod prometheus;
