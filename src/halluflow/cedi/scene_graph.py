"""Scene graphs for CEDI (Li et al., CEDI paper, "the grader: compare scene graphs, not strings").

A scene graph is `{"objects": [{"id", "name", "attributes"}], "relations": [{"subject", "predicate", "object"}]}`.
Truth graphs come from ODE scenes (the pair kind implies the relation, see `ode_scene_graph`), Visual Genome
scene-graph annotations or COCO instance annotations; every malformed item is reported by its position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import networkx as nx

from ..errors import InputError
from ..io import read_json, read_text

# Relations implied by an ODE pair kind. Each truth relation carries a SET of equivalent predicates because the
# edge substitution cost is 0 whenever the predicate sets intersect: "the dog with the cat" must match "next to".
ODE_RELATIONS: dict[str, tuple[str, ...]] = {
    "entity_environment": ("in", "inside", "within", "on"),
    "entity_entity": ("next to", "with", "near", "beside", "by"),
}

# Small built-in predicate synonym table (canonical first), used when no Visual Genome relation vocabulary is given.
BUILTIN_PREDICATE_SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("on", "on top of", "sitting on", "standing on", "lying on", "laying on", "resting on", "atop"),
    ("in", "inside", "inside of", "within", "in front of the background of"),
    ("next to", "beside", "near", "by", "close to", "alongside", "with", "together with"),
    ("under", "below", "beneath", "underneath"),
    ("behind",),
    ("in front of",),
    ("holding", "holds", "carrying", "carries"),
    ("wearing", "wears"),
)


def normalize(text: str) -> str:
    """Lower-case, drop surrounding punctuation/articles and collapse spaces: names compare on this form."""
    text = re.sub(r"[^a-z0-9 \-]+", " ", str(text).lower())
    words = [w for w in text.split() if w not in {"a", "an", "the"}]
    return " ".join(words)


def singular(word: str) -> str:
    """Cheap English singular for the last word of a name (no NLTK offline): dogs→dog, boxes→box, glasses→glass."""
    parts = word.split(" ")
    w = parts[-1]
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 4 and re.search(r"(ches|shes|sses|xes|zes)$", w):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not re.search(r"(ss|us|is|os)$", w):
        w = w[:-1]
    parts[-1] = w
    return " ".join(parts)


NAME_SOURCES = ("auto", "wordnet", "visual_genome", "none")


@dataclass
class Synonyms:
    """Maps a surface form to its canonical name; one table for object names, one for predicates. With a WordNet
    `lexicon`, two object names also match when they share a noun synset (CEDI's grader); `name_source` records
    which synonym source object names go through (wordnet | visual_genome | none)."""

    objects: dict[str, str] = field(default_factory=dict)
    predicates: dict[str, str] = field(default_factory=dict)
    lexicon: Any = None  # halluflow.cedi.wordnet.NounSynsets
    name_source: str = "none"

    @classmethod
    def resolve(
        cls, source: str = "auto", objects: str | Path | None = None, relations: str | Path | None = None
    ) -> "Synonyms":
        """The synonym source for object names: `wordnet` (WordNet 3.0 noun synsets, CEDI's match), `visual_genome`
        (Visual Genome's synonym lists, read from the `objects` file the user gives), `none` (built-in tables and the given
        files only) or `auto` = wordnet where installed, else visual_genome where found, else none."""
        from . import wordnet

        if source not in NAME_SOURCES:
            raise InputError(f"synonym source {source!r} is not one of {', '.join(NAME_SOURCES)}")
        folder = wordnet.find_wordnet() if source in ("auto", "wordnet") else None
        if source == "wordnet" and folder is None:
            tried = ", ".join(str(d) for d in wordnet.wordnet_dirs())
            raise InputError(f"synonym source 'wordnet': no WordNet index.noun found (looked in {tried})")
        vg = None
        if folder is None and source in ("auto", "visual_genome"):
            vg = objects
            if vg is None and source == "visual_genome":
                raise InputError(
                    "synonym source 'visual_genome' needs Visual Genome's objects vocabulary: give it with "
                    "--object-synonyms (CLI) or cedi.synonyms.objects (config)"
                )
        syn = cls.from_vocab_files(objects or vg, relations)
        if folder is not None:
            syn.lexicon, syn.name_source = wordnet.load(str(folder)), "wordnet"
        elif vg is not None:
            syn.name_source = "visual_genome"
        return syn

    def synsets(self, name: str) -> frozenset:
        """WordNet noun synsets of a (canonical) object name; empty without a lexicon."""
        return self.lexicon.synsets(name) if self.lexicon is not None else frozenset()

    def names_match(self, a: str, b: str) -> bool:
        return a == b or bool(self.synsets(a) & self.synsets(b))

    @classmethod
    def builtin(cls) -> "Synonyms":
        syn = cls()
        for line in BUILTIN_PREDICATE_SYNONYMS:
            for form in line:
                syn.predicates.setdefault(normalize(form), normalize(line[0]))
        return syn

    @classmethod
    def from_vocab_files(cls, objects: str | Path | None = None, relations: str | Path | None = None) -> "Synonyms":
        """Read Visual Genome bottom-up vocab files: one class per line, comma-separated synonyms, first canonical."""
        syn = cls.builtin()
        for path, table in ((objects, syn.objects), (relations, syn.predicates)):
            if path is None:
                continue
            path = Path(path)
            if not path.exists():
                raise InputError(f"{path}: synonym vocabulary file not found")
            for line in read_text(path).splitlines():
                forms = [normalize(f) for f in line.split(",") if normalize(f)]
                for form in forms:
                    table[form] = forms[0]  # later files win: the VG vocabulary overrides the built-in table
        return syn

    def object_name(self, name: str) -> str:
        # singular first: VG lists "table" and "tables" as two classes, but a scene graph does not count instances
        n = normalize(name)
        s = singular(n)
        return self.objects.get(s) or self.objects.get(n) or s

    def predicate(self, predicate: str) -> str:
        p = normalize(predicate)
        return self.predicates.get(p, p)


@dataclass(frozen=True)
class SGObject:
    id: str
    name: str
    attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SGRelation:
    subject: str
    predicate: str
    object: str


@dataclass
class SceneGraph:
    objects: list[SGObject] = field(default_factory=list)
    relations: list[SGRelation] = field(default_factory=list)
    stand_in: bool = False  # built from a stand-in model's output / synthetic data: reported with every grade
    counts: dict[str, int] = field(default_factory=dict)  # object id → instances it stands for (merged_by_name)

    # ---- construction and validation -------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any, source: str = "scene graph") -> "SceneGraph":
        """Validate the JSON form; each error names the item (`objects[2].name`) and the source file."""
        if not isinstance(data, Mapping):
            raise InputError(f"{source}: expected a JSON object with 'objects' and 'relations'")
        unknown = sorted(set(data) - {"objects", "relations", "stand_in", "image_id"})
        if unknown:
            raise InputError(f"{source}: unknown top-level key(s) {unknown} (allowed: objects, relations)")
        raw_objects = data.get("objects")
        if not isinstance(raw_objects, list):
            raise InputError(f"{source}: 'objects' must be a list")
        raw_relations = data.get("relations", [])
        if not isinstance(raw_relations, list):
            raise InputError(f"{source}: 'relations' must be a list")
        objects: list[SGObject] = []
        seen: set[str] = set()
        for i, obj in enumerate(raw_objects):
            where = f"{source}: objects[{i}]"
            if not isinstance(obj, Mapping):
                raise InputError(f"{where}: expected an object with id, name, attributes")
            if "id" not in obj or not isinstance(obj["id"], (str, int)) or isinstance(obj["id"], bool):
                raise InputError(f"{where}.id: missing or not a string/integer")
            oid = str(obj["id"])
            if oid in seen:
                raise InputError(f"{where}.id: duplicate id {oid!r}")
            seen.add(oid)
            name = obj.get("name")
            if not isinstance(name, str) or not normalize(name):
                raise InputError(f"{where}.name: missing or empty")
            attrs = obj.get("attributes", [])
            if not isinstance(attrs, list) or not all(isinstance(a, str) and normalize(a) for a in attrs):
                raise InputError(f"{where}.attributes: expected a list of non-empty strings")
            objects.append(SGObject(oid, name, tuple(attrs)))
        relations: list[SGRelation] = []
        for i, rel in enumerate(raw_relations):
            where = f"{source}: relations[{i}]"
            if not isinstance(rel, Mapping):
                raise InputError(f"{where}: expected an object with subject, predicate, object")
            for key in ("subject", "predicate", "object"):
                if key not in rel or not isinstance(rel[key], (str, int)) or isinstance(rel[key], bool):
                    raise InputError(f"{where}.{key}: missing or not a string")
            for key in ("subject", "object"):
                if str(rel[key]) not in seen:
                    raise InputError(f"{where}.{key}: {rel[key]!r} is not the id of any object")
            if not normalize(str(rel["predicate"])):
                raise InputError(f"{where}.predicate: empty")
            relations.append(SGRelation(str(rel["subject"]), str(rel["predicate"]), str(rel["object"])))
        return cls(objects, relations, bool(data.get("stand_in", False)))

    @classmethod
    def from_json_file(cls, path: str | Path) -> "SceneGraph":
        path = Path(path)
        if not path.exists():
            raise InputError(f"{path}: scene graph file not found")
        return cls.from_dict(read_json(path), source=str(path))

    def to_dict(self) -> dict:
        return {
            "objects": [{"id": o.id, "name": o.name, "attributes": list(o.attributes)} for o in self.objects],
            "relations": [{"subject": r.subject, "predicate": r.predicate, "object": r.object} for r in self.relations],
        }

    # ---- views -------------------------------------------------------------------------------------
    def merged_by_name(self, synonyms: Synonyms | None = None) -> "SceneGraph":
        """One node per canonical object name (attributes unioned, relations re-pointed, duplicates dropped), with
        the number of instances kept in `counts`. Instance-level annotations (COCO: one node per box; Visual Genome:
        one per region) and name-level predictions (one node per name mentioned) then compare like with like, so a
        correct "person" against three annotated persons costs nothing."""
        syn = synonyms or Synonyms.builtin()
        names = {o.id: syn.object_name(o.name) for o in self.objects}
        attrs: dict[str, set[str]] = {}
        counts: dict[str, int] = {}
        for o in self.objects:
            attrs.setdefault(names[o.id], set()).update(normalize(a) for a in o.attributes)
            counts[names[o.id]] = counts.get(names[o.id], 0) + 1
        ids = {n: f"n{i}" for i, n in enumerate(sorted(attrs))}
        objects = [SGObject(ids[n], n, tuple(sorted(attrs[n]))) for n in sorted(attrs)]
        rels = sorted(
            {(ids[names[r.subject]], syn.predicate(r.predicate), ids[names[r.object]]) for r in self.relations}
        )
        out = SceneGraph(objects, [SGRelation(*r) for r in rels], stand_in=self.stand_in)
        out.counts = {ids[n]: c for n, c in counts.items()}
        return out

    def names(self, synonyms: Synonyms | None = None) -> set[str]:
        syn = synonyms or Synonyms.builtin()
        return {syn.object_name(o.name) for o in self.objects}

    def to_networkx(self, synonyms: Synonyms | None = None) -> nx.DiGraph:
        """Directed graph for GED: node attrs `name`, `attributes` (canonical) and `synsets` (WordNet noun synsets of
        the name, empty without a lexicon), edge attr `predicates` (a set).

        Several relations between the same ordered pair become one edge with the union of their predicates, the
        form in which CEDI's edge cost ("0 if the predicate sets intersect") is defined.
        """
        syn = synonyms or Synonyms.builtin()
        g = nx.DiGraph()
        for o in self.objects:
            name = syn.object_name(o.name)
            g.add_node(
                o.id,
                name=name,
                attributes=frozenset(normalize(a) for a in o.attributes),
                synsets=syn.synsets(name),  # the GED's name match: equal names or a shared WordNet synset
            )
        for r in self.relations:
            pred = syn.predicate(r.predicate)
            if g.has_edge(r.subject, r.object):
                g.edges[r.subject, r.object]["predicates"] = g.edges[r.subject, r.object]["predicates"] | {pred}
            else:
                g.add_edge(r.subject, r.object, predicates=frozenset({pred}))
        return g


# ---- truth graphs from annotations ---------------------------------------------------------------------


def ode_scene_graph(scene: Mapping[str, Any], extra_predicates: bool = True) -> SceneGraph:
    """Truth graph of one ODE scene row (contract columns of scenes.parquet).

    Objects a and b with their state/action attribute; one relation a→b implied by the pair kind:
    entity_environment → "in" (the entity is in the environment), entity_entity → "next to"/"with" (the prompt
    "{a} and {b}" places both in one picture, nothing more). With `extra_predicates` the relation is stored as
    several relations with the equivalent predicates of ODE_RELATIONS, so a prediction using any of them matches.
    """
    for key in ("object_a", "object_b", "pair_kind"):
        if not scene.get(key):
            raise InputError(f"scene {scene.get('scene_id', '?')!r}: column {key!r} is missing or empty")
    kind = scene["pair_kind"]
    if kind not in ODE_RELATIONS:
        raise InputError(
            f"scene {scene.get('scene_id', '?')!r}: pair_kind {kind!r} is not one of {sorted(ODE_RELATIONS)}"
        )
    objects = []
    for side, oid in (("a", "o0"), ("b", "o1")):
        attr = scene.get(f"attribute_{side}")
        objects.append(SGObject(oid, str(scene[f"object_{side}"]), (str(attr),) if attr else ()))
    preds = ODE_RELATIONS[kind] if extra_predicates else ODE_RELATIONS[kind][:1]
    relations = [SGRelation("o0", p, "o1") for p in preds]
    return SceneGraph(objects, relations, stand_in=False)


def visual_genome_scene_graph(entry: Mapping[str, Any], source: str = "visual genome") -> SceneGraph:
    """One image of Visual Genome's scene_graphs.json: objects[{object_id, names|name, attributes}],
    relationships[{subject_id|subject{object_id}, predicate, object_id|object{object_id}}]."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("objects"), list):
        raise InputError(f"{source}: expected an image entry with an 'objects' list")
    objects = []
    for i, obj in enumerate(entry["objects"]):
        if not isinstance(obj, Mapping) or "object_id" not in obj:
            raise InputError(f"{source}: objects[{i}].object_id missing")
        names = obj.get("names") or ([obj["name"]] if obj.get("name") else [])
        if not names:
            raise InputError(f"{source}: objects[{i}] (object_id {obj['object_id']}) has no name")
        objects.append({"id": str(obj["object_id"]), "name": names[0], "attributes": list(obj.get("attributes") or [])})
    ids = {o["id"] for o in objects}
    relations = []

    def _id(rel: Mapping[str, Any], i: int, key: str) -> str:
        if f"{key}_id" in rel:
            return str(rel[f"{key}_id"])
        if isinstance(rel.get(key), Mapping) and "object_id" in rel[key]:
            return str(rel[key]["object_id"])
        raise InputError(f"{source}: relationships[{i}].{key}_id missing")

    for i, rel in enumerate(entry.get("relationships") or []):
        if not isinstance(rel, Mapping):
            raise InputError(f"{source}: relationships[{i}]: expected an object")
        subj, obj_id = _id(rel, i, "subject"), _id(rel, i, "object")
        if subj not in ids or obj_id not in ids:
            # VG relationships may point at objects that were merged away: skip rather than invent an object.
            continue
        relations.append(
            {"subject": subj, "predicate": str(rel.get("predicate", "")).strip() or "related to", "object": obj_id}
        )
    return SceneGraph.from_dict({"objects": objects, "relations": relations}, source=source)


def coco_scene_graphs(instances: Mapping[str, Any], source: str = "coco annotations") -> dict[str, SceneGraph]:
    """COCO instances JSON → one graph per image: one object per annotated instance (name = category), no
    attributes and no relations (COCO has none), so GED against it measures object hallucination only."""
    if not isinstance(instances, Mapping):
        raise InputError(f"{source}: expected a COCO instances JSON object")
    for key in ("images", "annotations", "categories"):
        if not isinstance(instances.get(key), list):
            raise InputError(f"{source}: '{key}' must be a list")
    cats = {}
    for i, c in enumerate(instances["categories"]):
        if not isinstance(c, Mapping) or "id" not in c or "name" not in c:
            raise InputError(f"{source}: categories[{i}] needs id and name")
        cats[c["id"]] = c["name"]
    graphs: dict[str, list[dict]] = {
        str(img["id"]): [] for img in instances["images"] if isinstance(img, Mapping) and "id" in img
    }
    for i, ann in enumerate(instances["annotations"]):
        if not isinstance(ann, Mapping) or "image_id" not in ann or "category_id" not in ann:
            raise InputError(f"{source}: annotations[{i}] needs image_id and category_id")
        if ann["category_id"] not in cats:
            raise InputError(f"{source}: annotations[{i}].category_id {ann['category_id']!r} is not a known category")
        key = str(ann["image_id"])
        if key not in graphs:
            raise InputError(f"{source}: annotations[{i}].image_id {ann['image_id']!r} is not in 'images'")
        graphs[key].append(
            {"id": str(ann.get("id", f"{key}_{len(graphs[key])}")), "name": cats[ann["category_id"]], "attributes": []}
        )
    return {
        k: SceneGraph.from_dict({"objects": v, "relations": []}, source=f"{source} image {k}")
        for k, v in graphs.items()
    }
