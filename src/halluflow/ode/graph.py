"""Weighted concept graph G = (V, A, E, W) of ODE (Tu et al., "ODE: Open-Set Evaluation of Hallucinations in
Multimodal Large Language Models", §3.1; ODE code `data_extractor.py`).

Nodes are annotated objects typed entity / environment with state and action attributes; an edge's weight
is the number of images in which both objects are annotated (each image counted once per pair, even when an
object repeats in its list). Readers: AMBER annotations.json (+ its attribute queries), COCO instances JSON,
Visual Genome objects/attributes JSON, a plain table, and the shipped seed tables in resources/graph_seed/.
"""

from __future__ import annotations

import csv
import itertools
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import polars as pl

from ..config_types import OdeGraph, OdeGraphSource
from ..errors import InputError
from ..io import atomic_path, read_json, read_parquet, read_text, write_parquet, write_text
from ..resources import resource_path

if TYPE_CHECKING:
    import networkx as nx

DEFAULT_ENVIRONMENTS = resource_path("vocab/environments.txt")
DEFAULT_SEED_DIR = resource_path("graph_seed")

FORMATS = ("amber", "coco", "visual_genome", "table", "seed")

# AMBER attribute questions come in consecutive (true, contrasting) pairs about one object; ODE mines the word
# pairs with exactly these patterns, so multi-word answers ("ride a bike") are skipped as in the anchor.
STATE_RE = re.compile(r"^Is the (\w+) (\w+) in this image\?$")
ACTION_RE = re.compile(r"^Does the (\w+) (\w+) in this image\?$")

NODE_SCHEMA = {
    "node": pl.String,
    "type": pl.String,
    "frequency": pl.Int64,
    "states": pl.List(pl.String),
    "actions": pl.List(pl.String),
    "state_pairs": pl.List(pl.String),
    "action_pairs": pl.List(pl.String),
}
EDGE_SCHEMA = {"source": pl.String, "target": pl.String, "weight": pl.Int64}
# G_H: source = a truth object, target = an object annotated as hallucination-prone in the same image (directed)
HALLU_SCHEMA = EDGE_SCHEMA


@dataclass
class Annotations:
    """Objects per image plus attribute word pairs per object (true, contrast), in first-seen order."""

    images: list[list[str]] = field(default_factory=list)
    # AMBER only: per image (parallel to `images`), the objects annotated as likely to be hallucinated
    hallu: list[list[str]] = field(default_factory=list)
    state_pairs: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    action_pairs: dict[str, list[tuple[str, str]]] = field(default_factory=dict)


def _normalise(name: str) -> str:
    return " ".join(str(name).strip().lower().split())


def _add_pair(store: dict[str, list[tuple[str, str]]], obj: str, pair: tuple[str, str]) -> None:
    pairs = store.setdefault(obj, [])
    if pair not in pairs:
        pairs.append(pair)


def load_environment_vocabulary(path: str | Path | None = None) -> set[str]:
    path = Path(path) if path else DEFAULT_ENVIRONMENTS
    if not path.exists():
        raise InputError(f"{path}: environment vocabulary not found (one object name per line)")
    words = set()
    for line in read_text(path).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            words.add(_normalise(line))
    return words


# ---------------------------------------------------------------- readers


def read_amber(annotations: str | Path, attribute_queries: str | Path | None = None) -> Annotations:
    """AMBER: generative items' `truth` lists; attribute pairs from consecutive attribute questions."""
    from ..metrics.formats import read_amber_annotations

    data = read_amber_annotations(annotations, indexed=False)
    ann = Annotations()
    for item in data:
        if item["type"] == "generative":
            truth = item["truth"]
            ann.images.append([_normalise(t) for t in truth])
            ann.hallu.append([_normalise(h) for h in item.get("hallu") or []])
    if not ann.images:
        raise InputError(f"{annotations}: no generative items (AMBER annotations.json expected)")
    if attribute_queries is not None:
        queries = read_json(attribute_queries)
        if not isinstance(queries, list):
            raise InputError(f"{attribute_queries}: expected AMBER's JSON array of queries")
        _mine_amber_attributes(queries, ann, attribute_queries)
    return ann


