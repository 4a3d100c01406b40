"""ODE diagnosis: concept × hallucination-rate matrix by hand, clustering, heatmap and per-distribution tables."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from halluflow.errors import ConfigError, InputError
from halluflow.ode.diagnosis import cluster_rows, diagnose, discriminative_events, generative_events, run_diagnosis


def _queries():
    return pl.DataFrame(
        {
            "query_id": ["g1", "g2", "e1", "e2", "e3", "a1", "a2", "c1"],
            "image_id": ["i1", "i2", "i1", "i1", "i2", "i1", "i2", "i2"],
            "distribution": [
                "standard",
                "fictional",
                "standard",
                "standard",
                "fictional",
                "standard",
                "fictional",
                "fictional",
            ],
            "query_type": [
                "generative",
                "generative",
                "existence",
                "existence",
                "existence",
                "attribute",
                "attribute",
                "counterfactual",
            ],
            "attribute_kind": [None, None, None, None, None, "state", "action", None],
            "truth": [None, None, "yes", "no", "yes", "yes", "no", "no"],
            "target": [None, None, "dog", "cat", "cow", "dog", "cow", "unicorn"],
            "objects": [
                ["dog", "sofa"],
                ["cow", "beach"],
                ["dog", "sofa"],
                ["dog", "sofa"],
                ["cow", "beach"],
                ["dog", "sofa"],
                ["cow", "beach"],
                ["cow", "beach"],
            ],
        }
    )


def _answers():
    return pl.DataFrame(
        {
            "query_id": ["g1", "g2", "e1", "e2", "e3", "a1", "a2", "c1"],
            "answer": ["A dog on a sofa.", "A cow.", "Yes.", "Yes, a cat.", "No", "yes", "maybe", "Yes"],
            "status": ["ok"] * 8,
        }
    )


def _captions():
    # g1: no hallucination; g2: one hallucinated object
    return pl.DataFrame({"caption_id": ["g1", "g2"], "n_hallucinated": [0, 1]})


def test_events_from_answers_by_hand():
    events, source = discriminative_events(_queries(), _answers())
    assert source == "answers"
    got = {r["query_id"]: (r["concept"], r["dimension"], r["hallucinated"]) for r in events.to_dicts()}
    assert got == {
        "e1": ("dog", "existence", False),
        "e2": ("cat", "existence", True),  # said yes to an absent cat
        "e3": ("cow", "existence", True),  # said no to a present cow
        "a1": ("dog", "attribute:state", False),
        "c1": ("unicorn", "counterfactual", True),
        # a2 ("maybe") does not parse: left out rather than counted either way
    }
    gen = generative_events(_queries(), _captions())
    assert sorted(gen.select("concept", "hallucinated").rows()) == [
        ("beach", True),
        ("cow", True),
        ("dog", False),
        ("sofa", False),
    ]


def test_scores_table_is_preferred_over_parsing():
    scores = pl.DataFrame({"query_id": ["e1", "e2", "a2"], "correct": [False, True, True]})
    events, source = discriminative_events(_queries(), _answers(), scores)
    assert source == "scores"
    assert dict(events.select("query_id", "hallucinated").rows()) == {"e1": True, "e2": False, "a2": False}


def test_diagnose_matrix_rates_and_clusters():
    events = pl.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(8)],
            "concept": ["dog", "dog", "cat", "cat", "cow", "cow", "cow", "cow"],
            "dimension": [
                "existence",
                "generative",
                "existence",
                "generative",
                "existence",
                "existence",
                "generative",
                "generative",
            ],
            "distribution": ["standard"] * 8,
            "hallucinated": [True, False, True, False, False, False, True, True],
        }
    )
    tidy, matrix, rows, dims = diagnose(events, linkage="average", metric="euclidean", n_clusters=2)
    assert dims == ["existence", "generative"]
    cell = {(r["concept"], r["dimension"]): (r["n"], r["n_hallucinated"], r["rate"]) for r in tidy.to_dicts()}
    assert cell[("cow", "existence")] == (2, 0, 0.0) and cell[("cow", "generative")] == (2, 2, 1.0)
    assert cell[("dog", "existence")] == (1, 1, 1.0)
    clusters = dict(tidy.select("concept", "cluster").unique().rows())
    assert clusters["dog"] == clusters["cat"] != clusters["cow"]  # identical rows cluster together
    # leaf order puts dog and cat next to each other
    assert abs(rows.index("dog") - rows.index("cat")) == 1
    np.testing.assert_array_equal(matrix[rows.index("cow")], [0.0, 1.0])


def test_cluster_rows_config_errors_and_small_inputs():
    with pytest.raises(ConfigError, match="diagnosis.linkage"):
        cluster_rows(np.zeros((3, 2)), method="mean")
    with pytest.raises(ConfigError, match="needs metric 'euclidean'"):
        cluster_rows(np.zeros((3, 2)), method="ward", metric="cosine")
    order, clusters, z = cluster_rows(np.zeros((1, 2)))
    assert order.tolist() == [0] and z is None
    # cosine distance of all-zero rows is undefined: still clusters without error
    order, clusters, _ = cluster_rows(np.array([[0.0, 0], [0, 0], [1, 0]]), method="average", metric="cosine")
    assert sorted(order.tolist()) == [0, 1, 2]


def test_run_diagnosis_writes_files_deterministically(tmp_path):
    outs = []
    for run in ("a", "b"):
        paths = {k: tmp_path / run / f"m.{k}" for k in ("parquet", "png", "dist.parquet")}
        summary = run_diagnosis(
            _queries(),
            _answers(),
            _captions(),
            model="m",
            stand_in=True,
            out_parquet=paths["parquet"],
            out_png=paths["png"],
            out_distributions=paths["dist.parquet"],
        )
        outs.append({k: p.read_bytes() for k, p in paths.items()})
    assert outs[0] == outs[1]
    assert outs[0]["png"][:8] == b"\x89PNG\r\n\x1a\n"
    assert summary["judged_from"] == "answers" and summary["events"] == 9
    dist = pl.read_parquet(tmp_path / "a" / "m.dist.parquet")
    row = dist.filter((pl.col("distribution") == "fictional") & (pl.col("dimension") == "existence")).to_dicts()[0]
    assert (row["n"], row["n_hallucinated"], row["rate"]) == (1, 1, 1.0)
    gen = dist.filter((pl.col("distribution") == "fictional") & (pl.col("dimension") == "generative")).to_dicts()[0]
    assert (gen["n"], gen["n_hallucinated"]) == (1, 1)  # one caption (g2), though it has two truth objects
    tidy = pl.read_parquet(tmp_path / "a" / "m.parquet")
    assert tidy["stand_in"].all() and set(tidy.columns) >= {"concept", "dimension", "rate", "row", "cluster"}


def test_run_diagnosis_with_nothing_scored(tmp_path):
    empty_answers = _answers().filter(pl.col("status") == "failed")
    run_diagnosis(
        _queries(),
        empty_answers,
        _captions().clear(),
        model="m",
        stand_in=False,
        out_parquet=tmp_path / "m.parquet",
        out_png=tmp_path / "m.png",
        out_distributions=tmp_path / "d.parquet",
    )
    assert pl.read_parquet(tmp_path / "m.parquet").height == 0
    assert (tmp_path / "m.png").stat().st_size > 0
    with pytest.raises(InputError, match="missing column 'target'"):
        run_diagnosis(
            _queries().drop("target"),
            _answers(),
            _captions(),
            model="m",
            stand_in=False,
            out_parquet=tmp_path / "x",
            out_png=tmp_path / "y",
            out_distributions=tmp_path / "z",
        )
