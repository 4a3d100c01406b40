"""A REAL local chat-completions server (http.server in a thread on 127.0.0.1) for the HTTP backend tests.

It speaks the OpenAI protocol and answers with the deterministic co-occurrence prior; per question it can inject
faults — 429 (with Retry-After), 500, 401, connection reset, timeout, malformed JSON, null or huge content — so the
client's retry/backoff/failure paths run against real sockets.
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
    def __init__(self, prior, expected_key: str | None = None, stall_s: float = 1.0):
        self.prior = prior
        self.expected_key = expected_key
        self.stall_s = stall_s
        self.faults: dict[str, list[str]] = defaultdict(list)  # question substring -> faults, consumed in order
        self.calls: Counter = Counter()  # question -> attempts seen
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                if server.expected_key and self.headers.get("Authorization") != f"Bearer {server.expected_key}":
                    return self._send(401, {"error": {"message": "bad key"}})
                question = server.question(body)
                with server.lock:
                    server.calls[question] += 1
                    server.bodies.append(body)
                    fault = None
                    for needle, faults in server.faults.items():
                        if needle in question and faults:
                            fault = faults.pop(0)
                            break
                if fault == "429":
                    return self._send(429, {"error": "slow down"}, {"Retry-After": "0"})
                if fault in ("500", "401"):
                    return self._send(int(fault), {"error": fault})
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
                content = server.answer(body)
                if fault == "null":
                    content = None
                elif fault == "huge":
                    content = "yes " * 3_000_000  # 12 MB
                return self._send(200, {"id": "x", "object": "chat.completion", "model": body.get("model"),
                                        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                                     "finish_reason": "stop"}]})

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
