"""The metric catalogue: every number the scorers write has exactly one entry (checked on real scorer outputs),
locations are followed exactly (no guessing), out-of-range values are errors, and docs/metrics.md is current."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from helpers import REPO as ROOT

from halluflow.cli import main
from halluflow.errors import InputError
from halluflow.metrics.catalogue import CATALOGUE, entry_for_path, markdown

# Lists of rows and the keys that name one row (the catalogue's `list[key=value]` steps).
ROW_KEYS = {"rows": ("group",), "comparisons": ("a", "b"), "sequential": ("position",)}


def _leaves(doc, document: str, prefix: str = ""):
    """(path, value) of every number in a scorer's output, stopping at interval objects the catalogue names."""
    if isinstance(doc, dict):
        entry = entry_for_path(prefix, document) if prefix else None
        if entry is not None and entry.shape == "interval":
            yield prefix, doc
            return
        for key, value in doc.items():
            yield from _leaves(value, document, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(doc, list) and prefix.split(".")[-1] in ROW_KEYS:
        for row in doc:
            sel = ",".join(f"{k}={row[k]}" for k in ROW_KEYS[prefix.split(".")[-1]])
            # the keys that name the row are its name, not a reported number
            named = ROW_KEYS[prefix.split(".")[-1]]
            yield from _leaves({k: v for k, v in row.items() if k not in named}, document, f"{prefix}[{sel}]")
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield prefix, doc


def _assert_catalogued(doc, document: str) -> int:
    """Every number has an entry (whose location matches its path) and lies in that entry's range."""
    n = 0
    for path, value in _leaves(doc, document):
        entry = entry_for_path(path, document)
        assert entry is not None, f"{document}: {path} = {value!r} has no catalogue entry"
        numbers = [value[k] for k in ("value", "ci_low", "ci_high")] if entry.shape == "interval" else [value]
        for x in numbers:
            assert x is None or entry.in_range(x), (path, x, entry.range_text)
        n += 1
    return n


def _ode_scored():
    from halluflow.ode.scoring import score_answers

    rows = [
        ("q01", "standard", "entity_entity", "discriminative", "existence", None, "yes", ["dog", "cat"], "Yes."),
        ("q02", "standard", "entity_entity", "discriminative", "existence", None, "no", ["dog", "cat"], "No"),
        ("q03", "fictional", "entity_environment", "discriminative", "counterfactual", None, "no", ["bear"], "yes"),
        ("q04", "fictional", "entity_environment", "discriminative", "attribute", "state", "yes", ["bear"], "No."),
        ("q05", "long_tail", "entity_entity", "discriminative", "attribute", "action", "no", ["cup"], "maybe"),
        ("q06", "long_tail", "entity_entity", "discriminative", "count", None, "yes", ["cup"], ""),
        ("q07", "random", "entity_entity", "generative", "generative", None, None, ["dog", "cat"], "A dog and a kite."),
        ("q08", "random", "entity_entity", "generative", "generative", None, None, ["cup"], "A cup."),
    ]
    keys = ("query_id", "distribution", "pair_kind", "task", "query_type", "attribute_kind", "truth", "objects")
    queries = pl.DataFrame([dict(zip(keys, r[:8])) for r in rows], schema_overrides={"attribute_kind": pl.String})
    answers = pl.DataFrame(
        {"query_id": [r[0] for r in rows], "model": "m", "answer": [r[8] for r in rows], "status": "ok"}
    )
    return score_answers(queries, answers, ["dog", "cat", "kite", "cup", "bear"])


def test_every_number_of_the_ode_metrics_json_is_catalogued():
    from halluflow.ode.scoring import ode_metrics

    doc = ode_metrics(_ode_scored(), "m")
    assert _assert_catalogued(doc, "metrics") > 150  # breakdowns, POPE counts, AMBER sections, CHAIR-like
    # the headline location, read exactly: POPE block over the yes/no answers (q06 failed: left out)
    assert CATALOGUE.read(doc, "pope.n") == 5 and CATALOGUE.read(doc, "n_failed") == 1
    assert CATALOGUE.read(doc, "by.pope.accuracy", breakdown="distribution", group="standard") == 1.0


def test_every_number_of_pope_chair_samf_and_compare_outputs_is_catalogued():
    from halluflow.metrics.chair import score_captions
    from halluflow.metrics.pope import pope_metrics
    from halluflow.metrics.uncertainty import compare_models
    from halluflow.samf.pipeline import compare as samf_compare

    pope = pope_metrics(["yes", "no", "", "sure", "Nein"], ["yes", "no", "no", "yes", "no"])
    # 16 numbers and counts, n_default_rule and its one reason ("Nein" read as yes by POPE's default rule)
    assert pope["default_rule_reasons"] == {"non_english": 1}
    assert _assert_catalogued({"pope": pope}, "metrics") == 18
    captions = pl.DataFrame(
        {"image_id": ["1", "2", "3"], "caption": ["A dog on a sofa.", "A cat.", ""], "failed": [False, False, True]}
    )
    chair, _ = score_captions(captions, {"1": ["dog"], "2": ["cat"]}, {"dog": "dog", "sofa": "couch", "cat": "cat"})
    assert _assert_catalogued({"chair": chair}, "metrics") == 7

    def evals(ghr):
        return pl.DataFrame(
            {"group": ["existence", "attribute"], "split": "test", "ghr": ghr, "risk_level": [1, 3], "policy": "p"}
        )

    table = samf_compare(evals([0.0, 1.0]), evals([1.0, 1.0]))
    assert _assert_catalogued({"rows": table.to_dicts()}, "samf") > 40
    rng = np.random.default_rng(0)
    truth = rng.choice(["yes", "no"], 40).tolist()  # both models answer the same queries (score compare pairs them)
    scores = {
        m: pl.DataFrame(
            {
                "query_id": [f"q{i}" for i in range(40)],
                "truth": truth,
                "parsed": rng.choice(["yes", "no"], 40).tolist(),
                "hallucinated": rng.random(40) < 0.3,
            }
        )
        for m in ("a", "b")
    }
    out = compare_models(scores, n_resamples=50)
    assert _assert_catalogued({k: out[k] for k in ("models", "comparisons")}, "compare") == 2 * (6 + 4) + 6 * 7


def test_locations_are_followed_exactly():
    doc = {
        "pope": {"f1": None},
        "amber": {"action": {"f1": 66.7}},
        "by_generator": {"FLUX.1-dev": {"pope": {"f1": 0.5}}},
        "rows": [{"group": "overall", "ghr_standard": 0.25}, {"group": "existence", "ghr_standard": 0.5}],
    }
    # null is n/a, never the next key named f1; an absent block is n/a too
    assert CATALOGUE.read(doc, "pope.f1") is None and CATALOGUE.present(doc, "pope.f1")
    assert CATALOGUE.read({}, "pope.f1") is None and not CATALOGUE.present({}, "pope.f1")
    assert CATALOGUE.read(doc, "amber.action.f1") == 66.7
    # a group name with a dot stays one step
    assert CATALOGUE.read(doc, "by.pope.f1", breakdown="generator", group="FLUX.1-dev") == 0.5
    assert CATALOGUE.read(doc, "samf.ghr_standard", group="existence") == 0.5
    with pytest.raises(InputError, match="unknown metric 'f1'"):
        CATALOGUE.read(doc, "f1")
    with pytest.raises(InputError, match="needs group"):
        CATALOGUE.read(doc, "samf.ghr_standard")
    doc["rows"].append({"group": "overall", "ghr_standard": 0.3})
    with pytest.raises(InputError, match=r"2 rows match \[group=overall\]"):
        CATALOGUE.read(doc, "samf.ghr_standard", "x.json", group="overall")
    with pytest.raises(InputError, match=r"x.json: amber.action.f1: 166.7 is outside the range \[0, 100\]"):
        CATALOGUE.read({"amber": {"action": {"f1": 166.7}}}, "amber.action.f1", "x.json")


def test_entries_are_complete_and_consistent():
    for e in CATALOGUE:
        assert e.definition and e.reference and e.failed and e.label, e.name
        assert e.better in ("higher", "lower", None), e.name
        if e.unit == "percent":
            assert (e.low, e.high) == (0, 100), e.name
        if e.unit == "count":
            assert e.better is None and e.low == 0, e.name
    assert CATALOGUE["pope.f1"].better == "higher" and CATALOGUE["chair.chair_s"].better == "lower"
    assert CATALOGUE["amber.generative.cover"].better == "higher" and CATALOGUE["cedi.ged"].high is None


def test_docs_metrics_md_is_generated_from_the_catalogue(tmp_path, capsys):
    assert (ROOT / "docs/metrics.md").read_text(encoding="utf-8") == markdown()
    assert main(["docs", "metrics", "--check", str(ROOT / "docs/metrics.md")]) == 0
    stale = tmp_path / "metrics.md"
    stale.write_text(markdown().replace("POPE F1", "F1"), encoding="utf-8")
    assert main(["docs", "metrics", "--check", str(stale)]) == 1
    assert "out of date with the metric catalogue" in capsys.readouterr().err
    assert main(["docs", "metrics", "--out", str(tmp_path / "new.md")]) == 0
    assert (tmp_path / "new.md").read_text(encoding="utf-8") == markdown()


def test_every_number_of_the_caos_summary_is_catalogued():
    from halluflow.caos.extract import ExtractedObject, build_vocabulary
    from halluflow.caos.scores import judge_caption, metrics_side_by_side, score
    from halluflow.models import registry

    vectors = {"dog": [1, 0, 0], "cat": [0, 1, 0], "car": [0, 0, 1], "frisbee": [1, 1, 0]}
    embedder = registry.create("embedder", {"backend": "table", "vectors": vectors})
    vocab = build_vocabulary(extra_terms=sorted(vectors), synonyms=False)

    def caption(cid, names, truth):
        objects = [ExtractedObject(n, n, i, "given", n in vocab) for i, n in enumerate(names)]
        return judge_caption(cid, cid, objects, truth, vocab)

    caps = [caption("a", ["dog", "cat", "frisbee"], ["dog"]), caption("b", ["car"], ["car", "dog"])]
    summary, _ = score(caps, ["car", "dog", "cat"], {"t": embedder}, k=2)
    summary["metrics"] = metrics_side_by_side({"pope": {"f1": 0.5}, "generative": {"chair_s": 0.25}})
    summary.update(n_generative_queries=2, n_answers_failed=0, n_answers_missing=0)
    assert _assert_catalogued(summary, "caos") > 40
    assert CATALOGUE.read(summary, "caos.caos_t", embedder="t") == summary["embedders"]["t"]["caos_t"]
