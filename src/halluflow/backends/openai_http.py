"""OpenAI-compatible chat-completions backends (vLLM, SGLang, Ollama, OpenAI, `transformers serve`) for the `vlm`
and `llm` roles.

Images travel as base64 data URLs; requests run on one bounded thread pool per client, so `concurrency` requests
stay in flight across batch boundaries; 429/5xx/timeouts/connection errors/malformed or empty replies are retried
with exponential backoff + jitter (Retry-After honoured per RFC 9110, capped by backoff_max_s), then recorded as a
failure that the answer stage does not cache, so a rerun retries it. One deadline (timeout_s) bounds each attempt
from connect to the last body byte. The API key is read from an environment variable NAMED in the config, and it
(with every auth header value) is redacted from every error text before anything stores, logs or prints it.
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import mimetypes
import os
import random
import re
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timezone
from typing import Any, Callable, Sequence

from ..errors import BackendError, ConfigError, InputError
from .base import LLM, VLM, BackendInfo, Result, VLMRequest

log = logging.getLogger("halluflow.backends.openai")

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
# A server that rejects this many requests with the same 4xx status and body rejects the configuration (an
# extra_body key it does not know, a wrong model or key), not one request: the rest fail without being sent.
IDENTICAL_REJECTIONS_TO_STOP = 3
REDACTED = "[REDACTED]"


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


def message_text(content: Any) -> str:
    """Reply text: a string, or the text parts of a content-part list joined (never a Python repr)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text") for p in content if isinstance(p, (str, dict))]
        if all(isinstance(p, str) for p in parts) and parts:
            return "".join(parts)
    raise RetryableError(
        f"server reply has no text content (content is {'null' if content is None else type(content).__name__})"
    )


