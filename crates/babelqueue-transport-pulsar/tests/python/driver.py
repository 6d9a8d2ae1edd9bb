"""Drives the reference Python SDK (babelqueue 1.24.0, PulsarTransport) against a local Pulsar
broker, for the Rust transport's interop tests and benchmark.

    driver.py publish URL QUEUE COUNT      publish COUNT envelopes; print {"seconds": s}
    driver.py consume URL QUEUE COUNT      consume COUNT messages with a handler for
                                           urn:babel:orders:created; print one JSON line per
                                           handler call, then {"seconds": s, "cpu_s": c}, c
                                           being this process's CPU time over the consume
    driver.py subscribe URL QUEUE          create the `babelqueue` subscription, then exit
    driver.py bare-subscribe URL QUEUE     create the `bench-bare` subscription with the bare
                                           pulsar-client (the C++ client the SDK wraps), then exit
    driver.py bare-consume URL QUEUE COUNT receive and acknowledge COUNT messages on
                                           `bench-bare` with the bare client, nothing decoded;
                                           print {"seconds": s}, timed from the first message
    driver.py bare-redelivery URL QUEUE    receive one message on `babelqueue` with the bare
                                           client, acknowledge it; print {"redelivery_count": n},
                                           the broker's count as the C++ client reports it
    driver.py bare-nack URL QUEUE COUNT    receive one message on `babelqueue` with the bare
                                           client, nack it COUNT times, printing the broker's
                                           count of each delivery; close without acknowledging
"""

import json
import resource
import sys
import time

from babelqueue import BabelQueue
from babelqueue.pulsar_transport import PulsarTransport

URN = "urn:babel:orders:created"


def _cpu_seconds():
    """This process's CPU time (user + system, getrusage), as the Rust side measures its own."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bare(mode: str, url: str, queue: str, count: int) -> int:
    """The bare-client loop: what the broker and the C++ client give without any SDK."""
    import pulsar

    client = pulsar.Client(url)
    try:
        if mode in ("bare-redelivery", "bare-nack"):
            consumer = client.subscribe(queue, "babelqueue", consumer_type=pulsar.ConsumerType.Shared,
                                        initial_position=pulsar.InitialPosition.Earliest,
                                        negative_ack_redelivery_delay_ms=100)
            message = consumer.receive(30_000)
            print(json.dumps({"redelivery_count": message.redelivery_count()}), flush=True)
            if mode == "bare-redelivery":
                consumer.acknowledge(message)
                return 0
            for _ in range(count):
                consumer.negative_acknowledge(message)
                message = consumer.receive(30_000)
                print(json.dumps({"redelivery_count": message.redelivery_count()}), flush=True)
            return 0
        consumer = client.subscribe(queue, "bench-bare", consumer_type=pulsar.ConsumerType.Shared)
        if mode == "bare-subscribe":
            return 0
        started = None
        for _ in range(count):
            message = consumer.receive(30_000)
            if started is None:
                started = time.perf_counter()
            consumer.acknowledge(message)
        print(json.dumps({"seconds": time.perf_counter() - started}), flush=True)
        return 0
    finally:
        client.close()


def main() -> int:
    mode, url, queue = sys.argv[1], sys.argv[2], sys.argv[3]
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    if mode.startswith("bare-"):
        return bare(mode, url, queue, count)
    transport = PulsarTransport(url)
    app = BabelQueue(transport=transport, queue=queue, dead_letter=True)
    try:
        if mode == "subscribe":
            transport.pop(queue, timeout=0.2)
            return 0
        if mode == "publish":
            started = time.perf_counter()
            for i in range(count):
                app.publish(URN, {"order_id": i, "lang": "python"})
            print(json.dumps({"seconds": time.perf_counter() - started}), flush=True)
            return 0
        if mode == "consume":
            seen = []

            def handle(data, meta, envelope):
                seen.append({"urn": envelope.get("job"), "attempts": envelope.get("attempts"),
                             "data": data, "lang": meta.get("lang")})

            app.register(URN, handle)
            started = time.perf_counter()
            cpu = _cpu_seconds()
            while len(seen) < count and time.perf_counter() - started < 60:
                app.consume(max_messages=count - len(seen), timeout=2.0, handle_signals=False)
            elapsed = time.perf_counter() - started
            cpu = _cpu_seconds() - cpu
            for line in seen:
                print(json.dumps(line), flush=True)
            print(json.dumps({"seconds": elapsed, "cpu_s": cpu}), flush=True)
            return 0 if len(seen) == count else 1
        print(f"unknown mode {mode}", file=sys.stderr)
        return 2
    finally:
        transport.close()


if __name__ == "__main__":
    sys.exit(main())
