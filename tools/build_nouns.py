"""Build resources/vocab/nouns.tsv, the noun lexicon of ODE's questions, prompts and exports (halluflow.ode.nouns).

One row per concept a graph can hold, gathered from
- COCO's 80 category names (`coco-categories/coco_categories.tsv`),
- Visual Genome's 1,600 object classes, every comma-separated synonym (`visual-genome-bottom-up-vocab/objects_vocab.txt`),
- AMBER's objects: the `truth` and `hallu` lists of its generative items and every name in `relation.json`,
- ODE's graph nodes with their type (`ode-iridescent-y/ode_graph_{T,H}_nodes.tsv`: `virtual` marks tire, drain, hot),
- the shipped seed graph (`resources/graph_seed`) and environment list (`resources/vocab/environments.txt`).

Rules, in this order (the word classes are our own, written by hand from the names; facts of English):
1. `none` (never asked): a name in NOT_NOUNS (adjectives, pronouns, positions, the singular of a word that only
   exists as a plural: "jean", "scissor", and annotation typos that are no word).
2. `plural` (asked "Are there jeans …?", never counted): a name in PLURAL_ONLY, or the plural of another name of
   the sources (Visual Genome lists "apples" beside "apple", "feet" beside "foot").
3. `mass` (asked "Is there grass …?", never counted): a name in MASS.
4. `count`: everything else, with its indefinite article by sound and its plural (halluflow.ode.nouns rules).
`virtual` = yes where ODE's graph types the node `virtual`.

    python tools/build_nouns.py [--data ../shared/data] [--out resources/vocab/nouns.tsv] [--check]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from halluflow.ode.nouns import COLUMNS, indefinite_article, plural_phrase

REPO = Path(__file__).resolve().parents[1]

NOT_NOUNS = {
    # adjectives, a pronoun and words for a position or a time of day, listed as Visual Genome classes or by AMBER
    "back", "background", "black", "bottom", "day", "distance", "end", "foreground", "front", "half", "hot",
    "inside", "night", "outside", "she", "wild", "yellow",
    # singulars of plural-only nouns ("a jean" and "a scissor" are no English)
    "jean", "pant", "scissor", "short", "trouser",
    # annotation typos that are no word (AMBER's and Visual Genome's own spelling otherwise stays as it is)
    "baconic", "cann", "rpoe", "scoon",
    # AMBER's "leave" stands for leaves: as written it is a verb ("Is there a leave …?")
    "leave",
}  # fmt: skip

PLURAL_ONLY = {
    # pluralia tantum and plural-only collectives
    "bleachers", "cattle", "chopsticks", "clothes", "electronics", "eyeglasses", "eye glasses", "glasses", "goggles",
    "headphones", "jeans", "overalls", "pajamas", "pants", "people", "police", "scissors", "shorts", "ski goggles",
    "slacks", "sunglasses", "suspenders", "sweatpants", "swim trunks", "tights", "tongs", "toiletries", "trunks",
    "snow pants", "ski pants",
    # plurals whose singular none of the sources lists
    "bangs", "beads", "chips", "condiments", "crumbs", "dvds", "earphones", "fixtures", "footprints", "greens",
    "herbs", "icons", "instructions", "nuts", "pebbles", "prongs", "products", "reigns", "ripples", "seeds", "shingles",
    "skiis", "slats", "slippers", "sprinkles", "stairs", "tines", "toppings", "tracks", "vines", "weeds", "whiskers",
    "panes", "claws", "drapes", "blinds", "handle bars", "steps", "stands", "woods", "remains", "berries",
    "front legs", "items", "pancakes", "railroad tracks", "ski tracks", "tail feathers", "tools", "wipers", "teeth",
}  # fmt: skip

MASS = {
    # substances, materials and food or drink in bulk
    "air", "alcohol", "asparagus", "asphalt", "bacon", "bamboo", "bark", "beef", "beer", "bread", "broccoli",
    "brocolli", "butter", "cardboard", "cauliflower", "celery", "cement", "cereal", "charcoal", "cheese", "chocolate",
    "clay", "coffee", "cola", "concrete", "corn", "cream", "dirt", "foam", "food", "frosting", "fruit", "fur",
    "ginger", "gravel", "hair", "ham", "hay", "ice", "icing", "juice", "ketchup", "lettuce", "liquid", "macaroni",
    "meat", "mesh", "milk", "mud", "mulch", "mustard", "paint", "paper", "pasta", "pavement", "pepperoni",
    "plastic", "produce", "pulp", "rice", "salt", "sand", "sauce", "seasoning", "seaweed", "shampoo", "sanitizer",
    "skin", "smoke", "snow", "soap", "soda", "soil", "soup", "spinach", "spray", "steam", "straw", "syrup", "tarmac",
    "surf", "tea", "tinfoil", "toast", "toilet paper", "toothpaste", "turf", "water", "ocean water", "wine", "wood", "wool",
    "tape", "breakfast", "lunch", "dinner", "facial hair",
    # collections and abstract nouns a picture shows without a count
    "air-conditioning", "art", "artwork", "baggage", "bedding", "cargo", "cash", "clothing", "copyright", "fencing",
    "flooring", "foliage", "furniture", "gear", "graffiti", "grafitti", "ivy", "land", "lettering", "luggage",
    "money", "napery", "netting", "plumbing", "rain", "scaffolding", "shade", "silverware", "text", "traffic",
    "trash", "wallpaper", "weather", "writing", "countryside",
    # the ground and the sky of a scene
    "grass", "ground", "sky",
    # sports and activities
    "rugby", "sailing", "soccer", "surfing", "tennis",
}  # fmt: skip


def _norm(name: str) -> str:
    return " ".join(str(name).strip().lower().split())


def gather(data: Path) -> dict[str, dict]:
    """name → {sources, virtual} from every source; a missing source folder is one clear line."""
    names: dict[str, dict] = {}

    def add(name, source, virtual=False):
        name = _norm(name)
        if name:
            entry = names.setdefault(name, {"sources": set(), "virtual": False})
            entry["sources"].add(source)
            entry["virtual"] |= virtual

    def need(path: Path) -> Path:
        if not path.is_file():
            sys.exit(f"{path}: source file not found (--data names the folder of the peer data)")
        return path

    with open(need(data / "coco-categories/coco_categories.tsv"), encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            add(row["name"], "coco")
    for line in need(data / "visual-genome-bottom-up-vocab/objects_vocab.txt").read_text("utf-8").splitlines():
        for surface in line.split(","):
            add(surface, "vg")
    for item in json.loads(need(data / "amber/data/annotations.json").read_text("utf-8")):
        if item.get("type") == "generative":
            for name in [*(item.get("truth") or []), *(item.get("hallu") or [])]:
                add(name, "amber")
    for key, related in json.loads(need(data / "amber/data/relation.json").read_text("utf-8")).items():
        for name in [key, *related]:
            add(name, "amber")
    for graph in ("T", "H"):
        with open(need(data / f"ode-iridescent-y/ode_graph_{graph}_nodes.tsv"), encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                add(row["node"], "ode", row["type"] == "virtual")
    seed = REPO / "resources/graph_seed"
    with open(seed / "nodes.tsv", encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            add(row["node"], "seed")
    with open(seed / "hallu_edges.tsv", encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            add(row["source"], "seed"), add(row["target"], "seed")
    for line in (REPO / "resources/vocab/environments.txt").read_text("utf-8").splitlines():
        add(line.split("#", 1)[0], "environments")
    return names


def classify(name: str, plurals_of_others: set[str]) -> str:
    if name in NOT_NOUNS:
        return "none"
    if name in PLURAL_ONLY or name in plurals_of_others:
        return "plural"
    if name in MASS:
        return "mass"
    return "count"


def rows(names: dict[str, dict]) -> list[list[str]]:
    # the plural of another name of the sources ("apples" of "apple", "skies" of "sky") is never a count noun of its
    # own; a mass noun's plural reads as kinds of it ("grasses", "fruits") and is a plural too
    plurals = {plural_phrase(n) for n in names if n not in NOT_NOUNS} - {n for n in names if plural_phrase(n) == n}
    out = []
    for name in sorted(names):
        kind = classify(name, plurals)
        count = kind == "count"
        out.append(
            [
                name,
                kind,
                indefinite_article(name) if count else "",
                plural_phrase(name) if count else "",
                "yes" if names[name]["virtual"] else "",
                ",".join(sorted(names[name]["sources"])),
            ]
        )
    return out


def render(table: list[list[str]]) -> str:
    return "\n".join("\t".join(r) for r in [list(COLUMNS), *table]) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared/data"), help="folder of the peer data")
    parser.add_argument("--out", default=str(REPO / "resources/vocab/nouns.tsv"))
    parser.add_argument("--check", action="store_true", help="exit 1 when --out differs from a fresh build")
    args = parser.parse_args(argv)
    text = render(rows(gather(Path(args.data))))
    out = Path(args.out)
    if args.check:
        same = out.is_file() and out.read_text("utf-8") == text
        print(f"{out}: {'up to date' if same else 'differs from a fresh build'}")
        return 0 if same else 1
    out.write_text(text, encoding="utf-8")
    print(f"{out}: {text.count(chr(10)) - 1} nouns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
