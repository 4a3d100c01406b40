"""Turn other benchmarks' items into UniHall instances ("Unified Hallucination Fuzzing for Multimodal Large
Language Models", Appendix B.1 schema, B.2 taxonomy).

Sources: ODE release queries (our own queries.parquet: existence, count, attribute), POPE label files (existence),
AMBER's annotations + queries (existence, attribute, relation) and a plain item table for any category, knowledge
items with their evidence passages included. ODE/POPE/AMBER give yes/no items (UniHall's YON needs a truth and a
negative; generative captions have neither); the table gives YON or free-form VQA items. Risk levels come from the
taxonomy (taxonomy.RISK_LEVELS) unless the source or the caller fixes one.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..errors import InputError
from ..io import read_jsonl, stable_hash
from .schema import validate_instance
from .taxonomy import QUESTION_TYPES, group_key, make_instance_id
from .taxonomy import risk_level as taxonomy_risk

# ODE query_type (+ attribute_kind) -> (category, subtype, subsubtype). A counterfactual query asks about an object
# that never co-occurs with the scene (an existence probe) or, with an attribute_kind, about an attribute the object
# never has (an attribute probe). ODE's "action" attributes are a status (B.2 "state").
ODE_MAPPING = {
    "existence": ("object", "existence", ""),
    "counterfactual": ("object", "existence", ""),
    ("counterfactual", "state"): ("object", "attribute", "state"),
    ("counterfactual", "action"): ("object", "attribute", "state"),
    "count": ("object", "attribute", "number"),
    ("attribute", "state"): ("object", "attribute", "state"),
    ("attribute", "action"): ("object", "attribute", "state"),
    ("attribute", None): ("object", "attribute", "state"),
}
AMBER_MAPPING = {
    "discriminative-hallucination": ("object", "existence", ""),
    "discriminative-attribute-state": ("object", "attribute", "state"),
    "discriminative-attribute-number": ("object", "attribute", "number"),
    "discriminative-attribute-action": ("object", "attribute", "state"),
    "discriminative-relation": ("object", "relation", ""),
    "relation": ("object", "relation", ""),
}
ODE_QUERY_TYPES = ("existence", "counterfactual", "count", "attribute")


def _yes_no(value, where: str) -> str:
    v = str(value).strip().lower()
    if v not in ("yes", "no"):
        raise InputError(f"{where}: truth {value!r} is not yes/no")
    return "Yes" if v == "yes" else "No"


def ode_mapping(query_type: str, attribute_kind: str | None = None) -> tuple[str, str, str]:
    if query_type == "attribute":
        return ODE_MAPPING.get(("attribute", attribute_kind), ODE_MAPPING[("attribute", None)])
    if query_type == "counterfactual" and attribute_kind in ("state", "action"):
        return ODE_MAPPING[("counterfactual", attribute_kind)]
    if query_type not in ODE_MAPPING:
        raise InputError(f"ODE query_type {query_type!r} has no UniHall mapping; known: {', '.join(ODE_QUERY_TYPES)}")
    return ODE_MAPPING[query_type]


def ode_groups(query_types: Sequence[str]) -> list[str]:
    """The (subtype, YON) groups the given ODE query types produce; known from config alone (static DAG)."""
    kinds = (None, "state")  # counterfactual queries land in both groups, depending on their attribute_kind
    return sorted({group_key(ode_mapping(q, k)[1], "YON") for q in query_types for k in kinds})


class _Serials:
    def __init__(self):
        self.next: dict[tuple[str, str], int] = defaultdict(int)

    def __call__(self, category: str, subtype: str) -> str:
        self.next[(category, subtype)] += 1
        return make_instance_id(category, subtype, self.next[(category, subtype)])


def _risk(mapping: tuple[str, str, str], risk) -> int:
    """risk: an int fixes it; None / "taxonomy" / a dict of overrides take the taxonomy's level for the item."""
    if isinstance(risk, bool):
        raise InputError(f"risk level {risk!r} is not 1..5 or 'taxonomy'")
    if isinstance(risk, int):
        return risk
    if risk is None or risk == "taxonomy" or isinstance(risk, dict):
        return taxonomy_risk(*mapping, overrides=risk if isinstance(risk, dict) else None)
    raise InputError(f"risk level {risk!r} is not 1..5 or 'taxonomy'")


