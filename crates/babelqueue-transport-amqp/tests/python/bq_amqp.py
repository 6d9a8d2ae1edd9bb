"""Driver for the reference Python SDK (babelqueue 1.24.0) over RabbitMQ, used by the Rust
crate's interop tests and benchmark. Every command prints JSON lines on stdout.

  publish URL QUEUE URN DATA [--count N] [--trace-id T] [--header K=V]...
  consume URL QUEUE [--fail-urn URN]... [--max-attempts N] [--dead-letter] [--max N] [--timeout S]
      one line per handler call: {"urn", "attempts", "data", "meta", "trace_id", "headers"}
  drain URL QUEUE
      takes every message off QUEUE (basic_get + ack) and prints
      {"body", "properties", "headers", "header_types"} for each, body decoded with the SDK codec
  bench URL QUEUE N
      publishes N messages with the SDK, then consumes them with the SDK worker; prints
      {"n", "publish_s", "consume_s"}
"""

import json
import resource
import sys
import time

import pika

from babelqueue import BabelQueue, EnvelopeCodec
from babelqueue.headers import headers_from_context


def _options(argv, flags=(), multi=()):
    out = {k: [] for k in multi}
    rest = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            key = a[2:].replace("-", "_")
            if key in flags:
                out[key] = True
                i += 1
                continue
            value = argv[i + 1]
            if key in multi:
                out[key].append(value)
            else:
                out[key] = value
            i += 2
        else:
            rest.append(a)
            i += 1
    return rest, out


def publish(argv):
    (url, queue, urn, data), opts = _options(argv, multi=("header",))
    app = BabelQueue(url, queue=queue)
    headers = dict(h.split("=", 1) for h in opts["header"])
    for _ in range(int(opts.get("count", 1))):
        if headers:
            mid = app.publish_with_headers(urn, json.loads(data), headers, trace_id=opts.get("trace_id"))
        else:
            mid = app.publish(urn, json.loads(data), trace_id=opts.get("trace_id"))
        print(json.dumps({"published": mid}), flush=True)


def consume(argv):
    (url, queue), opts = _options(argv, flags=("dead_letter",), multi=("fail_urn", "urn"))
    app = BabelQueue(
        url,
        queue=queue,
        max_attempts=int(opts.get("max_attempts", 3)),
        dead_letter=bool(opts.get("dead_letter")),
    )

    def handler_for(urn, fail):
        def handle(data, meta, envelope):
            print(json.dumps({
                "urn": urn,
                "attempts": envelope.get("attempts"),
                "data": data,
                "meta": meta,
                "trace_id": envelope.get("trace_id"),
                "headers": dict(headers_from_context()),
            }), flush=True)
            if fail:
                raise RuntimeError("python handler failed on purpose")
        return handle

    for urn in opts["urn"]:
        app.register(urn, handler_for(urn, False))
    for urn in opts["fail_urn"]:
        app.register(urn, handler_for(urn, True))
    max_messages = int(opts["max"]) if "max" in opts else None
    app.consume(max_messages=max_messages, timeout=float(opts.get("timeout", 1.0)), handle_signals=False)


def drain(argv):
    (url, queue), _ = _options(argv)
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.queue_declare(queue=queue, durable=True)
    while True:
        method, props, body = ch.basic_get(queue=queue, auto_ack=True)
        if method is None:
            break
        headers = props.headers or {}
        print(json.dumps({
            "body": EnvelopeCodec.decode(body.decode("utf-8")),
            "properties": {
                "type": props.type,
                "correlation_id": props.correlation_id,
                "message_id": props.message_id,
                "app_id": props.app_id,
                "content_type": props.content_type,
                "delivery_mode": props.delivery_mode,
            },
            "headers": {k: (v.decode() if isinstance(v, bytes) else v) for k, v in headers.items()},
            "header_types": {k: type(v).__name__ for k, v in headers.items()},
        }), flush=True)
    conn.close()


def bench(argv):
    (url, queue, n), _ = _options(argv)
    n = int(n)
    app = BabelQueue(url, queue=queue)
    count = [0]

    def handle(data, meta):
        count[0] += 1

    app.register("urn:babel:bench:ping", handle)
    started = time.perf_counter()
    for i in range(n):
        app.publish("urn:babel:bench:ping", {"i": i, "total": 99.9})
    published = time.perf_counter()
    cpu = _cpu_seconds()
    app.consume(max_messages=n, timeout=1.0, handle_signals=False)
    done = time.perf_counter()
    print(json.dumps({
        "n": count[0],
        "publish_s": published - started,
        "consume_s": done - published,
        "consume_cpu_s": _cpu_seconds() - cpu,
    }), flush=True)


def _cpu_seconds():
    """This process's CPU time (user + system, getrusage), as the Rust side measures its own."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    {"publish": publish, "consume": consume, "drain": drain, "bench": bench}[sys.argv[1]](sys.argv[2:])
