"""A stand-in inference server that misbehaves on cue, for the block-level fault tests.

    python fake_engine.py --port N [--script ok,no_usage,...] [--api-key-env NAME] [--child]
                          [--never-ready] [--reject-flag] [--say-file PATH]

OpenAI-style /v1/completions streaming; the n-th completion request follows the n-th word of
--script (the last word repeats). Words:
  ok          max_tokens tokens, finish_reason "length", cached_tokens 0, usage, [DONE]
  no_usage    events and [DONE], no usage chunk
  malformed   one event that is not JSON
  http500     HTTP 500 with a JSON error body
  http429     HTTP 429 (rate limited)
  http400     HTTP 400, as vLLM answers a prompt longer than its context
  truncated   two events, then the connection closes without [DONE]
  cache_hit   like ok, but usage reports cached_tokens 16
  early_stop  half the tokens, finish_reason "stop"
  short       finish_reason "length" but one token fewer than max_tokens
  slow        like ok, 0.2 s per event (a block long enough to interrupt)
  drip        like ok, one token every --drip-s seconds (a server that never stalls long enough for a
              between-reads timeout, yet takes far longer than request.timeout_s)
  echo_auth   HTTP 500 whose body quotes the request's Authorization header (as some proxies and
              gateways do); the header is logged too
  echo_text   like ok, but the generated text quotes the Authorization header
  echo_forms  HTTP 500 whose body, a response header and the log carry the Authorization header in other
              forms: base64 of the header, base64 of the key, base64 of "user:KEY" (Basic auth), the key
              URL-encoded and in a URL's userinfo and query string
  echo_forms_text  like ok, but the generated text carries the same forms
  nan_count   like ok, but usage says completion_tokens NaN
  key_in_count like ok, but usage puts the Authorization header where cached_tokens (a number) belongs
  stall_head  the status line, then one header every 0.3 s, never the end of the head
  say         like ok, but the first token's text is the UTF-8 text of --say-file (any text a model could
              generate)
--api-key-env NAME: /v1/* answer 401 unless "Authorization: Bearer $NAME" is sent (like vLLM).
--child: fork a child in the same process group (like vLLM's engine core) and print its pid.
--never-ready: /health answers 503 forever.  --reject-flag: exit 2 at once like argparse.
Every completion request is logged on stdout as `request N WORD auth=yes|no`. The attach probe's requests
(prompt starting "# bracket preflight", bracket.experiment.probe) answer ok, logged as `request probe ok`, and are
not counted: the script is for the blocks' requests.
"""

import argparse
import base64
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, quote_plus

p = argparse.ArgumentParser()
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--port", type=int, required=True)
p.add_argument("--script", default="ok")
p.add_argument("--api-key-env", default="")
p.add_argument("--child", action="store_true")
p.add_argument("--never-ready", action="store_true")
p.add_argument("--reject-flag", action="store_true")
p.add_argument("--drip-s", type=float, default=4.0)
p.add_argument("--say-file", default="")
args = p.parse_args()

if args.reject_flag:
    time.sleep(0.3)
    print("fake_engine: error: unrecognized arguments: --no-such-flag", file=sys.stderr)
    sys.exit(2)

SCRIPT = args.script.split(",")
KEY = os.environ.get(args.api_key_env) if args.api_key_env else None
lock = threading.Lock()
count = [0]
if args.child:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(f"child {child.pid}", flush=True)