def _mine_amber_attributes(queries: list, ann: Annotations, source) -> None:
    previous = None  # (kind, image, object, word) of an unpaired question
    for i, q in enumerate(sorted(queries, key=lambda q: q.get("id", 0))):
        if not isinstance(q, dict) or "query" not in q:
            raise InputError(f"{source}: query {i} lacks 'query'")
        text = q["query"].strip()
        match, kind = STATE_RE.match(text), "state"
        if match is None:
            match, kind = ACTION_RE.match(text), "action"
        if match is None:
            previous = None
            continue
        current = (kind, q.get("image"), match.group(1).lower(), match.group(2).lower())
        if previous is not None and previous[:3] == current[:3]:
            store = ann.state_pairs if kind == "state" else ann.action_pairs
            _add_pair(store, current[2], (previous[3], current[3]))
            previous = None
        else:
            previous = current


def _coco_objects(data, instances) -> dict[object, list[str]]:
    """Category name of every annotation, per image id (annotation order)."""
    for key in ("annotations", "categories"):
        if not isinstance(data, dict) or key not in data:
            raise InputError(f"{instances}: COCO instances JSON lacks {key!r}")
    try:
        names = {c["id"]: _normalise(c["name"]) for c in data["categories"]}
    except (KeyError, TypeError):
        raise InputError(f"{instances}: every category needs 'id' and 'name'") from None
    per_image: dict[object, list[str]] = {}
    for i, a in enumerate(data["annotations"]):
        try:
            per_image.setdefault(a["image_id"], []).append(names[a["category_id"]])
        except KeyError as exc:
            raise InputError(f"{instances}: annotation {i} has unknown or missing {exc.args[0]!r}") from None
    return per_image


def read_coco(instances: str | Path) -> Annotations:
    """COCO instances JSON: the category names of each image's annotations (images without any are skipped)."""
    per_image = _coco_objects(read_json(instances), instances)
    return Annotations(images=[per_image[k] for k in sorted(per_image, key=str)])


def read_coco_images(instances: str | Path) -> list[tuple[str, str, list[str]]]:
    """COCO instances JSON → (image id, file_name, category names: one per category, first-annotated first) for every
    listed image; an image without annotations has no objects (its truth is that nothing is there)."""
    data = read_json(instances)
    per_image = _coco_objects(data, instances)
    if not isinstance(data.get("images"), list):
        raise InputError(f"{instances}: COCO instances JSON lacks an 'images' list")
    out = []
    for i, img in enumerate(data["images"]):
        if not isinstance(img, dict) or "id" not in img or "file_name" not in img:
            raise InputError(f"{instances}: images[{i}] needs 'id' and 'file_name'")
        out.append((str(img["id"]), str(img["file_name"]), list(dict.fromkeys(per_image.get(img["id"], [])))))
    listed = {str(img["id"]) for img in data["images"]}
    unlisted = sorted(str(k) for k in per_image if str(k) not in listed)
    if unlisted:
        raise InputError(f"{instances}: annotations name image_id {unlisted[0]!r}, which is not in 'images'")
    return out


def read_visual_genome(objects: str | Path, attributes: str | Path | None = None) -> Annotations:
    """Visual Genome objects.json (first name of each object); attributes.json adds single-word states."""
    data = read_json(objects)
    if not isinstance(data, list):
        raise InputError(f"{objects}: expected Visual Genome's JSON array of images")
    ann = Annotations()
    for i, img in enumerate(data):
        if not isinstance(img, dict):
            raise InputError(f"{objects}: image {i} is not an object (Visual Genome objects.json expected)")
        if "objects" not in img:
            raise InputError(f"{objects}: image {i} lacks 'objects'")
        names = []
        for obj in img["objects"]:
            obj_names = obj.get("names") or ([obj["name"]] if "name" in obj else [])
            if obj_names:
                names.append(_normalise(obj_names[0]))
        ann.images.append(names)
    if attributes is not None:
        attr_data = read_json(attributes)
        for img in attr_data:
            for obj in img.get("attributes", []):
                obj_names = obj.get("names") or ([obj["name"]] if "name" in obj else [])
                for word in obj.get("attributes") or []:
                    if obj_names and len(word.split()) == 1:
                        # VG has no contrasting word: the pair's second member stays empty.
                        _add_pair(ann.state_pairs, _normalise(obj_names[0]), (_normalise(word), ""))
    return ann


