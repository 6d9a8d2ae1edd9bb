"""Interop peer for the Rust GDPR tests: runs the Python reference SDK's field protection.

    gdpr_peer.py protect   SCHEMA_JSON KEY_BASE64 < data.json  > protected.json
    gdpr_peer.py unprotect SCHEMA_JSON KEY_BASE64 < data.json  > clear.json

The reference SDK ships no cipher (only the Cipher protocol), so this peer supplies the AES-GCM
one its documentation describes, on the `cryptography` package: a fresh 12-byte nonce, then the
sealed bytes (ciphertext and 16-byte tag), all in standard base64. A decrypt failure exits with
status 3 and the exception's class name on stderr.
"""

import base64
import json
import os
import sys

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from babelqueue.exceptions import DecryptError
from babelqueue.gdpr import protect, unprotect


class PeerCipher:
    def __init__(self, key: bytes) -> None:
        self._gcm = AESGCM(key)

    def encrypt(self, plaintext: bytes) -> str:
        iv = os.urandom(12)
        return base64.b64encode(iv + self._gcm.encrypt(iv, plaintext, None)).decode("ascii")

    def decrypt(self, ciphertext: str) -> bytes:
        blob = base64.b64decode(ciphertext, validate=True)
        return self._gcm.decrypt(blob[:12], blob[12:], None)


def main() -> int:
    command, schema_text, key_text = sys.argv[1:4]
    schema = json.loads(schema_text)
    cipher = PeerCipher(base64.b64decode(key_text))
    data = json.loads(sys.stdin.read())
    try:
        if command == "protect":
            protect(data, schema, cipher)
        elif command == "unprotect":
            unprotect(data, schema, cipher)
        else:
            print(f"unknown command {command}", file=sys.stderr)
            return 2
    except DecryptError as exc:
        print(type(exc).__name__, file=sys.stderr)
        return 3
    sys.stdout.write(json.dumps(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
