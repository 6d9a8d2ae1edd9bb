"""Drives the reference Python SDK (babelqueue 1.24.0, ``babelqueue[artemis]``) against the same
Artemis broker as the Rust tests and benchmark. Output is one JSON document per line on stdout.

    publish URL QUEUE URN COUNT DATA_JSON [TRACE_ID]
        BabelQueue(URL).publish(...) COUNT times; prints {"ids": [...], "seconds": s}.
    consume URL QUEUE COUNT [--fail-urn URN] [--max-attempts N] [--dead-letter]
        Consumes up to COUNT messages with the SDK's runtime; prints one line per handler call
        ({"urn","trace_id","attempts","data","meta"}), then {"processed": n}.
    bench-consume URL QUEUE COUNT
        Times consuming COUNT messages with a no-op handler (the clock starts at the first
        handler call); prints {"messages": n, "seconds": s, "per_second": r, "cpu_s": c}, c being
        this process's CPU time (getrusage) over the consume call.
"""

import json
import resource
import sys
import time

from babelqueue import BabelQueue


def _app(url, queue, **options):
    return BabelQueue(url, queue=queue, **options)


def publish(url, queue, urn, count, data, trace_id=None):
    app = _app(url, queue)
    ids = []
    started = time.perf_counter()
    for _ in range(count):
        ids.append(app.publish(urn, data, trace_id=trace_id))
    seconds = time.perf_counter() - started
    app.transport.close()
    print(json.dumps({"ids": ids, "seconds": seconds}), flush=True)


def consume(url, queue, count, fail_urns, max_attempts, dead_letter):
    app = _app(url, queue, max_attempts=max_attempts, dead_letter=dead_letter)

    class Catch:
        def __init__(self, urn, fail):
            self.urn = urn
            self.fail = fail

        def __call__(self, data, meta, envelope):
            print(
                json.dumps(
                    {
                        "urn": self.urn,
                        "trace_id": envelope.get("trace_id"),
                        "attempts": envelope.get("attempts"),
                        "data": data,
                        "meta": meta,
                    }
                ),
                flush=True,
            )
            if self.fail:
                raise RuntimeError("failing on purpose")

    return app, Catch


def run_consume(argv):
    url, queue, count = argv[0], argv[1], int(argv[2])
    fail_urns, handle_urns, max_attempts, dead_letter = [], [], 3, False
    rest = argv[3:]
    i = 0
    while i < len(rest):
        if rest[i] == "--fail-urn":
            fail_urns.append(rest[i + 1])
            i += 2
        elif rest[i] == "--urn":
            handle_urns.append(rest[i + 1])
            i += 2
        elif rest[i] == "--max-attempts":
            max_attempts = int(rest[i + 1])
            i += 2
        elif rest[i] == "--dead-letter":
            dead_letter = True
            i += 1
        else:
            raise SystemExit(f"unknown argument {rest[i]!r}")
    app, catch = consume(url, queue, count, fail_urns, max_attempts, dead_letter)
    for urn in handle_urns:
        app.register(urn, catch(urn, False))
    for urn in fail_urns:
        app.register(urn, catch(urn, True))
    processed = app.consume(max_messages=count, timeout=3.0, handle_signals=False)
    app.transport.close()
    print(json.dumps({"processed": processed}), flush=True)


def bench_consume(url, queue, count, urn):
    app = _app(url, queue)
    state = {"first": None, "n": 0}

    def handle(data, meta):
        if state["first"] is None:
            state["first"] = time.perf_counter()
        state["n"] += 1

    app.register(urn, handle)
    cpu = _cpu_seconds()
    app.consume(max_messages=count, timeout=5.0, handle_signals=False)
    cpu = _cpu_seconds() - cpu
    seconds = time.perf_counter() - (state["first"] or time.perf_counter())
    app.transport.close()
    n = state["n"]
    print(
        json.dumps(
            {"messages": n, "seconds": seconds, "per_second": n / seconds if seconds else 0, "cpu_s": cpu}
        ),
        flush=True,
    )


def _cpu_seconds():
    """This process's CPU time (user + system, getrusage), as the Rust side measures its own."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv):
    command = argv[0]
    if command == "publish":
        trace_id = argv[6] if len(argv) > 6 else None
        publish(argv[1], argv[2], argv[3], int(argv[4]), json.loads(argv[5]), trace_id)
    elif command == "consume":
        run_consume(argv[1:])
    elif command == "bench-consume":
        bench_consume(argv[1], argv[2], int(argv[3]), argv[4])
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
