"""`halluflow release diff` and the lineage helpers, on hand-made releases whose differences can be counted."""

from __future__ import annotations

import json

import polars as pl
import pytest

from halluflow.cli import main
from halluflow.errors import InputError
from halluflow.ode.lineage import ancestor_pairs, diff_releases, lineage, pair_key


def _release(root, name, pairs, edges=None, parent=None):
    rel = root / name / "release"
    rel.mkdir(parents=True)
    pl.DataFrame([{"scene_id": f"s{i}", "distribution": d, "object_a": a, "object_b": b}
                  for i, (d, a, b) in enumerate(pairs)]).write_parquet(rel / "scenes.parquet")
    pl.DataFrame({"query_type": ["existence"] * len(pairs) + ["generative"]}).write_parquet(rel / "queries.parquet")
    manifest = {"release": name, "lineage": {"ancestors": lineage(parent) if parent else []}}
    (rel / "manifest.json").write_text(json.dumps(manifest))
    if edges is not None:
        (root / name / "graph").mkdir()
        pl.DataFrame(edges, schema=["source", "target", "weight"], orient="row").write_parquet(
            root / name / "graph" / "edges.parquet")
    return rel


def test_diff_counts_by_hand(tmp_path, capsys):
    a = _release(tmp_path, "a", [("standard", "dog", "frisbee"), ("standard", "car", "road"),
                                 ("fictional", "fish", "sky")],
                 edges=[("dog", "frisbee", 5), ("car", "road", 9), ("fish", "water", 2)])
    b = _release(tmp_path, "b", [("standard", "frisbee", "dog"), ("standard", "cat", "sofa"),
                                 ("fictional", "fish", "desk")],
                 edges=[("dog", "frisbee", 6), ("car", "road", 9), ("cat", "sofa", 4)], parent=a)
    d = diff_releases(a, b)
    std = next(r for r in d["by_distribution"] if r["distribution"] == "standard")
    # dog|frisbee is the same pair whichever object comes first.
    assert (std["pairs_shared"], std["pairs_added"], std["pairs_removed"]) == (1, 1, 1)
    assert (std["concepts_added"], std["concepts_removed"]) == (2, 2)  # +cat +sofa, -car -road
    assert d["pairs"]["added"] == ["cat|sofa", "desk|fish"]
    assert d["graph"] == {"edges_a": 3, "edges_b": 3, "added": 1, "removed": 1, "reweighted": 1}
    assert d["queries"]["b"] == {"existence": 3, "generative": 1}
    assert d["lineage_b"] == ["a"]
    assert main(["release", "diff", str(a), str(b), "--out", str(tmp_path / "d.json")]) == 0
    out = capsys.readouterr().out
    assert "| standard | 2 | 2 | 1 | 1 | 1 | 2 | 2 |" in out and "1 reweighted" in out
    assert json.loads((tmp_path / "d.json").read_text())["pairs"]["removed"] == ["car|road", "fish|sky"]


def test_ancestor_pairs_follow_the_chain(tmp_path):
    a = _release(tmp_path, "a", [("standard", "dog", "frisbee")])
    b = _release(tmp_path, "b", [("standard", "cat", "sofa")], parent=a)
    assert [e["release"] for e in lineage(b)] == ["b", "a"]
    assert ancestor_pairs(b) == {pair_key("dog", "frisbee"), pair_key("sofa", "cat")}
    with pytest.raises(InputError, match="release.parent"):
        lineage(tmp_path / "nowhere")
