"""halluflow.secrets.Redactor on its own: every form a server may echo a key in loses every 8-character piece of it,
ordinary text is left alone, and a large answer is redacted in bounded time (every served answer passes here)."""

from __future__ import annotations

import json
import time

import pytest

from halluflow.secrets import REDACTED, Redactor

KEY = "sk-live-8Hq2Zt5Wv9Xc1Bn4Mk7Pj0Ld3Fs6Ga"
FORMS = {
    "verbatim": f"Bearer {KEY}",
    "split-by-newline": f"{KEY[:11]}\n{KEY[11:]}",
    "split-by-crlf-and-spaces": f"{KEY[:5]}\r\n   {KEY[5:20]} {KEY[20:]}",
    "json-escaped-newline": json.dumps({"e": f"{KEY[:17]}\n{KEY[17:]}"}),
    "u002d": KEY.replace("-", "\\u002d"),
    "every-char-escaped": "".join(f"\\u{ord(c):04X}" for c in KEY),
    "percent": KEY.replace("-", "%2d"),
    "slash-escaped": (KEY[:9] + "/" + KEY[9:]).replace("/", "\\/"),
    "prefix-only": KEY[:12] + "...",
    "middle-only": "xx" + KEY[10:19] + "yy",
    "suffix-only": "key ending in " + KEY[-9:],
}


def pieces(text: str) -> list[str]:
    flat = "".join(text.split())
    return [KEY[i : i + 8] for i in range(len(KEY) - 7) if KEY[i : i + 8] in text or KEY[i : i + 8] in flat]


@pytest.mark.parametrize("form", list(FORMS))
def test_every_echoed_form_loses_every_piece(form):
    redact = Redactor([KEY, f"Bearer {KEY}"])
    out = redact(FORMS[form])
    assert REDACTED in out and pieces(out) == [], out


@pytest.mark.parametrize(
    "masked",
    ["Incorrect API key provided: sk-live-********************Fs6Ga.", "bad key sk-li***...6Ga", "sk-...Fs6Ga"],
)
def test_masked_keys_are_dropped_from_errors_only(masked):
    redact = Redactor([KEY])
    assert "*" not in redact(masked, error=True) and "6Ga" not in redact(masked, error=True)
    assert redact("***Yes***, a dog") == "***Yes***, a dog"  # an answer's markdown is not an error


def test_ordinary_text_is_left_alone():
    redact = Redactor([KEY, "user", "p4ssw0rd"])
    text = 'Yes, there is a dog.\n{"error": "rate limited"}\\n 100% sure, sky-blue; live-8 not 8Hq2'
    assert redact(text, error=True) == text


def test_a_large_answer_is_redacted_in_bounded_time():
    redact = Redactor([KEY, f"Bearer {KEY}"])
    answer = "yes, a dog on the grass " * 500_000 + KEY[:12] + "\n" + KEY[12:]  # 12 MB
    start = time.perf_counter()
    out = redact(answer)
    assert time.perf_counter() - start < 10  # measured 0.6 s; matching each position in Python took minutes
    assert out.endswith(REDACTED) and pieces(out[-100:]) == []
