"""A webhook receiver for the tests, verifying every delivery with PyPI
`standardwebhooks` (the official verifier), unmodified but for its clock,
which follows the test's clock so the ±5 minute tolerance is checked against
the time the registry under test believes it is.

Control (JSON over HTTP, from the test):
  POST /_control {"secrets": [...], "now": <unix s>, "answers": [503, 410, ...]}
      secrets to verify with (each tried alone), the receiver's clock, and the
      statuses to answer next, in order (then 200 for ever).
  GET  /_log  -> every delivery received: id, timestamp, path, the status
      answered, the indices of the secrets that verified, the verifier's
      error per secret, and the parsed body.
Prints "listening <port>" on stdout once bound to 127.0.0.1.
"""

import json
import sys
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import standardwebhooks.webhooks as library
from standardwebhooks import Webhook

STATE = {"secrets": [], "now": None, "answers": [], "log": []}
LOCK = threading.Lock()


class TestClock(datetime):
    """`datetime` whose now() is the test's clock when one is set."""

    @classmethod
    def now(cls, tz=None):
        with LOCK:
            now = STATE["now"]
        if now is None:
            return datetime.now(tz)
        return datetime.fromtimestamp(now, tz or timezone.utc)


library.datetime = TestClock


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body=b"{}"):
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/_log":
            with LOCK:
                body = json.dumps(STATE["log"]).encode()
            return self.reply(200, body)
        self.reply(404)

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(length)
        if self.path == "/_control":
            control = json.loads(body)
            with LOCK:
                for key in ("secrets", "now", "answers"):
                    if key in control:
                        STATE[key] = control[key]
            return self.reply(200)
        with LOCK:
            secrets = list(STATE["secrets"])
            status = STATE["answers"].pop(0) if STATE["answers"] else 200
        headers = {k.lower(): v for k, v in self.headers.items()}
        verified, errors, parsed = [], [], None
        for index, secret in enumerate(secrets):
            try:
                parsed = Webhook(secret).verify(body, headers)
                verified.append(index)
                errors.append(None)
            except Exception as error:  # the verifier's refusal, recorded per secret
                errors.append(str(error))
        entry = {
            "id": headers.get("webhook-id"),
            "timestamp": headers.get("webhook-timestamp"),
            "signature": headers.get("webhook-signature"),
            "path": self.path,
            "status": status,
            "verified": verified,
            "errors": errors,
            "body": parsed if parsed is not None else json.loads(body or b"null"),
        }
        with LOCK:
            STATE["log"].append(entry)
        self.reply(status)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
