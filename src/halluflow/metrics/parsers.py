"""The one yes/no parser module: every scorer and stage that reads "yes"/"no" out of a model's answer calls it.

Named variants reproduce the anchors' own parsers: `pope` = RUCAIBox/POPE evaluate.py (`pope_official`: the same
reading as a peer parser, the empty answer read as yes as the script does); `exact` = exact match after
lower()/strip() (lmms-eval's parse with its aggregation bugs fixed); `lmms_eval` = lmms-eval's POPE task as it
scores (the same parse with its aggregation, see pope.py); `vlmevalkit` = VLMEvalKit's YOrN_Extraction (its POPE
rating without a judge model); `amber` = AMBER's strict "Yes"/"No"; `lenient` = the first word when it is yes/no,
else the only one of the two present (the CAOS oracle and the ODE diagnosis); `unihall` = the first standalone
yes/no word (UniHall's GHR binary branch, "EvalHall" eq. 22); `affirm` = an opening yes/no word, else a negation in
the first sentence, else an affirmation (CEDI's yes/no questions); `opener` = only an opening yes/no word (CEDI's
open questions); `pope_lower` = POPE's first-sentence negation test, case-insensitive, on any whitespace (the
parser of the lmms-eval task that `halluflow release export` writes, which must run without halluflow); `release` =
the release's own reader (case-, whitespace- and punctuation-robust; refusals, hedges, other languages and emoji
from the shared table resources/answers/unreadable.tsv are unknown, and its unknown answers are excluded from every
ratio: EXCLUDES_UNKNOWN). `release_reader_source()` gives it as standalone source for an exported task.

Every parser also states its default rule (DEFAULT_RULES: what it does with an answer it cannot read);
`default_rule_mask` marks the answers it read only by that rule, which the scorers count as n_default_rule.

Every variant has three outcomes: "yes", "no" or None (unknown: an answer was given but says neither).

The failed-answer rule (docs/failed-answers.md) is defined here once, `is_failed` for one answer and `failed_mask`
for a polars column; every scorer and stage calls one of them. A record whose request failed (status other than
ok) or that holds no answer (null, not a string) is failed under every parser. Under halluflow's own parsers a
blank answer (nothing but whitespace, control or format characters: "", "  ", "\x1c", "\u200b") is failed too,
never read as yes or no (POPE's own script would call "" a "yes"). The peer parsers (`PEER_PARSERS`) exist to give
a peer's number, so they score every string the peer would see, the empty string included.
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
# Parsers that reproduce a peer harness's own scoring: they see every answer string, as the peer does. The value
# is what the scorers write as "parser_mode". Commits: the code read to write them (bench/peer_ports.py).
PEER_PARSERS = {
    "pope_official": "peer: RUCAIBox/POPE evaluate.py: every answer string scored, the empty string included (read "
    "as yes, as the script does); a ratio the script cannot compute (0/0, where it crashes) is null",
    "lmms_eval": "peer: lmms-eval tasks/pope/utils.py (pope_process_results + pope_aggregate_*, commit 75571cf): "
    "every answer string scored, the empty string included (wrong, neither yes nor no); 0 where a ratio is "
    "undefined; recall leaves answers that are neither yes nor no out; yes_ratio counts the ground truth",
    "vlmevalkit": "peer: VLMEvalKit dataset/utils/yorn.py (YOrN_Extraction + POPE_rating, exact matching, no judge "
    "model; commit e8e78f0): every answer string scored, the empty string included (Unknown, counted as not yes); "
    "0 where a ratio is undefined; fractions where VLMEvalKit prints percent (its Overall is f1); VLMEvalKit has no "
    "yes_ratio, this one is answers extracted as Yes / n",
}
HALLUFLOW_RULE = (
    "halluflow: failed requests and blank answers (empty, whitespace, control or format characters only) are "
    "excluded and counted as n_failed; answers the parser reads as neither yes nor no are wrong and counted as "
    "n_unknown"
)

# What a blank answer may hold: Python's whitespace (str.isspace: it includes \x1c-\x1f, which polars' strip does
# not) and the Unicode control (Cc) and format (Cf) characters, as of Unicode 14. Written out so the scalar test
# (Python's re) and the vectorised one (polars' Rust regex) read the same class on every Python and polars version.
_BLANK_CLASS = (
    r"[\u0000-\u0020\u007F-\u00A0\u00AD\u0600-\u0605\u061C\u06DD\u070F\u0890-\u0891\u08E2\u1680\u180E"
    r"\u2000-\u200F\u2028-\u202F\u205F-\u2064\u2066-\u206F\u3000\uFEFF\uFFF9-\uFFFB\U000110BD\U000110CD"
    r"\U00013430-\U00013438\U0001BCA0-\U0001BCA3\U0001D173-\U0001D17A\U000E0001\U000E0020-\U000E007F]"
)
_BLANK = re.compile(f"{_BLANK_CLASS}*")
# Python's str.strip() characters (lmms-eval strips with it; polars' strip_chars() without arguments misses
# \x1c-\x1f).
PY_WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def is_peer(parser: str | None) -> bool:
    return parser in PEER_PARSERS


RELEASE_RULE = (
    "halluflow release reader: failed requests and blank answers are excluded and counted as n_failed; answers it "
    "cannot read (refusals, hedges, other languages, emoji, no yes/no in the first sentence) are excluded and "
    "counted as n_unknown, never read as yes"
)


def parser_mode(parser: str) -> str:
    """How `parser` treats answers, in words (written as "parser_mode" beside the numbers)."""
    if parser == "release":
        return RELEASE_RULE
    return PEER_PARSERS.get(parser, HALLUFLOW_RULE)


def is_blank(text: str) -> bool:
    """True when `text` shows nothing: only whitespace, control or format characters."""
    return _BLANK.fullmatch(text) is not None


def is_failed(answer: Any, status: Any = None, parser: str | None = None) -> bool:
    """THE failed-answer rule for one record: a recorded failure (status other than ok), no answer (missing, null,
    not a string), or, unless `parser` is a peer parser, a blank answer."""
    if status is not None and status != "ok":
        return True
    if not isinstance(answer, str):
        return True
    return not is_peer(parser) and is_blank(answer)


def failed_mask(answers: "pl.Series", status: "pl.Series | None" = None, parser: str | None = None) -> "pl.Series":
    """is_failed over a String or Categorical column (and an optional status column; null status = ok)."""
    import polars as pl

    if is_peer(parser):
        failed = answers.is_null()
    elif answers.dtype == pl.Categorical:  # test each distinct answer once
        distinct = answers.unique().drop_nulls().cast(pl.String)
        blank = distinct.filter(distinct.str.contains(f"^{_BLANK_CLASS}*$")).to_list()
        failed = answers.is_null() | answers.is_in(blank)
    else:
        failed = answers.is_null() | answers.str.contains(f"^{_BLANK_CLASS}*$")
    if status is not None:
        failed = failed | (status.is_not_null() & (status != "ok"))
    return failed.fill_null(True).rename("failed").cast(pl.Boolean)


def check_failed(
    n_failed: int,
    n_total: int,
    limit: float | None,
    what: str,
    advice: str = "no scores printed; rerun the failed answers or raise the limit",
    n_missing: int = 0,
) -> None:
    """Refuse (TooManyFailedError, one line) when more than `limit` of `n_total` answers failed (or, `n_missing` of
    them, were never given: an item of the input with no answer record at all)."""
    if limit is None or n_total == 0:
        return
    if not 0.0 <= limit <= 1.0:  # also refuses NaN, which every comparison would let through
        raise InputError(f"--max-failed-fraction {limit}: expected a number between 0 and 1")
    bad = n_failed + n_missing
    if bad / n_total > limit:
        missing = f" and {n_missing} are missing" if n_missing else ""
        raise TooManyFailedError(
            f"{what}: {n_failed} of {n_total} answers failed or are empty{missing} ({bad / n_total:.0%} > "
            f"--max-failed-fraction {limit:g}); {advice}"
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


# VLMEvalKit's process_punctuation (vlmeval/smp/misc.py), kept with its quirks: a punctuation mark is deleted
# when it touches a space anywhere in the text (or when the text has a digit,digit), otherwise replaced by a space;
# then periods with no digit on either side are removed. The original passes re.UNICODE (= 32) as the `count`
# argument of sub(), so only the first 32 such periods are removed; we keep that.
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
_PERIOD = re.compile(r"(?<!\d)\.(?!\d)")  # since VLMEvalKit 928a95b (2025-05); before: (?!<=\d)(\.)(?!\d)


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


def pope_lower_yes_no(text: str) -> str | None:
    # The exported lmms-eval task's parser (ode/export.py writes it into utils.py, which runs without halluflow):
    # the first sentence, ',' as a space, lower-cased, split on any whitespace; "no" iff a word is 'no' or 'not'.
    words = text.strip().split(".")[0].replace(",", " ").lower().split()
    return NO if ("no" in words or "not" in words) else YES


# ---------------------------------------------------------------- the release's own reader
# Answers no reader may read (refusals, hedges, other languages, emoji): one shared table, documented in
# docs/failed-answers.md ("Answers no reader can read"). Its phrases are matched as whole words of the normalised
# first sentence (NFKC, case-folded, curly apostrophes straightened, any whitespace run → one space).
UNREADABLE_TABLE = "answers/unreadable.tsv"
UNREADABLE_KINDS = ("refusal", "hedge", "foreign_yes", "foreign_no", "emoji_yes", "emoji_no")
# An opening word that answers the question.
RELEASE_YES_OPENERS = frozenset(
    {"yes", "yeah", "yep", "yup", "yea", "affirmative", "correct", "true", "certainly", "definitely", "absolutely"}
    | {"indeed", "sure"}
)
RELEASE_NO_OPENERS = frozenset({"no", "nope", "nah", "negative", "not", "none", "never", "false", "incorrect"})
# A negation anywhere in the first sentence (after no opener) → no.
RELEASE_NEGATIONS = frozenset(
    {"no", "not", "none", "nothing", "never", "nobody", "nowhere", "neither", "nor", "cannot", "absent", "ain't"}
    | {"isn't", "aren't", "wasn't", "weren't", "doesn't", "don't", "didn't", "can't", "couldn't", "won't", "hasn't"}
    | {"haven't", "hadn't"}
)
# An affirmation in the first sentence (after no opener and no negation) → yes; anything else is unknown.
RELEASE_AFFIRMATIONS = (
    "yes",
    "there is",
    "there are",
    "there's",
    "i see",
    "i can see",
    "it is",
    "it's",
    "they are",
    "they're",
    "this is",
    "that is",
    "is present",
    "are present",
    "is visible",
    "are visible",
    "of course",
    "the image shows",
    "the image contains",
    "the picture shows",
    "the picture contains",
)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")
_SENTENCE_END = re.compile(r"[.!?;:\u3002\uff01\uff1f]")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u00b4": "'"})


def _load_unreadable() -> dict[str, tuple[str, ...]]:
    from ..resources import resource_path

    table: dict[str, list[str]] = {k: [] for k in UNREADABLE_KINDS}
    with open(resource_path(UNREADABLE_TABLE), encoding="utf-8") as fh:
        rows = [line.rstrip("\n").split("\t") for line in fh if line.strip() and not line.startswith("#")]
    for kind, _language, phrase in rows[1:]:
        if kind not in table:
            raise InputError(f"{UNREADABLE_TABLE}: unknown kind {kind!r} (known: {', '.join(UNREADABLE_KINDS)})")
        words = " ".join(_WORD.findall(_release_normalise(phrase)))
        table[kind].append(words if kind in ("refusal", "hedge") else phrase.casefold())
    return {k: tuple(v) for k, v in table.items()}


_UNREADABLE: dict[str, tuple[str, ...]] | None = None


def unreadable_table() -> dict[str, tuple[str, ...]]:
    """The shared table of refusal / hedge phrases and non-English / emoji yes-no words, by kind (read once)."""
    global _UNREADABLE
    if _UNREADABLE is None:
        _UNREADABLE = _load_unreadable()
    return _UNREADABLE


def _release_normalise(text: str) -> str:
    import unicodedata

    return " ".join(unicodedata.normalize("NFKC", text).casefold().translate(_APOSTROPHES).split())


def _release_first_words(text: str) -> list[str]:
    """The words of the first sentence that has any (so "... yes" and "Yes!!!" both read "yes")."""
    for sentence in _SENTENCE_END.split(_release_normalise(text)):
        words = _WORD.findall(sentence)
        if words:
            return words
    return []


def _has_phrase(joined: str, phrases: Iterable[str]) -> bool:
    return any(f" {p} " in joined for p in phrases)


def release_yes_no(text: str) -> str | None:
    """The release's own reader: case-, whitespace- and punctuation-robust; unknown (None) for what it cannot read.

    On the first sentence that has words (NFKC, case-folded, any whitespace run one space): a refusal or a hedge
    of the shared table → unknown; an opening yes word (yes, yeah, yep, correct, sure, ...) → yes; an opening no
    word (no, nope, nah, not, none, never, ...) → no, so "Not really" is no while "Not sure" (a hedge) is unknown;
    a negation anywhere (no, not, isn't, can't, ...) → no; "yes" or an affirmation ("there is", "it is", "I see",
    "the image shows", ...) → yes; anything else (other languages, emoji, a bare noun phrase) → unknown. Under
    this reader an unknown answer is excluded from every ratio (counted as n_unknown), never read as yes."""
    words = _release_first_words(text)
    if not words:
        return None
    table = unreadable_table()
    joined = f" {' '.join(words)} "
    if _has_phrase(joined, table["refusal"]) or _has_phrase(joined, table["hedge"]):
        return None
    if words[0] in RELEASE_YES_OPENERS:
        return YES
    if words[0] in RELEASE_NO_OPENERS:
        return NO
    if RELEASE_NEGATIONS.intersection(words):
        return NO
    return YES if _has_phrase(joined, RELEASE_AFFIRMATIONS) else None


def unreadable_kind(text: Any) -> str | None:
    """Why the release reader cannot read `text` (None when it can): "failed" (no answer or blank), "refusal",
    "hedge", "non_english" (a yes/no word of another language, or no Latin letter at all), "emoji" (a yes/no emoji
    or no word at all), or "no_yes_no_word" (English without an answer in it)."""
    if is_failed(text):
        return "failed"
    if release_yes_no(text) is not None:
        return None
    table = unreadable_table()
    words = _release_first_words(text)
    joined = f" {' '.join(words)} "
    if _has_phrase(joined, table["refusal"]):
        return "refusal"
    if _has_phrase(joined, table["hedge"]):
        return "hedge"
    foreign = set(table["foreign_yes"]) | set(table["foreign_no"])
    if any(w in foreign or any(w.startswith(f) and not f.isascii() for f in foreign) for w in words):
        return "non_english"
    if not words:
        return "emoji"
    if not any(w.isascii() for w in words):
        return "non_english"
    return "no_yes_no_word"


def release_reader_source() -> str:
    """Standalone Python source of `release_yes_no(text)` (stdlib only, the shared table inlined): what an exported
    task that must run without halluflow writes; a test checks it reads every answer as this module does."""
    import inspect

    table = unreadable_table()
    body = [
        "import re",
        "import unicodedata",
        "",
        f"YES, NO = {YES!r}, {NO!r}",
        f"_REFUSAL = {table['refusal']!r}",
        f"_HEDGE = {table['hedge']!r}",
        f"RELEASE_YES_OPENERS = frozenset({sorted(RELEASE_YES_OPENERS)!r})",
        f"RELEASE_NO_OPENERS = frozenset({sorted(RELEASE_NO_OPENERS)!r})",
        f"RELEASE_NEGATIONS = frozenset({sorted(RELEASE_NEGATIONS)!r})",
        f"RELEASE_AFFIRMATIONS = {RELEASE_AFFIRMATIONS!r}",
        f"_WORD = re.compile({_WORD.pattern!r})",
        f"_SENTENCE_END = re.compile({_SENTENCE_END.pattern!r})",
        f"_APOSTROPHES = str.maketrans({ {chr(k): v for k, v in _APOSTROPHES.items()}!r})",
        "",
        "",
        "def _release_normalise(text):",
        '    return " ".join(unicodedata.normalize("NFKC", text).casefold().translate(_APOSTROPHES).split())',
        "",
        "",
        inspect.getsource(_release_first_words).replace(" -> list[str]", ""),
        "",
        "def _has_phrase(joined, phrases):",
        '    return any(f" {p} " in joined for p in phrases)',
        "",
        "",
        "def release_yes_no(text):",
        '    """halluflow\'s release reader (halluflow.metrics.parsers.release_yes_no), without halluflow."""',
        "    if not isinstance(text, str):",
        "        return None",
        "    words = _release_first_words(text)",
        "    if not words:",
        "        return None",
        "    joined = f\" {' '.join(words)} \"",
        "    if _has_phrase(joined, _REFUSAL) or _has_phrase(joined, _HEDGE):",
        "        return None",
        "    if words[0] in RELEASE_YES_OPENERS:",
        "        return YES",
        "    if words[0] in RELEASE_NO_OPENERS:",
        "        return NO",
        "    if RELEASE_NEGATIONS.intersection(words):",
        "        return NO",
        "    return YES if _has_phrase(joined, RELEASE_AFFIRMATIONS) else None",
        "",
    ]
    return "\n".join(body)