def read_table(
    path: str | Path, image_column: str = "image_id", object_column: str = "object", separator: str = ";"
) -> Annotations:
    """CSV/TSV/parquet: either one row per (image, object) or one row per image with `separator`-joined objects."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        df = read_parquet(path)
    elif suffix in (".csv", ".tsv", ".txt"):
        df = pl.read_csv(path, separator="\t" if suffix != ".csv" else ",", infer_schema=False)
    else:
        raise InputError(f"{path}: table format must be .csv, .tsv or .parquet")
    for col in (image_column, object_column):
        if col not in df.columns:
            raise InputError(f"{path}: column {col!r} not found (columns: {', '.join(df.columns)})")
    per_image: dict[str, list[str]] = {}
    for image, objs in zip(df[image_column].cast(pl.String), df[object_column].to_list()):
        items = objs if isinstance(objs, list) else str(objs or "").split(separator)
        per_image.setdefault(image, []).extend(_normalise(o) for o in items if str(o).strip())
    return Annotations(images=[per_image[k] for k in sorted(per_image)])


# ---------------------------------------------------------------- graph


WEIGHTINGS = ("images", "ode_anchor")


def build_tables(
    ann: Annotations, environments: set[str], weighting: str = "images"
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Nodes (with image frequency and attributes) and edges (co-occurrence counts) from annotations.

    weighting "images" (paper): weight = number of images in which both objects occur.
    weighting "ode_anchor": ODE's released graph exactly: every ordered pair of list positions (repeats
    included, so a repeated object makes a self-loop) adds 1 to an undirected edge, minus one per edge:
    for objects listed once, weight = 2 * images - 1 (sky-cloud 447 = 2 * 224 - 1). Reproduces all 4,364
    edges of ODE's T graph; kept only to compare with the anchor.
    """
    if weighting not in WEIGHTINGS:
        raise InputError(f"graph weighting {weighting!r} unknown; known: {', '.join(WEIGHTINGS)}")
    frequency: Counter[str] = Counter()
    weights: Counter[tuple[str, str]] = Counter()
    for objects in ann.images:
        objects = [o for o in objects if o]
        unique = sorted(set(objects))
        frequency.update(unique)
        if weighting == "images":
            weights.update(itertools.combinations(unique, 2))
        else:
            weights.update(
                tuple(sorted((objects[i], objects[j]))) for i, j in itertools.permutations(range(len(objects)), 2)
            )
    if weighting == "ode_anchor":
        weights = Counter({k: v - 1 for k, v in weights.items()})
    nodes = sorted(frequency)
    rows = []
    for n in nodes:
        sp = ann.state_pairs.get(n, [])
        ap = ann.action_pairs.get(n, [])
        rows.append(
            {
                "node": n,
                "type": "environment" if n in environments else "entity",
                "frequency": frequency[n],
                "states": list(dict.fromkeys(p[0] for p in sp)),
                "actions": list(dict.fromkeys(p[0] for p in ap)),
                "state_pairs": [f"{a}/{b}" for a, b in sp],
                "action_pairs": [f"{a}/{b}" for a, b in ap],
            }
        )
    nodes_df = pl.DataFrame(rows, schema=NODE_SCHEMA) if rows else pl.DataFrame(schema=NODE_SCHEMA)
    edges = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    edges_df = pl.DataFrame(
        {"source": [k[0] for k, _ in edges], "target": [k[1] for k, _ in edges], "weight": [w for _, w in edges]},
        schema=EDGE_SCHEMA,
    )
    return nodes_df, edges_df


def to_networkx(nodes: pl.DataFrame, edges: pl.DataFrame) -> "nx.Graph":
    import networkx as nx  # only the GraphML export needs it (~0.2 s to import for every stage reading the graph)

    g = nx.Graph()
    for row in nodes.iter_rows(named=True):
        # GraphML has no list type: attribute lists are stored as ';'-joined strings.
        g.add_node(
            row["node"],
            type=row["type"],
            frequency=int(row["frequency"]),
            state_pairs=";".join(row["state_pairs"]),
            action_pairs=";".join(row["action_pairs"]),
        )
    for s, t, w in edges.iter_rows():
        g.add_edge(s, t, weight=int(w))
    return g


def write_graph(
    nodes: pl.DataFrame,
    edges: pl.DataFrame,
    out_dir: str | Path | None = None,
    *,
    nodes_path=None,
    edges_path=None,
    graphml_path=None,
) -> None:
    out_dir = Path(out_dir) if out_dir else None
    nodes_path = nodes_path or out_dir / "nodes.parquet"
    edges_path = edges_path or out_dir / "edges.parquet"
    graphml_path = graphml_path or out_dir / "graph.graphml"
    write_parquet(nodes_path, nodes)
    write_parquet(edges_path, edges)
    with atomic_path(graphml_path) as tmp:
        import networkx as nx

        nx.write_graphml(to_networkx(nodes, edges), tmp)


