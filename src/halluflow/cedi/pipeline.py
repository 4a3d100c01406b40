"""CEDI stage of the workflow (Li et al., "Contextualized Evaluation of Vision Language Models through Dynamic,
Multi-turn Interactions"): pick images, build truth scene graphs, examine, grade.

Scene-graph sources (`cedi.source`): `ode` = an ODE release (release/scenes.parquet + queries.parquet + images,
graph/nodes.parquet + edges.parquet for the vocabulary and the absent co-occurring objects); `visual_genome` = a
Visual Genome scene_graphs.json (the paper's setting) and `coco` = a COCO instances JSON, each with an image folder
(`cedi.scene_graphs`, `cedi.images_dir`); absent objects then come from co-occurrence counted over the same file.
Outputs per model under results/<release>/cedi/<model>/: transcripts.parquet, truth_graphs.json (`examine_model`);
grades.json, per_turn.parquet, pred_graphs.json (`grade_model`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..config_types import Cedi
from ..errors import ConfigError, InputError
from ..io import read_json, read_parquet, safe_join, sha256_file, stable_hash, write_json, write_parquet
from ..models import MODELS_CACHE
from ..models.model import GenerateConfig, Model, cache_folder
from ..progress import get_logger
from .comparison import compare_graders, graders_of
from .examiner import Examiner, Scene
from .parser import Vocabulary, split_el
from .scene_graph import (
    NAME_SOURCES,
    SceneGraph,
    Synonyms,
    coco_scene_graphs,
    ode_scene_graph,
    visual_genome_scene_graph,
)

log = get_logger(__name__)

# Schema of transcripts.parquet (explicit so an empty or all-null column keeps its type).
TRANSCRIPT_SCHEMA = {
    "conversation_id": "str",
    "model": "str",
    "image_id": "str",
    "scene_id": "str",
    "distribution": "str",
    "pair_kind": "str",
    "examiner": "str",
    "history": "str",
    "question_writer": "str",
    "turn": "int",
    "question_type": "str",
    "question": "str",
    "question_source": "str",
    "switch_source": "str",
    "switch_choice": "str",
    "switch_honoured": "bool",
    "answer": "str",
    "answer_label": "str",
    "truth": "str",
    "false_premise": "bool",
    "premise": "list",
    "probe": "str",
    "hallucinated": "bool",
    "hallucination_kind": "str",
    "context_background": "str",
    "context_goal": "str",
    "context_objects": "list",
    "stand_in": "bool",
    "coverage": "float",
    "llm_failures": "list",
    "end_reason": "str",
}


def polars_schema(spec: Mapping[str, str]):
    import polars as pl

    types = {"str": pl.Utf8, "int": pl.Int64, "bool": pl.Boolean, "float": pl.Float64, "list": pl.List(pl.Utf8)}
    return {k: types[v] for k, v in spec.items()}


def settings_of(config: Mapping[str, Any]) -> dict:
    cedi = dict(config.get("cedi") or {})
    return cedi


def synonyms_of(settings: Mapping[str, Any] | Cedi) -> Synonyms:
    """`cedi.synonyms`: the object-name synonym source (`source`: auto = WordNet where installed, else Visual
    Genome's lists) and optional Visual Genome-format files for objects and relations."""
    syn = Cedi.from_dict(settings).synonyms
    if syn.source not in NAME_SOURCES:
        raise ConfigError(f"config key 'cedi.synonyms.source': {syn.source!r} is not one of {', '.join(NAME_SOURCES)}")
    return Synonyms.resolve(syn.source, syn.objects, syn.relations)


# Sources whose truth graphs annotate INSTANCES (one node per box / region, names repeat): the grader compares them
# with one node per name on both sides (`ged_instances: auto`), as CEDI's grader keys its graphs by object name.
INSTANCE_SOURCES = ("coco", "visual_genome")


def ged_instances_of(settings: Mapping[str, Any] | Cedi) -> tuple[str, str]:
    """(keep | merge, why): `cedi.ged_instances` as given, or for `auto` by whether the source's truth repeats
    instances."""
    settings = Cedi.from_dict(settings)
    mode = settings.ged_instances
    if mode not in ("auto", "keep", "merge"):
        raise ConfigError(f"config key 'cedi.ged_instances': {mode!r} is not one of auto, keep, merge")
    if mode != "auto":
        return mode, "configured"
    source = settings.source
    if source in INSTANCE_SOURCES:
        return "merge", f"auto: {source} truth repeats instances"
    return "keep", f"auto: {source} truth has one node per object"


def llm_of(config: Mapping[str, Any], settings: Mapping[str, Any], needed: bool, requests_cache=None):
    """The examiner's / parser's LLM (cedi.llm, else the top-level `llm:`), asking through the request cache folder
    of that block under `requests_cache` (None: no cache)."""
    if not needed:
        return None
    spec = settings.get("llm") or config.get("llm")
    if not spec:
        raise ConfigError("config key 'cedi.llm': an llm backend is needed for question_writer/parser 'llm'")
    return Model.llm(spec, method="cedi", cache=cache_folder(requests_cache, spec, role="llm"))


def read_table(path: str | Path, columns: Sequence[str]):

    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    df = read_parquet(path)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
    return df


def select_images(queries, n: int, seed: int) -> list[dict]:
    """`n` images of the release, ordered by a seeded hash (spread over distributions, stable across reruns)."""
    rows = {}
    for r in queries.select("image_id", "image", "scene_id").iter_rows(named=True):
        rows.setdefault(str(r["image_id"]), r)
    order = sorted(rows, key=lambda i: stable_hash(["cedi-images", seed, i]))
    return [rows[i] for i in order[:n]]


def neighbours_of(edges, names: Sequence[str], exclude: set[str]) -> list[str]:
    """Concept-graph neighbours of the truth objects, heaviest co-occurrence first (ties by name)."""
    import polars as pl

    hit = edges.filter(pl.col("source").is_in(list(names)) | pl.col("target").is_in(list(names)))
    best: dict[str, int] = {}
    for s, t, w in hit.select("source", "target", "weight").iter_rows():
        for other in (t if s in names else None, s if t in names else None):
            if other and other not in exclude:
                best[other] = max(best.get(other, 0), int(w))
    return sorted(best, key=lambda o: (-best[o], o))


def popular_of(edges, exclude: set[str], n: int = 50) -> list[str]:
    """The concept graph's most frequent objects (weighted degree = summed co-occurrence), most frequent first (ties
    by name), leaving out `exclude`: POPE's "popular" negatives."""
    weight: dict[str, int] = {}
    for s, t, w in edges.select("source", "target", "weight").iter_rows():
        for node in (s, t):
            weight[node] = weight.get(node, 0) + int(w)
    return [o for o in sorted(weight, key=lambda o: (-weight[o], o)) if o not in exclude][:n]


def detected_labels(accepted: str | Path | None) -> dict[str, set[str]]:
    """Objects the detector saw in each image (filtered/accepted.parquet `detected`): never asked as absent, as ODE
    excludes them from its "no" questions."""
    if accepted is None:
        return {}
    table = read_table(accepted, ["image_id", "detected"])
    return {str(r["image_id"]): set(r["detected"] or []) for r in table.iter_rows(named=True)}


def build_scenes(
    release_dir: str | Path,
    graph_dir: str | Path,
    n_images: int,
    seed: int,
    vocab: Vocabulary,
    accepted: str | Path | None = None,
) -> list[Scene]:
    release_dir, graph_dir = Path(release_dir), Path(graph_dir)
    seen = detected_labels(accepted)
    queries = read_table(release_dir / "queries.parquet", ["image_id", "image", "scene_id"])
    scenes = read_table(release_dir / "scenes.parquet", ["scene_id", "pair_kind", "object_a", "object_b"])
    edges = read_table(graph_dir / "edges.parquet", ["source", "target", "weight"])
    by_scene = {str(r["scene_id"]): r for r in scenes.iter_rows(named=True)}
    out = []
    for row in select_images(queries, n_images, seed):
        scene = by_scene.get(str(row["scene_id"]))
        if scene is None:
            raise InputError(
                f"{release_dir / 'queries.parquet'}: image {row['image_id']!r} has scene_id "
                f"{row['scene_id']!r}, which is not in scenes.parquet"
            )
        truth = ode_scene_graph(scene)
        vocab.add_graph(truth)
        contrasts: dict[str, list[str]] = {}
        for side in ("a", "b"):
            name, kind = scene[f"object_{side}"], scene.get(f"attribute_{side}_kind")
            vocab.add(name, [scene.get(f"attribute_{side}")] if scene.get(f"attribute_{side}") else [], kind=kind)
            if scene.get(f"attribute_{side}_contrast"):
                contrast = scene[f"attribute_{side}_contrast"]
                vocab.add(name, [contrast], kind=kind)
                contrasts.setdefault(vocab.synonyms.object_name(name), []).append(contrast.lower())
        names = [o.name for o in truth.objects]
        image = safe_join(release_dir, str(row["image"]))
        if not image.exists():
            raise InputError(f"{release_dir}: image {row['image']!r} of {row['image_id']!r} not found")
        out.append(
            Scene(
                image_id=str(row["image_id"]),
                image_path=str(image),
                image_sha256=sha256_file(image),
                truth=truth,
                neighbours=neighbours_of(edges, names, set(names) | seen.get(str(row["image_id"]), set())),
                popular=popular_of(edges, set(names) | seen.get(str(row["image_id"]), set())),
                contrasts=contrasts,
                scene_id=str(row["scene_id"]),
                distribution=scene.get("distribution"),
                pair_kind=scene.get("pair_kind"),
            )
        )
    return out


SOURCES = ("ode", "visual_genome", "coco")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def annotation_graphs(source: str, path: str | Path) -> tuple[dict[str, SceneGraph], dict[str, str]]:
    """Truth graphs of a Visual Genome scene_graphs.json (a list of image entries) or a COCO instances JSON, by image
    id, and the image file name each annotation names (COCO `file_name`, VG `file_name` or `url`), if any."""
    path = Path(path)
    data = read_json(path)
    files: dict[str, str] = {}
    if source == "visual_genome":
        entries = data if isinstance(data, list) else None
        if entries is None:
            raise InputError(f"{path}: a Visual Genome scene_graphs.json is a JSON array of image entries")
        graphs = {}
        for i, entry in enumerate(entries):
            if not isinstance(entry, Mapping) or "image_id" not in entry:
                raise InputError(f"{path}: entry {i}: image_id missing")
            key = str(entry["image_id"])
            graphs[key] = visual_genome_scene_graph(entry, source=f"{path} [image {key}]")
            name = entry.get("file_name") or str(entry.get("url") or "").rsplit("/", 1)[-1]
            if name:
                files[key] = name
        return graphs, files
    graphs = coco_scene_graphs(data, source=str(path))
    for img in data["images"]:
        if isinstance(img, Mapping) and img.get("file_name"):
            files[str(img["id"])] = str(img["file_name"])
    return graphs, files


def cooccurrence_neighbours(graphs: Mapping[str, SceneGraph], synonyms: Synonyms) -> dict[str, dict[str, int]]:
    """name → {other name: images showing both}: the annotation file's own co-occurrence graph, which stands in for
    ODE's concept graph when choosing plausible absent objects."""
    counts: dict[str, dict[str, int]] = {}
    for g in graphs.values():
        names = sorted(g.names(synonyms))
        for a in names:
            row = counts.setdefault(a, {})
            for b in names:
                if a != b:
                    row[b] = row.get(b, 0) + 1
    return counts


def build_annotation_scenes(
    source: str, scene_graphs: str | Path, images_dir: str | Path, n_images: int, seed: int, vocab: Vocabulary
) -> list[Scene]:
    graphs, files = annotation_graphs(source, scene_graphs)
    syn = vocab.synonyms
    co = cooccurrence_neighbours(graphs, syn)
    frequency: dict[str, int] = {}  # images showing each object: POPE's "popular" ranking over the same file
    for g in graphs.values():
        for name in g.names(syn):
            frequency[name] = frequency.get(name, 0) + 1
    ranked = sorted(frequency, key=lambda o: (-frequency[o], o))
    images_dir = Path(images_dir)
    if not images_dir.is_dir():
        raise InputError(f"config key 'cedi.images_dir': {images_dir} is not a folder")
    candidates = sorted(
        (k for k, g in graphs.items() if g.objects), key=lambda k: stable_hash(["cedi-images", seed, k])
    )
    out = []
    for image_id in candidates[:n_images]:
        # one node per object name: the examiner asks about names, and the rule parser predicts names
        truth = graphs[image_id].merged_by_name(syn)
        vocab.add_graph(truth)
        names = [o.name for o in truth.objects]
        best: dict[str, int] = {}
        for name in names:
            for other, w in co.get(name, {}).items():
                if other not in names:
                    best[other] = max(best.get(other, 0), w)
        neighbours = sorted(best, key=lambda o: (-best[o], o))
        popular = [o for o in ranked if o not in names][:50]
        for other in neighbours + popular:
            vocab.add(other)
        image = _image_file(images_dir, image_id, files.get(image_id))
        out.append(
            Scene(
                image_id=image_id,
                image_path=str(image),
                image_sha256=sha256_file(image),
                truth=truth,
                neighbours=neighbours,
                popular=popular,
                scene_id=image_id,
                distribution=source,
            )
        )
    if not out:
        raise InputError(f"{scene_graphs}: no image with at least one object")
    return out


def _image_file(images_dir: Path, image_id: str, file_name: str | None) -> Path:
    names = ([file_name] if file_name else []) + [image_id + s for s in IMAGE_SUFFIXES]
    for name in names:
        path = safe_join(images_dir, name)
        if path.exists():
            return path
    raise InputError(
        f"config key 'cedi.images_dir': no image for {image_id!r} in {images_dir} (looked for {', '.join(names)})"
    )


def annotation_source(settings: Mapping[str, Any] | Cedi) -> str:
    settings = Cedi.from_dict(settings)
    source = settings.source
    if source not in SOURCES:
        raise ConfigError(f"config key 'cedi.source': {source!r} is not one of {', '.join(SOURCES)}")
    if source != "ode":
        for key in ("scene_graphs", "images_dir"):
            if not getattr(settings, key):
                raise ConfigError(f"config key 'cedi.{key}': required when cedi.source is {source}")
    return source


def vocabulary(graph_dir: str | Path, synonyms: Synonyms) -> Vocabulary:
    nodes = read_table(Path(graph_dir) / "nodes.parquet", ["node"])
    return Vocabulary.from_nodes(nodes.iter_rows(named=True), synonyms)


def examine_model(
    config: Mapping[str, Any],
    model_spec: Mapping[str, Any],
    release_dir: str | Path | None,
    graph_dir: str | Path | None,
    out_transcripts: str | Path,
    out_truth: str | Path,
    vlm=None,
    models_cache: str | Path = MODELS_CACHE,
    accepted: str | Path | None = None,
    requests_cache: str | Path | None = None,
) -> int:
    """Run every configured examiner and history mode for one model; returns the number of turns written.
    release_dir / graph_dir / accepted are read only for `cedi.source: ode`. `requests_cache`: the run's request
    cache root (the evaluatee asks through its `models:` entry's folder, the answer stage's; the LLM through its
    block's); None: no cache."""
    import polars as pl

    s = settings_of(config)  # the section as given, for the examiner
    cedi = Cedi.from_dict(s)  # completed with the schema's defaults
    syn = synonyms_of(cedi)
    source = annotation_source(cedi)
    if source == "ode":
        vocab = vocabulary(graph_dir, syn)
        scenes = build_scenes(release_dir, graph_dir, cedi.images, int(config.get("seed", 0)), vocab, accepted=accepted)
    else:
        graph_dir = None  # no concept graph: a `prior` evaluatee needs one and says so
        vocab = Vocabulary(synonyms=syn)
        scenes = build_annotation_scenes(
            source, cedi.scene_graphs, cedi.images_dir, cedi.images, int(config.get("seed", 0)), vocab
        )
    llm = llm_of(config, s, "llm" in (cedi.question_writer, cedi.switch), requests_cache)
    vlm = (
        vlm
        if vlm is not None
        else Model.under_test(
            model_spec,
            graph_dir=graph_dir,
            models_cache=models_cache,
            config=GenerateConfig(max_new_tokens=cedi.max_new_tokens),
            method="cedi",
            cache=cache_folder(requests_cache, model_spec),
        )
    )
    info = vlm.describe()
    examiner = Examiner(vocab, s, llm=llm, seed=int(config.get("seed", 0)))
    rows = examiner.run(
        scenes,
        vlm,
        model_spec["name"],
        list(cedi.examiners),
        list(cedi.history),
        stand_in=bool(info.stand_in),
    )
    write_parquet(out_transcripts, pl.DataFrame(rows, schema=polars_schema(TRANSCRIPT_SCHEMA), orient="row"))
    write_json(
        out_truth,
        {
            "model": info.as_dict(),
            "source": source,
            "graphs": {
                sc.image_id: {**sc.truth.to_dict(), "neighbours": sc.neighbours, "popular": sc.popular[:20]}
                for sc in scenes
            },
        },
    )
    log.info("cedi: %d turns over %d images for %s", len(rows), len(scenes), model_spec["name"])
    return len(rows)


def load_truth_graphs(path: str | Path) -> tuple[dict[str, SceneGraph], dict, dict[str, list[str]]]:
    """(truth graph by image id, the evaluatee's description, absent neighbours asked about by image id)."""
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("graphs"), dict):
        raise InputError(f"{path}: expected {{'graphs': {{image_id: scene graph}}}}")
    graphs, neighbours = {}, {}
    for image_id, g in data["graphs"].items():
        neighbours[image_id] = (
            [str(n) for n in (g.get("neighbours") or []) + (g.get("popular") or [])] if isinstance(g, dict) else []
        )
        g = {k: v for k, v in g.items() if k not in ("neighbours", "popular")} if isinstance(g, dict) else g
        graphs[image_id] = SceneGraph.from_dict(g, source=f"{path} [{image_id}]")
    return graphs, data.get("model", {}), neighbours