SCALAR: dict[str, Callable[[str], str | None]] = {
    "pope": pope_yes_no,
    "pope_official": pope_yes_no,
    "exact": exact_yes_no,
    "lmms_eval": exact_yes_no,
    "vlmevalkit": vlmevalkit_yorn,
    "amber": amber_yes_no,
    "lenient": lenient_yes_no,
    "unihall": unihall_yes_no,
    "affirm": affirm_yes_no,
    "opener": opener_yes_no,
    "pope_lower": pope_lower_yes_no,
    "release": release_yes_no,
}
PARSERS = tuple(SCALAR)


# Parsers that leave an answer they cannot read out of every ratio (counted as n_unknown) instead of counting it
# wrong: the release's reader, which has no default rule.
EXCLUDES_UNKNOWN = frozenset({"release"})
# What each parser does with an answer it cannot read: its default rule. `score pope`, ODE scoring and the workflow
# count the answers each parser read only by it (n_default_rule) and say so in one line when there are any.
_NEGATION_DEFAULT = "an answer without a negation word in its first sentence is read as yes"
DEFAULT_RULES = {
    "pope": "POPE evaluate.py: " + _NEGATION_DEFAULT + " (No/not/no, split on single spaces)",
    "pope_official": "POPE evaluate.py: " + _NEGATION_DEFAULT + " (No/not/no, split on single spaces), '' included",
    "pope_lower": "POPE's rule lower-cased: " + _NEGATION_DEFAULT + " (no/not, any whitespace)",
    "exact": "an answer other than exactly yes/no is unknown and counted wrong",
    "lmms_eval": "lmms-eval: an answer other than exactly yes/no is counted wrong",
    "vlmevalkit": "VLMEvalKit: an answer with neither (or both) of yes/no is Unknown and counted as not yes",
    "amber": "AMBER: a response other than exactly Yes/No is counted wrong",
    "lenient": "an answer with no yes/no word is unknown and counted wrong",
    "unihall": "an answer with no yes/no word is unknown and counted wrong",
    "affirm": "an answer with no yes/no word, negation or affirmation is unknown and counted wrong",
    "opener": "an answer that does not open with a yes/no word is unknown and counted wrong",
    "release": "none: an answer it cannot read is unknown and excluded (n_unknown)",
}
# The parsers whose default rule reads an unreadable answer as yes (the others leave it unknown).
DEFAULT_YES = frozenset({"pope", "pope_official", "pope_lower"})


