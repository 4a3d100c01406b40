"""The one redaction point for secrets: API keys and base_url credentials never leave in anything halluflow writes.

A key is registered before any message about its model is formed (`register_args`: every backend's arguments pass
here when they are checked, so the value of the variable named by `api_key_env` and a base_url's credentials are
known before the first log line, request or error). From then on `redact` replaces them in every text that leaves:
answers and errors of served models, log records (a record factory redacts each message as it is made) and the
command line's error line. A key is found not only verbatim but as a server may echo it back:
- in part: every run of 8 or more characters that is a piece of a secret is replaced (a truncated echo, a key cut by
  a server's excerpt), so no 8-character piece of a key survives anywhere;
- across line breaks and other whitespace ("sk-ab\\ncd..."), and through JSON, URL and `\\/` escapes
  ("sk\\u002dab", "sk%2Dab"): the text is matched as it would read once unescaped.
Errors (`error=True`: server error bodies, log lines, the error line) also lose masked keys as OpenAI-style 401s
print them ("sk-ab***...xyz", "sk-proj-****abcd") and values shaped like well-known API keys (sk-…, hf_…), which
would give away a key's beginning and end even when halluflow never held the key itself.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[REDACTED]"
PIECE = 8  # characters: no piece of a secret this long survives redaction
MIN_SECRET = 4  # shorter values (v=1 in a query string) would redact ordinary words
BLOCK = 1 << 14  # characters a text is looked at in, beyond the first look at all of it

# One unit of text as a server may write a character: a JSON escape, a percent-escape, or the character itself.
_UNIT = re.compile(r"\\u[0-9a-fA-F]{4}|\\[\\/\"bfnrt]|%[0-9a-fA-F]{2}|.", re.DOTALL)
_JSON_ESCAPES = {"\\\\": "\\", "\\/": "/", '\\"': '"', "\\b": "", "\\f": "", "\\n": "", "\\r": "", "\\t": ""}
# Masked keys as providers print them in 401 bodies, and values shaped like well-known API keys.
_MASKED = re.compile(r"[\w\-]*(?:\*{3,}(?:\.{2,}|…)?)+[\w\-]*|\b(?:sk|rk|pk)-[\w\-]*(?:\.{3}|…)[\w\-]+")
_KEY_SHAPED = re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-]{16,}|\bhf_[A-Za-z0-9]{20,}|\bAIza[0-9A-Za-z_\-]{30,}")


def _decode_unit(unit: str) -> str:
    """The character a unit stands for; "" for whitespace and escaped line breaks (a key split across lines)."""
    if len(unit) == 1:
        return "" if unit.isspace() else unit
    if unit.startswith("\\u"):
        char = chr(int(unit[2:], 16))
        return "" if char.isspace() else char
    if unit.startswith("%"):
        char = chr(int(unit[1:], 16))
        return "" if char.isspace() else char
    return _JSON_ESCAPES.get(unit, unit)


_ESCAPE = re.compile(r"\\u[0-9a-fA-F]{4}|\\[\\/\"bfnrt]|%[0-9a-fA-F]{2}")


_NO_SPACE = {c: None for c in range(0x3000 + 1) if chr(c).isspace()}
_COMMON_ESCAPES = ("\\n", "\\r", "\\t", "\\b", "\\f")


def _may_hold(text: str, anchors: frozenset) -> bool:
    """A first look over the whole text at C speed: could it hold a piece of a secret at all (unescaped, without
    whitespace)? Most texts cannot, and then no run of it is looked at one by one."""
    if "\\" in text:
        for escape in _COMMON_ESCAPES:  # escaped line breaks: as many as the text has lines, removed in C
            text = text.replace(escape, "")
    if "\\" in text or "%" in text:
        text = _ESCAPE.sub(lambda m: _decode_unit(m.group(0)), text)
    flat = text.translate(_NO_SPACE)
    return any(a in flat for a in anchors)


class Redactor:
    """Secrets and the pieces of them that `redact` removes; thread-safe (`add` swaps in a new immutable state)."""

    def __init__(self, secrets: Iterable[str] = ()):
        self._lock = threading.Lock()
        self._state: tuple = ((), frozenset(), frozenset(), None, None)
        self.add(*secrets)

    @property
    def secrets(self) -> tuple[str, ...]:
        return self._state[0]

    def add(self, *secrets: Any) -> None:
        new = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET}
        with self._lock:
            known = set(self._state[0])
            if new <= known:
                return
            every = sorted(known | new, key=len, reverse=True)  # longest first: "Bearer <key>" before <key>
            pieces, anchors = set(), set()
            for secret in every:
                flat = "".join(secret.split())
                n = min(PIECE, len(flat))
                pieces.update(flat[i : i + n] for i in range(len(flat) - n + 1))
                # Every piece of n characters holds one of these aligned blocks whole: a cheap first look.
                block = max(1, n // 2)
                anchors.update(flat[i : i + block] for i in range(0, len(flat) - block + 1, block))
                anchors.add(flat[-block:])
            chars = {c for s in every for c in s if not c.isspace()} | set('\\%u0123456789abcdefABCDEF/"bfnrt')
            members = "".join(re.escape(c) for c in sorted(chars)) + r"\s"
            runs = re.compile(f"[{members}]{{{MIN_SECRET},}}")
            breaker = re.compile(f"[^{members}]")  # a character no run holds: where a block may end
            self._state = (tuple(every), frozenset(pieces), frozenset(anchors), runs, breaker)

    def __call__(self, text: str, error: bool = False) -> str:
        return self.redact(text, error)

    def redact(self, text: str, error: bool = False) -> str:
        """`text` without any secret or piece of one (as written or escaped); `error`: also without masked or
        key-shaped values (server errors, log lines, the error line)."""
        if not isinstance(text, str):
            text = str(text)
        secrets, pieces, anchors, runs, breaker = self._state
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        if pieces and _may_hold(text, anchors):
            # Block by block (each ending where no run can go on), so only the blocks that may hold a piece are
            # looked at run by run: a 12 MB answer with a key at its end costs one block's runs, not millions.
            out, pos = [], 0
            while pos < len(text):
                end = pos + BLOCK
                if end < len(text):
                    stop = breaker.search(text, end)
                    end = stop.end() if stop else len(text)
                block = text[pos:end]
                if _may_hold(block, anchors):
                    block = runs.sub(lambda m: self._run(m.group(0), pieces, anchors), block)
                out.append(block)
                pos = end
            text = "".join(out)
        if error:
            text = _MASKED.sub(REDACTED, text)
            text = _KEY_SHAPED.sub(REDACTED, text)
        return text

    @staticmethod
    def _run(run: str, pieces: frozenset, anchors: frozenset) -> str:
        """One run of characters a secret could be written with: every stretch of it that reads, unescaped and
        without whitespace, as pieces of a secret is replaced, so no PIECE characters of one survive."""
        escaped = "\\" in run or "%" in run
        flat = "".join(_decode_unit(u) for u in _UNIT.findall(run)) if escaped else run.translate(_NO_SPACE)
        if not any(a in flat for a in anchors) or not any(p in flat for p in pieces):
            return run
        units = _UNIT.findall(run)
        chars: list[str] = []
        owner: list[int] = []  # the unit each character of the flattened text came from
        for u, unit in enumerate(units):
            for c in _decode_unit(unit):
                chars.append(c)
                owner.append(u)
        flat = "".join(chars)
        covered = bytearray(len(flat))
        for piece in pieces:
            start = flat.find(piece)
            while start >= 0:
                covered[start : start + len(piece)] = b"\1" * len(piece)
                start = flat.find(piece, start + 1)
        out, u = [], 0
        i = 0
        while i < len(flat):
            if not covered[i]:
                i += 1
                continue
            j = i
            while j < len(flat) and covered[j]:
                j += 1
            first, last = owner[i], owner[j - 1]
            out.append("".join(units[u:first]) + REDACTED)
            u = last + 1
            i = j
        out.append("".join(units[u:]))
        return "".join(out)


_PROCESS = Redactor()
_factory_lock = threading.Lock()
_factory_installed = False


def register(*secrets: Any) -> None:
    """Add secrets to this process's redaction: from now on no text halluflow writes, logs or prints holds them."""
    _PROCESS.add(*secrets)
    _install_log_redaction()