def _instance(iid, mapping, risk, source, image, question, truth, visual_facts=None) -> dict:
    category, subtype, subsub = mapping
    inst = {
        "instance_id": iid,
        "meta_inf": {
            "category": category,
            "subtype": subtype,
            "subsubtype": subsub,
            "risk_level": _risk(mapping, risk),
        },
        "source_inf": source,
        "seed_data": {
            "type": "YON",
            "image_path": image,
            "question": question,
            "ground_truth": truth,
            "expected_other_answers": [],
            "negative_answers": ["No" if truth == "Yes" else "Yes"],
        },
    }
    if visual_facts:
        inst["visual_facts"] = visual_facts
    return validate_instance(inst)


def balanced_take(rows: list[dict], key, limit: int | None, seed: int) -> list[dict]:
    """Round-robin over `key` groups (each shuffled with the seed) so a small sample covers every group."""
    if limit is None or limit >= len(rows):
        return rows
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    queues = []
    for name in sorted(groups):
        rng = np.random.default_rng(int(stable_hash(["samf-take", seed, name])[:16], 16))
        queues.append([groups[name][int(i)] for i in rng.permutation(len(groups[name]))])
    out: list[dict] = []
    while len(out) < limit:
        for q in queues:
            if q and len(out) < limit:
                out.append(q.pop(0))
    return out


def from_ode_queries(
    queries: Iterable[dict],
    release: str,
    query_types: Sequence[str] = ODE_QUERY_TYPES,
    risk_level="taxonomy",
    limit: int | None = None,
    seed: int = 0,
) -> list[dict]:
    """ODE release queries (rows of queries.parquet) -> UniHall YON instances; image paths stay release-relative.

    The scene's truth objects become `visual_facts` (BHR's V evidence set)."""
    for q in query_types:
        ode_mapping(q)
    rows = sorted(
        (r for r in queries if r.get("task") == "discriminative" and r.get("query_type") in query_types),
        key=lambda r: str(r["query_id"]),
    )
    rows = sorted(balanced_take(rows, lambda r: r["query_type"], limit, seed), key=lambda r: str(r["query_id"]))
    serial, out = _Serials(), []
    for r in rows:
        mapping = ode_mapping(r["query_type"], r.get("attribute_kind"))
        where = f"ODE query {r['query_id']}"
        source = {
            "source_dataset": f"ODE:{release}",
            "source_id": str(r["query_id"]),
            "image_id": str(r.get("image_id")),
            "query_type": r["query_type"],
            "distribution": r.get("distribution"),
        }
        facts = [f"There is a {o} in the image." for o in (r.get("objects") or [])]
        out.append(
            _instance(
                serial(*mapping[:2]),
                mapping,
                risk_level,
                source,
                r["image"],
                r["question"],
                _yes_no(r["truth"], where),
                facts,
            )
        )
    return out


def from_pope(labels_path: str | Path, risk_level="taxonomy", limit: int | None = None, seed: int = 0) -> list[dict]:
    """POPE label file (JSONL or JSON array of {question_id, image, text, label}) -> object/existence instances."""
    from ..metrics.formats import read_pope_labels

    labels = read_pope_labels(labels_path)
    rows = [
        {"question_id": r["question_id"], "image": r["image"], "text": r["text"], "label": r["truth"]}
        for r in labels.iter_rows(named=True)
    ]
    for i, r in enumerate(rows, 1):
        missing = [k for k in ("image", "text") if r[k] is None]
        if missing:
            raise InputError(f"{labels_path}: item #{i} lacks {', '.join(missing)}")
    rows = balanced_take(rows, lambda r: str(r["label"]), limit, seed)
    rows = sorted(
        rows, key=lambda r: int(r["question_id"]) if str(r["question_id"]).isdigit() else str(r["question_id"])
    )
    serial, name = _Serials(), Path(labels_path).stem
    return [
        _instance(
            serial("object", "existence"),
            ("object", "existence", ""),
            risk_level,
            {"source_dataset": f"POPE:{name}", "source_id": str(r["question_id"])},
            r["image"],
            r["text"],
            _yes_no(r["label"], f"{labels_path}: question {r['question_id']}"),
        )
        for r in rows
    ]


def from_amber(
    annotations_path: str | Path,
    queries_path: str | Path,
    risk_level="taxonomy",
    limit: int | None = None,
    seed: int = 0,
) -> list[dict]:
    """AMBER discriminative items (annotations.json types + query file) -> existence/attribute/relation instances."""
    from ..metrics.formats import read_amber_annotations, read_amber_queries

    annotations = read_amber_annotations(annotations_path, indexed=False)
    queries = read_amber_queries(queries_path)
    by_id = {a["id"]: a for a in annotations}
    rows = []
    for q in queries:
        ann = by_id.get(int(q["id"]))
        if ann is None:
            raise InputError(f"{queries_path}: query id {q['id']} has no annotation in {annotations_path}")
        if ann["type"] in AMBER_MAPPING:
            rows.append({**q, "type": ann["type"], "truth": ann["truth"]})
    rows = sorted(balanced_take(rows, lambda r: r["type"], limit, seed), key=lambda r: int(r["id"]))
    serial = _Serials()
    out = []
    for r in rows:
        mapping = AMBER_MAPPING[r["type"]]
        out.append(
            _instance(
                serial(*mapping[:2]),
                mapping,
                risk_level,
                {"source_dataset": "AMBER", "source_id": str(r["id"])},
                r["image"],
                r["query"],
                _yes_no(r["truth"], f"AMBER id {r['id']}"),
            )
        )
    return out