def vocab_from_questions(turns: Sequence[Mapping[str, Any]], vocab: Vocabulary) -> None:
    """Objects and attributes the examiner's questions named (an LLM-written absent object or false premise may lie
    outside the concept graph): the grader's parser must recognise them in the answers."""
    for t in turns:
        for el in list(t.get("premise") or []) + ([t["probe"]] if t.get("probe") else []):
            parts = split_el(el)
            vocab.add(parts[1], [parts[2]] if parts[0] == "attribute" else [])
            if parts[0] == "relation":
                vocab.add(parts[3])


def grade_model(
    config: Mapping[str, Any],
    transcripts: str | Path,
    truth_graphs: str | Path,
    graph_dir: str | Path | None,
    out_grades: str | Path,
    out_per_turn: str | Path,
    out_pred: str | Path,
    requests_cache: str | Path | None = None,
) -> dict:
    """Grade one model's transcripts against the truth graphs; `requests_cache` as for examine_model (the parser's
    and VALOR extractor's LLM)."""
    import polars as pl

    from .grader import PER_TURN_SCHEMA, grade_transcripts

    s = settings_of(config)  # the section as given, for the grader and the comparison
    cedi = Cedi.from_dict(s)  # completed with the schema's defaults
    syn = synonyms_of(cedi)
    # the vocabulary the examiner used: the concept graph (ODE) or the truth graphs and the absent objects asked about
    vocab = vocabulary(graph_dir, syn) if annotation_source(cedi) == "ode" else Vocabulary(synonyms=syn)
    truths, model_info, neighbours = load_truth_graphs(truth_graphs)
    for g in truths.values():
        vocab.add_graph(g)
    for names in neighbours.values():
        for name in names:
            vocab.add(name)
    turns = read_table(transcripts, ["conversation_id", "image_id", "turn", "answer", "premise", "probe"]).to_dicts()
    vocab_from_questions(turns, vocab)
    graders = graders_of(s)
    valor_llm = "valor" in graders and cedi.valor_extractor == "llm"
    llm = llm_of(config, s, cedi.parser == "llm" or valor_llm, requests_cache)
    instances, why = ged_instances_of(cedi)
    grades, per_turn, preds = grade_transcripts(
        turns,
        truths,
        vocab,
        {**s, "ged_instances": instances, "ged_instances_rule": why},
        llm=llm if cedi.parser == "llm" else None,
    )
    grades["model"] = model_info
    llm_info = llm.describe().as_dict() if llm is not None else None
    comparison, described, valor_fb = compare_graders(
        turns, truths, vocab, grades["summary"], s, llm=llm if valor_llm else None, llm_info=llm_info
    )
    grades["comparison"] = comparison
    grades["graders"] = {"graders": graders, "described": described, "llm": llm_info}
    if "valor" in graders:
        grades["fallbacks"]["valor_extractor"] = valor_fb
    write_parquet(out_per_turn, pl.DataFrame(per_turn, schema=polars_schema(PER_TURN_SCHEMA), orient="row"))
    write_json(out_pred, preds)
    write_json(out_grades, grades)
    return grades
