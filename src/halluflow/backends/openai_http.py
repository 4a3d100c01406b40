"""OpenAI-compatible chat-completions backends (vLLM, SGLang, Ollama, OpenAI, `transformers serve`) for the `vlm`
and `llm` roles.

Images travel as base64 data URLs; requests run on one thread pool per client and stay in flight across batch
boundaries: as many as the server's adaptive window allows (halluflow.backends.concurrency: one window per server,
shared by the clients and processes that use it, bounded by max_concurrency), or exactly `concurrency` when that is
set. 429/5xx/timeouts/connection errors/malformed or empty replies are retried with exponential backoff + jitter
(Retry-After honoured per RFC 9110, capped by backoff_max_s; with the adaptive window it also pauses the server's
new requests), then recorded as a failure that the answer stage does not cache, so a rerun retries it. A 3xx/4xx fails its own request; the rest of
the shard is not sent only when the rejection is provably shared (401, 404, 405, a redirect, or a probe request
rejected alike). One deadline (timeout_s) bounds each attempt from connect through status line, headers and the last
body byte, and a reply is decoded only up to max_reply_bytes (a GET /models listing up to MAX_MODELS_BYTES). The API
key is read from an environment variable NAMED in the config; it, the Authorization value and base_url's credentials
(userinfo, query values) are registered with halluflow.secrets, the one redaction point, and every body a server
sends is redacted the moment it is read (`_request`), before any id, answer or error is taken from it: the key
verbatim, in part, split across lines or JSON-escaped; error texts also lose masked keys ("sk-ab***...xyz"). httpx's
per-request log lines (which carry the URL) are silenced. Bodies are decoded by halluflow.io.loads_json (bounded
depth; a reply nested 200,000 deep is one failed request), and a 200 reply that carries only {"error": ...} is
recorded as that error. A request's failure never escapes as a traceback: a shared rejection stops the rest of the
shard (`stop`), and a queued request cancelled by its caller is dropped quietly whatever its state.
"""

from __future__ import annotations

import atexit
import base64
import email.utils
import heapq
import json
import logging
import mimetypes
import os
import random
import re
import socket
import threading
import time
import zlib
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from datetime import timezone
from typing import Any, Callable, Sequence

from .. import secrets as redaction
from ..errors import BackendError, ConfigError, InputError
from ..io import loads_json, scrub_surrogates
from . import concurrency as adaptive
from .base import LLM, VLM, BackendInfo, Result, VLMRequest, finish_result

log = logging.getLogger("halluflow.backends.openai")
# httpx logs one INFO line per request with its URL (a base_url's credentials included): it would flood Slurm logs.
logging.getLogger("httpx").setLevel(logging.WARNING)
logging.getLogger("httpcore").setLevel(logging.WARNING)
atexit.register(adaptive.close_all)  # leave the shared server windows, so other processes take this one's share

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
# Rejections that are the same for every request of a configuration (the key, the model or path): the rest of the
# shard is not sent. Other 4xx fail only their own request unless a probe request is rejected alike.
SHARED_STATUS = {401, 404, 405}
PROBES_PER_CLIENT = 8  # distinct rejection texts probed; beyond that each stays a per-request failure
REDACTED = redaction.REDACTED
ERROR_EXCERPT_CHARS = 200  # of a server's error body, cut AFTER redaction
MODELS_DEADLINE_S = 10.0  # GET /models is a listing: it answers within this or the server is stuck
DEFAULT_MAX_REPLY_BYTES = 64 * 2**20  # decoded; a chat reply is kilobytes, a runaway one megabytes
MAX_MODELS_BYTES = 4 * 2**20  # decoded; a model list is kilobytes (OpenAI's, with every model, about 10 KB)
MODELS_SHOWN = 10  # served ids named in the one "model not served" line