TABLE_FIELDS = ("id", "image", "question", "answer", "category", "subtype")


def _str_list(row: dict, key: str, where: str) -> list[str]:
    value = row.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where}: field {key!r} must be a list of strings")
    return value


def from_table(path: str | Path, risk_level="taxonomy", limit: int | None = None, seed: int = 0) -> list[dict]:
    """Items of any UniHall category from JSONL / a JSON array of
    {id, image, question, answer, category, subtype[, subsubtype, type, other_answers, negatives, evidence,
    visual_facts, risk, source]}: object attribute/relation items, instruction items, and knowledge items whose
    `evidence` passages become E of BHR's evidence sets. `type` defaults to YON for a yes/no answer, else VQA;
    a row's own `risk` wins over `risk_level`."""
    rows = read_jsonl(path)
    for i, r in enumerate(rows, 1):
        missing = [k for k in TABLE_FIELDS if k not in r]
        if missing:
            raise InputError(f"{path}: item #{i} lacks {', '.join(missing)}")
    rows = balanced_take(rows, lambda r: f"{r['category']}/{r['subtype']}", limit, seed)
    rows = sorted(rows, key=lambda r: str(r["id"]))
    serial, name, out = _Serials(), Path(path).stem, []
    for r in rows:
        where = f"{path}: item {r['id']}"
        answer = str(r["answer"]).strip()
        qtype = r.get("type") or ("YON" if answer.lower() in ("yes", "no") else "VQA")
        if qtype not in QUESTION_TYPES:
            raise InputError(f"{where}: field 'type' is {qtype!r}; known: {', '.join(QUESTION_TYPES)}")
        mapping = (str(r["category"]), str(r["subtype"]), str(r.get("subsubtype") or ""))
        try:
            iid = serial(*mapping[:2])
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        truth = _yes_no(answer, where) if qtype == "YON" else answer
        negatives = _str_list(r, "negatives", where)
        if qtype == "YON" and not negatives:
            negatives = ["No" if truth == "Yes" else "Yes"]
        inst = {
            "instance_id": iid,
            "meta_inf": {
                "category": mapping[0],
                "subtype": mapping[1],
                "subsubtype": mapping[2],
                "risk_level": _risk(mapping, r.get("risk", risk_level)),
            },
            "source_inf": {"source_dataset": str(r.get("source") or name), "source_id": str(r["id"])},
            "seed_data": {
                "type": qtype,
                "image_path": str(r["image"]),
                "question": str(r["question"]),
                "ground_truth": truth,
                "expected_other_answers": _str_list(r, "other_answers", where),
                "negative_answers": negatives,
            },
        }
        for key in ("evidence", "visual_facts"):
            if r.get(key):
                inst[key] = _str_list(r, key, where)
        try:
            out.append(validate_instance(inst))
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
    return out


def convert_items(
    source: str,
    input_path: str,
    *,
    queries: str | None = None,
    release: str | None = None,
    risk: int | str = "taxonomy",
    limit: int | None = None,
    seed: int = 0,
) -> list[dict]:
    """UniHall instances of one input (what `halluflow fuzz export` writes): `source` is ode (queries.parquet;
    `release` names it, default its folder), pope (a label file), amber (annotations.json + `queries`) or table."""
    if source == "ode":
        import polars as pl

        path = Path(input_path)
        if not path.exists():
            raise InputError(f"--input {path}: file not found")
        try:
            table = pl.read_parquet(path)
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise InputError(
                f"--input {path}: not a readable parquet file ({str(exc).splitlines()[0][:120]})"
            ) from None
        return from_ode_queries(table.to_dicts(), release or path.parent.name, risk_level=risk, limit=limit, seed=seed)
    if source == "table":
        return from_table(input_path, risk, limit, seed)
    if source == "pope":
        return from_pope(input_path, risk, limit, seed)
    if not queries:
        raise InputError("--queries: AMBER needs its query file besides annotations.json")
    return from_amber(input_path, queries, risk, limit, seed)
