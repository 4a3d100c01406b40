"""The one yes/no parser module: every scorer and stage that reads "yes"/"no" out of a model's answer calls it.

Named variants reproduce the anchors' own parsers: `pope` = RUCAIBox/POPE evaluate.py; `exact` = exact match after
lower()/strip() (lmms-eval's parse with its aggregation bugs fixed); `lmms_eval` = the same parse with lmms-eval's
aggregation bugs (see pope.py); `vlmevalkit` = VLMEvalKit's YOrN_Extraction; `amber` = AMBER's strict "Yes"/"No";
`lenient` = the first word when it is yes/no, else the only one of the two present (the CAOS oracle and the ODE
diagnosis); `unihall` = the first standalone yes/no word (UniHall's GHR binary branch, "EvalHall" eq. 22);
`affirm` = an opening yes/no word, else a negation in the first sentence, else an affirmation (CEDI's yes/no
questions); `opener` = only an opening yes/no word (CEDI's open questions).

Every variant has three outcomes: "yes", "no" or None (unknown: an answer was given but says neither). A failed
request or an empty answer is never parsed at all (docs/failed-answers.md): `failed_mask` finds them and the
callers exclude and count them, so no variant can turn a missing answer into a prediction — POPE's own script
would call "" a "yes".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..errors import InputError, TooManyFailedError

if TYPE_CHECKING:
    import polars as pl

YES, NO = "yes", "no"
UNKNOWN = None

# Share of failed answers above which a scorer refuses to print numbers (docs/failed-answers.md explains 0.1).
DEFAULT_MAX_FAILED_FRACTION = 0.1


# ---------------------------------------------------------------- failed answers
def is_failed(answer: Any, status: Any = None) -> bool:
    """True for a recorded failure (status other than ok), a missing answer or one holding only whitespace."""
    if status is not None and status != "ok":
        return True
    return not isinstance(answer, str) or not answer.strip()


def failed_mask(answers: "pl.Series", status: "pl.Series | None" = None) -> "pl.Series":
    """Vectorised is_failed over a String or Categorical series (and an optional status series; null status = ok)."""
    import polars as pl

    if answers.dtype == pl.Categorical:  # test each distinct answer once
        distinct = answers.unique().drop_nulls()
        blank = distinct.filter(distinct.cast(pl.String).str.strip_chars() == "").cast(pl.String).to_list()
        failed = answers.is_null() | answers.is_in(blank)
    else:
        failed = answers.is_null() | (answers.str.strip_chars() == "")
    if status is not None:
        failed = failed | (status.is_not_null() & (status != "ok"))
    return failed.fill_null(True).rename("failed").cast(pl.Boolean)


def check_failed(
    n_failed: int,
    n_total: int,
    limit: float | None,
    what: str,
    advice: str = "no scores printed; rerun the failed answers or raise the limit",
) -> None:
    """Refuse (TooManyFailedError, one line) when more than `limit` of `n_total` answers failed."""
    if limit is None or n_total == 0:
        return
    if not 0.0 <= limit <= 1.0:
        raise InputError(f"--max-failed-fraction {limit}: expected a number between 0 and 1")
    if n_failed / n_total > limit:
        raise TooManyFailedError(
            f"{what}: {n_failed} of {n_total} answers failed or are empty ({n_failed / n_total:.0%} > "
            f"--max-failed-fraction {limit:g}); {advice}"
        )


def add_max_failed_argument(parser) -> None:
    from ..cli import fraction

    parser.add_argument(
        "--max-failed-fraction",
        type=fraction,
        default=DEFAULT_MAX_FAILED_FRACTION,
        metavar="F",
        help="refuse to score when more than this share of answers failed or are empty "
        f"(default {DEFAULT_MAX_FAILED_FRACTION}; they are always excluded and counted as n_failed)",
    )


# ---------------------------------------------------------------- the variants, one answer at a time
def pope_yes_no(text: str) -> str:
    # POPE evaluate.py: the text before the first '.', ',' dropped, split on ' ' (one space, not any whitespace),
    # "no" iff a word is exactly 'No', 'not' or 'no'.
    words = text.split(".")[0].replace(",", "").split(" ")
    return NO if any(w in ("No", "not", "no") for w in words) else YES


def exact_yes_no(text: str) -> str | None:
    norm = text.lower().strip()  # lmms-eval: pred = answer.lower().strip()
    return norm if norm in (YES, NO) else None


def amber_yes_no(text: str) -> str | None:
    # AMBER inference.py compares the raw response with "Yes"/"No": no stripping, case-sensitive.
    return {"Yes": YES, "No": NO}.get(text)


# VLMEvalKit's process_punctuation (vlmeval/smp/vlm.py), kept with its quirks: a punctuation mark is deleted
# when it touches a space anywhere in the text (or when the text has a digit,digit), otherwise replaced by a space;
# then periods not followed by a digit are removed. The original passes re.UNICODE (= 32) as the `count`
# argument of sub(), so only the first 32 periods are removed; we keep that.
_VLMEVAL_PUNCT = [
    ";",
    "/",
    "[",
    "]",
    '"',
    "{",
    "}",
    "(",
    ")",
    "=",
    "+",
    "\\",
    "_",
    "-",
    ">",
    "<",
    "@",
    "`",
    ",",
    "?",
    "!",
]
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
    has_yes, has_no = YES in words, NO in words
    if has_yes != has_no:
        return YES if has_yes else NO
    return None


_LETTERS = re.compile(r"[a-z]+")


def lenient_yes_no(text: str) -> str | None:
    toks = _LETTERS.findall(text.lower())
    if not toks:
        return None
    if toks[0] in {"yes", "yeah", "yep"}:
        return YES
    if toks[0] in {"no", "nope"}:
        return NO
    has_yes, has_no = YES in toks, (NO in toks or "not" in toks)
    if has_yes != has_no:
        return YES if has_yes else NO
    return None


_YES_NO_WORD = re.compile(r"\b(yes|no)\b")


def unihall_yes_no(text: str) -> str | None:
    m = _YES_NO_WORD.search(text.lower())
    return m.group(1) if m else None


_WORDS = re.compile(r"[a-z']+")
_AFFIRM = re.compile(r"\b(yes|it is|it's|they are|indeed|correct|certainly)\b")


def opener_yes_no(text: str) -> str | None:
    """Only an opening yes/no word counts (yes, yeah, yep, correct, indeed, sure / no, nope)."""
    words = _WORDS.findall(text.strip().lower())
    if words and words[0] in {"yes", "yeah", "yep", "correct", "indeed", "sure"}:
        return YES
    if words and words[0] in {"no", "nope"}:
        return NO
    return None


def affirm_yes_no(text: str) -> str | None:
    # The opener, then POPE's rule on the first sentence (a negation word → no); unlike POPE an answer must also
    # affirm to count as yes, so a stand-in model's noise stays unknown instead of inflating a hallucination rate.
    opened = opener_yes_no(text)
    if opened is not None:
        return opened
    first = text.strip().lower().split(".")[0]
    if {"no", "not", "isn't", "aren't", "doesn't", "don't"} & set(_WORDS.findall(first)):
        return NO
    return YES if _AFFIRM.search(first) else None


SCALAR: dict[str, Callable[[str], str | None]] = {
    "pope": pope_yes_no,
    "exact": exact_yes_no,
    "lmms_eval": exact_yes_no,
    "vlmevalkit": vlmevalkit_yorn,
    "amber": amber_yes_no,
    "lenient": lenient_yes_no,
    "unihall": unihall_yes_no,
    "affirm": affirm_yes_no,
    "opener": opener_yes_no,
}
PARSERS = tuple(SCALAR)


def _known(parser: str) -> Callable[[str], str | None]:
    try:
        return SCALAR[parser]
    except KeyError:
        raise InputError(f"unknown parser {parser!r} (known: {', '.join(sorted(SCALAR))})") from None


def parse_yes_no(text: Any, parser: str = "pope") -> str | None:
    """One answer → "yes" / "no" / None. A failed, empty or non-string answer is None under every variant."""
    fn = _known(parser)
    if is_failed(text):
        return UNKNOWN
    return fn(text)


# ---------------------------------------------------------------- vectorised (polars) forms of the same rules
# POPE's word test as one regex on single-space boundaries; ^/$ in polars' (Rust) regex match only at the ends of
# the string, as split(' ') does.
_POPE_NEGATION = r"(?:^| )(?:No|not|no)(?: |$)"


def _pope_series(answers: "pl.Series") -> "pl.Series":
    import polars as pl

    first_sentence = answers.str.extract(r"^([^.]*)", 1).str.replace_all(",", "", literal=True)
    negated = first_sentence.str.contains(_POPE_NEGATION)
    return pl.select(pl.when(negated).then(pl.lit(NO)).otherwise(pl.lit(YES)).alias("parsed")).to_series()


def _exact_series(answers: "pl.Series") -> "pl.Series":
    import polars as pl

    norm = answers.str.to_lowercase().str.strip_chars()
    return pl.select(
        pl.when(norm == YES).then(pl.lit(YES)).when(norm == NO).then(pl.lit(NO)).otherwise(None).alias("parsed")
    ).to_series()


def _amber_series(answers: "pl.Series") -> "pl.Series":
    import polars as pl

    return pl.select(
        pl.when(answers == "Yes")
        .then(pl.lit(YES))
        .when(answers == "No")
        .then(pl.lit(NO))
        .otherwise(None)
        .alias("parsed")
    ).to_series()


def _map_unique(answers: "pl.Series", fn: Callable[[str], str | None]) -> "pl.Series":
    """Apply a Python parser once per distinct answer (model answers repeat a lot), then broadcast back."""
    import polars as pl

    uniq = answers.unique()
    table = pl.DataFrame(
        {"answer": uniq, "parsed": [None if a is None else fn(a) for a in uniq]},
        schema={"answer": answers.dtype, "parsed": pl.String},
    )
    return answers.to_frame("answer").join(table, on="answer", how="left", maintain_order="left", nulls_equal=True)[
        "parsed"
    ]


_VECTOR: dict[str, Callable[["pl.Series"], "pl.Series"]] = {
    "pope": _pope_series,
    "exact": _exact_series,
    "lmms_eval": _exact_series,
    "amber": _amber_series,
}


def parse_answers(answers: "Iterable[str | None] | pl.Series", parser: str = "pope") -> "pl.Series":
    """Parse answers to "yes"/"no"/null with the named variant; failed (null) and empty answers stay null."""
    import polars as pl

    fn = _known(parser)
    if isinstance(answers, pl.Series):
        series = answers
    else:
        values = list(answers)
        series = pl.Series("answer", [v if isinstance(v, str) else None for v in values], dtype=pl.String)
    series = series.cast(pl.String)
    vector = _VECTOR.get(parser)
    parsed = vector(series) if vector is not None else _map_unique(series, fn)
    return pl.select(pl.when(failed_mask(series)).then(None).otherwise(parsed).alias("parsed")).to_series()
