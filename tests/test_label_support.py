"""Label support: how many yes/no labels the release's detector supports at ODE's paper threshold (0.65), counted by
hand on a table built here, and the one line a release with prompt-only "yes" labels carries in its DATACARD,
manifest, metrics and report."""

from __future__ import annotations

import html
import io
import json

import polars as pl
from PIL import Image

from halluflow.io import sha256_bytes
from halluflow.ode.release import package_release, verify_release
from halluflow.ode.support import label_support, support_line


def q(qid, image_id, query_type, truth, target):
    return {"query_id": qid, "image_id": image_id, "query_type": query_type, "truth": truth, "target": target}


QUERIES = pl.DataFrame(
    [
        q("1", "a", "existence", "yes", "dog"),  # boxed at 0.9: supported
        q("2", "a", "existence", "yes", "cat"),  # 0.3 < 0.65: the prompt alone
        q("3", "a", "existence", "no", "Kite"),  # boxed at 0.7 though stated absent: contradicted (case ignored)
        q("4", "a", "existence", "no", "horse"),  # prompted, no box: supported
        q("5", "a", "counterfactual", "no", "bird"),  # never prompted: the prompt alone
        q("6", "a", "attribute", "yes", "dog"),  # the object is boxed: supported (the attribute is not read)
        q("7", "a", "attribute", "no", "dog"),  # an attribute "no": always the prompt alone
        q("8", "a", "count", "yes", "dog"),
        q("9", "b", "existence", "yes", "dog"),  # image without detection rows: the prompt alone
        q("10", "a", "generative", None, None),  # open: not counted
    ]
)
DETECTIONS = pl.DataFrame(
    {
        "image_id": ["a", "a", "a"],
        "label": ["dog", "cat", "kite"],
        "score": [0.9, 0.3, 0.7],
        "vocabulary": [["dog", "cat", "kite", "horse"]] * 3,
    }
)


def test_support_counted_by_hand():
    got = label_support(QUERIES, DETECTIONS)
    rows = {(r["query_type"], r["truth"]): r for r in got["rows"]}
    keys = ("labels", "supported", "contradicted", "prompt_only")
    assert {k: tuple(r[c] for c in keys) for k, r in rows.items()} == {
        ("existence", "yes"): (3, 1, 0, 2),
        ("existence", "no"): (2, 1, 1, 0),
        ("counterfactual", "no"): (1, 0, 0, 1),
        ("attribute", "yes"): (1, 1, 0, 0),
        ("attribute", "no"): (1, 0, 0, 1),
        ("count", "yes"): (1, 1, 0, 0),
    }
    assert (got["yes_labels"], got["yes_prompt_only"]) == (5, 2)
    assert got["line"].startswith(
        '2 of 5 "yes" labels rest on the prompt alone (no detector box of the object at 0.65)'
    )
    # at a lower threshold the cat's 0.3 box counts
    assert label_support(QUERIES, DETECTIONS, 0.25)["yes_prompt_only"] == 1
    # without a recorded vocabulary only boxed objects are known to have been asked for: the horse's "no" rests
    # on the prompt
    bare = {(r["query_type"], r["truth"]): r for r in label_support(QUERIES, DETECTIONS.drop("vocabulary"))["rows"]}
    assert bare["existence", "no"]["supported"] == 0 and bare["existence", "no"]["prompt_only"] == 1
    # no detections at all: every "yes" on the prompt alone
    none = label_support(QUERIES, None)
    assert none["yes_prompt_only"] == none["yes_labels"] == 5
    assert label_support(QUERIES.filter(pl.col("query_id") == "1"), DETECTIONS)["line"] is None


