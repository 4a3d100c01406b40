"""The noun lexicon behind every ODE question, prompt and export: is a concept countable ("a dog"), a mass noun
("grass"), a plural ("jeans", "apples"), or no object to ask about at all (ODE's virtual nodes, stray non-nouns)?

`resources/vocab/nouns.tsv` holds one row per concept a graph can hold (COCO's 80 categories, Visual Genome's 1,600
object classes, AMBER's objects, ODE's graph nodes), written by `tools/build_nouns.py` from those sources with the
rules of this module and its hand-written word classes. A name the table lacks (another graph source) gets the same
rules here: a count noun, its article by sound, its plural by the spelling rules and the irregular table below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import polars as pl

from ..errors import InputError
from ..resources import resource_path

NOUNS = resource_path("vocab/nouns.tsv")
KINDS = ("count", "mass", "plural", "none")
COLUMNS = ("noun", "kind", "article", "plural", "virtual", "sources")

# --------------------------------------------------------------------------------------------- article by sound
# A vowel letter that sounds like a consonant ("a unicorn", "a one-way sign", "a eucalyptus") or a consonant letter
# that is silent ("an hour"): English picks the article by the first sound, not the first letter.
_SILENT_H = ("hour", "honest", "honor", "honour", "heir")
# "un" as a prefix is /ʌn/ ("an uneven road"); words on "uni" are /juːn/ ("a uniform") unless "un" is a prefix
# before an i-word ("an unidentified object", "an uninhabited island").
_UN_PREFIXED_I = ("unid", "unim", "unin", "unir")
# Initialisms read letter by letter: "an SUV", "a TV", "an MP3 player".
INITIALISMS = frozenset(
    {"atm", "atv", "bbq", "cd", "cpu", "dvd", "gps", "lcd", "led", "mp3", "pc", "rv", "suv", "tv", "ufo", "usb", "vcr"}
)
_LETTERS_AN = set("aefhilmnorsx")  # letter names that start with a vowel sound: "an F", "an S", "an X"
_VOWELS = "aeiou"


def indefinite_article(phrase: str) -> str:
    """ "a" or "an" for the sound the phrase starts with: an apple, a urinal, a unicorn, an umbrella, an hour, a
    one-way sign, a eucalyptus, an urn, an SUV, a TV, an x-ray, a t-shirt."""
    word = phrase.strip().lower().split(" ", 1)[0]
    if not word:
        return "a"
    first = re.split(r"[-/]", word, maxsplit=1)[0]
    if first in INITIALISMS or (len(first) == 1 and "-" in word):
        return "an" if first[0] in _LETTERS_AN else "a"
    if word.startswith(_SILENT_H):
        return "an"
    if word == "one" or word.startswith(("one-", "onesie", "once", "eu", "ewe")):
        return "a"
    if word[0] == "u":
        return "a" if _u_sounds_like_you(word) else "an"
    return "an" if word[0] in _VOWELS else "a"


def _u_sounds_like_you(word: str) -> bool:
    """u + one consonant + vowel is /juː/ (unicorn, urinal, utensil, usual, ukulele), except the prefix un- before
    anything but i (uneven, unopened); u + two consonants is /ʌ/ or /ɜː/ (umbrella, umpire, urn, usher, ugly)."""
    if word.startswith(_UN_PREFIXED_I):
        return False
    if word.startswith("un"):
        return word.startswith("uni")
    return len(word) >= 3 and word[1] not in _VOWELS + "y" and word[2] in _VOWELS + "y"


# ------------------------------------------------------------------------------------------------------- plural
IRREGULAR = {
    "person": "people",
    "man": "men",
    "woman": "women",
    "child": "children",
    "foot": "feet",
    "tooth": "teeth",
    "goose": "geese",
    "mouse": "mice",
    "louse": "lice",
    "ox": "oxen",
    "die": "dice",
    "cactus": "cacti",
    "fungus": "fungi",
    "nucleus": "nuclei",
    "radius": "radii",
    "axis": "axes",
    "crisis": "crises",
    "oasis": "oases",
    "quiz": "quizzes",
}
# Nouns whose plural is the singular ("two sheep", "three aircraft"); compounds on these words follow them.
INVARIANT_ENDINGS = ("sheep", "deer", "fish", "craft", "moose", "bison", "salmon", "trout", "swine", "species",
                     "series", "shrimp", "squid", "offspring")  # fmt: skip
# -f/-fe nouns that turn into -ves (every other -f takes -s: roofs, chefs, cliffs, giraffes, reefs)
_VES = {"knife": "knives", "wife": "wives", "life": "lives", "leaf": "leaves", "loaf": "loaves", "shelf": "shelves",
        "wolf": "wolves", "calf": "calves", "half": "halves", "scarf": "scarves", "hoof": "hooves", "elf": "elves",
        "thief": "thieves", "sheaf": "sheaves", "self": "selves"}  # fmt: skip
# consonant + o nouns that take -es (every other -o takes -s: photos, pianos, avocados, flamingos, logos)
_OES = {"potato", "tomato", "mango", "hero", "echo", "volcano", "torpedo", "veto", "buffalo", "domino", "mosquito",
        "tornado", "cargo", "embargo", "grotto"}  # fmt: skip
# -man nouns that are not compounds of "man" (an ottoman, two humans)
_MAN_NOT_MEN = {"human", "ottoman", "german", "roman", "shaman", "talisman", "caiman", "doberman", "walkman"}
_CH_AS_K = {"stomach", "monarch", "epoch", "patriarch", "matriarch", "tech", "loch"}


def plural_word(word: str) -> str:
    """Plural of one English noun: irregulars (people, feet, mice), invariants (sheep, aircraft), -es after
    s/x/z/ch/sh, -ies after consonant + y, -ves for the -f words that take it, -oes for the -o words that do."""
    if not word:
        return word
    for singular, plural in IRREGULAR.items():
        if word == singular or (singular in ("person", "man", "woman", "child") and word.endswith(singular)):
            if singular == "man" and word in _MAN_NOT_MEN:
                break
            return word[: len(word) - len(singular)] + plural
    if word.endswith(INVARIANT_ENDINGS):
        return word
    if word in _VES:
        return _VES[word]
    if word.endswith("o") and word in _OES:
        return word + "es"
    if word in _CH_AS_K:
        return word + "s"
    if re.search(r"(s|x|z|ch|sh)$", word):
        return word + "es"
    if re.search(r"[^aeiou]y$", word):
        return word[:-1] + "ies"
    return word + "s"


def plural_phrase(phrase: str) -> str:
    """Plural of a noun phrase: its head word, the last one ("tennis rackets", "computer mice") or the one before
    "of" ("pairs of skis")."""
    head, sep, tail = phrase.partition(" of ")
    front, _, last = head.rpartition(" ")
    # a hyphenated compound pluralizes its last part ("t-shirts", "e-books", "sea-horses")
    stem, hyphen, end = last.rpartition("-")
    last = f"{stem}{hyphen}{plural_word(end)}"
    return f"{front} {last}".strip() + (sep + tail if sep else "")


# ------------------------------------------------------------------------------------------------------ lexicon
@dataclass(frozen=True)
class Noun:
    name: str
    kind: str  # count / mass / plural / none
    article: str  # "a" / "an" for count nouns, "" otherwise
    plural: str  # the plural of a count noun, "" otherwise
    virtual: bool = False  # ODE types it `virtual`: never an object of a prompt or a question

    @property
    def askable(self) -> bool:
        """An object a prompt may draw and a question may name: a noun, not one of ODE's virtual nodes."""
        return self.kind != "none" and not self.virtual

    @property
    def countable(self) -> bool:
        return self.kind == "count"


