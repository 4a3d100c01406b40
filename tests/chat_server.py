"""A REAL local chat-completions server (http.server in a thread on 127.0.0.1) for the HTTP backend tests.

It speaks the OpenAI protocol (POST /v1/chat/completions, GET /v1/models) and answers with the deterministic
co-occurrence prior; per question it can inject faults — 429 (with any Retry-After), 500, 401 (optionally echoing
the request's Authorization header, as some proxies do, after any padding), 400 "image too large", 422, a redirect,
connection reset, timeout, a status line or a body trickled one byte at a time, a gzip body that expands to 1 GiB,
malformed JSON, null, empty, blank, list-shaped, space-prefixed, huge, lone-surrogate or key-quoting content — so
the client's retry/backoff/failure paths run against real sockets. Server-wide: body fields it rejects like a strict
server (`reject_fields`), a GET /v1/models that hangs (`models_stall_s`), and `hold_after`: after that many answers,
hold every further request until `release()`, so a test can kill its client at a known point. A fault may also be a
callable taking the request's headers and returning (status, raw body bytes), and `models_reply` such a callable
for GET /v1/models, for replies no named fault writes (a key echoed in served ids, escaped or split bodies).
"""

from __future__ import annotations

import functools
import json
import socket
import struct
import threading
import time
import zlib
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from halluflow.backends.base import VLMRequest

BOMB_BYTES = 2**30