class OpenAIClient:
    """Chat-completions client shared by OpenAIVLM and OpenAILLM.

    Args: base_url (e.g. http://localhost:8000/v1), model, api_key_env (NAME of the env var holding the key; null =
    no auth, e.g. a local vLLM), timeout_s (60: one deadline per attempt, connect to last byte), max_retries (5),
    backoff_s (1.0: first wait, doubled each retry), backoff_max_s (60: also caps Retry-After), concurrency
    (4 requests in flight), max_tokens (64), temperature (0), top_p (1), seed (0, sent for servers that support it),
    max_tokens_field ("max_tokens"; "max_completion_tokens" for newer OpenAI models), extra_body (dict merged into
    each request; server-specific, see docs/models.md), revision (recorded only), stand_in.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        backoff_max_s: float = 60.0,
        concurrency: int = 4,
        max_tokens: int = 64,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = 0,
        max_tokens_field: str = "max_tokens",
        extra_body: dict | None = None,
        revision: str | None = None,
        system_prompt: str | None = None,
        stand_in: bool = False,
    ):
        import httpx

        if not base_url:
            raise ConfigError("openai backend: argument 'base_url' is required (e.g. http://localhost:8000/v1)")
        headers = {"Content-Type": "application/json"}
        self._secrets: list[str] = []
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise ConfigError(f"openai backend: environment variable {api_key_env!r} (api_key_env) is not set")
            headers["Authorization"] = f"Bearer {key}"
            self._secrets = [f"Bearer {key}", key]
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.base_url = base_url
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self.concurrency = max(1, int(concurrency))
        self.max_tokens = int(max_tokens)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.seed = seed
        self.max_tokens_field = max_tokens_field
        self.extra_body = dict(extra_body or {})
        self.revision = revision
        self.system_prompt = system_prompt
        self.stand_in = stand_in
        # Connection pool sized to the thread pool; the key lives only in these headers (never repr'd or logged).
        self._http = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(self.timeout_s),
            limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
        )
        self._httpx = httpx
        # Jitter only spreads retries; seeding it per process (from os.urandom) keeps parallel jobs from retrying
        # in lock-step against the same server.
        self._jitter = random.Random()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._checked = False
        self._unserved: str | None = None
        self._rejections: dict[str, int] = {}
        self._stopped: str | None = None

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

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
    def _post(self, body: dict) -> tuple[int, dict, bytes]:
        """POST within ONE deadline: each phase's socket timeout is what is left of it, and a watchdog shuts the
        socket at the deadline while the body is read, so a server trickling bytes cannot hold a request past
        timeout_s. (A status line and headers trickled byte by byte are bounded per read only: httpcore exposes
        the socket once they are in.)"""
        httpx = self._httpx
        deadline = time.monotonic() + self.timeout_s
        timeouts = dict.fromkeys(("connect", "read", "write", "pool"), self.timeout_s)

        def trace(event: str, info: dict) -> None:
            # httpcore reads the socket timeout of a phase (send headers, send body, receive headers) right after
            # its ".started" event: give each phase only what is left of the deadline.
            if event.endswith(".started"):
                timeouts.update(dict.fromkeys(timeouts, max(1e-3, deadline - time.monotonic())))

        request = self._http.build_request(
            "POST", self.url, json=body, extensions={"timeout": timeouts, "trace": trace}
        )
        response = self._http.send(request, stream=True)
        watchdog = None
        try:
            left = deadline - time.monotonic()
            if left <= 0:
                raise httpx.ReadTimeout("deadline passed before the body")
            timeouts["read"] = left
            sock = _socket_of(response)
            if sock is not None:
                watchdog = threading.Timer(left, _shutdown, (sock,))
                watchdog.daemon = True
                watchdog.start()
            chunks = []
            for chunk in response.iter_bytes():
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("deadline passed during the body")
            data = b"".join(chunks)
        except (httpx.ReadError, httpx.RemoteProtocolError):
            if time.monotonic() >= deadline - 0.01:  # the watchdog cut it
                raise httpx.ReadTimeout("deadline passed during the body") from None
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()
            response.close()
        headers = {"retry-after": response.headers.get("Retry-After")}
        return response.status_code, headers, data

    def _once(self, body: dict) -> str:
        httpx = self._httpx
        try:
            status, headers, data = self._post(body)
        except httpx.TimeoutException as exc:
            raise RetryableError(f"timeout after {self.timeout_s:g} s ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise RetryableError(f"connection error ({type(exc).__name__})") from None
        if status in RETRY_STATUS or status >= 500:
            raise RetryableError(f"HTTP {status}", retry_after_seconds(headers["retry-after"]), status)
        if status >= 400:
            # 400/401/403/404/422: the request itself is wrong; retrying cannot help.
            raise BackendError(self.redact(f"HTTP {status}: {data.decode('utf-8', 'replace')[:200]}"))
        try:
            content = json.loads(data)["choices"][0]["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise RetryableError("malformed JSON response (no choices[0].message)") from None
        return message_text(content)

    def _wait(self, attempt: int, retry_after: float | None) -> float:
        with self._lock:
            jitter = self._jitter.uniform(0, 1)
        delay = min(self.backoff_max_s, self.backoff_s * (2**attempt)) * (0.5 + 0.5 * jitter)
        return max(delay, min(retry_after or 0.0, self.backoff_max_s))

    def _rejected(self, error: str) -> None:
        with self._lock:
            self._rejections[error] = n = self._rejections.get(error, 0) + 1
            if n >= IDENTICAL_REJECTIONS_TO_STOP and self._stopped is None:
                self._stopped = error
                log.error("server rejected %d requests identically (%s); not sending the rest", n, error)

    def complete(
        self,
        messages: list[dict] | Callable[[], list[dict]],
        max_tokens: int | None = None,
        overrides: dict | None = None,
    ) -> Result:
        """One request with retries. `messages` may be a callable, so a queued request reads and encodes its images
        only when it is sent; `overrides` (temperature, top_p, seed of one request) replace the client defaults."""
        if self._stopped is not None:
            return Result(
                None, f"not sent: the server rejected {IDENTICAL_REJECTIONS_TO_STOP} requests with {self._stopped}", 0
            )
        self.check_model()
        body = self.body(messages() if callable(messages) else messages, max_tokens, overrides)
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                return Result(self._once(body), None, attempt + 1)
            except RetryableError as exc:
                last = self.redact(str(exc))
                if attempt == self.max_retries:
                    break
                delay = self._wait(attempt, exc.retry_after)
                log.warning("request failed (%s); retry %d/%d in %.2f s", last, attempt + 1, self.max_retries, delay)
                time.sleep(delay)
            except BackendError as exc:
                error = self.redact(str(exc))
                self._rejected(error)
                return Result(None, error, attempt + 1)
        return Result(None, f"gave up after {self.max_retries + 1} attempts: {last}", self.max_retries + 1)

    # ---- is the model served? ----------------------------------------------------------------------------------
    def served_models(self) -> list[str] | None:
        """Ids from GET <base_url>/models, or None when the server does not answer that (some do not)."""
        try:
            response = self._http.get(self.base_url.rstrip("/") + "/models", timeout=min(self.timeout_s, 30.0))
            if response.status_code != 200:
                return None
            return [str(m["id"]) for m in response.json()["data"]]
        except Exception as exc:  # noqa: BLE001 - a best-effort check; the requests themselves report failures
            log.info("GET /models failed (%s); not checking the model id", self.redact(type(exc).__name__))
            return None

    def check_model(self) -> None:
        """Once per client: fail with one line naming the served ids when the configured model is not served.

        Servers that load models on demand (`transformers serve` without a pinned model) list only loaded ones, so
        an unlisted model gets one short probe request before it is declared missing; only an HTTP error that is not
        about load (429, 502-504, timeouts) counts as a verdict (unpinned `transformers serve` answers an unknown
        model with 500, vLLM and OpenAI with 404, a pinned server with 400)."""
        with self._lock:
            served = None if self._checked else self.served_models()
            if served is not None and self.model not in served:
                verdict = None
                # The probe names only the model: a server-specific `extra_body` key another server rejects (422)
                # must not read as "model not served"; those rejections stop a shard through the 4xx rule instead.
                probe = {"model": self.model, "messages": [{"role": "user", "content": "hi"}], self.max_tokens_field: 1}
                try:
                    self._once(probe)
                except BackendError as exc:
                    verdict = str(exc)
                except RetryableError as exc:
                    if exc.status is not None and exc.status not in {408, 409, 425, 429, 502, 503, 504}:
                        verdict = str(exc)
                if verdict is not None:
                    self._unserved = (
                        f"openai backend: model {self.model!r} is not served by {self.base_url} (GET /models lists "
                        f"{', '.join(map(repr, served)) or 'nothing'}; a probe request got "
                        f"{' '.join(self.redact(verdict).split())[:120]}); set args.model to a served id"
                    )
            self._checked = True
        if self._unserved is not None:  # every queued request fails the same way, none is sent
            raise BackendError(self._unserved)

    # ---- many requests -----------------------------------------------------------------------------------------
    def submit(
        self,
        messages: list[dict] | Callable[[], list[dict]],
        max_tokens: int | None = None,
        overrides: dict | None = None,
    ) -> Future:
        """Queue one request on the client's pool: `concurrency` requests stay in flight however callers batch."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="openai")
        return self._pool.submit(self.complete, messages, max_tokens, overrides)

    def complete_many(
        self,
        conversations: Sequence[list[dict]],
        max_tokens: int | None = None,
        overrides: Sequence[dict] | None = None,
    ) -> list[Result]:
        """`overrides`: one dict per conversation (max_tokens, temperature, top_p, seed of that request)."""
        per = [dict(o) for o in overrides] if overrides is not None else [{} for _ in conversations]
        if len(conversations) <= 1 or self.concurrency == 1:
            return [self.complete(c, o.pop("max_tokens", None) or max_tokens, o) for c, o in zip(conversations, per)]
        return _results(
            [self.submit(c, o.pop("max_tokens", None) or max_tokens, o) for c, o in zip(conversations, per)]
        )

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._http.close()


