"""A REAL local chat-completions server (http.server in a thread on 127.0.0.1) for the HTTP backend tests.

It speaks the OpenAI protocol (POST /v1/chat/completions, GET /v1/models) and answers with the deterministic
co-occurrence prior; per question it can inject faults — 429 (with any Retry-After), 500, 401 (optionally echoing
the request's Authorization header, as some proxies do), 422, connection reset, timeout, a body trickled one byte at
a time, malformed JSON, null, list-shaped, space-prefixed or huge content — so the client's retry/backoff/failure
paths run against real sockets.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from halluflow.backends.base import VLMRequest


class ChatServer:
    def __init__(
        self,
        prior,
        expected_key: str | None = None,
        stall_s: float = 1.0,
        models: tuple[str, ...] | None = None,
        trickle_s: float = 0.2,
        delay_s: float = 0.0,
    ):
        self.prior = prior
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
                if self.path.rstrip("/") == "/v1/models" and server.models is not None:
                    return self._send(
                        200, {"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]}
                    )
                return self._send(404, {"error": "not found"})

            def do_POST(self):
                with server.lock:
                    server.posts += 1
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                if server.expected_key and self.headers.get("Authorization") != f"Bearer {server.expected_key}":
                    return self._send(401, {"error": {"message": "bad key"}})
                if server.models is not None and body.get("model") not in server.models:
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
                return self._send(
                    200,
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                        ],
                    },
                )

            def _trickle(self, data):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    for i in range(len(data)):
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

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