def _png(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return buf.getvalue()


def build(tmp_path):
    root = tmp_path / "results"
    (root / "images").mkdir(parents=True)
    pngs = {"a": _png((255, 0, 0)), "b": _png((0, 0, 255))}
    for image_id, data in pngs.items():
        (root / "images" / f"{image_id}.png").write_bytes(data)
    accepted = pl.DataFrame(
        {
            "image_id": ["a", "b"],
            "scene_id": ["a", "b"],
            "distribution": ["standard", "standard"],
            "pair_kind": ["entity_entity"] * 2,
            "path": ["images/a.png", "images/b.png"],
        }
    )
    images = accepted.select(
        "image_id",
        "path",
        pl.Series("sha256", [sha256_bytes(pngs[i]) for i in ("a", "b")]),
        pl.lit("tiny-flux").alias("model"),
        pl.lit(None, pl.String).alias("revision"),
        pl.lit(True).alias("stand_in"),
    )
    detections = DETECTIONS.with_columns(
        pl.lit("tiny-owl").alias("model"), pl.lit(None, pl.String).alias("revision"), pl.lit(True).alias("stand_in")
    )
    queries = QUERIES.with_columns(
        pl.col("image_id").alias("scene_id"),
        pl.lit("standard").alias("distribution"),
        pl.lit("entity_entity").alias("pair_kind"),
        pl.format("Question {}?", "query_id").alias("question"),
        pl.concat_list([pl.col("target").fill_null("dog")]).alias("objects"),
        pl.when(pl.col("query_type") == "attribute").then(pl.lit("state")).alias("attribute_kind"),
        pl.when(pl.col("truth").is_null()).then(pl.lit("generative")).otherwise(pl.lit("discriminative")).alias("task"),
    )
    release = root / "release"
    manifest = package_release(
        release,
        root=root,
        accepted=accepted,
        queries=queries,
        scenes=accepted.select("scene_id", "distribution", "pair_kind"),
        images=[images],
        detections=[detections],
        config={"seed": 1, "ode": {"filter": {"keep_threshold": 0.0, "exclusion_threshold": 0.6}}},
        seed=1,
        name="support",
    )
    support = manifest["counts"]["label_support"]
    assert support["threshold"] == 0.65 and support["yes_prompt_only"] == 2 and support["yes_labels"] == 5
    assert json.loads((release / "manifest.json").read_text())["counts"]["label_support"] == support
    assert support_line(manifest) == support["line"]
    card = (release / "DATACARD.md").read_text()
    assert f"> **{support['line']}.**" in card  # the one line, at the top
    assert "## Label support" in card and "| existence | yes | 3 | 1 | 0 | 2 |" in card
    assert "| existence | no | 2 | 1 | 1 | 0 |" in card
    assert verify_release(release) == []


def test_release_states_support_and_the_prompt_only_line(tmp_path):
    build(tmp_path)


def test_metrics_and_report_carry_the_line(tmp_path, capsys):
    from halluflow.io import write_parquet
    from halluflow.ode.scoring import run_score
    from halluflow.report.summary import ReportOptions, build_summary

    build(tmp_path)
    release = tmp_path / "results" / "release"
    line = json.loads((release / "manifest.json").read_text())["counts"]["label_support"]["line"]
    queries = pl.read_parquet(release / "queries.parquet")
    answers = queries.select(
        "query_id",
        pl.lit("m").alias("model"),
        pl.lit("Yes.").alias("answer"),
        pl.lit("ok").alias("status"),
        pl.lit(None, pl.String).alias("error"),
    )
    write_parquet(tmp_path / "a.parquet", answers)
    write_parquet(tmp_path / "nodes.parquet", pl.DataFrame({"node": ["dog", "cat"]}))
    metrics = run_score(
        [str(tmp_path / "a.parquet")],
        str(release / "queries.parquet"),
        str(tmp_path / "nodes.parquet"),
        str(tmp_path / "s.parquet"),
        str(tmp_path / "m.json"),
        "m",
        {"parser": "pope"},
        release_dir=str(release),
    )
    assert metrics["label_support"]["line"] == line and metrics["label_support"]["yes_prompt_only"] == 2
    assert json.loads((tmp_path / "m.json").read_text())["label_support"]["line"] == line
    assert f"score m: release labels: {line}" in capsys.readouterr().err
    from halluflow.ode.release_scoring import score_release, summary_lines

    released, _ = score_release(tmp_path / "a.parquet", release, parser="pope")
    assert released["label_support"]["line"] == line
    assert f"score release: release labels: {line}" in summary_lines(released, "score release")
    page = build_summary(tmp_path / "results", tmp_path / "r.html", ReportOptions(gallery_size=1, dpi=30)).read_text()
    page = html.unescape(page)
    assert '2 of 5 "yes" labels rest on the prompt alone' in page and "Label support" in page


def test_a_label_support_of_another_shape_is_one_error_line(tmp_path):
    import pytest

    from halluflow.errors import InputError
    from halluflow.report.summary import ReportOptions, build_summary

    build(tmp_path)
    release = tmp_path / "results" / "release"
    manifest = json.loads((release / "manifest.json").read_text())
    manifest["counts"]["label_support"]["rows"][0]["labels"] = "many"
    (release / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match=r"key 'counts.label_support.rows.0.labels': expected a number, got a string"):
        build_summary(tmp_path / "results", tmp_path / "r.html", ReportOptions(gallery_size=1, dpi=30))