def read_graph(nodes_path: str | Path, edges_path: str | Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    for p in (nodes_path, edges_path):
        if not Path(p).exists():
            raise InputError(f"{p}: graph table not found (run build_graph first)")
    nodes, edges = read_parquet(nodes_path), read_parquet(edges_path)
    for df, schema, p in ((nodes, NODE_SCHEMA, nodes_path), (edges, EDGE_SCHEMA, edges_path)):
        missing = [c for c in schema if c not in df.columns]
        if missing:
            raise InputError(f"{p}: missing column(s) {', '.join(missing)}")
    return nodes, edges


def build_hallu_edges(ann: Annotations, weighting: str = "images") -> pl.DataFrame:
    """G_H of ODE: truth object -> hallucination-prone object, weight = images where both are annotated so.

    "ode_anchor" counts list positions (repeats included), which reproduces all 5,391 edges of ODE's H graph.
    """
    weights: Counter[tuple[str, str]] = Counter()
    for truth, hallu in zip(ann.images, ann.hallu):
        if weighting == "images":
            weights.update((t, h) for t in sorted(set(truth)) for h in sorted(set(hallu)) if t != h)
        else:
            # the anchor keeps an object listed both as truth and as hallucination-prone as a self-loop
            weights.update((t, h) for t in truth for h in hallu)
    return _edge_frame(weights)


def _edge_frame(weights: Counter) -> pl.DataFrame:
    rows = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    return pl.DataFrame(
        {"source": [k[0] for k, _ in rows], "target": [k[1] for k, _ in rows], "weight": [w for _, w in rows]},
        schema=EDGE_SCHEMA,
    )


def hallu_graph(source: Mapping[str, Any] | OdeGraphSource, weighting: str = "images") -> pl.DataFrame:
    """G_H from a source block: AMBER's `hallu` lists, or the seed's hallu_edges.tsv; empty for other formats."""
    source = OdeGraphSource.from_dict(source)
    fmt = source.format
    if fmt == "amber":
        return build_hallu_edges(read_amber(source.path), weighting)
    if fmt == "seed":
        path = Path(source.path or DEFAULT_SEED_DIR) / "hallu_edges.tsv"
        if path.exists():
            return _read_edge_tsv(path, directed=True)
    return pl.DataFrame(schema=HALLU_SCHEMA)


def hallu_graph_from_config(graph: Mapping[str, Any] | OdeGraph) -> pl.DataFrame:
    """G_H of every source of an `ode.graph` block, weights added up."""
    graph = OdeGraph.from_dict(graph)
    weights: Counter[tuple[str, str]] = Counter()
    from .concepts import read_spelling

    spelling = read_spelling()
    for src in (graph.source, *graph.extra_sources):
        df = hallu_graph(src, graph.weighting)
        for s, t, w in df.iter_rows():
            s, t = spelling.get(s, s), spelling.get(t, t)  # corrected or dropped as build_graph_from_config does
            if s and t and s != t:
                weights[(s, t)] += int(w)
    return _edge_frame(weights)


# ---------------------------------------------------------------- shipped seed (figures only)


def write_seed(
    nodes: pl.DataFrame, edges: pl.DataFrame, seed_dir: str | Path, hallu_edges: pl.DataFrame | None = None
) -> None:
    """Human-readable TSV seed: derived counts and attribute words, never the raw annotation files."""
    seed_dir = Path(seed_dir)
    node_lines = ["node\ttype\tfrequency\tstate_pairs\taction_pairs"]
    for r in nodes.iter_rows(named=True):
        node_lines.append(
            "\t".join(
                [r["node"], r["type"], str(r["frequency"]), ";".join(r["state_pairs"]), ";".join(r["action_pairs"])]
            )
        )
    edge_lines = ["source\ttarget\tweight"] + [f"{s}\t{t}\t{w}" for s, t, w in edges.iter_rows()]
    write_text(seed_dir / "nodes.tsv", "\n".join(node_lines) + "\n")
    write_text(seed_dir / "edges.tsv", "\n".join(edge_lines) + "\n")
    if hallu_edges is not None and hallu_edges.height:
        lines = ["source\ttarget\tweight"] + [f"{s}\t{t}\t{w}" for s, t, w in hallu_edges.iter_rows()]
        write_text(seed_dir / "hallu_edges.tsv", "\n".join(lines) + "\n")


def _split_pairs(text: str) -> list[str]:
    return [p for p in (text or "").split(";") if p]


def _read_edge_tsv(path: Path, directed: bool) -> pl.DataFrame:
    weights: Counter[tuple[str, str]] = Counter()
    with open(path, encoding="utf-8", newline="") as fh:
        for i, r in enumerate(csv.DictReader(fh, delimiter="\t"), 2):
            try:
                key = (r["source"], r["target"]) if directed else tuple(sorted((r["source"], r["target"])))
                weights[key] += int(r["weight"])
            except (KeyError, ValueError, TypeError) as exc:
                raise InputError(f"{path}:{i}: malformed row ({exc})") from None
    return _edge_frame(weights)


def read_seed(seed_dir: str | Path, environments: set[str] | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Load the shipped seed tables; `environments`, when given, re-types the nodes."""
    seed_dir = Path(seed_dir)
    nodes_file, edges_file = seed_dir / "nodes.tsv", seed_dir / "edges.tsv"
    for p in (nodes_file, edges_file):
        if not p.exists():
            raise InputError(f"{p}: graph seed table not found")
    rows = []
    with open(nodes_file, encoding="utf-8", newline="") as fh:
        for i, r in enumerate(csv.DictReader(fh, delimiter="\t"), 2):
            try:
                sp, ap = _split_pairs(r["state_pairs"]), _split_pairs(r["action_pairs"])
                node_type = r["type"]
                if environments is not None:
                    node_type = "environment" if r["node"] in environments else "entity"
                rows.append(
                    {
                        "node": r["node"],
                        "type": node_type,
                        "frequency": int(r["frequency"]),
                        "states": list(dict.fromkeys(p.split("/")[0] for p in sp)),
                        "actions": list(dict.fromkeys(p.split("/")[0] for p in ap)),
                        "state_pairs": sp,
                        "action_pairs": ap,
                    }
                )
            except (KeyError, ValueError, TypeError) as exc:
                raise InputError(f"{nodes_file}:{i}: malformed row ({exc})") from None
    nodes = pl.DataFrame(sorted(rows, key=lambda r: r["node"]), schema=NODE_SCHEMA)
    edges = _read_edge_tsv(edges_file, directed=False)
    return nodes, edges


# ---------------------------------------------------------------- entry point


def build_graph(
    source: Mapping[str, Any] | OdeGraphSource, environments_path: str | Path | None = None, weighting: str = "images"
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Build node/edge tables from a graph `source` config block ({format, path, ...}; a partial block gets the
    schema's defaults)."""
    source = OdeGraphSource.from_dict(source)
    fmt = source.format
    path = source.path
    environments = load_environment_vocabulary(environments_path)
    if fmt == "seed":
        # The seed keeps its own node types unless a vocabulary is named explicitly.
        return read_seed(path or DEFAULT_SEED_DIR, environments if environments_path else None)
    if not path:
        raise InputError(f"graph source format {fmt!r} needs 'path'")
    if fmt == "amber":
        ann = read_amber(path, source.attribute_queries)
    elif fmt == "coco":
        ann = read_coco(path)
    elif fmt == "visual_genome":
        ann = read_visual_genome(path, source.attributes)
    elif fmt == "table":
        ann = read_table(path, source.image_column, source.object_column, source.separator)
    else:
        raise InputError(f"unknown graph source format {fmt!r}; known: {', '.join(FORMATS)}")
    return build_tables(ann, environments, weighting)


def merge_graphs(graphs: list[tuple[pl.DataFrame, pl.DataFrame]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Union of graphs built from different sources (ODE's "update the knowledge base with more objects").

    Frequencies and edge weights add up (the sources' images are disjoint); attribute pairs are united in
    first-seen order; a node is an environment when any source says so.
    """
    if len(graphs) == 1:
        return graphs[0]
    merged: dict[str, dict] = {}
    weights: Counter[tuple[str, str]] = Counter()
    for nodes, edges in graphs:
        for r in nodes.iter_rows(named=True):
            m = merged.setdefault(
                r["node"], {"node": r["node"], "type": "entity", "frequency": 0, "state_pairs": [], "action_pairs": []}
            )
            if r["type"] == "environment":
                m["type"] = "environment"
            m["frequency"] += int(r["frequency"])
            for key in ("state_pairs", "action_pairs"):
                m[key] += [p for p in r[key] if p not in m[key]]
        weights.update({(s, t): int(w) for s, t, w in edges.iter_rows()})
    rows = []
    for name in sorted(merged):
        m = merged[name]
        rows.append(
            {
                **m,
                "states": list(dict.fromkeys(p.split("/")[0] for p in m["state_pairs"])),
                "actions": list(dict.fromkeys(p.split("/")[0] for p in m["action_pairs"])),
            }
        )
    edge_rows = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    return (
        pl.DataFrame(rows, schema=NODE_SCHEMA),
        pl.DataFrame(
            {
                "source": [k[0] for k, _ in edge_rows],
                "target": [k[1] for k, _ in edge_rows],
                "weight": [w for _, w in edge_rows],
            },
            schema=EDGE_SCHEMA,
        ),
    )


def correct_spelling(nodes: pl.DataFrame, edges: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """The graph with its misspelt words corrected by resources/vocab/spelling.tsv ("seegull" → seagull: counts and
    attributes merge into the corrected node) and the words it drops removed with their edges (AMBER's "doghole":
    no English noun, and which one is meant is unclear). Returns (nodes, edges, {wrong: right or ""})."""
    from .concepts import read_spelling

    table = read_spelling()
    applied = {n: table[n] for n in nodes["node"].to_list() if n in table}
    if not applied:
        return nodes, edges, {}
    rename = {n: applied.get(n, n) for n in nodes["node"].to_list()}
    kept = nodes.filter(pl.col("node").replace_strict(rename, default=None) != "")
    renamed = kept.with_columns(pl.col("node").replace_strict(rename, default=pl.col("node")))
    keep_edges = edges.filter(~pl.col("source").is_in([w for w, r in applied.items() if not r]))
    keep_edges = keep_edges.filter(~pl.col("target").is_in([w for w, r in applied.items() if not r]))
    pairs = [
        tuple(sorted((rename.get(s, s), rename.get(t, t)))) for s, t in keep_edges.select("source", "target").rows()
    ]
    renamed_edges = pl.DataFrame(
        {"source": [p[0] for p in pairs], "target": [p[1] for p in pairs], "weight": keep_edges["weight"]},
        schema=EDGE_SCHEMA,
    )
    renamed_edges = (
        renamed_edges.filter(pl.col("source") != pl.col("target"))
        .group_by("source", "target")
        .agg(pl.col("weight").sum())
        .sort("weight", "source", "target", descending=[True, False, False])
    )
    # merge_graphs adds up the nodes that now share a name (its second graph is empty)
    nodes_out, _ = merge_graphs([(renamed, renamed_edges), (renamed.clear(), renamed_edges.clear())])
    edges_out = renamed_edges.cast(EDGE_SCHEMA)
    return nodes_out, edges_out, applied


def build_graph_from_config(
    graph: Mapping[str, Any] | OdeGraph, applied: dict | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The `ode.graph` config block: `source` plus any `extra_sources`, merged, with misspelt words corrected or
    dropped (`correct_spelling`; the build log says how many, and `applied` receives {wrong: right or ""})."""
    graph = OdeGraph.from_dict(graph)
    sources = (graph.source, *graph.extra_sources)
    nodes, edges = merge_graphs([build_graph(src, graph.environments, graph.weighting) for src in sources])
    nodes, edges, spelt = correct_spelling(nodes, edges)
    if applied is not None:  # the caller's record of what the spelling table did (graph/spelling.json)
        applied.update(spelt)
    if spelt:
        fixed = sorted(f"{w} → {r}" for w, r in spelt.items() if r)
        dropped = sorted(w for w, r in spelt.items() if not r)
        logging.getLogger(__name__).info(
            "spelling table: %d graph words corrected (%s), %d dropped (%s)",
            len(fixed),
            ", ".join(fixed),
            len(dropped),
            ", ".join(dropped),
        )
    return nodes, edges


def neighbours(edges: pl.DataFrame) -> dict[str, list[tuple[str, int]]]:
    """Adjacency lists sorted by descending weight, ties by name (the order ODE draws 'no' candidates in)."""
    adj: dict[str, list[tuple[str, int]]] = {}
    for s, t, w in edges.iter_rows():
        adj.setdefault(s, []).append((t, w))
        adj.setdefault(t, []).append((s, w))
    for lst in adj.values():
        lst.sort(key=lambda x: (-x[1], x[0]))
    return adj
