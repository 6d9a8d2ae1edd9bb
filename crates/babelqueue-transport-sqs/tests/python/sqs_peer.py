"""The reference Python SDK (babelqueue 1.24.0) as an SQS peer for the Rust tests and benchmark.

Every command goes through the Python SDK's own SqsTransport, built from the same sqs:// URL the
Rust side uses, and prints one JSON object per line on stdout:

    publish        --url U --queue Q --urn URN --count N [--header K=V]...
                   one {"body": <the exact text sent>} per message; data is {"seq": i, "note": ...}
    consume        --url U --queue Q --count N [--urn URN]... [--fail-urn URN]...
                   [--max-attempts N] [--dead-letter] [--timeout S]
                   one {"urn", "trace_id", "attempts", "data", "meta", "headers", "envelope"} per
                   handler call, then {"processed": n}
    bench-publish  --url U --queue Q --urn URN --count N     -> {"messages", "seconds"}
    bench-consume  --url U --queue Q --urn URN --count N     -> {"messages", "seconds", "cpu_s"}
                   (cpu_s: this process's CPU time over the consume, getrusage)

Credentials come from the environment (the tests pass dummy ones; moto checks no signature).
"""

import argparse
import json
import resource
import sys
import time

from babelqueue import BabelQueue, EnvelopeCodec
from babelqueue.headers import headers_from_context


def _app(args, **options):
    return BabelQueue(args.url, queue=args.queue, **options)


def publish(args):
    app = _app(args)
    headers = dict(h.split("=", 1) for h in args.header)
    for i in range(args.count):
        envelope = EnvelopeCodec.make(
            args.urn, {"seq": i, "note": "caf\u00e9 / \u00fc", "ratio": 1.5}, queue=args.queue
        )
        body = EnvelopeCodec.encode(envelope)
        # What BabelQueue.publish / publish_with_headers do, keeping the exact body to report it.
        if headers:
            app.transport.publish_with_headers(args.queue, body, headers)
        else:
            app.transport.publish(args.queue, body)
        print(json.dumps({"body": body}), flush=True)


def consume(args):
    app = _app(
        args,
        max_attempts=args.max_attempts,
        dead_letter=args.dead_letter,
    )

    def record(fail):
        def handler(data, meta, envelope):
            print(
                json.dumps(
                    {
                        "urn": envelope.get("job"),
                        "trace_id": envelope.get("trace_id"),
                        "attempts": envelope.get("attempts"),
                        "data": data,
                        "meta": meta,
                        "headers": dict(headers_from_context()),
                        "envelope": envelope,
                    }
                ),
                flush=True,
            )
            if fail:
                raise RuntimeError("python peer: %s is a --fail-urn" % envelope.get("job"))

        return handler

    for urn in args.urn:
        app.register(urn, record(False))
    for urn in args.fail_urn:
        app.register(urn, record(True))
    processed = app.consume(
        args.queue, max_messages=args.count, timeout=args.timeout, handle_signals=False
    )
    print(json.dumps({"processed": processed}), flush=True)


def bench_publish(args):
    app = _app(args)
    started = time.perf_counter()
    for i in range(args.count):
        app.publish(args.urn, {"order_id": i, "total": 99.9})
    elapsed = time.perf_counter() - started
    print(json.dumps({"messages": args.count, "seconds": elapsed}), flush=True)


def bench_consume(args):
    app = _app(args)
    app.register(args.urn, lambda data, meta: None)
    started = time.perf_counter()
    cpu = _cpu_seconds()
    processed = app.consume(args.queue, max_messages=args.count, timeout=1.0, handle_signals=False)
    cpu = _cpu_seconds() - cpu
    elapsed = time.perf_counter() - started
    print(json.dumps({"messages": processed, "seconds": elapsed, "cpu_s": cpu}), flush=True)


def _cpu_seconds():
    """This process's CPU time (user + system, getrusage), as the Rust side measures its own."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["publish", "consume", "bench-publish", "bench-consume"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--urn", action="append", default=[])
    parser.add_argument("--fail-urn", action="append", default=[])
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--max-attempts", type=int, default=3)
    parser.add_argument("--dead-letter", action="store_true")
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args(argv)
    if args.command in ("publish", "bench-publish", "bench-consume"):
        if len(args.urn) != 1:
            parser.error("%s takes exactly one --urn" % args.command)
        args.urn = args.urn[0]
    {
        "publish": publish,
        "consume": consume,
        "bench-publish": bench_publish,
        "bench-consume": bench_consume,
    }[args.command](args)


if __name__ == "__main__":
    main(sys.argv[1:])
