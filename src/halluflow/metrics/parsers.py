"""Yes/no answer parsers of the anchors, vectorised over a polars Series (anchors.md, POPE / AMBER sections).

`pope` = POPE's evaluate.py; `exact` = exact match after lower()/strip() (lmms-eval's parse, with its
aggregation bugs fixed); `lmms_eval` = the same parse with lmms-eval's aggregation bugs (see pope.py);
`vlmevalkit` = VLMEvalKit's YOrN_Extraction (yes/no/unknown); `amber` = AMBER's strict "Yes"/"No".
Every parser returns "yes", "no" or null (unknown), so all of them share one metric implementation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import polars as pl

from ..errors import InputError

YES, NO = "yes", "no"

# POPE evaluate.py: keep the text before the first '.', drop ',', split on ' ' (one space, not any
# whitespace) and say "no" iff a word is exactly 'No', 'not' or 'no'. The regex below is that word test on
# single-space boundaries; ^/$ in polars' (Rust) regex match only at the ends of the string, as split does.
_POPE_NEGATION = r"(?:^| )(?:No|not|no)(?: |$)"


def parse_pope(answers: pl.Series) -> pl.Series:
    first_sentence = answers.str.extract(r"^([^.]*)", 1).str.replace_all(",", "", literal=True)
    negated = first_sentence.str.contains(_POPE_NEGATION)
    return pl.select(pl.when(negated).then(pl.lit(NO)).otherwise(pl.lit(YES)).alias("parsed")).to_series()


def _exact(answers: pl.Series) -> pl.Series:
    # lmms-eval: pred = answer.lower().strip(); only the exact strings "yes"/"no" count.
    norm = answers.str.to_lowercase().str.strip_chars()
    return pl.select(
        pl.when(norm == YES).then(pl.lit(YES)).when(norm == NO).then(pl.lit(NO)).otherwise(None).alias("parsed")
    ).to_series()


def parse_amber(answers: pl.Series) -> pl.Series:
    # AMBER inference.py compares the raw response with "Yes"/"No" — no stripping, case-sensitive.
    return pl.select(
        pl.when(answers == "Yes").then(pl.lit(YES)).when(answers == "No").then(pl.lit(NO)).otherwise(None).alias("parsed")
    ).to_series()


# VLMEvalKit's process_punctuation (vlmeval/smp/vlm.py), kept with its quirks: a punctuation mark is deleted
# when it touches a space anywhere in the text (or when the text has a digit,digit), otherwise replaced by a space;
# then periods not followed by a digit are removed. The original passes re.UNICODE (= 32) as the `count`
# argument of sub(), so only the first 32 periods are removed; we keep that.
_VLMEVAL_PUNCT = [";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@", "`", ",", "?", "!"]
_COMMA_DIGITS = re.compile(r"(\d)(,)(\d)")
_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")


def _vlmeval_punctuation(text: str) -> str:
    out = text
    has_comma_digits = _COMMA_DIGITS.search(text) is not None
    for p in _VLMEVAL_PUNCT:
        if (p + " " in text or " " + p in text) or has_comma_digits:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    return _PERIOD.sub("", out, count=32)


def vlmevalkit_yorn(text: str) -> str | None:
    words = _vlmeval_punctuation(text.lower()).split()
    has_yes, has_no = "yes" in words, "no" in words
    if has_yes and not has_no:
        return YES
    if has_no and not has_yes:
        return NO
    return None


def parse_vlmevalkit(answers: pl.Series) -> pl.Series:
    return _map_unique(answers, vlmevalkit_yorn)


def _map_unique(answers: pl.Series, fn: Callable[[str], str | None]) -> pl.Series:
    """Apply a Python parser once per distinct answer (model answers repeat a lot), then broadcast back."""
    uniq = answers.unique()
    table = pl.DataFrame({"answer": uniq, "parsed": [None if a is None else fn(a) for a in uniq]},
                         schema={"answer": answers.dtype, "parsed": pl.String})
    return answers.to_frame("answer").join(table, on="answer", how="left", maintain_order="left",
                                           nulls_equal=True)["parsed"]


PARSERS: dict[str, Callable[[pl.Series], pl.Series]] = {
    "pope": parse_pope,
    "exact": _exact,
    "lmms_eval": _exact,
    "vlmevalkit": parse_vlmevalkit,
    "amber": parse_amber,
}


def parse_answers(answers: Iterable[str | None] | pl.Series, parser: str = "pope") -> pl.Series:
    """Parse answers to "yes"/"no"/null with the named parser; a null answer (failed request) stays null."""
    if parser not in PARSERS:
        raise InputError(f"unknown parser {parser!r} (known: {', '.join(sorted(PARSERS))})")
    series = answers if isinstance(answers, pl.Series) else pl.Series("answer", list(answers), dtype=pl.String)
    series = series.cast(pl.String)
    parsed = PARSERS[parser](series)
    # A failed request has no answer: unknown under every parser (POPE's own script would call '' a "yes").
    return pl.select(pl.when(series.is_null()).then(None).otherwise(parsed).alias("parsed")).to_series()