def excludes_unknown(parser: str | None) -> bool:
    return parser in EXCLUDES_UNKNOWN


def default_rule_mask(answers: "pl.Series", parsed: "pl.Series", parser: str) -> "pl.Series":
    """Which answers (not failed) `parser` read only by its default rule: for POPE's rule, a "yes" the answer does
    not affirm (the release reader reads it as no or cannot read it: "Nein", a refusal, "There isn't a cat"); for
    a parser that leaves what it cannot read unknown (and counts it wrong), every unknown answer; none for the
    release reader. `parsed` is the parser's reading of `answers`."""
    import polars as pl

    if excludes_unknown(parser):
        return pl.Series("default_rule", [False] * len(parsed), dtype=pl.Boolean)
    if parser in DEFAULT_YES:
        release = _map_unique(answers.cast(pl.String), release_yes_no)
        return ((parsed == YES) & (release.fill_null("") != YES)).fill_null(False).rename("default_rule")
    return parsed.is_null().rename("default_rule")


def default_rule_reasons(answers: Iterable[Any], weights: Iterable[int] | None = None) -> dict[str, int]:
    """Why the release reader cannot read these answers (unreadable_kind, "negation" where it reads no): counts."""
    out: dict[str, int] = {}
    for text, w in zip(answers, weights if weights is not None else iter(lambda: 1, None)):
        kind = unreadable_kind(text) or ("negation" if release_yes_no(text) == NO else "affirmation")
        out[kind] = out.get(kind, 0) + int(w)
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def default_rule_line(what: str, parser: str, n_default: int, n_read: int, reasons: dict[str, int] | None) -> str:
    """The one line a scorer prints when `n_default` answers were read only by `parser`'s default rule."""
    why = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in (reasons or {}).items())
    return (
        f"{what}: {n_default} of {n_read} answers read only by the {parser} parser's default rule "
        f"({DEFAULT_RULES.get(parser, parser)})" + (f"; release reader: {why}" if why else "")
    )


