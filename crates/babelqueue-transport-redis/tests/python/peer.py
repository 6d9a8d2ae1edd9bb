"""A small driver for the Python reference SDK (babelqueue 1.24.0), used by the Rust tests and
benchmarks as the interop peer. Every command prints JSON lines on stdout.

  publish URL QUEUE URN DATA_JSON COUNT            one {"id": meta.id} line per message
  consume URL QUEUE MAX [options]                  one {"urn","trace_id","attempts","data","meta"} line
        --urn URN (repeatable)    handle this URN
        --fail-urn URN            handle this URN with a handler that raises
        --max-attempts N  --dead-letter  --timeout SECONDS
  drain URL QUEUE                                  one {"body": <raw text>} line per message, acked
  bench URL QUEUE N                                publish N, consume N (no-op),
                                                   {"publish_s","consume_s","consume_cpu_s"}
"""
import argparse
import json
import resource
import sys
import time

from urllib.parse import parse_qs, urlsplit, urlunsplit

from babelqueue import BabelQueue
from babelqueue.redis_transport import RedisTransport


def make_app(url, queue, **options):
    """The reference SDK passes its own query keys (laravel, prefix, retry_after) on to redis-py,
    which rejects them; give it a clean URL and the options as keywords instead."""
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    kwargs = {}
    if query.get("laravel", "").lower() in ("1", "true", "yes", "on"):
        kwargs["laravel_compat"] = True
    if query.get("prefix"):
        kwargs["key_prefix"] = query["prefix"]
    if "retry_after" in query:
        value = query["retry_after"]
        kwargs["retry_after"] = None if value.lower() in ("null", "none") else int(value)
    clean = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    return BabelQueue(transport=RedisTransport(clean, **kwargs), queue=queue, **options)


def line(obj):
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def publish(args):
    app = make_app(args.url, args.queue)
    data = json.loads(args.data)
    for _ in range(args.count):
        line({"id": app.publish(args.urn, data)})


def consume(args):
    app = make_app(args.url, args.queue, max_attempts=args.max_attempts, dead_letter=args.dead_letter)

    def handler(fail):
        def run(data, meta, envelope):
            line({
                "urn": envelope.get("job"),
                "trace_id": envelope.get("trace_id"),
                "attempts": envelope.get("attempts"),
                "data": data,
                "meta": meta,
            })
            if fail:
                raise RuntimeError("python peer: --fail-urn")
        return run

    for urn in args.urn or []:
        app.register(urn, handler(False))
    for urn in args.fail_urn or []:
        app.register(urn, handler(True))
    app.consume(max_messages=args.max, timeout=args.timeout, handle_signals=False)


def drain(args):
    app = make_app(args.url, args.queue)
    transport = app.transport
    while True:
        message = transport.pop(args.queue, timeout=0.2)
        if message is None:
            break
        line({"body": message.body})
        transport.ack(message)


def bench(args):
    app = make_app(args.url, args.queue)
    handled = [0]

    def noop(data, meta):
        handled[0] += 1

    app.register("urn:babel:bench:noop", noop)
    data = {"order_id": 1042, "total": 99.9}
    started = time.perf_counter()
    for _ in range(args.n):
        app.publish("urn:babel:bench:noop", data)
    published = time.perf_counter()
    cpu = cpu_seconds()
    app.consume(max_messages=args.n, timeout=1.0, handle_signals=False)
    done = time.perf_counter()
    line({
        "publish_s": published - started,
        "consume_s": done - published,
        "consume_cpu_s": cpu_seconds() - cpu,
        "handled": handled[0],
    })


def cpu_seconds():
    """This process's CPU time (user + system, getrusage), as the Rust side measures its own."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("publish")
    p.add_argument("url"), p.add_argument("queue"), p.add_argument("urn"), p.add_argument("data")
    p.add_argument("count", type=int)
    c = sub.add_parser("consume")
    c.add_argument("url"), c.add_argument("queue"), c.add_argument("max", type=int)
    c.add_argument("--urn", action="append")
    c.add_argument("--fail-urn", action="append")
    c.add_argument("--max-attempts", type=int, default=3)
    c.add_argument("--dead-letter", action="store_true")
    c.add_argument("--timeout", type=float, default=1.0)
    d = sub.add_parser("drain")
    d.add_argument("url"), d.add_argument("queue")
    b = sub.add_parser("bench")
    b.add_argument("url"), b.add_argument("queue"), b.add_argument("n", type=int)
    args = parser.parse_args()
    {"publish": publish, "consume": consume, "drain": drain, "bench": bench}[args.cmd](args)


if __name__ == "__main__":
    main()
