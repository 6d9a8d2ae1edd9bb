"""A peer for the kit's own tests of PythonPeer: no broker, just the JSON-lines protocol.

  args ARG...   print a log line, then {"args": [...], "sdk": babelqueue.__version__}
  echo          print {"ready": true}, then {"echo": <line>} for each JSON line on stdin
  fail          print to stderr and exit 3
"""
import json
import sys

import babelqueue


def line(obj):
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def main():
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd == "args":
        print("a log line that is not JSON")
        line({"args": rest, "sdk": babelqueue.__version__})
    elif cmd == "echo":
        line({"ready": True})
        for raw in sys.stdin:
            line({"echo": json.loads(raw)})
    elif cmd == "fail":
        sys.stderr.write("echo.py: failing on purpose\n")
        sys.exit(3)


if __name__ == "__main__":
    main()