@functools.lru_cache(maxsize=1)
def gzip_bomb() -> bytes:
    """About 1 MB of gzip that expands to 1 GiB of spaces (built once per test session, in 16 MiB steps)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * 2**24
    parts = [z.compress(block) for _ in range(BOMB_BYTES // len(block))]
    return b"".join(parts) + z.flush()


class ChatServer:
    def __init__(
        self,
        prior,
        expected_key: str | None = None,
        stall_s: float = 1.0,
        models: tuple[str, ...] | None = None,
        trickle_s: float = 0.2,
        delay_s: float = 0.0,
        reject_fields: tuple[str, ...] = (),
        models_stall_s: float = 0.0,
        hold_after: int | None = None,
    ):
        self.prior = prior
        self.reject_fields = reject_fields
        self.models_stall_s = models_stall_s
        self.hold_after = hold_after
        self.answered = 0  # 200 replies with an answer, fully written
        self.unknown_model_stall_s = 0.0  # a request naming an unlisted model waits this long before its 400
        self.models_status: int | None = None  # GET /v1/models answers this status instead of the list
        self.models_reply = None  # callable(headers) -> (status, raw bytes): GET /v1/models answers that instead
        self.paths: list[str] = []  # request paths as received (query strings included)
        self.held = threading.Event()
        # Ids GET /v1/models lists; other ids get HTTP 400 like a server pinned to its models. None: no /v1/models
        # endpoint (404, like some servers) and any id is answered.
        self.models = models
        self.trickle_s = trickle_s
        self.delay_s = delay_s  # think time per answer, so requests overlap
        self.in_flight = self.max_in_flight = 0
        self.expected_key = expected_key
        self.stall_s = stall_s
        self.faults: dict[str, list[str]] = defaultdict(list)  # question substring -> faults, consumed in order
        self.calls: Counter = Counter()  # question -> attempts seen (requests that pass the key and model checks)
        self.posts = 0  # every POST, rejected or not
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_GET(self):
                with server.lock:
                    server.paths.append(self.path)
                if server.models_stall_s:
                    time.sleep(server.models_stall_s)  # a server blocked fetching a model it does not have
                if server.models_status:
                    return self._send(server.models_status, {"error": f"HTTP {server.models_status}"})
                if server.models_reply is not None:
                    status, raw = server.models_reply(self.headers)
                    return self._send(status, None, raw=raw)
                if self.path.split("?")[0].rstrip("/") == "/v1/models" and server.models is not None:
                    return self._send(
                        200, {"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]}
                    )
                return self._send(404, {"error": "not found"})

            def do_POST(self):
                with server.lock:
                    server.posts += 1
                    server.paths.append(self.path)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                if server.expected_key and self.headers.get("Authorization") != f"Bearer {server.expected_key}":
                    return self._send(401, {"error": {"message": "bad key"}})
                if server.models is not None and body.get("model") not in server.models:
                    time.sleep(server.unknown_model_stall_s)  # a server fetching an id it does not have from the hub
                    return self._send(400, {"error": f"Server is pinned to {server.models[0]}"})
                question = server.question(body)
                with server.lock:
                    server.calls[question] += 1
                    server.bodies.append(body)
                    fault = None
                    for needle, faults in server.faults.items():
                        if needle in question and faults:
                            fault = faults.pop(0)
                            break
                    hold = server.hold_after is not None and server.answered >= server.hold_after
                if hold:
                    server.held.wait(60)
                if callable(fault):  # a reply built from the request's headers: (status, raw body bytes)
                    status, raw = fault(self.headers)
                    return self._send(status, None, raw=raw)
                rejected = [f for f in server.reject_fields if f in body]
                if rejected:  # as pydantic-validated servers (transformers serve) reject unknown fields
                    return self._send(
                        422,
                        {"detail": [{"type": "extra_forbidden", "loc": ["body", rejected[0]], "msg": "Extra inputs"}]},
                    )
                if fault and fault.startswith("401-echo:"):  # "401-echo:<padding>": the header quoted after padding
                    pad = "x" * int(fault.partition(":")[2])
                    auth = self.headers.get("Authorization")
                    return self._send(401, None, raw=f'{{"error": "{pad} Authorization: {auth}"}}'.encode())
                if fault == "400-too-large":  # a per-request rejection: other requests are fine
                    return self._send(400, {"error": {"message": "image too large (max 20 MB)"}})
                if fault == "redirect":
                    return self._send(307, {}, {"Location": "https://elsewhere.example/v1/chat/completions"})
                if fault == "trickle-status":
                    return self._trickle(
                        json.dumps({"choices": [{"message": {"content": "late"}}]}).encode(), status_line=True
                    )
                if fault == "gzip-bomb":
                    return self._send(200, None, {"Content-Encoding": "gzip"}, raw=gzip_bomb())
                if fault and fault.split(":", 1)[0] == "429":  # "429:<Retry-After value>"
                    return self._send(429, {"error": "slow down"}, {"Retry-After": fault.partition(":")[2] or "0"})
                if fault in ("500", "401"):
                    return self._send(int(fault), {"error": fault})
                if fault == "401-echo":  # a proxy that quotes the request's headers in its error
                    return self._send(401, {"error": f"rejected Authorization: {self.headers.get('Authorization')}"})
                if fault == "422":
                    return self._send(
                        422,
                        {
                            "detail": [
                                {
                                    "type": "extra_forbidden",
                                    "loc": ["body", "top_k"],
                                    "msg": "Extra inputs are not permitted",
                                }
                            ]
                        },
                    )
                if fault == "trickle":
                    return self._trickle(json.dumps({"choices": [{"message": {"content": "late"}}]}).encode())
                if fault == "reset":
                    # SO_LINGER 0 makes close() send RST: the client sees a connection reset, not a clean EOF.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    return None
                if fault == "timeout":
                    time.sleep(server.stall_s)
                    return None
                if fault == "malformed":
                    return self._send(200, None, raw=b"{not json")
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                time.sleep(server.delay_s)
                with server.lock:
                    server.in_flight -= 1
                content = server.answer(body)
                if fault == "null":
                    content = None
                elif fault == "parts":
                    content = [{"type": "text", "text": content[:1]}, {"type": "text", "text": content[1:]}]
                elif fault == "space":
                    content = " " + content
                elif fault == "huge":
                    content = "yes " * 3_000_000  # 12 MB
                elif fault in ("empty", "blank"):
                    content = "" if fault == "empty" else " \n\t "
                elif fault == "surrogate":
                    content = "Yes \ud800"  # json.dumps writes it as the escape "\ud800": valid JSON, no valid UTF-8
                elif fault and fault.startswith("echo-200:"):  # an answer quoting the request's key after padding
                    content = "x" * int(fault.partition(":")[2]) + f" {self.headers.get('Authorization')}"
                try:
                    return self._send(
                        200,
                        {
                            "id": "x",
                            "object": "chat.completion",
                            "model": body.get("model"),
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop",
                                }
                            ],
                        },
                    )
                finally:
                    with server.lock:
                        server.answered += 1

            def _trickle(self, data, status_line=False):
                head = (
                    f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
                ).encode()
                if status_line:  # status line and headers one byte at a time, then the body at once
                    data, first = head + data, len(head)
                else:
                    self.wfile.write(head)
                    self.wfile.flush()
                    first = len(data)
                try:
                    for i in range(len(data)):
                        if status_line and i >= first:
                            self.wfile.write(data[i:])
                            break
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        time.sleep(server.trickle_s)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _send(self, status, payload, headers=None, raw=None):
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @staticmethod
    def question(body: dict) -> str:
        content = body["messages"][-1]["content"]
        if isinstance(content, list):
            return " ".join(c["text"] for c in content if c.get("type") == "text")
        return content

    def answer(self, body: dict) -> str:
        return self.prior.answer([VLMRequest("http", self.question(body), None)])[0]

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def release(self) -> None:
        """Let held requests (hold_after) through, and every later one."""
        self.hold_after = None
        self.held.set()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.held.set()
        self.httpd.shutdown()
        self.httpd.server_close()