def _known(parser: str) -> Callable[[str], str | None]:
    try:
        return SCALAR[parser]
    except KeyError:
        raise InputError(f"unknown parser {parser!r} (known: {', '.join(sorted(SCALAR))})") from None


def parse_yes_no(text: Any, parser: str = "pope") -> str | None:
    """One answer → "yes" / "no" / None. A failed answer (is_failed under this parser) is never read: None."""
    fn = _known(parser)
    if is_failed(text, parser=parser):
        return UNKNOWN
    return fn(text)


def reader(variant: str) -> Callable[[Any], str | None]:
    """The named variant as a one-argument function (a failed answer → None), for a caller that always reads one
    way: `oracle_yes_no = reader("lenient")` in CAOS, `ghr_yes_no = reader("unihall")` in SAMF."""
    _known(variant)

    def read(text: Any) -> str | None:
        return parse_yes_no(text, variant)

    read.__name__ = read.__qualname__ = f"{variant}_reader"
    read.__doc__ = f"parse_yes_no(text, {variant!r}): the shared module's {variant!r} variant."
    return read


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

    norm = answers.str.to_lowercase().str.strip_chars(PY_WHITESPACE)
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
    "pope_official": _pope_series,
    "exact": _exact_series,
    "lmms_eval": _exact_series,
    "amber": _amber_series,
}


def parse_answers(answers: "Iterable[str | None] | pl.Series", parser: str = "pope") -> "pl.Series":
    """Parse answers to "yes"/"no"/null with the named variant; failed answers (failed_mask) stay null."""
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
    return pl.select(
        pl.when(failed_mask(series, parser=parser)).then(None).otherwise(parsed).alias("parsed")
    ).to_series()
