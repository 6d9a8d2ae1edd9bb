"""Drives the reference Python SDK (babelqueue 1.24.0, ``babelqueue[kafka]``) for the Rust
Kafka transport's interop tests and benchmark. One subcommand per role; every result is printed
as JSON lines on stdout, diagnostics go to stderr.

    driver.py publish   BROKERS TOPIC COUNT
    driver.py consume   BROKERS TOPIC COUNT GROUP
    driver.py fail-once BROKERS TOPIC GROUP TIERS
    driver.py reinject  BROKERS TOPIC GROUP TIERS SECONDS
    driver.py dead-letter BROKERS TOPIC COUNT GROUP
    driver.py bench     BROKERS TOPIC COUNT GROUP
    driver.py bench-publish BROKERS TOPIC COUNT
"""

import json
import resource
import logging
import sys
import time

from babelqueue import BabelQueue
from babelqueue.kafka_retry import RetryReinjector
from babelqueue.kafka_transport import KafkaTransport

URN = "urn:babel:orders:created"
DEADLINE = 90.0

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)


def emit(doc):
    sys.stdout.write(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def tiers_of(text):
    return [int(t) for t in text.split(",") if t]


def transport(brokers, group="babelqueue", tiers=None):
    return KafkaTransport("kafka://" + brokers, group_id=group, retry_tiers_ms=tiers)


def recording(t):
    """Wraps ``pop`` so a handler can see the body it was given (attempts included)."""
    seen = {}
    pop = t.pop

    def wrapped(queue, timeout=1.0):
        received = pop(queue, timeout)
        if received is not None:
            seen["body"] = received.body
        return received

    t.pop = wrapped
    return seen


def publish(brokers, topic, count):
    t = transport(brokers)
    app = BabelQueue(transport=t, queue=topic)
    for n in range(int(count)):
        meta_id = app.publish(URN, {"n": n, "who": "python", "text": "h\u00e9llo \u2713 / \"q\""})
        emit({"id": meta_id})
    t._producer_().flush(30)


def consume(brokers, topic, count, group, dead_letter=False):
    t = transport(brokers, group)
    seen = recording(t)
    app = BabelQueue(transport=t, queue=topic, dead_letter=dead_letter, max_attempts=1)
    handled = []

    def handler(data, meta, envelope):
        handled.append(1)
        emit({"urn": envelope.get("job"), "data": data, "meta": meta, "body": seen.get("body")})

    app.register(URN, handler)
    want = int(count)
    stop = time.monotonic() + DEADLINE
    processed = 0
    while processed < want and time.monotonic() < stop:
        processed += app.consume(topic, max_messages=want - processed, timeout=1.0, handle_signals=False)
    t.close()
    if processed < want:
        sys.stderr.write("only %d of %d processed\n" % (processed, want))
        sys.exit(1)


def fail_once(brokers, topic, group, tiers):
    t = transport(brokers, group, tiers_of(tiers))
    app = BabelQueue(transport=t, queue=topic, max_attempts=3)

    def handler(data, meta):
        raise RuntimeError("python fails the first delivery")

    app.register(URN, handler)
    stop = time.monotonic() + DEADLINE
    processed = 0
    while processed < 1 and time.monotonic() < stop:
        processed += app.consume(topic, max_messages=1, timeout=1.0, handle_signals=False)
    t.close()
    emit({"processed": processed})


def reinject(brokers, topic, group, tiers, seconds):
    r = RetryReinjector("kafka://" + brokers, work_topics=[topic], retry_tiers_ms=tiers_of(tiers), group_id=group)
    stop = time.monotonic() + float(seconds)
    written = 0
    while written < 1 and time.monotonic() < stop:
        written += r.run_once(timeout=0.5)
    r.close()
    emit({"reinjected": written})


def bench(brokers, topic, count, group):
    t = transport(brokers, group)
    app = BabelQueue(transport=t, queue=topic)
    app.register(URN, lambda data, meta: None)
    want = int(count)
    # The first poll joins the group; time only the steady state after the first record.
    first = app.consume(topic, max_messages=1, timeout=5.0, handle_signals=False)
    started = time.perf_counter()
    cpu = _cpu_seconds()
    processed = 0
    stop = time.monotonic() + 600
    while first + processed < want and time.monotonic() < stop:
        processed += app.consume(topic, max_messages=want - first - processed, timeout=2.0, handle_signals=False)
    elapsed = time.perf_counter() - started
    cpu = _cpu_seconds() - cpu
    t.close()
    emit({"messages": processed, "seconds": elapsed, "cpu_s": cpu})


def _cpu_seconds():
    """This process's CPU time (user + system, getrusage), as the Rust side measures its own."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bench_publish(brokers, topic, count):
    """Publishes COUNT envelopes one by one, as an application does, then flushes: the time
    until the broker has them all."""
    t = transport(brokers)
    app = BabelQueue(transport=t, queue=topic)
    data = {"order_id": 1, "total": 99.9, "currency": "EUR"}
    started = time.perf_counter()
    for _ in range(int(count)):
        app.publish(URN, data)
    left = t._producer_().flush(60)
    elapsed = time.perf_counter() - started
    if left:
        raise SystemExit("%d records still queued after the flush" % left)
    emit({"messages": int(count), "seconds": elapsed})


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "publish":
        publish(*args)
    elif cmd == "consume":
        consume(*args)
    elif cmd == "dead-letter":
        consume(*args, dead_letter=True)
    elif cmd == "fail-once":
        fail_once(*args)
    elif cmd == "reinject":
        reinject(*args)
    elif cmd == "bench":
        bench(*args)
    elif cmd == "bench-publish":
        bench_publish(*args)
    else:
        raise SystemExit("unknown command %r" % cmd)


if __name__ == "__main__":
    main(sys.argv)