def rule_entry(name: str) -> Noun:
    """The entry of a name the lexicon does not list: a count noun with its article and plural by the rules."""
    return Noun(name, "count", indefinite_article(name), plural_phrase(name))


@lru_cache(maxsize=4)
def read_lexicon(path: str | None = None) -> dict[str, Noun]:
    """name → Noun from the shipped lexicon (or another file with the same columns)."""
    path = Path(path) if path else NOUNS
    if not path.is_file():
        raise InputError(f"{path}: noun lexicon not found (tools/build_nouns.py writes it)")
    try:
        table = pl.read_csv(path, separator="\t", schema={c: pl.String for c in COLUMNS}, quote_char=None)
    except (pl.exceptions.PolarsError, OSError):
        raise InputError(f"{path}: not a noun lexicon (tab-separated columns {', '.join(COLUMNS)})") from None
    table = table.with_columns(pl.col("article", "plural", "virtual").fill_null(""))
    count = pl.col("kind") == "count"
    wrong = ~pl.col("kind").is_in(KINDS) | pl.col("noun").is_null() | (count & ~pl.col("article").is_in(["a", "an"]))
    wrong = wrong | (count & (pl.col("plural") == ""))
    bad = table.with_row_index("line", offset=2).filter(wrong.fill_null(True))
    if bad.height:
        raise InputError(
            f"{path}:{bad['line'][0]}: needs a noun, a kind in {', '.join(KINDS)} and, for a count noun, "
            "an article (a/an) and a plural"
        )
    return {
        name: Noun(name, kind, article, plural, virtual == "yes")
        for name, kind, article, plural, virtual in table.select(COLUMNS[:5]).iter_rows()
    }


def noun(name: str, lexicon: dict[str, Noun] | None = None) -> Noun:
    """The lexicon's entry for a concept name, or the rules' entry when it lists none."""
    lexicon = read_lexicon() if lexicon is None else lexicon
    return lexicon.get(name) or rule_entry(name)


def askable_nodes(nodes, lexicon: dict[str, Noun] | None = None) -> set[str]:
    """The graph nodes (a nodes table with `node` and `type`) that a prompt may draw and a question may name: not
    typed `virtual` by the graph (ODE's own type) nor by the lexicon (tire, drain, hot), and a noun."""
    lexicon = read_lexicon() if lexicon is None else lexicon
    return {n for n, t in zip(nodes["node"], nodes["type"]) if t != "virtual" and noun(n, lexicon).askable}


def noun_phrase(name: str, lexicon: dict[str, Noun] | None = None) -> str:
    """The concept as an indefinite noun phrase: "a dog", "an egg", "a urinal", "grass", "jeans"."""
    entry = noun(name, lexicon)
    return f"{entry.article} {name}" if entry.kind == "count" else name


def list_phrase(names: list[str], lexicon: dict[str, Noun] | None = None) -> str:
    """Noun phrases joined as English lists them: "a drawing and an egg", "a dog, grass and a ball"."""
    phrases = [noun_phrase(n, lexicon) for n in names]
    return phrases[0] if len(phrases) == 1 else f"{', '.join(phrases[:-1])} and {phrases[-1]}"
