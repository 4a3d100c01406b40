"""Exceptions with messages meant for users: each names the offending key, file or item."""


class HalluflowError(Exception):
    """Base class: the CLI prints these as one line and exits non-zero."""


class ConfigError(HalluflowError):
    """The config does not match the schema; the message names the key."""


class InputError(HalluflowError):
    """A user-supplied file (annotations, answers, images) is missing or malformed."""


class MissingExtraError(HalluflowError, ImportError):
    """An optional dependency is missing; the message names the pip extra to install."""


class BackendError(HalluflowError):
    """A model backend failed in a way a retry will not fix."""


class TooManyFailedError(HalluflowError):
    """More answers failed than the user's --max-failed-fraction allows: no numbers are printed."""


# ---- text from data shown to a person (terminal lines, page cells) ----
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # controls, format (bidi overrides), surrogates, separators


def visible(text: object) -> str:
    """`text` with every control character shown as an escape, as Python writes it (a newline as ``\\n``, ANSI ESC
    as ``\\x1b``, a bidi override as ``\\u202e``): a name taken from data cannot forge, erase or reorder terminal
    lines. Every name or message from data printed to a terminal goes through this one function."""
    text = str(text)
    if text.isprintable():  # the common case: nothing to show (isprintable is False for every class escaped here)
        return text
    import unicodedata

    return "".join(repr(ch)[1:-1] if ch != " " and unicodedata.category(ch) in _INVISIBLE else ch for ch in text)


CUT_MARK = "… [cut: {n:,} more characters]"


def clip(text: object, limit: int) -> str:
    """`text` cut to `limit` characters with a visible marker saying how much was left out (a 5 MB reason read
    from a results file is shown as its first `limit` characters and the count of the rest)."""
    text = str(text)
    if len(text) <= limit:
        return text
    return text[:limit] + CUT_MARK.format(n=len(text) - limit)