class RetryableError(Exception):
    def __init__(self, message: str, retry_after: float | None = None, status: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


def image_data_url(path: str) -> str:
    mime = mimetypes.guess_type(path)[0] or "image/png"
    try:
        with open(path, "rb") as fh:
            data = base64.b64encode(fh.read()).decode("ascii")
    except FileNotFoundError:
        raise InputError(f"image {path}: file not found") from None
    return f"data:{mime};base64,{data}"


def request_messages(request: VLMRequest, system_prompt: str | None = None) -> list[dict]:
    """OpenAI chat messages; the images ride with the first user turn (multi-turn examiners replay history)."""
    messages: list[dict] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    turns = [*request.history, (request.prompt, None)]
    for i, (user, assistant) in enumerate(turns):
        if i == 0 and request.images:
            content: Any = [{"type": "image_url", "image_url": {"url": image_data_url(p)}} for p in request.images]
            content.append({"type": "text", "text": user})
        else:
            content = user
        messages.append({"role": "user", "content": content})
        if assistant is not None:
            messages.append({"role": "assistant", "content": assistant})
    return messages


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """RFC 9110 section 10.2.3: Retry-After is delay-seconds (1*DIGIT) or an HTTP-date; anything else is ignored."""
    if value is None:
        return None
    value = value.strip()
    if re.fullmatch(r"[0-9]+", value):
        return float(min(int(value), 10**9))  # any cap works: the caller caps the wait at backoff_max_s
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        when = None
    if when is None:
        log.info("ignoring unparseable Retry-After header %r", value[:64])
        return None
    if when.tzinfo is None:  # "-0000" zones parse as naive; HTTP-dates are always GMT
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def retry_after_header(headers) -> float | None:
    """The wait a refusal asks for: `retry-after-ms` (milliseconds, as OpenAI and Azure OpenAI send it; what the
    openai SDK reads first) when it parses, else Retry-After (RFC 9110)."""
    ms = headers.get("retry-after-ms")
    if ms is not None and re.fullmatch(r"[0-9]{1,12}(\.[0-9]+)?", ms.strip()):
        return float(ms.strip()) / 1000
    return retry_after_seconds(headers.get("retry-after"))


def message_text(content: Any, allow_empty: bool = False) -> str:
    """Reply text: a string, or the text parts of a content-part list joined (never a Python repr)."""
    text = None
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text") for p in content if isinstance(p, (str, dict))]
        if all(isinstance(p, str) for p in parts) and parts:
            text = "".join(parts)
    if text is not None:
        if not text.strip() and not allow_empty:  # an empty answer is a failed one, retried
            raise RetryableError("server reply is empty (no text or only whitespace)")
        return text
    raise RetryableError(
        f"server reply has no text content (content is {'null' if content is None else type(content).__name__})"
    )


class Rejected(BackendError):
    """A 3xx/4xx reply (or a reply over the size cap): this request as sent cannot succeed, so it is not retried.
    `status` None: a per-request failure that says nothing about the other requests."""

    def __init__(self, message: str, status: int | None):
        super().__init__(message)
        self.status = status


class _Conn:
    """One worker thread's HTTP client (one connection) and the socket it is on: the deadline watchdog shuts that
    socket, which is the only way to stop a status line or headers trickled byte by byte (each read is short)."""

    def __init__(self, http):
        self.http = http
        self.sock: socket.socket | None = None
        self.fired = False


class _CappedBody:
    """The reply body decoded (identity, gzip, deflate) and capped at `cap` bytes AS IT IS DECODED, so a small
    compressed body that expands enormously is stopped at the cap instead of filling memory."""

    def __init__(self, encoding: str, cap: int, setting: str = "max_reply_bytes"):
        self.cap = cap
        self.setting = setting  # what sets the cap, named in the failure
        self.out = bytearray()
        if encoding in ("", "identity"):
            self.z = None
        elif encoding in ("gzip", "x-gzip"):
            self.z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self.z = zlib.decompressobj(zlib.MAX_WBITS)  # zlib-wrapped, as RFC 9110 section 8.4.1.2 defines it
        else:
            raise Rejected(f"reply has Content-Encoding {encoding!r} (the request accepts gzip or deflate only)", None)

    def feed(self, data: bytes) -> None:
        if self.z is None:
            self.out += data
            self._check()
            return
        try:
            while data:
                self.out += self.z.decompress(data, self.cap + 1 - len(self.out))  # never 0: _check keeps len <= cap
                self._check()
                data = self.z.unconsumed_tail
        except zlib.error:
            raise RetryableError("reply body is not valid gzip/deflate data") from None

    def _check(self) -> None:
        if len(self.out) > self.cap:
            raise Rejected(f"reply larger than {self.cap} bytes once decoded ({self.setting}); not read further", None)

    def result(self) -> bytes:
        if self.z is not None:
            self.feed(b"")
            self.out += self.z.flush()
            self._check()
        return bytes(self.out)


def _api_key(env: str) -> str:
    """The key from the variable NAMED env, refused in one line (never echoed) when no HTTP header can carry it."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(env)):
        # Not a variable name: most likely the key itself pasted into the config, which must not be echoed.
        raise ConfigError(
            "openai backend: api_key_env must be the NAME of an environment variable (letters, digits, _), not "
            "the key itself; export the key in a variable and name that variable"
        )
    key = os.environ.get(env)
    if not key:
        raise ConfigError(f"openai backend: environment variable {env!r} (api_key_env) is not set")
    why = None
    if not key.isascii():
        why = "a non-ASCII character (HTTP headers carry ASCII only: a pasted typographic quote or dash?)"
    elif "\n" in key or "\r" in key:
        why = "a line break (read from a file with its newline?)"
    elif not key.isprintable() or key != key.strip() or " " in key:
        why = "whitespace or a control character"
    if why:
        raise ConfigError(f"openai backend: environment variable {env!r} (api_key_env) holds {why}; fix the key")
    return key


def _parse_base_url(base_url: Any):
    import httpx

    if not base_url:
        raise ConfigError("openai backend: argument 'base_url' is required (e.g. http://localhost:8000/v1)")
    try:
        url = httpx.URL(str(base_url))
    except (httpx.InvalidURL, TypeError, ValueError):
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(
            "openai backend: argument 'base_url' is not an http:// or https:// address with a host "
            "(e.g. http://localhost:8000/v1)"
        )
    return url


def display_url(url) -> str:
    """A URL as halluflow writes it anywhere: userinfo and query values replaced (they often carry credentials)."""
    netloc = url.netloc.decode("ascii", "replace")
    query = "&".join(f"{k}={REDACTED}" for k, _ in url.params.multi_items())
    return f"{url.scheme}://{REDACTED + '@' if url.userinfo else ''}{netloc}{url.path}{'?' + query if query else ''}"


def _endpoint(url, name: str):
    """base_url + "/name", the path joined before any query string (…/v1?key=k → …/v1/name?key=k)."""
    return url.copy_with(path=url.path.rstrip("/") + "/" + name)


def _url_secrets(url) -> list[str]:
    """Credentials a base_url carries: userinfo (raw, decoded, and as the Basic header httpx builds from it) and
    every query value of 4+ characters (shorter ones, like v=1, would redact ordinary words)."""
    out: list[str] = []
    if url.userinfo:
        user, password = url.username, url.password
        out += [url.userinfo.decode("ascii", "replace"), f"{user}:{password}", user, password]
        out.append(base64.b64encode(f"{user}:{password}".encode()).decode("ascii"))
    for raw in url.query.decode("ascii", "replace").split("&"):
        out.append(raw.partition("=")[2])
    out += [v for _, v in url.params.multi_items()]
    return [s for s in out if len(s) >= 4]


class OpenAIClient:
    """Chat-completions client shared by OpenAIVLM and OpenAILLM.

    Args: base_url (e.g. http://localhost:8000/v1), model, api_key_env (NAME of the env var holding the key; null =
    no auth, e.g. a local vLLM), timeout_s (60: one deadline per attempt, connect to last byte), max_retries (5),
    backoff_s (1.0: first wait, doubled each retry), backoff_max_s (60: also caps Retry-After), concurrency (null:
    the adaptive window of halluflow.backends.concurrency; a number: exactly that many requests in flight, never
    adapted), max_concurrency (256: the adaptive window's bound), start_concurrency (16: its first size),
    latency_tolerance (0.5: a round's median latency above (1 + this) x the baseline ends its slow start), max_tokens (64), temperature (0), top_p (1), seed (0, sent for servers that support it),
    max_tokens_field ("max_tokens"; "max_completion_tokens" for newer OpenAI models), extra_body (dict merged into
    each request; server-specific, see docs/models.md), max_reply_bytes (64 MiB: a reply is read, decoded, up to
    this size and failed beyond it), revision (recorded only), stand_in.
    """

    # Values no run can use, refused at planning time (halluflow.models.check_backend_args) and here.
    ARG_BOUNDS = {
        "timeout_s": (">", 0),
        "max_retries": (">=", 0),
        "backoff_s": (">=", 0),
        "backoff_max_s": (">=", 0),
        "concurrency": (">=", 1),
        "max_concurrency": (">=", 1),
        "start_concurrency": (">=", 1),
        "latency_tolerance": (">", 0),
        "max_tokens": (">=", 1),
        "temperature": (">=", 0),
        "top_p": (">=", 0),
        "max_reply_bytes": (">=", 1024),
    }

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        backoff_max_s: float = 60.0,
        concurrency: int | None = None,
        max_concurrency: int = adaptive.DEFAULT_MAX_CONCURRENCY,
        start_concurrency: int = adaptive.DEFAULT_START_CONCURRENCY,
        latency_tolerance: float = adaptive.DEFAULT_LATENCY_TOLERANCE,
        max_tokens: int = 64,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = 0,
        max_tokens_field: str = "max_tokens",
        extra_body: dict | None = None,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        revision: str | None = None,
        system_prompt: str | None = None,
        stand_in: bool = False,
    ):
        given = {k: v for k, v in locals().items() if k != "self"}
        import httpx

        from ..models import check_backend_args

        check_backend_args("llm", "openai", given)  # library callers get the planning-time line too
        url = _parse_base_url(base_url)
        self._headers = {"Content-Type": "application/json", "Accept-Encoding": "gzip, deflate"}
        secrets = _url_secrets(url)
        if api_key_env:
            key = _api_key(api_key_env)
            self._headers["Authorization"] = f"Bearer {key}"
            # The key as sent, as a JSON string escapes it, and as servers that escape "/" write it.
            secrets += [f"Bearer {key}", key, json.dumps(key)[1:-1], key.replace("/", "\\/")]
        # Registered before any request: every body, id, error and log line of this process is redacted of them.
        redaction.register(*secrets)
        self._url = url
        self._chat_url = _endpoint(url, "chat/completions")
        self._models_url = _endpoint(url, "models")
        self.base_url = display_url(url)  # what describe(), manifests and messages show
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        # Fixed: exactly `concurrency` threads, no window. Adaptive: max_concurrency threads, each attempt waits for
        # a place in the server's window (shared with the other clients and processes that talk to it).
        self.concurrency = None if concurrency is None else int(concurrency)
        self.max_concurrency = int(max_concurrency)
        self.pool_size = self.concurrency or self.max_concurrency
        self.window = (
            None
            if self.concurrency is not None
            else adaptive.window_for(
                f"{url.scheme}://{url.host}:{url.port or ''}{url.path}",
                self.max_concurrency,
                int(start_concurrency),
                float(latency_tolerance),
            )
        )
        self.max_tokens = int(max_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.seed = seed
        self.max_tokens_field = max_tokens_field
        self.extra_body = dict(extra_body or {})
        self.max_reply_bytes = int(max_reply_bytes)
        self.revision = revision
        self.system_prompt = system_prompt
        self.stand_in = stand_in
        self._httpx = httpx
        # Jitter only spreads retries; seeding it per process (from os.urandom) keeps parallel jobs from retrying
        # in lock-step against the same server.
        self._jitter = random.Random()
        self._lock = threading.Lock()
        self._check_lock = threading.Lock()  # held across the model check's requests (which take _lock)
        self._probe_lock = threading.Lock()
        self._local = threading.local()
        self._conns: list[_Conn] = []
        self._pool: ThreadPoolExecutor | None = None
        self._ssl = None
        self._checked = False
        self._unserved: str | None = None
        self._verdicts: dict[str, bool] = {}  # rejection text -> whether a probe proved it shared
        self._stopped: str | None = None
        # An empty reply is a failed answer of a model under test; the `llm` roles read "" as "no verdict" and fall
        # back to their rules, so OpenAILLM turns this off.
        self.empty_is_failure = True

    # ---- the one redaction point -------------------------------------------------------------------------------
    @staticmethod
    def redact(text: str, error: bool = False) -> str:
        """Every text leaving this backend (answers, errors, log lines) passes halluflow.secrets.redact: the key,
        the Authorization value and the base_url's credentials become [REDACTED], whole, in part, split across
        lines or escaped; `error`: masked and key-shaped values too."""
        return redaction.redact(text, error)

    def excerpt(self, text: str, chars: int = ERROR_EXCERPT_CHARS) -> str:
        """A server's text as one short error line: redacted FIRST (as an error), then cut, so a key straddling
        the cut cannot survive in part."""
        return " ".join(self.redact(text, error=True).split())[:chars]

    def _result(self, text: str | None, error: str | None, attempts: int, start: float) -> Result:
        # The body was redacted as it was read; the text once more, now unescaped (a key in \u escapes).
        text = None if text is None else scrub_surrogates(self.redact(text))
        error = None if error is None else self.excerpt(error, 1000)
        return Result(text, error, attempts, latency_s=time.monotonic() - start)

    def body(self, messages: list[dict], max_tokens: int | None = None, overrides: dict | None = None) -> dict:
        """The request body; `overrides` (temperature, top_p, seed of one request) replace the client defaults."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            self.max_tokens_field: self.max_tokens if max_tokens is None else int(max_tokens),
            "temperature": self.temperature,
            "top_p": self.top_p,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        body.update({k: v for k, v in (overrides or {}).items() if v is not None})
        body.update(self.extra_body)
        return body

    # ---- one attempt -------------------------------------------------------------------------------------------
    def _conn(self) -> _Conn:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            httpx = self._httpx
            with self._lock:
                if self._ssl is None:  # one context for every connection: building one costs ~20 ms of CPU
                    self._ssl = httpx.create_ssl_context()
            http = httpx.Client(
                verify=self._ssl,
                headers=self._headers,
                timeout=httpx.Timeout(self.timeout_s),
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
                follow_redirects=False,  # a redirect would re-send the key to another address: one clear line
            )
            conn = self._local.conn = _Conn(http)
            with self._lock:
                self._conns.append(conn)
        return conn

    def _request(
        self, method: str, url, body: dict | None = None, timeout_s: float | None = None, cap: int | None = None
    ):
        """One HTTP exchange within ONE deadline, connect to the last body byte: each phase's socket timeout is what
        is left of it, and a watchdog shuts the socket at the deadline, so neither a status line and headers nor a
        body trickled byte by byte hold an attempt past it. Returns (status, headers, body text): decoded, capped
        at `cap` bytes (max_reply_bytes) and REDACTED here, before anything reads an id, answer or error from it."""
        httpx = self._httpx
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        conn = self._conn()
        timeouts = dict.fromkeys(("connect", "read", "write", "pool"), timeout_s)

        def trace(event: str, info: dict) -> None:
            # The socket this thread's connection reads from: the TCP one, then the TLS one that wraps it (wrapping
            # detaches the TCP socket object, so shutting that one would do nothing).
            if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
                conn.sock = _socket_of_stream(info.get("return_value"))
            # httpcore reads the socket timeout of a phase right after its ".started" event.
            if event.endswith(".started"):
                timeouts.update(dict.fromkeys(timeouts, max(1e-3, deadline - time.monotonic())))

        def fire() -> None:
            conn.fired = True
            _shutdown(conn.sock)

        conn.fired = False
        alarm = _WATCHDOG.arm(deadline, fire)
        try:
            request = conn.http.build_request(method, url, json=body, extensions={"timeout": timeouts, "trace": trace})
            response = conn.http.send(request, stream=True)
            try:
                encoding = response.headers.get("content-encoding", "").strip().lower()
                if cap is None or cap >= self.max_reply_bytes:
                    reply = _CappedBody(encoding, self.max_reply_bytes)
                else:
                    reply = _CappedBody(encoding, cap, "the cap of a model list")
                for chunk in response.iter_raw():
                    reply.feed(chunk)
                    if time.monotonic() > deadline:
                        raise httpx.ReadTimeout("deadline passed during the body")
                data = reply.result()
            finally:
                response.close()
        except httpx.TransportError:
            if conn.fired or time.monotonic() >= deadline - 0.01:  # the watchdog cut it
                raise httpx.ReadTimeout("deadline passed") from None
            raise
        finally:
            _WATCHDOG.disarm(alarm)
        return response.status_code, response.headers, self.redact(data.decode("utf-8", "replace"))

    def _once(self, body: dict) -> str:
        httpx = self._httpx
        try:
            status, headers, text = self._request("POST", self._chat_url, body)
        except httpx.TimeoutException as exc:
            raise RetryableError(f"timeout after {self.timeout_s:g} s ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise RetryableError(f"connection error ({type(exc).__name__})") from None
        if 300 <= status < 400:
            raise Rejected(
                f"HTTP {status}: the server redirects to {self._location(headers.get('location'))}; set base_url to "
                "that address (redirects are not followed: they would send the key on)",
                status,
            )
        if status in RETRY_STATUS or status >= 500:
            raise RetryableError(f"HTTP {status}", retry_after_header(headers), status)
        if status >= 400:
            # 400/401/403/404/422: the request itself is wrong; retrying cannot help.
            raise Rejected(self.excerpt(f"HTTP {status}: {self._said(text)}"), status)
        try:
            reply = loads_json(text, "server reply")
        except InputError as exc:
            raise RetryableError(f"malformed JSON response ({str(exc).removeprefix('server reply: ')})") from None
        if isinstance(reply, dict) and "choices" not in reply and reply.get("error"):
            # A 200 that carries only an error (a proxy or a busy server): that error, not "malformed".
            error = reply["error"]
            message = error.get("message") if isinstance(error, dict) else error
            said = message if isinstance(message, str) else json.dumps(_redact_tree(error), ensure_ascii=False)
            raise RetryableError(f"server error: {self.redact(said, error=True)}")
        try:
            content = reply["choices"][0]["message"].get("content")
        except (KeyError, IndexError, TypeError, AttributeError):
            raise RetryableError("malformed JSON response (no choices[0].message)") from None
        usage = reply.get("usage") if isinstance(reply, dict) else None
        tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
        self._local.tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
        return message_text(content, allow_empty=not self.empty_is_failure)

    def _said(self, text: str) -> str:
        """What a server's (already redacted) error body says, as one text: a JSON body unescaped and redacted again
        string by string (a key written with \\u escapes or split by an escaped line break reads whole only once
        decoded); any other body as it came."""
        try:
            decoded = loads_json(text, "server reply")
        except InputError:
            return text
        return json.dumps(_redact_tree(decoded), ensure_ascii=False)

    def _location(self, value: str | None) -> str:
        if not value:
            return "no address (no Location header)"
        try:
            return display_url(self._url.join(value))
        except Exception:  # noqa: BLE001 - an unparseable Location is shown cut and redacted
            return repr(self.excerpt(value, 120))

    def _wait(self, attempt: int, retry_after: float | None) -> float:
        with self._lock:
            jitter = self._jitter.uniform(0, 1)
        delay = min(self.backoff_max_s, self.backoff_s * (2**attempt)) * (0.5 + 0.5 * jitter)
        return max(delay, min(retry_after or 0.0, self.backoff_max_s))

    # ---- one rejection: this request only, or every request? --------------------------------------------------
    def _judge(self, exc: Rejected, error: str) -> None:
        """Stop the shard only when a rejection is provably the same for every request: 401 (the key), 404 and
        405 (the model or the path), a redirect (base_url) at once; any other 4xx (a bad argument, or this
        request's image too large) only when a probe request without images, with the same model and arguments,
        gets the very same rejection. Each distinct rejection text is probed once."""
        if exc.status is None:
            return
        if exc.status in SHARED_STATUS or 300 <= exc.status < 400:
            shared = True
        else:
            with self._probe_lock:
                if error not in self._verdicts:
                    self._verdicts[error] = len(self._verdicts) < PROBES_PER_CLIENT and self._probe_fails_alike(error)
                shared = self._verdicts[error]
        if shared:
            with self._lock:
                if self._stopped is None:
                    self._stopped = f"the server rejects every request of this configuration alike ({error})"
                    log.error("%s; not sending the rest", self._stopped)

    def _probe_fails_alike(self, error: str) -> bool:
        probe = self.body([{"role": "user", "content": "Reply with one word."}])
        try:
            self._once(probe)
        except Rejected as exc:
            return self.excerpt(str(exc), 1000) == error
        except RetryableError:
            return False
        return False

    def complete(
        self,
        messages: list[dict] | Callable[[], list[dict]],
        max_tokens: int | None = None,
        overrides: dict | None = None,
    ) -> Result:
        """One request with retries. `messages` may be a callable, so a queued request reads and encodes its images
        only when it is sent; `overrides` (temperature, top_p, seed of one request) replace the client defaults."""
        start = time.monotonic()
        if self._stopped is not None:
            return self._result(None, f"not sent: {self._stopped}", 0, start)
        self.check_model()
        body = self.body(messages() if callable(messages) else messages, max_tokens, overrides)
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                text = self._attempt(body)
                if attempt == 0:
                    start = self._sent_at  # a request's latency starts when it is sent, not while it waits its turn
                return self._result(text, None, attempt + 1, start)
            except RetryableError as exc:
                if attempt == 0:
                    start = self._sent_at
                last = self.excerpt(str(exc))
                if attempt == self.max_retries:
                    break
                delay = self._wait(attempt, exc.retry_after)
                log.warning("request failed (%s); retry %d/%d in %.2f s", last, attempt + 1, self.max_retries, delay)
                time.sleep(delay)
            except Rejected as exc:
                if attempt == 0:
                    start = self._sent_at
                error = self.excerpt(str(exc), 1000)
                self._judge(exc, error)
                return self._result(None, error, attempt + 1, start)
        return self._result(None, f"gave up after {self.max_retries + 1} attempts: {last}", self.max_retries + 1, start)

    @property
    def _sent_at(self) -> float:
        return getattr(self._local, "sent_at", time.monotonic())

    def _attempt(self, body: dict) -> str:
        """One attempt within the server's window: a place is taken before it is sent and given back with what
        happened (its latency when answered, the status and Retry-After when refused), so the window adapts."""
        window = self.window
        if window is None:
            self._local.sent_at = time.monotonic()
            return self._once(body)
        window.acquire()
        sent = self._local.sent_at = time.monotonic()
        outcome: tuple = (None, None, None)
        try:
            self._local.tokens = None
            text = self._once(body)
            outcome = (time.monotonic() - sent, None, None, self._local.tokens)
            return text
        except RetryableError as exc:
            retry_after = None if exc.retry_after is None else min(exc.retry_after, self.backoff_max_s)
            outcome = (None, exc.status, retry_after)
            raise
        finally:
            window.release(*outcome)

    # ---- is the model served? ----------------------------------------------------------------------------------
    def served_models(self) -> list[str] | None:
        """Ids from GET <base_url>/models; None only when the server has no such endpoint (404/405/501) or nothing
        listens (the requests then report that themselves). A /models that times out, errors or answers no list
        is a BackendError in one line: never a fallback to requests that could each hang for timeout_s."""
        httpx = self._httpx
        where = f"GET {display_url(self._models_url)}"
        limit = MODELS_DEADLINE_S  # its own deadline: a short timeout_s for answers must not fail a busy listing
        try:
            cap = min(self.max_reply_bytes, MAX_MODELS_BYTES)
            status, _, body = self._request("GET", self._models_url, timeout_s=limit, cap=cap)
        except httpx.TimeoutException:
            raise BackendError(
                f"openai backend: {where} did not answer within {limit:g} s, so model {self.model!r} cannot be "
                "checked and no request was sent (a server stuck loading a model it does not have?); check the "
                "server and args.model, then rerun"
            ) from None
        except httpx.ConnectError as exc:
            log.info("%s: cannot connect (%s); the requests report it", where, type(exc).__name__)
            return None
        except httpx.TransportError as exc:
            raise BackendError(f"openai backend: {where} failed ({type(exc).__name__}); no request was sent") from None
        except (Rejected, RetryableError) as exc:  # an oversized or undecodable list
            raise BackendError(f"openai backend: {where}: {self.excerpt(str(exc), 300)}; no request was sent") from None
        if status in (404, 405, 501):
            log.info("%s: HTTP %d (no model list); the first request checks the model id", where, status)
            return None
        if status != 200:
            raise BackendError(self.excerpt(f"openai backend: {where} answered HTTP {status}: {self._said(body)}", 400))
        try:
            listing = loads_json(body, "body")
        except InputError as exc:  # not JSON, or nested past the depth bound: one line, no RecursionError
            raise BackendError(
                self.excerpt(f"openai backend: {where} answered no model list ({exc}); no request was sent", 300)
            ) from None
        try:
            # Ids are a server's words: redacted again once unescaped, before any message can name them.
            return [self.redact(str(m["id"]), error=True) for m in listing["data"]]
        except (KeyError, TypeError, IndexError):
            raise BackendError(
                self.excerpt(f"openai backend: {where} answered no model list (no data[].id): {self._said(body)}", 300)
            ) from None

    def check_model(self) -> None:
        """Once per client: fail with one line naming the served ids when the configured model is not served.

        Servers that load models on demand (`transformers serve` without a pinned model) list only loaded ones, so
        an unlisted model gets one probe request before it is declared missing; an HTTP error that is not about
        load (429, 502-504) counts as a verdict (unpinned `transformers serve` answers an unknown model with 500,
        vLLM and OpenAI with 404, a pinned server with 400), and so does a probe that gets no answer in timeout_s
        (a server blocked fetching a model it does not have)."""
        with self._check_lock:
            if not self._checked:
                try:
                    problem = self._model_problem()
                except BackendError as exc:
                    problem = str(exc)
                self._unserved = None if problem is None else self.redact(problem, error=True)
                self._checked = True
        if self._unserved is not None:  # every queued request fails the same way, none is sent
            raise BackendError(self._unserved)

    def _model_problem(self) -> str | None:
        served = self.served_models()
        if served is None or self.model in served:
            return None
        # The probe names only the model: a server-specific `extra_body` key another server rejects (422) must not
        # read as "model not served"; those rejections stop a shard through the rejection rule instead.
        probe = {"model": self.model, "messages": [{"role": "user", "content": "hi"}], self.max_tokens_field: 1}
        try:
            self._once(probe)
            return None
        except Rejected as exc:
            verdict = str(exc)
        except RetryableError as exc:
            if exc.status in {408, 409, 425, 429, 502, 503, 504}:
                return None
            verdict = str(exc)
        slow = " (or raise timeout_s if the server loads it on demand)" if verdict.startswith("timeout") else ""
        shown = ", ".join(repr(m[:80]) for m in served[:MODELS_SHOWN]) or "nothing"
        if len(served) > MODELS_SHOWN:
            shown += f" and {len(served) - MODELS_SHOWN} more"
        return (
            f"openai backend: model {self.model!r} is not served by {self.base_url} (GET /models lists {shown}; "
            f"a probe request got {self.excerpt(verdict, 120)}); set args.model to a served id{slow}"
        )

    # ---- many requests -----------------------------------------------------------------------------------------
    def submit(
        self,
        messages: list[dict] | Callable[[], list[dict]],
        max_tokens: int | None = None,
        overrides: dict | None = None,
    ) -> Future:
        """Queue one request on the client's pool: requests stay in flight however callers batch (as many as the
        window allows, or `concurrency`)."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.pool_size, thread_name_prefix="openai")
        return self._pool.submit(self.complete, messages, max_tokens, overrides)

    def complete_many(
        self,
        conversations: Sequence[list[dict]],
        max_tokens: int | None = None,
        overrides: Sequence[dict] | None = None,
    ) -> list[Result]:
        """`overrides`: one dict per conversation (max_tokens, temperature, top_p, seed of that request)."""
        per = [dict(o) for o in overrides] if overrides is not None else [{} for _ in conversations]
        if len(conversations) <= 1 or self.pool_size == 1:
            return [self.complete(c, o.pop("max_tokens", None) or max_tokens, o) for c, o in zip(conversations, per)]
        return _results(
            [self.submit(c, o.pop("max_tokens", None) or max_tokens, o) for c, o in zip(conversations, per)]
        )

    def stop(self, reason: str) -> None:
        """Send nothing more: every request not yet sent is answered "not sent: <reason>" at once (the caller could
        not keep its answer: a full disk), while those in flight finish and are kept."""
        with self._lock:
            if self._stopped is None:
                self._stopped = self.redact(reason, error=True)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.http.close()


class _Watchdog:
    """One thread for every attempt's deadline (a threading.Timer per attempt started a thread per request, a third
    of the client's CPU time per request): arm() schedules a callback at a monotonic deadline, disarm() cancels it."""

    def __init__(self):
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._cancelled: set[int] = set()
        self._fired: set[int] = set()
        self._next = 0
        self._thread: threading.Thread | None = None

    def arm(self, deadline: float, callback: Callable[[], None]) -> int:
        with self._cond:
            self._next += 1
            token = self._next
            first = not self._heap or deadline < self._heap[0][0]
            heapq.heappush(self._heap, (deadline, token, callback))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="openai-deadlines", daemon=True)
                self._thread.start()
            elif first:
                self._cond.notify()
        return token

    def disarm(self, token: int) -> None:
        with self._cond:
            if token in self._fired:
                self._fired.discard(token)
            else:
                self._cancelled.add(token)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][1] in self._cancelled:
                        self._cancelled.discard(heapq.heappop(self._heap)[1])
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        _, token, callback = heapq.heappop(self._heap)
                        self._fired.add(token)
                        break
                    self._cond.wait(min(self._heap[0][0] - now, 1.0) if self._heap else 1.0)
            callback()  # outside the lock: it shuts a socket


_WATCHDOG = _Watchdog()
os.register_at_fork(after_in_child=_WATCHDOG.__init__)  # a forked child has neither the thread nor a free lock


def _results(futures: Sequence[Future]) -> list[Result]:
    """Wait for every future; a BackendError from the model check propagates (one line for the whole job)."""
    try:
        return [f.result() for f in futures]
    finally:
        for f in futures:
            f.cancel()


class _Finished(Future):
    """The Future of one queued request's Result as VLM.respond returns it (text stripped, the image fallback
    noted). Cancelling it cancels the request only while it is still queued: a request already sent cannot be
    called back, so it runs on and its Result arrives (the caller keeps it). Before, the wrapper was cancelled
    alone and the request's completion then set a result on a cancelled Future: one InvalidStateError traceback
    per request in flight, thousands of lines after a wrong model id's one error line."""

    def __init__(self, request: Future, note: str | None):
        super().__init__()
        self._request = request
        self._note = note
        request.add_done_callback(self._copy)

    def cancel(self) -> bool:
        return self._request.cancel()  # its callback cancels this Future when it worked

    def _copy(self, f: Future) -> None:
        try:
            if f.cancelled():
                # Cancelled AND notified, as an executor does with its own: as_completed/wait see it as done.
                if Future.cancel(self):
                    self.set_running_or_notify_cancel()
            elif f.exception() is not None:
                self.set_exception(f.exception())
            else:
                self.set_result(finish_result(f.result(), self._note))
        except (InvalidStateError, RuntimeError):  # settled already by a caller: nothing to report
            pass


def _finish(future: Future, note: str | None) -> Future:
    """A Future of the Result as VLM.respond returns it: text stripped, the image fallback noted."""
    return _Finished(future, note)


def _redact_tree(value: Any) -> Any:
    """A decoded JSON value with every string (keys too) redacted as an error text."""
    if isinstance(value, str):
        return redaction.redact(value, error=True)
    if isinstance(value, dict):
        return {_redact_tree(str(k)): _redact_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_tree(v) for v in value]
    return value


def _socket_of_stream(stream) -> socket.socket | None:
    try:
        return stream.get_extra_info("socket") if stream is not None else None
    except Exception:  # noqa: BLE001 - a transport without sockets simply has no watchdog
        return None


def _shutdown(sock: socket.socket | None) -> None:
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _raise_first_failure(results: Sequence[Result], ids: Sequence[str]) -> None:
    for rid, result in zip(ids, results):
        if not result.ok:
            raise BackendError(f"request {rid}: {result.error}")


class OpenAIVLM(VLM):
    """Model under test behind an OpenAI-compatible server; args are OpenAIClient's plus max_images (images one
    prompt may carry, default 1: many servers take one; more are tiled into one image)."""

    FORWARDS_ARGS_TO = OpenAIClient  # the declared signature the config's arguments are checked against
    ARG_BOUNDS = {"max_images": (">=", 1)}

    def __init__(self, max_images: int = 1, **client_args):
        self.client = OpenAIClient(**client_args)
        self.max_images = int(max_images)
        c = self.client
        self.set_sampling(c.max_tokens, c.temperature, c.top_p, c.seed, c.system_prompt)

    def describe(self) -> BackendInfo:
        c = self.client
        return BackendInfo("vlm", "openai", c.model, c.revision, c.stand_in, {"base_url": c.base_url})

    def generation_settings(self, request: VLMRequest) -> dict:
        extra = {"extra_body": self.client.extra_body} if self.client.extra_body else {}
        return {**self.settings_for(request), **extra}

    def _submit(self, request: VLMRequest) -> Future:
        s = self.settings_for(request)
        overrides = {"temperature": s["temperature"], "top_p": s["top_p"], "seed": s["seed"]}
        return self.client.submit(lambda: request_messages(request, s["system_prompt"]), s["max_new_tokens"], overrides)

    def answer_results(self, requests: Sequence[VLMRequest]) -> list[Result]:
        """Per-request outcomes (failures included) for the answer stage, which records them without caching."""
        return _results([self._submit(r) for r in requests])

    def respond_futures(self, requests: Sequence[VLMRequest]) -> list[Future]:
        """respond() queued, one Future[Result] each (images fitted, text stripped, fallback noted): the answer stage
        queues every batch of a shard at once, so `concurrency` requests stay in flight across batch boundaries."""
        out = []
        for request in requests:
            fitted, note = self.fit_images(request)
            out.append(_finish(self._submit(fitted), note))
        return out

    def stop(self, reason: str) -> None:
        """Send no request not yet sent (OpenAIClient.stop); those in flight finish."""
        self.client.stop(reason)

    def answer(self, requests: Sequence[VLMRequest]) -> list[str]:
        results = self.answer_results(requests)
        _raise_first_failure(results, [r.request_id for r in requests])
        return [r.text or "" for r in results]


class OpenAILLM(LLM):
    """Examiner / parser / judge behind an OpenAI-compatible server; args are OpenAIClient's."""

    FORWARDS_ARGS_TO = OpenAIClient

    def __init__(self, **client_args):
        self.client = OpenAIClient(**client_args)
        self.client.empty_is_failure = False

    def describe(self) -> BackendInfo:
        c = self.client
        return BackendInfo("llm", "openai", c.model, c.revision, c.stand_in, {"base_url": c.base_url})

    def _messages(self, messages: Sequence[dict]) -> list[dict]:
        messages = [dict(m) for m in messages]
        if self.client.system_prompt and not any(m.get("role") == "system" for m in messages):
            messages.insert(0, {"role": "system", "content": self.client.system_prompt})
        return messages

    def chat(self, messages: Sequence[dict]) -> str:
        return self.chat_batch([messages])[0]

    def chat_batch(self, batch: Sequence[Sequence[dict]]) -> list[str]:
        results = self.client.complete_many([self._messages(m) for m in batch])
        _raise_first_failure(results, [str(i) for i in range(len(batch))])
        return [r.text or "" for r in results]
