"""OpenAI-compatible chat-completions backends (vLLM, SGLang, Ollama, OpenAI servers) for the `vlm` and `llm` roles.

Images travel as base64 data URLs; requests run on a bounded thread pool; 429/5xx/timeouts/connection errors/
malformed JSON are retried with exponential backoff + jitter (honouring Retry-After), then recorded as a failure
that the answer stage does not cache, so a rerun retries it. The API key is read from an environment variable
NAMED in the config and never logged or written anywhere.
"""

from __future__ import annotations

import base64
import email.utils
import logging
import mimetypes
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from ..errors import BackendError, ConfigError, InputError
from .base import LLM, VLM, BackendInfo, Result, VLMRequest

log = logging.getLogger("halluflow.backends.openai")

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class RetryableError(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


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


def _retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class OpenAIClient:
    """Chat-completions client shared by OpenAIVLM and OpenAILLM.

    Args: base_url (e.g. http://localhost:8000/v1), model, api_key_env (NAME of the env var holding the key; null =
    no auth, e.g. a local vLLM), timeout_s (60), max_retries (5), backoff_s (1.0: first wait, doubled each retry),
    backoff_max_s (60), concurrency (4 threads), max_tokens (64), temperature (0), top_p (1), seed (0, sent for
    servers that support it), max_tokens_field ("max_tokens"; "max_completion_tokens" for newer OpenAI models),
    extra_body (dict merged into each request), revision (recorded only), stand_in.
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
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise ConfigError(f"openai backend: environment variable {api_key_env!r} (api_key_env) is not set")
            headers["Authorization"] = f"Bearer {key}"
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.base_url = base_url
        self.model = model
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
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
        )
        self._httpx = httpx
        self._jitter = random.Random(0)
        self._jitter_lock = threading.Lock()

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

    def _once(self, body: dict) -> str:
        httpx = self._httpx
        try:
            response = self._http.post(self.url, json=body)
        except httpx.TimeoutException as exc:
            raise RetryableError(f"timeout ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise RetryableError(f"connection error ({type(exc).__name__})") from None
        if response.status_code in RETRY_STATUS or response.status_code >= 500:
            raise RetryableError(
                f"HTTP {response.status_code}", _retry_after_seconds(response.headers.get("Retry-After"))
            )
        if response.status_code >= 400:
            # 400/401/403/404: the request itself is wrong; retrying cannot help.
            raise BackendError(f"HTTP {response.status_code}: {response.text[:200]}")
        try:
            payload = response.json()
            content = payload["choices"][0]["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise RetryableError("malformed JSON response (no choices[0].message)") from None
        return "" if content is None else str(content)

    def _wait(self, attempt: int, retry_after: float | None) -> float:
        with self._jitter_lock:
            jitter = self._jitter.uniform(0, 1)
        delay = min(self.backoff_max_s, self.backoff_s * (2**attempt)) * (0.5 + 0.5 * jitter)
        return max(delay, retry_after or 0.0)

    def complete(self, messages: list[dict], max_tokens: int | None = None, overrides: dict | None = None) -> Result:
        body = self.body(messages, max_tokens, overrides)
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                return Result(self._once(body), None, attempt + 1)
            except RetryableError as exc:
                last = str(exc)
                if attempt == self.max_retries:
                    break
                delay = self._wait(attempt, exc.retry_after)
                log.warning("request failed (%s); retry %d/%d in %.2f s", last, attempt + 1, self.max_retries, delay)
                time.sleep(delay)
            except BackendError as exc:
                return Result(None, str(exc), attempt + 1)
        return Result(None, f"gave up after {self.max_retries + 1} attempts: {last}", self.max_retries + 1)

    def complete_many(self, conversations: Sequence[list[dict]], max_tokens: int | None = None,
                      overrides: Sequence[dict] | None = None) -> list[Result]:
        """`overrides`: one dict per conversation (max_tokens, temperature, top_p, seed of that request)."""
        per = list(overrides) if overrides is not None else [{}] * len(conversations)

        def one(i: int) -> Result:
            o = dict(per[i])
            return self.complete(conversations[i], o.pop("max_tokens", None) or max_tokens, o)

        if len(conversations) <= 1 or self.concurrency == 1:
            return [one(i) for i in range(len(conversations))]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(one, range(len(conversations))))

    def close(self) -> None:
        self._http.close()


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

    def answer_results(self, requests: Sequence[VLMRequest]) -> list[Result]:
        """Per-request outcomes (failures included) for the answer stage, which records them without caching."""
        settings = [self.settings_for(r) for r in requests]
        conversations = [request_messages(r, s["system_prompt"]) for r, s in zip(requests, settings)]
        overrides = [{"max_tokens": s["max_new_tokens"], "temperature": s["temperature"], "top_p": s["top_p"],
                      "seed": s["seed"]} for s in settings]
        return self.client.complete_many(conversations, overrides=overrides)

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
