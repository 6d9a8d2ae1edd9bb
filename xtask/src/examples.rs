//! `cargo xtask examples [--broker NAME]...`: runs the examples of `examples/`, one producer and
//! one worker, against every real broker of `scripts/brokers.sh` (up first; their URLs from
//! `eval "$(scripts/brokers.sh env)"`).
//!
//! For each broker: the producer publishes [`COUNT`] orders to a queue of its own on the
//! broker's URL, then the worker must handle all of them and exit with status 0 within
//! [`DEADLINE`]. A broker whose URL variable is unset is skipped with a line saying so, or fails
//! the command when `BQ_REQUIRE_BROKERS=1` (as in `.ci/run`). One more run proves the worker's
//! check can fail: a worker on an empty queue must exit non-zero. Service Bus (`sb://`) is
//! compiled into both (all features) but not run: no Service Bus is reachable from CI.

use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::{cargo, root, status};

/// Orders each producer publishes and each worker must handle.
const COUNT: &str = "25";
/// How long one producer or worker may take, connecting included.
const DEADLINE: Duration = Duration::from_secs(120);

/// Each broker the examples run against, and the variable `scripts/brokers.sh env` sets to its
/// URL.
const BROKERS: [(&str, &str); 7] = [
    ("redis", "BQ_REDIS_URL"),
    ("amqp", "BQ_AMQP_URL"),
    ("sqs", "BQ_SQS_URL"),
    ("kafka", "BQ_KAFKA_URL"),
    ("artemis", "BQ_ARTEMIS_URL"),
    ("pulsar", "BQ_PULSAR_URL"),
    ("nats", "BQ_NATS_URL"),
];

pub(crate) fn examples(args: &[String]) -> Result<(), String> {
    let mut only = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--broker" => {
                let name = it.next().ok_or("examples: --broker needs a value")?;
                if !BROKERS.iter().any(|(b, _)| b == name) {
                    return Err(format!("examples: no broker {name:?} to run against"));
                }
                only.push(name.clone());
            }
            other => return Err(format!("examples: unknown argument {other:?}")),
        }
    }
    let required = std::env::var("BQ_REQUIRE_BROKERS").is_ok_and(|v| v == "1");
    status({
        let mut cmd = cargo();
        cmd.args(["build", "--quiet", "--package", "babelqueue-examples"])
            .args(["--examples", "--all-features"]);
        cmd
    })?;
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut failed = Vec::new();
    let mut checked_failure = false;
    for (broker, var) in BROKERS {
        if !only.is_empty() && !only.iter().any(|b| b == broker) {
            continue;
        }
        let Some(url) = std::env::var(var).ok().filter(|u| !u.is_empty()) else {
            let line = format!("{broker}: {var} is not set (scripts/brokers.sh env)");
            if required {
                failed.push(line);
            } else {
                println!("examples: SKIPPED {line}");
            }
            continue;
        };
        let queue = format!("examples-{broker}-{stamp}");
        let started = Instant::now();
        let result = run_pair(broker, &url, &queue);
        match &result {
            Ok(()) => println!(
                "examples: {broker}: {COUNT} orders produced and handled on {queue} ({:.1} s)",
                started.elapsed().as_secs_f64()
            ),
            Err(e) => {
                println!("examples: {broker}: FAILED: {e}");
                failed.push(format!("{broker}: {e}"));
            }
        }
        if result.is_ok() && !checked_failure {
            checked_failure = true;
            let empty = format!("{queue}-empty");
            prepare(broker, &url, &empty)?;
            let args = ["--queue", &empty, "--count", "1", "--timeout", "3"];
            match wait(
                &format!("the {broker} worker"),
                example("worker", &url, &args),
            ) {
                Ok(s) if !s.success() => println!(
                    "examples: {broker}: a worker on an empty queue exits with {s}, as it must"
                ),
                Ok(s) => failed.push(format!(
                    "{broker}: a worker on an empty queue exited with {s}: its check cannot fail"
                )),
                Err(e) => failed.push(format!("{broker}: {e}")),
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("examples failed:\n{}", failed.join("\n")))
    }
}

/// The producer, then the worker, on `queue`.
fn run_pair(broker: &str, url: &str, queue: &str) -> Result<(), String> {
    prepare(broker, url, queue)?;
    let produced = wait(
        &format!("the {broker} producer"),
        example("producer", url, &["--queue", queue, "--count", COUNT]),
    )?;
    if !produced.success() {
        return Err(format!("the producer exited with {produced}"));
    }
    let worked = wait(
        &format!("the {broker} worker"),
        example(
            "worker",
            url,
            &["--queue", queue, "--count", COUNT, "--timeout", "60"],
        ),
    )?;
    if !worked.success() {
        return Err(format!("the worker exited with {worked}"));
    }
    Ok(())
}

/// The example `name` (`producer` or `worker`), built by the `cargo build` above, on `url` with
/// these arguments. It runs from the target directory rather than through `cargo run`, so a
/// worker's time limit is not spent waiting for a build lock another cargo holds.
fn example(name: &str, url: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(
        crate::target_dir()
            .join("debug")
            .join("examples")
            .join(name),
    );
    cmd.current_dir(root()).args(args).args(["--url", url]);
    cmd
}

/// Runs `cmd`; kills it after [`DEADLINE`]. `shown` names it in errors (the command line
/// itself holds the broker URL, which may carry a password).
fn wait(shown: &str, mut cmd: Command) -> Result<ExitStatus, String> {
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("{shown} could not start: {e}"))?;
    let started = Instant::now();
    loop {
        if let Some(s) = child.try_wait().map_err(|e| format!("{shown}: {e}"))? {
            return Ok(s);
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{shown} still ran after {DEADLINE:?}; killed"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What a broker needs before the first publish. SQS queues are infrastructure the app does not
/// create: the queue and its dead-letter queue are created on the local SQS server (moto) with
/// boto3 from the Python environment `scripts/brokers.sh` installs (`$BQ_PYTHON`).
fn prepare(broker: &str, url: &str, queue: &str) -> Result<(), String> {
    if broker != "sqs" {
        return Ok(());
    }
    let python = std::env::var("BQ_PYTHON")
        .map_err(|_| "BQ_PYTHON is not set (scripts/brokers.sh env)".to_owned())?;
    let endpoint = url
        .split_once("endpoint=")
        .and_then(|(_, rest)| rest.split('&').next())
        .ok_or_else(|| format!("{url} names no endpoint= (only a local SQS server is prepared)"))?;
    status({
        let mut cmd = Command::new(python);
        cmd.args([
            "-c",
            "import sys, boto3\n\
             sqs = boto3.client('sqs', endpoint_url=sys.argv[1], region_name='us-east-1')\n\
             for name in sys.argv[2:]:\n    sqs.create_queue(QueueName=name)",
            endpoint,
            queue,
            &format!("{queue}-dlq"),
        ]);
        cmd
    })
}
