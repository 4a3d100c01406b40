"""English noun singularizer that behaves like pattern.en.singularize, which CHAIR (LisaAnne/Hallucination) uses.

pattern is not installable offline, and CHAIR's published numbers depend on its quirks ("glass" → "glas", hence
CHAIR's "wine glas" rule; "bus" → "bu"; "ties" → "ty"), so we reproduce its decision order: words that are a
suffix of an uninflected/uncountable word stay; -ie nouns; irregular plurals by suffix; then ordered suffix rules.
Word lists and rule order follow pattern 2.6 (CLiPS, BSD-3-Clause; its rules adapt Bermi Ferrer's Inflector, MIT).
"""

from __future__ import annotations

import re
from functools import lru_cache

_PREPOSITIONS = frozenset(
    "about above across after among around at athwart before behind below beneath beside besides between "
    "betwixt beyond but by during except for from in into near of off on onto out over since till to under "
    "until unto upon with".split()
)

# pattern tests `uninflected_word.endswith(w)`, i.e. any word that is a SUFFIX of these stays as it is
# ("ears" ⊂ "shears", "apes" ⊂ "jackanapes"): a quirk we keep. pattern's lists lack three commas, so Python joins
# "wildebeest" "carp", "water" "cheese" and "zombie" "bogie" into one string each; kept joined ("zombies" →
# "zombie" by the suffix rules, "bogies" → "bogy").
_UNINFLECTED = (
    "bison debris headquarters pincers trout bream diabetes herpes pliers tuna breeches djinn high-jinks "
    "proceedings whiting britches eland homework rabies wildebeestcarp elk innings salmon chassis flounder "
    "jackanapes scissors christmas gallows mackerel series clippers georgia measles shears cod graffiti mews "
    "species contretemps mumps swine corps news swiss"
).split()
_UNCOUNTABLE = (
    "advice equipment happiness luggage news software bread fruit information mathematics progress "
    "understanding butter furniture ketchup mayonnaise research watercheese garbage knowledge meat rice "
    "electricity gravel love mustard sand"
).split()
# "-ies" words whose singular ends in "-ie"; pattern returns such words UNCHANGED (another kept quirk). The
# "^pie"/"^tie" entries contain a literal caret and so never match — which is why "ties" becomes "ty".
_IE = (
    "alergie cutie hoagie newbie softie veggie auntie doggie hottie nightie sortie weenie beanie eyrie indie "
    "oldie stoolie yuppie birdie freebie junkie ^pie sweetie zombiebogie goonie laddie pixie techie bombie "
    "groupie laramie quickie ^tie collie hankie lingerie reverie toughie cookie hippie meanie rookie "
    "valkyrie"
).split()
_IRREGULAR = {
    "atlantes": "atlas",
    "atlases": "atlas",
    "axes": "axe",
    "beeves": "beef",
    "brethren": "brother",
    "children": "child",
    "corpora": "corpus",
    "corpuses": "corpus",
    "ephemerides": "ephemeris",
    "feet": "foot",
    "ganglia": "ganglion",
    "geese": "goose",
    "genera": "genus",
    "genii": "genie",
    "graffiti": "graffito",
    "helves": "helve",
    "kine": "cow",
    "leaves": "leaf",
    "loaves": "loaf",
    "men": "man",
    "mongooses": "mongoose",
    "monies": "money",
    "moves": "move",
    "mythoi": "mythos",
    "numena": "numen",
    "occipita": "occiput",
    "octopodes": "octopus",
    "opera": "opus",
    "opuses": "opus",
    "our": "my",
    "oxen": "ox",
    "penes": "penis",
    "penises": "penis",
    "people": "person",
    "sexes": "sex",
    "soliloquies": "soliloquy",
    "teeth": "tooth",
    "testes": "testis",
    "trilbys": "trilby",
    "turves": "turf",
    "zoa": "zoon",
}
# Ordered (pattern, replacement); the first rule whose pattern matches wins. Groups that did not take part in
# the match are replaced by "" (pattern's behaviour). `[m|l]` and `[octop|vir]` are character classes in the
# original (so "slice" → "slouse"); kept.
_RULES = [
    (re.compile(p), r)
    for p, r in [
        (r"(?i)(.)ae$", r"\1a"),
        (r"(?i)(.)itis$", r"\1itis"),
        (r"(?i)(.)eaux$", r"\1eau"),
        (r"(?i)(quiz)zes$", r"\1"),
        (r"(?i)(matr)ices$", r"\1ix"),
        (r"(?i)(ap|vert|ind)ices$", r"\1ex"),
        (r"(?i)^(ox)en", r"\1"),
        (r"(?i)(alias|status)es$", r"\1"),
        (r"(?i)([octop|vir])i$", r"\1us"),
        (r"(?i)(cris|ax|test)es$", r"\1is"),
        (r"(?i)(shoe)s$", r"\1"),
        (r"(?i)(o)es$", r"\1"),
        (r"(?i)(bus)es$", r"\1"),
        (r"(?i)([m|l])ice$", r"\1ouse"),
        (r"(?i)(x|ch|ss|sh)es$", r"\1"),
        (r"(?i)(m)ovies$", r"\1ovie"),
        (r"(?i)(.)ombies$", r"\1ombie"),
        (r"(?i)(s)eries$", r"\1eries"),
        (r"(?i)([^aeiouy]|qu)ies$", r"\1y"),
        (r"([aeo]l)ves$", r"\1f"),
        (r"([^d]ea)ves$", r"\1f"),
        (r"arves$", "arf"),
        (r"erves$", "erve"),
        (r"([nlw]i)ves$", r"\1fe"),
        (r"(?i)([lr])ves$", r"\1f"),
        (r"([aeo])ves$", r"\1ve"),
        (r"(?i)(sive)s$", r"\1"),
        (r"(?i)(tive)s$", r"\1"),
        (r"(?i)(hive)s$", r"\1"),
        (r"(?i)([^f])ves$", r"\1fe"),
        (r"(?i)(^analy)ses$", r"\1sis"),
        (r"(?i)((a)naly|(b)a|(d)iagno|(p)arenthe|(p)rogno|(s)ynop|(t)he)ses$", r"\1\2sis"),
        (r"(?i)(.)opses$", r"\1opsis"),
        (r"(?i)(.)yses$", r"\1ysis"),
        (r"(?i)(h|d|r|o|n|b|cl|p)oses$", r"\1ose"),
        (r"(?i)(fruct|gluc|galact|lact|ket|malt|rib|sacchar|cellul)ose$", r"\1ose"),
        (r"(?i)(.)oses$", r"\1osis"),
        (r"(?i)([ti])a$", r"\1um"),
        (r"(?i)(n)ews$", r"\1ews"),
        (r"(?i)s$", ""),
    ]
]


def singularize(word: str) -> str:
    """Singular of `word` the way pattern.en.singularize computes it (quirks included)."""
    if "-" in word:
        parts = word.split("-")
        if len(parts) > 1 and parts[1] in _PREPOSITIONS:  # mothers-in-law → mother-in-law
            return singularize(parts[0]) + "-" + "-".join(parts[1:])
    if word.endswith("'"):  # dogs' → dog's
        return singularize(word[:-1]) + "'s"
    lower = word.lower()
    if any(x.endswith(lower) for x in _UNINFLECTED) or any(x.endswith(lower) for x in _UNCOUNTABLE):
        return word
    if any(lower.endswith(x + "s") for x in _IE):
        return lower
    for plural, single in _IRREGULAR.items():
        if lower.endswith(plural):
            return re.sub("(?i)" + plural + "$", single, word)
    for rule, replacement in _RULES:
        m = rule.search(word)
        if m:
            for k, g in enumerate(m.groups(), 1):
                if g is None:
                    replacement = replacement.replace("\\" + str(k), "")
            return rule.sub(replacement, word)
    return word


singularize_cached = lru_cache(maxsize=1 << 16)(singularize)
