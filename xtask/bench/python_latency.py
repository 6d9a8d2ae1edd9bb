"""Open-loop publish-to-handled latency of the Python reference SDK (babelqueue 1.24.0).

  python_latency.py URL QUEUE RATE SECONDS

The consumer runs in this process; the producer in a child process (`produce` mode) that says
when it is ready and is then given the schedule's start, paced by a clock schedule: message i is due at start + i / RATE and carries that time (wall clock, ns,
in its `t` data field), whether the producer is on time or late. The consumer records, per
message, its handler's start minus the scheduled time, so a slow producer or consumer shows in
the latencies (no coordinated omission). The run gives up 5 s after the schedule's end. Prints one JSON line:
{"rate", "offered", "lat_us": [...], "span_s", "cpu_s"} where span_s runs from the first
scheduled send to the last handler start and cpu_s is this consuming process's CPU time
(getrusage) over the run. The Rust benchmarks read it into the same histogram as their own.
"""
import json
import os
import resource
import subprocess
import sys
import threading
import time
from urllib.parse import parse_qs, urlsplit, urlunsplit

from babelqueue import BabelQueue

URN = "urn:babel:bench:noop"
GRACE_S = 5.0
# Where the lines for the parent go: the original stdout. `main` points file descriptor 1 at
# stderr, because some clients log there (Pulsar's C++ client does, even at exit).
RESULT = sys.stdout


def make_app(url, queue, consuming=False):
    parts = urlsplit(url)
    if parts.scheme == "sqs" and parse_qs(parts.query).get("endpoint"):
        # A local endpoint (moto) takes any credentials; real ones in the environment win.
        for key, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test")):
            os.environ.setdefault(key, value)
        os.environ.setdefault("AWS_DEFAULT_REGION", parts.hostname or "us-east-1")
    if parts.scheme in ("pulsar", "pulsar+ssl") and consuming:
        # The reference SDK's subscription starts at the latest message and is made at the
        # first receive: make it before the warm-up message is published, or that is missed.
        app = BabelQueue(url, queue=queue)
        app.transport.pop(queue, timeout=0.2)
        return app
    if parts.scheme in ("redis", "rediss"):
        # The reference SDK hands its URL's query to redis-py: give it a clean URL.
        from babelqueue.redis_transport import RedisTransport

        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        kwargs = {}
        if query.get("laravel", "").lower() in ("1", "true", "yes", "on"):
            kwargs["laravel_compat"] = True
        clean = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        return BabelQueue(transport=RedisTransport(clean, **kwargs), queue=queue)
    return BabelQueue(url, queue=queue)


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def produce(url, queue, rate, seconds):
    app = make_app(url, queue)
    # Ready (interpreter up, SDK imported, app made): the consumer answers with the schedule's
    # start, so the interpreter's start-up is not counted as latency.
    RESULT.write("ready\n")
    RESULT.flush()
    start_ns = int(sys.stdin.readline())
    offered = round(rate * seconds)
    interval = 1_000_000_000 // rate
    for i in range(offered):
        due = start_ns + i * interval
        wait = (due - time.time_ns()) / 1e9
        if wait > 0:
            time.sleep(wait)
        app.publish(URN, {"order_id": 1042, "total": 99.9, "t": due})
    # Kafka's producer sends in the background: what it still holds goes out before the exit.
    close = getattr(app.transport, "close", None)
    if close is not None:
        close()


def consume(url, queue, rate, seconds):
    app = make_app(url, queue, consuming=True)
    offered = round(rate * seconds)
    latencies = []
    last = [0]

    # Warm-up: connections and the first poll, as the Rust side does.
    # A Kafka consumer group may take a while to join a topic that was just created.
    warm = [False]

    def handle(data, meta):
        now = time.time_ns()
        due = data.get("t")
        if due is None:
            warm[0] = True
        else:
            latencies.append(max(0, now - due) // 1000)
            last[0] = now

    app.register(URN, handle)
    app.publish(URN, {"warm": True})
    warm_until = time.monotonic() + 60
    while not warm[0] and time.monotonic() < warm_until:
        app.consume(max_messages=1, handle_signals=False)
    producer = subprocess.Popen(
        [sys.executable, __file__, "produce", url, queue, str(rate), str(seconds)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    if producer.stdout.readline().strip() != "ready":
        raise SystemExit("the producer did not start")
    start_ns = time.time_ns() + 5_000_000
    producer.stdin.write("%d\n" % start_ns)
    producer.stdin.flush()
    # A load this side cannot sustain would take minutes to drain: the run gives up GRACE_S
    # after the schedule's end, as the Rust side does (what is missing then is not sustained).
    # With max_messages, the SDK's consume returns at the first empty poll (pika's basic_get
    # finds the queue empty between two messages), so it is called again until every message
    # was handled; each call with the SDK's default poll timeout (1 s).
    give_up_ns = start_ns + int((seconds + GRACE_S) * 1e9)
    give_up = threading.Timer((give_up_ns - time.time_ns()) / 1e9, app.stop)
    give_up.start()
    before = cpu_seconds()
    while len(latencies) < offered and time.time_ns() < give_up_ns:
        app.consume(max_messages=offered - len(latencies), handle_signals=False)
    cpu = cpu_seconds() - before
    give_up.cancel()
    if producer.poll() is None:
        producer.kill()
    producer.wait()
    span = (last[0] - start_ns) / 1e9 if last[0] else 0.0
    RESULT.write(
        json.dumps({"rate": rate, "offered": offered, "lat_us": latencies, "span_s": span, "cpu_s": cpu})
        + "\n"
    )
    RESULT.flush()


def main():
    global RESULT
    sys.stdout.flush()
    RESULT = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    if sys.argv[1] == "produce":
        url, queue, rate, seconds = sys.argv[2:6]
        produce(url, queue, int(rate), float(seconds))
    else:
        url, queue, rate, seconds = sys.argv[1:5]
        consume(url, queue, int(rate), float(seconds))


if __name__ == "__main__":
    main()