def echoed_forms(header: str) -> list[str]:
    """The Authorization header's key in the forms a gateway may echo it in (see the module's docstring)."""
    key = header.removeprefix("Bearer ")
    return [
        base64.b64encode(header.encode()).decode(),
        base64.b64encode(key.encode()).decode(),
        base64.urlsafe_b64encode(f"user:{key}".encode()).decode(),
        quote(key, safe=""),
        f"http://user:{quote(key, safe='')}@gateway:8000/v1?api_key={quote_plus(key)}&x=1",
    ]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the stream ends when the connection closes

    def log_message(self, *a):
        pass

    def _json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self):
        return KEY is None or self.headers.get("Authorization") == f"Bearer {KEY}"

    def do_GET(self):
        if self.path == "/health":
            self._json(503 if args.never_ready else 200, {})
        elif self.path == "/version":
            self._json(200, {"version": "fake-0"})
        elif self.path == "/metrics":
            body = b"# no counters\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif not self._authorized():
            self._json(401, {"error": "Unauthorized"})
        elif self.path == "/v1/models":
            self._json(200, {"data": [{"id": "bracket-model"}]})
        else:
            self._json(404, {})

    def _event(self, obj):
        data = obj if isinstance(obj, str) else json.dumps(obj)
        self.wfile.write(f"data: {data}\n\n".encode())
        self.wfile.flush()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if str(body.get("prompt", "")).startswith("# bracket preflight"):
            n, word = (
                "probe",
                "ok",
            )  # bracket.experiment.probe's requests before the first block: the script is for blocks
        else:
            with lock:
                n = count[0]
                count[0] += 1
            word = SCRIPT[min(n, len(SCRIPT) - 1)]
        print(f"request {n} {word} auth={'yes' if self.headers.get('Authorization') else 'no'}", flush=True)
        if not self._authorized():
            return self._json(401, {"error": "Unauthorized"})
        if word == "http500":
            return self._json(500, {"error": {"message": "engine core died", "type": "InternalServerError"}})
        if word == "http400":
            return self._json(
                400,
                {
                    "error": {
                        "message": "This model's maximum context length is 2048 tokens. "
                        "However, you requested 1250008 tokens.",
                        "type": "BadRequestError",
                    }
                },
            )
        if word == "http429":
            return self._json(429, {"error": {"message": "too many requests"}})
        if word in ("echo_forms", "echo_forms_text"):
            forms = echoed_forms(self.headers.get("Authorization") or "")
        if word == "echo_forms":
            print(f"upstream saw {' '.join(forms)}", flush=True)
            body = json.dumps({"error": {"message": "upstream rejected the request", "seen": forms}}).encode()
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Echo-Authorization", forms[0])
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if word == "echo_auth":
            print(
                f"upstream rejected request with headers: Authorization: {self.headers.get('Authorization')}",
                flush=True,
            )
            return self._json(
                500,
                {
                    "error": {
                        "message": "upstream rejected the request",
                        "request_headers": {"Authorization": self.headers.get("Authorization")},
                    }
                },
            )
        if word == "stall_head":
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            self.wfile.flush()
            try:
                for i in range(1000):
                    time.sleep(0.3)
                    self.wfile.write(b"X-Stall-%d: %d\r\n" % (i, i))
                    self.wfile.flush()
            except OSError:  # the client hung up: what a total limit does
                pass
            return
        max_tokens = int(body.get("max_tokens", 16))
        tokens = {"early_stop": max_tokens // 2, "short": max_tokens - 1}.get(word, max_tokens)
        finish = "stop" if word == "early_stop" else "length"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if word == "malformed":
            self._event('{"choices": [{"text": "tok"')
            return
        for i in range(tokens):
            if word == "truncated" and i == 2:
                return  # connection closes mid-stream
            if word == "slow":
                time.sleep(0.2)
            if word == "drip":
                time.sleep(args.drip_s)
            last = i == tokens - 1
            text = f" {self.headers.get('Authorization')}" if word == "echo_text" and i == 0 else " t"
            if word == "echo_forms_text" and i == 0:
                text = " " + " ".join(forms)
            if word == "say" and i == 0:
                with open(args.say_file, encoding="utf-8", newline="") as f:
                    text = f.read()
            self._event({"choices": [{"index": 0, "text": text, "finish_reason": finish if last else None}]})
        if word != "no_usage":
            cached = 16 if word == "cache_hit" else 0
            usage = {
                "prompt_tokens": 20,
                "completion_tokens": tokens,
                "total_tokens": 20 + tokens,
                "prompt_tokens_details": {"cached_tokens": cached},
            }
            if word == "key_in_count":
                usage["prompt_tokens_details"]["cached_tokens"] = self.headers.get("Authorization")
            event = json.dumps({"choices": [], "usage": usage})
            if word == "nan_count":
                event = event.replace(f'"completion_tokens": {tokens}', '"completion_tokens": NaN')
            self._event(event)
        self._event("[DONE]")


time.sleep(0.3)  # a start-up, however short
print(f"serving on {args.host}:{args.port}", flush=True)
ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()