def _results(futures: Sequence[Future]) -> list[Result]:
    """Wait for every future; a BackendError from the model check propagates (one line for the whole job)."""
    try:
        return [f.result() for f in futures]
    finally:
        for f in futures:
            f.cancel()


def _finish(future: Future, note: str | None) -> Future:
    """A Future of the Result as VLM.respond returns it: text stripped, the image fallback noted."""
    done: Future = Future()

    def copy(f: Future) -> None:
        if f.cancelled():
            done.cancel()
        elif f.exception() is not None:
            done.set_exception(f.exception())
        else:
            result = f.result()
            if result.text is not None:
                result.text = result.text.strip()
            if note:
                result.note = note if result.note is None else f"{result.note}; {note}"
            done.set_result(result)

    future.add_done_callback(copy)
    done.add_done_callback(lambda d: future.cancel() if d.cancelled() else None)
    return done


def _socket_of(response) -> socket.socket | None:
    stream = response.extensions.get("network_stream")
    try:
        return stream.get_extra_info("socket") if stream is not None else None
    except Exception:  # noqa: BLE001 - a transport without sockets simply has no watchdog
        return None


def _shutdown(sock: socket.socket) -> None:
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

    def __init__(self, max_images: int = 1, **client_args):
        self.client = OpenAIClient(**client_args)
        self.max_images = max(1, int(max_images))
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

    def answer(self, requests: Sequence[VLMRequest]) -> list[str]:
        results = self.answer_results(requests)
        _raise_first_failure(results, [r.request_id for r in requests])
        return [r.text or "" for r in results]


class OpenAILLM(LLM):
    """Examiner / parser / judge behind an OpenAI-compatible server; args are OpenAIClient's."""

    def __init__(self, **client_args):
        self.client = OpenAIClient(**client_args)

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