def redact(text: Any, error: bool = False) -> str:
    """The process's redaction (see the module docstring)."""
    return _PROCESS.redact(text, error)


def known() -> tuple[str, ...]:
    return _PROCESS.secrets


def env_secret(name: Any) -> str | None:
    """The value of the environment variable `name` (a key named by api_key_env), when `name` is a variable name."""
    if isinstance(name, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return os.environ.get(name) or None
    return None


def url_secrets(base_url: Any) -> list[str]:
    """Credentials a base_url carries: userinfo (raw, decoded, and as the Basic header built from it) and every
    query value of MIN_SECRET+ characters."""
    import base64
    from urllib.parse import parse_qsl, unquote, urlsplit

    if not isinstance(base_url, str):
        return []
    try:
        parts = urlsplit(base_url)
        user, password = parts.username, parts.password
    except ValueError:
        return []
    out: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        out += [userinfo, unquote(userinfo)]
        if user is not None:
            out += [unquote(user), unquote(password or "")]
            basic = f"{unquote(user)}:{unquote(password or '')}"
            out += [basic, base64.b64encode(basic.encode()).decode("ascii")]
    for raw in parts.query.split("&"):
        out.append(raw.partition("=")[2])
    out += [v for _, v in parse_qsl(parts.query, keep_blank_values=True)]
    return [s for s in out if len(s) >= MIN_SECRET]


def register_args(args: Mapping[str, Any], who: str = "model") -> None:
    """Register the secrets a backend's arguments lead to (the key of `api_key_env`, base_url's credentials) before
    any message about them is formed; refuse, in one line that does not echo it, a key pasted into another
    argument (`model: sk-...`), which would be sent, logged and recorded as that argument."""
    from .errors import ConfigError

    key = env_secret(args.get("api_key_env"))
    register(key, *url_secrets(args.get("base_url")))
    if not key or len(key) < MIN_SECRET:
        return
    for name, value in args.items():
        # base_url may carry the key as a query value on purpose (it is redacted as a credential)
        if name not in ("api_key_env", "base_url") and isinstance(value, str) and key in value:
            raise ConfigError(
                f"{who}: argument {name!r} holds the API key of the variable {args['api_key_env']!r} (api_key_env); "
                "the key goes only through api_key_env, never into another argument"
            )


class _RedactingFactory:
    """Log record factory: each record's message is redacted as it is made, whatever handler later writes it."""

    def __init__(self, previous):
        self.previous = previous

    def __call__(self, *args, **kwargs):
        record = self.previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is logging's own error to report
            return record
        clean = _PROCESS.redact(message, error=True)
        if clean != message:
            record.msg, record.args = clean, ()
        return record


def _install_log_redaction() -> None:
    global _factory_installed
    with _factory_lock:
        if not _factory_installed:
            logging.setLogRecordFactory(_RedactingFactory(logging.getLogRecordFactory()))
            _factory_installed = True
