"""The consume-side codec hop of the Python SDK, timed per body, for `cargo xtask bench runtime`.

For each `NAME.json` in the directory given as the first argument, it times what the Python
SDK's runtime does to a delivery it retries: the strict poison verdict, the lenient decode,
`attempts + 1`, and the encode, starting from the body's bytes. It prints one line per body:

    BQ-FIGURE python_hop_ns NAME NANOSECONDS
"""

import pathlib
import sys
import time

from babelqueue.codec import EnvelopeCodec


def hop(body: bytes) -> int:
    text = body.decode("utf-8")
    cause = EnvelopeCodec.poison_cause(text)
    envelope = EnvelopeCodec.decode_lenient(text)
    envelope["attempts"] = envelope.get("attempts", 0) + 1
    return len(EnvelopeCodec.encode(envelope)) + (cause is not None)


def per_message(body: bytes, budget: float) -> float:
    """The best of seven rounds of budget/7 seconds each: on a shared machine other work only
    ever adds time (the Rust side of the benchmark is timed the same way)."""
    hop(body)
    best = float("inf")
    for _ in range(7):
        rounds = 0
        started = time.perf_counter()
        while time.perf_counter() - started < budget / 7:
            for _ in range(16):
                hop(body)
            rounds += 16
        best = min(best, (time.perf_counter() - started) / rounds)
    return best


def main() -> None:
    directory = pathlib.Path(sys.argv[1])
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    for path in sorted(directory.glob("*.json")):
        seconds = per_message(path.read_bytes(), budget)
        print(f"BQ-FIGURE python_hop_ns {path.stem} {seconds * 1e9:.0f}", flush=True)


if __name__ == "__main__":
    main()
