"""Tests of the report: the HTML summary on a small result folder laid out per docs/data-contracts.md,
sections that say "not run" for missing stages, hand-checkable counts and rates, byte-identical rebuilds, the CLI,
and a headless-Chromium render (screenshot + DOM + console errors) of the generated page.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
from browser import chromium, console_errors, require_chromium
from PIL import Image, ImageDraw

from halluflow.cli import main as cli_main
from halluflow.errors import InputError
from halluflow.io import write_json, write_parquet
from halluflow.ode.scoring import ode_metrics, score_answers
from halluflow.report.collect import Results, counts_table, hallucination_by_distribution, scorecard
from halluflow.report.figures import cedi_curve_data, samf_bar_data
from halluflow.report.summary import ReportOptions, build_summary, write_figure_files, write_table_files
from halluflow.samf.pipeline import compare as samf_compare

SECTION_IDS = [
    "overview",
    "counts",
    "gallery-accepted",
    "gallery-rejected",
    "metrics",
    "radar",
    "rates",
    "uncertainty",
    "diagnosis",
    "cedi",
    "cedi-errors",
    "samf",
    "alignment",
]
DISTS = ["standard", "long_tail", "random", "fictional"]
KINDS = ["entity_entity", "entity_environment"]
PAIRS = {
    ("standard", "entity_entity"): ("dog", "cat"),
    ("standard", "entity_environment"): ("boat", "sea"),
    ("long_tail", "entity_entity"): ("horse", "umbrella"),
    ("long_tail", "entity_environment"): ("bench", "beach"),
    ("random", "entity_entity"): ("cup", "kite"),
    ("random", "entity_environment"): ("car", "forest"),
    ("fictional", "entity_entity"): ("giraffe", "toaster"),
    ("fictional", "entity_environment"): ("bear", "street"),
}


def make_results(
    root: Path, models=("tiny-vlm", "blind"), stages=("ode", "answers", "caos", "cedi", "samf", "align")
) -> Path:
    """A small release folder: 8 scenes × 2 images; image 0 of each scene accepted, image 1 rejected."""
    root.mkdir(parents=True, exist_ok=True)
    scenes, images, dets, accepted, rejected, queries = [], [], [], [], [], []
    for (dist, kind), (a, b) in PAIRS.items():
        sid = f"{dist}-{kind}-0"
        scenes.append(
            {
                "scene_id": sid,
                "distribution": dist,
                "pair_kind": kind,
                "object_a": a,
                "object_b": b,
                "attribute_a": None,
                "attribute_a_kind": None,
                "attribute_b": None,
                "attribute_b_kind": None,
                "cooccurrence": 0 if dist == "fictional" else 5,
                "variant": 0,
            }
        )
        for v in range(2):
            iid = f"{sid}-{v}"
            shard = f"{v:03d}"
            path = f"images/{shard}/{iid}.png"
            img = Image.new("RGB", (96, 96), (40 + 25 * DISTS.index(dist), 120, 200 - 60 * v))
            ImageDraw.Draw(img).ellipse((10, 10, 50, 60), fill=(230, 200, 40))
            (root / "images" / shard).mkdir(parents=True, exist_ok=True)
            img.save(root / path)
            images.append(
                {
                    "image_id": iid,
                    "scene_id": sid,
                    "path": path,
                    "sha256": "0" * 64,
                    "width": 96,
                    "height": 96,
                    "model": "tiny-flux",
                    "seed": v,
                    "stand_in": True,
                    "shard": shard,
                }
            )
            dets.append(
                {
                    "image_id": iid,
                    "label": a,
                    "score": 0.9 - 0.5 * v,
                    "x0": 10.0,
                    "y0": 10.0,
                    "x1": 50.0,
                    "y1": 60.0,
                    "model": "tiny-owl",
                    "stand_in": True,
                    "shard": shard,
                }
            )
            dets.append(
                {
                    "image_id": iid,
                    "label": b,
                    "score": 0.7,
                    "x0": 40.0,
                    "y0": 30.0,
                    "x1": 90.0,
                    "y1": 90.0,
                    "model": "tiny-owl",
                    "stand_in": True,
                    "shard": shard,
                }
            )
            row = {
                "image_id": iid,
                "scene_id": sid,
                "distribution": dist,
                "pair_kind": kind,
                "path": path,
                "detected": [a, b] if v == 0 else [b],
                "max_score_a": 0.9 - 0.5 * v,
                "max_score_b": 0.7,
            }
            if v == 0:
                accepted.append(row)
                for q, truth in enumerate(("yes", "no")):
                    queries.append(
                        {
                            "query_id": f"{iid}-q{q}",
                            "image_id": iid,
                            "image": f"images/{iid}.png",
                            "scene_id": sid,
                            "distribution": dist,
                            "pair_kind": kind,
                            "task": "discriminative",
                            "query_type": "existence",
                            "truth": truth,
                        }
                    )
            else:
                rejected.append({**row, "reason": f"{a} below 0.65"})
    if "ode" in stages:
        write_parquet(root / "scenes/scenes.parquet", pl.DataFrame(scenes))
        for shard in ("000", "001"):
            write_parquet(
                root / f"images/{shard}.parquet", pl.DataFrame([r for r in images if r["shard"] == shard]).drop("shard")
            )
            write_parquet(
                root / f"detections/{shard}.parquet",
                pl.DataFrame([r for r in dets if r["shard"] == shard]).drop("shard"),
            )
        write_parquet(root / "filtered/accepted.parquet", pl.DataFrame(accepted))
        write_parquet(root / "filtered/rejected.parquet", pl.DataFrame(rejected))
        write_parquet(root / "queries/queries.parquet", pl.DataFrame(queries))
    queries_df = pl.DataFrame(queries).with_columns(
        pl.lit(None, pl.String).alias("attribute_kind"),
        pl.col("scene_id")
        .replace_strict({f"{d}-{k}-0": list(PAIRS[(d, k)]) for d, k in PAIRS}, return_dtype=pl.List(pl.String))
        .alias("objects"),
    )
    vocabulary = sorted({o for pair in PAIRS.values() for o in pair})
    for m, model in enumerate(models):
        if "answers" in stages:
            # Model m answers the first (m + 1) * 4 queries (in query order = design order) wrongly, the rest
            # correctly, so its hallucination rate per distribution can be checked by hand.
            wrong = [i < (m + 1) * 4 for i in range(queries_df.height)]
            flip = {"yes": "no", "no": "yes"}
            answers = pl.DataFrame(
                {
                    "query_id": queries_df["query_id"],
                    "model": model,
                    "answer": [flip[t] if w else t for t, w in zip(queries_df["truth"].to_list(), wrong)],
                    "status": "ok",
                    "error": None,
                    "stand_in": True,
                }
            )
            write_parquet(root / f"answers/{model}/000.parquet", answers)
            scored = score_answers(queries_df, answers, vocabulary)
            write_parquet(root / f"scores/{model}/answers.parquet", scored)
            write_json(root / f"metrics/{model}.json", ode_metrics(scored, model))
        if "answers" in stages and m == len(models) - 1:
            from halluflow.metrics.uncertainty import compare_score_files

            compare_score_files(
                [str(root / f"scores/{x}/answers.parquet") for x in models],
                str(root / "compare" / "models.json"),
                resamples=200,
            )
        if "caos" in stages:
            write_json(
                root / f"caos/{model}.json",
                {
                    "model": model,
                    "embedders": {
                        "glove": {"caos_t": 0.61, "caos_x": 0.42, "caos_k": 0.5, "n_hallucinated": 3},
                        "minilm": {"caos_t": 0.3, "caos_x": 0.2, "caos_k": 0.1, "n_hallucinated": 3},
                    },
                },
            )
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(4, 3))
            ax.imshow([[0.1, 0.5], [0.9, 0.3]], cmap="viridis")
            ax.set_xlabel("hallucinated concept")
            ax.set_ylabel("scene concept")
            (root / "diagnosis").mkdir(exist_ok=True)
            fig.savefig(root / f"diagnosis/{model}.png", metadata={"Software": None})
            plt.close(fig)
            write_parquet(root / f"diagnosis/{model}.distributions.parquet", pl.DataFrame({"distribution": DISTS}))
        if "cedi" in stages:
            # The grader's per_turn layout (cedi.grader.PER_TURN_SCHEMA): one row per examiner/history/turn/type.
            write_parquet(
                root / f"cedi/{model}/per_turn.parquet",
                pl.DataFrame(
                    {
                        "examiner": ["cedi"] * 8,
                        "history": ["with"] * 4 + ["without"] * 4,
                        "turn": [0, 1, 1, 2] * 2,
                        "question_type": ["regular", "regular", "adversarial", "regular"] * 2,
                        "n": [4] * 8,
                        "n_judged": [4, 2, 2, 4, 4, 4, 4, 4],
                        "n_hallucinated": [0, 1, 1, 3, 0, 0, 2, 1],
                        "rate": [0.0, 0.5, 0.5, 0.75, 0.0, 0.0, 0.5, 0.25],
                    }
                ),
            )
            write_json(
                root / f"cedi/{model}/grades.json",
                {
                    "headline": "cedi/with",
                    "ged": 4.0,
                    "ged_hal": 1.0,
                    "ged_miss": 3.0,
                    "hallucination_rate": 0.25,
                    "stand_in": True,
                    "summary": {"cedi/with": {"ged": 4.0, "hallucination_rate": 0.25}},
                    "error_types": {"counts": {"object": 3, "attribute": 1, "relation": 0, "other": 0}},
                },
            )
        if "samf" in stages:
            # Standard GHR: existence 0.5, attribute 0.0; fuzzed: existence 1.0, attribute 0.5 (overall 0.25 / 0.75).
            def evals(ghr):
                return pl.DataFrame(
                    {
                        "group": ["existence", "existence", "attribute", "attribute"],
                        "split": "test",
                        "ghr": ghr,
                        "bhr": [0.0] * 4,
                        "risk_level": [1, 3, 2, 2],
                        "policy": "p0",
                    }
                )

            comparison = samf_compare(evals([0.0, 1.0, 0.0, 0.0]), evals([1.0, 1.0, 1.0, 0.0]))
            write_parquet(root / f"fuzz/{model}/comparison.parquet", comparison)
            write_json(root / f"fuzz/{model}/comparison.json", {"rows": comparison.to_dicts(), "stand_in": True})
    if "align" in stages:  # `halluflow align human --out align/<name>.json`
        write_json(
            root / "align/cedi_human.json",
            {
                "metrics": {
                    "ged_hal": {
                        "threshold": 0.0,
                        "overall": {
                            "n": 4,
                            "accuracy": 0.75,
                            "recall": 1.0,
                            "f1": 0.8,
                            "kappa": 0.5,
                            "pearson": 0.9,
                            "spearman": 1.0,
                        },
                    }
                }
            },
        )
    return root


@pytest.fixture(scope="module")
def _results_template(tmp_path_factory) -> Path:
    return make_results(tmp_path_factory.mktemp("template") / "demo")


@pytest.fixture
def results(_results_template, tmp_path) -> Path:
    # A private copy per test: some tests damage their folder on purpose.
    return Path(shutil.copytree(_results_template, tmp_path / "results" / "demo"))


def _sections(html_text: str) -> dict[str, str]:
    return dict(re.findall(r'<section id="([\w-]+)" class="(ran|not-run)"', html_text))


def test_counts_by_distribution_and_pair_kind(results):
    counts = counts_table(Results(results))
    assert counts["distribution"].to_list() == [d for d in DISTS for _ in KINDS]
    assert counts["pair_kind"].to_list() == KINDS * 4
    # 1 scene, 2 images (1 accepted, 1 rejected) and 2 queries in every cell of the design.
    for col, value in (("scenes", 1), ("images", 2), ("accepted", 1), ("rejected", 1), ("queries", 2)):
        assert counts[col].to_list() == [value] * 8, col
    assert counts["acceptance_rate"].to_list() == [0.5] * 8


def test_hallucination_rate_by_distribution_is_hand_checkable(results):
    rates = hallucination_by_distribution(Results(results))
    # 16 queries in design order (2 per cell, 4 per distribution); tiny-vlm hallucinates on the first 4, blind on 8.
    tiny = rates.filter(pl.col("model") == "tiny-vlm")
    assert tiny["distribution"].to_list() == DISTS
    assert tiny["rate"].to_list() == [1.0, 0.0, 0.0, 0.0]
    blind = rates.filter(pl.col("model") == "blind")
    assert blind["rate"].to_list() == [1.0, 1.0, 0.0, 0.0]
    assert blind["n"].to_list() == [4, 4, 4, 4] and blind["hallucinated"].to_list() == [4, 4, 0, 0]


def test_scorecard_takes_least_nested_metric(results):
    res = Results(results)
    assert res.models() == ["blind", "tiny-vlm"]  # diagnosis/<model>.distributions.parquet is not a model
    card = scorecard(res).filter(pl.col("model") == "tiny-vlm").row(0, named=True)
    # ode_metrics' top-level hallucination rate: 4 of 16 answers wrong; accuracy 12/16 (discriminative block).
    assert card["hallucination rate"] == pytest.approx(0.25)
    assert card["POPE accuracy"] == pytest.approx(0.75)  # not by_distribution.*.accuracy
    assert card["CAOS_T (glove)"] == pytest.approx(0.61)  # first embedder, named in the column
    assert card["CEDI hallucination rate"] == pytest.approx(0.25) and card["CEDI GED"] == 4.0
    assert card["GHR standard"] == pytest.approx(0.25) and card["GHR fuzzed"] == pytest.approx(0.75)


def test_cedi_curves_pool_question_types_and_samf_bars_use_groups(results):
    res = Results(results)
    curve = cedi_curve_data(res.cedi_per_turn("blind"))
    with_h = curve.filter(pl.col("mode") == "cedi, with history")
    # turn 1 pools regular (1 of 2) and adversarial (1 of 2): 2 / 4 judged.
    assert with_h["turn"].to_list() == [0, 1, 2] and with_h["rate"].to_list() == [0.0, 0.5, 0.75]
    assert with_h["n"].to_list() == [4.0, 4.0, 4.0]
    bars = samf_bar_data(res.fuzz_comparison("blind"))
    lookup = {(r["label"], r["setting"]): r["value"] for r in bars.iter_rows(named=True)}
    assert lookup[("existence", "standard")] == 0.5 and lookup[("existence", "fuzzed")] == 1.0
    assert lookup[("attribute", "fuzzed")] == 0.5 and lookup[("overall", "fuzzed")] == 0.75


def test_summary_has_every_section_and_stand_in_banner(results, tmp_path):
    out = build_summary(results, tmp_path / "summary.html", ReportOptions(gallery_size=4, dpi=50))
    text = out.read_text()
    assert _sections(text) == {sid: "ran" for sid in SECTION_IDS}
    assert 'id="stand-in-banner"' in text and "model tiny-vlm" in text and "synthesis" in text
    # the reasons table lists each rejected image's recorded reason with its count (one per scene here)
    counts = text[text.index('<section id="counts"') : text.index('<section id="gallery-accepted"')]
    reasons = counts[counts.index("<h3>Rejection reasons</h3>") :]
    assert re.findall(r'<td class="text">([^<]+)</td><td>(\d+)</td>', reasons) == sorted(
        (f"{a} below 0.65", "1") for a, _ in PAIRS.values()
    )
    assert text.count("data:image/png;base64,") >= 8  # 7 figures + 2 diagnosis heatmaps, no external files
    assert "<h3>Paired comparisons</h3>" in text and "blind" in text


def test_missing_stages_say_not_run(tmp_path):
    root = make_results(tmp_path / "results" / "partial", stages=("ode",))
    text = build_summary(root, tmp_path / "partial.html", ReportOptions(gallery_size=2, dpi=40)).read_text()
    status = _sections(text)
    assert [s for s in SECTION_IDS if status[s] == "ran"] == [
        "overview",
        "counts",
        "gallery-accepted",
        "gallery-rejected",
    ]
    assert "not run: no cedi/&lt;model&gt;/per_turn.parquet" in text
    # An empty folder still gives a page where every stage section says it did not run.
    empty = tmp_path / "results" / "empty"
    empty.mkdir()
    text = build_summary(empty, tmp_path / "empty.html").read_text()
    assert set(_sections(text).values()) == {"ran", "not-run"} and _sections(text)["counts"] == "not-run"
    assert "stand-in-banner" not in text


def test_rebuild_is_byte_identical_and_link_mode_writes_assets(results, tmp_path):
    import base64

    opts = ReportOptions(gallery_size=4, dpi=40)
    embedded = build_summary(results, tmp_path / "a.html", opts).read_text()
    linked = build_summary(results, tmp_path / "site" / "index.html", opts, embed=False)
    text = linked.read_text()
    assert "data:image/png" not in text
    inline = re.findall(r'<img src="data:image/png;base64,([^"]+)"', embedded)
    files = re.findall(r'<img src="([^"]+)"', text)
    assert len(inline) == len(files) >= 7
    # Every figure was drawn twice (two builds): same bytes, so reruns never change the report.
    for data, src in zip(inline, files):
        assert base64.b64decode(data) == (linked.parent / src).read_bytes(), src
    assert re.sub(r'<img src="[^"]+"', "", embedded) == re.sub(r'<img src="[^"]+"', "", text)


def test_snakemake_files_written_with_placeholders(tmp_path):
    root = make_results(tmp_path / "results" / "r", stages=("ode",))
    out = tmp_path / "report"
    names = ["gallery_accepted", "gallery_rejected", "radar", "rates", "diagnosis", "cedi", "samf"]
    write_figure_files(root, {n: out / f"{n}.png" for n in names}, ReportOptions(gallery_size=2, dpi=40))
    for n in names:
        assert (out / f"{n}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    write_table_files(root, {"counts": out / "counts.tsv", "scorecard": out / "scorecard.tsv"})
    assert (out / "counts.tsv").read_text().splitlines()[0].startswith("distribution\tpair_kind\tscenes")
    assert (out / "scorecard.tsv").read_text().startswith("note\nnot run")


def test_tolerant_parsers_for_cedi_and_samf_tables():
    long = pl.DataFrame({"metric": ["ghr", "ghr"], "setting": ["standard", "fuzzed"], "value": [0.1, 0.3]})
    assert samf_bar_data(long)["value"].to_list() == [0.1, 0.3]
    assert isinstance(samf_bar_data(pl.DataFrame({"x": [1.0]})), str)
    raw = pl.DataFrame({"round": [0, 0, 1, 1], "hallucinated": [True, False, True, True]})
    curve = cedi_curve_data(raw)
    assert curve["rate"].to_list() == [0.5, 1.0] and curve["mode"].to_list() == ["all", "all"]
    assert isinstance(cedi_curve_data(pl.DataFrame({"x": [1]})), str)


def test_bad_inputs_name_the_file(results, tmp_path, capsys):
    (results / "filtered/accepted.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="accepted.parquet: not a readable parquet table"):
        build_summary(results, tmp_path / "x.html")
    write_parquet(results / "filtered/accepted.parquet", pl.DataFrame({"image_id": ["a"]}))
    with pytest.raises(InputError, match=r"accepted.parquet: missing column\(s\) scene_id"):
        build_summary(results, tmp_path / "x.html")
    assert cli_main(["report", "build", str(tmp_path / "nope"), "--out", str(tmp_path / "x.html")]) == 1
    assert "nope: result folder not found" in capsys.readouterr().err


def test_cli_builds_summary(results, tmp_path, capsys):
    out = tmp_path / "cli.html"
    assert cli_main(["report", "build", str(results), "--out", str(out), "--gallery-size", "2", "--dpi", "40"]) == 0
    assert out.is_file() and capsys.readouterr().out.strip() == str(out)


def test_summary_renders_in_headless_chromium(results, tmp_path):
    require_chromium()
    html_path = build_summary(results, tmp_path / "summary.html", ReportOptions(gallery_size=8))
    shot = Path(os.environ.get("HALLUFLOW_REPORT_SCREENSHOT", tmp_path / "summary.png"))
    dom = chromium(html_path.as_uri(), "--dump-dom", profile=tmp_path / "dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    for sid in SECTION_IDS:
        assert f'id="{sid}"' in dom.stdout, sid
    assert dom.stdout.count("<img") >= 7
    assert not console_errors(dom), console_errors(dom)
    snap = chromium(html_path.as_uri(), f"--screenshot={shot}", "--window-size=1280,2400", profile=tmp_path / "shot")
    assert snap.returncode == 0, snap.stderr[-2000:]
    with Image.open(shot) as img:
        assert img.size == (1280, 2400)
        # A rendered page is not blank: the dark header and the red stand-in banner are both on it.
        colours = {img.getpixel((5, 5)), img.getpixel((5, 85))}
        assert any(c[0] < 40 and c[2] > 50 for c in colours), colours


def test_empty_rejected_gallery_ran_but_says_so(results, tmp_path):
    rejected = pl.read_parquet(results / "filtered/rejected.parquet")
    write_parquet(results / "filtered/rejected.parquet", rejected.head(0))
    text = build_summary(results, tmp_path / "s.html", ReportOptions(gallery_size=2, dpi=40)).read_text()
    assert _sections(text)["gallery-rejected"] == "ran"
    assert "no rejected images in this release" in text


def _card(columns: dict[str, str], rows: dict[str, list]):
    from halluflow.metrics.catalogue import CATALOGUE
    from halluflow.report.collect import Scorecard

    return Scorecard(pl.DataFrame(rows), {label: CATALOGUE[name] for label, name in columns.items()})


def test_radar_draws_bounded_directed_metrics_flipped_outward_is_better():
    from matplotlib.figure import Figure

    from halluflow.report.figures import RADAR_NOTE, radar

    columns = {
        "POPE F1": "pope.f1",
        "CHAIR_s": "chair.chair_s",
        "AMBER F1 (%)": "amber.overall.f1",
        "CEDI GED": "cedi.ged",
        "yes ratio": "pope.yes_ratio",
    }
    card = _card(
        columns,
        {
            "model": ["a", "b", "pending"],
            "POPE F1": [0.5, 0.7, None],
            "CHAIR_s": [0.2, 0.1, None],
            "AMBER F1 (%)": [66.7, 40.0, None],
            "CEDI GED": [4.0, 2.0, None],
            "yes ratio": [0.5, 0.6, None],
        },
    )
    fig = radar(card)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    # GED is unbounded and the yes ratio has no better direction: no axis. CHAIR_s (lower is better) is flipped.
    assert [t.get_text() for t in ax.get_xticklabels()] == ["POPE F1", "1 − CHAIR_s", "AMBER F1 (%)"]
    assert RADAR_NOTE in ax.get_title()
    lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert sorted(lines) == ["a", "b"]  # "pending" drew no polygon
    # radius = share of the catalogue range, flipped when lower is better: 0.5, 1 - 0.2, 66.7 / 100
    assert list(lines["a"].get_ydata()) == pytest.approx([0.5, 0.8, 0.667, 0.5])
    assert "at least 3" in radar(_card({"POPE F1": "pope.f1"}, {"model": ["a"], "POPE F1": [0.5]}))


def test_radar_refuses_a_column_without_catalogue_entry():
    from halluflow.report.collect import Scorecard
    from halluflow.report.figures import radar

    card = Scorecard(pl.DataFrame({"model": ["a"], "f1": [0.5]}), {})
    with pytest.raises(InputError, match="'f1' has no metric catalogue entry"):
        radar(card)


# Every scorecard column and the catalogue entry it is read through (docs/metrics.md), written out by hand.
SCORECARD_TRACE = {
    "POPE accuracy": "pope.accuracy",
    "POPE F1": "pope.f1",
    "yes ratio": "pope.yes_ratio",
    "AMBER F1 (%)": "amber.overall.f1",
    "CHAIR_s (ODE)": "generative.chair_s",
    "CHAIR_i (ODE)": "generative.chair_i",
    "CHAIR_s": "chair.chair_s",
    "CHAIR_i": "chair.chair_i",
    "AMBER CHAIR (%)": "amber.generative.chair",
    "hallucination rate": "hallucination_rate",
    "CAOS_T (glove)": "caos.caos_t",
    "CAOS_X (glove)": "caos.caos_x",
    "CAOS_K (glove)": "caos.caos_k",
    "CEDI hallucination rate": "cedi.hallucination_rate",
    "CEDI GED": "cedi.ged",
    "GHR standard": "samf.ghr_standard",
    "GHR fuzzed": "samf.ghr_fuzzed",
    "failed answers": "n_failed",
    "unknown answers": "pope.n_unknown",
    "SAMF failed answers": "samf.n_failed_standard",
}


def _by_hand(root: Path, model: str, name: str):
    """The value at each entry's documented location, followed by hand in the JSON (not through the catalogue)."""
    import json

    def load(rel):
        return json.loads((root / rel).read_text())

    metrics, caos, cedi = load(f"metrics/{model}.json"), load(f"caos/{model}.json"), load(f"cedi/{model}/grades.json")
    samf = next(r for r in load(f"fuzz/{model}/comparison.json")["rows"] if r["group"] == "overall")
    where = {
        "pope.accuracy": lambda: metrics["pope"]["accuracy"],
        "pope.f1": lambda: metrics["pope"]["f1"],
        "pope.yes_ratio": lambda: metrics["pope"]["yes_ratio"],
        "amber.overall.f1": lambda: metrics["amber"]["overall"]["f1"],
        "hallucination_rate": lambda: metrics["hallucination_rate"],
        "caos.caos_t": lambda: caos["embedders"]["glove"]["caos_t"],
        "caos.caos_x": lambda: caos["embedders"]["glove"]["caos_x"],
        "caos.caos_k": lambda: caos["embedders"]["glove"]["caos_k"],
        "cedi.hallucination_rate": lambda: cedi["hallucination_rate"],
        "cedi.ged": lambda: cedi["ged"],
        "samf.ghr_standard": lambda: samf["ghr_standard"],
        "samf.ghr_fuzzed": lambda: samf["ghr_fuzzed"],
        "n_failed": lambda: metrics["n_failed"],
        "pope.n_unknown": lambda: metrics["pope"]["n_unknown"],
        "samf.n_failed_standard": lambda: samf["n_failed_standard"],
    }
    return where[name]()


def test_every_scorecard_and_radar_column_traces_to_its_catalogue_entry(results):
    from halluflow.report.collect import SCORECARD, scorecard_table
    from halluflow.report.figures import radar_axes

    card = scorecard_table(Results(results))
    # The card's columns are exactly the entries listed above (no generative captions and no COCO / AMBER-source
    # CHAIR in this release, so those columns are absent: their locations exist in no model's file).
    assert {label: e.name for label, e in card.columns.items()} == {
        k: v for k, v in SCORECARD_TRACE.items() if "CHAIR" not in k
    }
    assert card.frame.columns[1:] == list(card.columns)
    assert {name for name, _ in SCORECARD} == set(SCORECARD_TRACE.values())
    for model in ("blind", "tiny-vlm"):
        row = card.frame.filter(pl.col("model") == model).row(0, named=True)
        for label, entry in card.columns.items():
            expected = _by_hand(results, model, entry.name)
            assert row[label] == (None if expected is None else pytest.approx(round(expected, 4))), (model, label)
    # The radar's axes: the bounded columns with a direction, lower-is-better ones named as flipped.
    assert radar_axes(card) == [
        ("POPE accuracy", "POPE accuracy"),
        ("POPE F1", "POPE F1"),
        ("AMBER F1 (%)", "AMBER F1 (%)"),
        ("hallucination rate", "1 − hallucination rate"),
        ("CEDI hallucination rate", "1 − CEDI hallucination rate"),
        ("GHR standard", "1 − GHR standard"),
        ("GHR fuzzed", "1 − GHR fuzzed"),
    ]
    for column, _ in radar_axes(card):
        entry = card.columns[column]
        assert entry.bounded and entry.better in ("higher", "lower") and SCORECARD_TRACE[column] == entry.name


def test_null_pope_f1_shows_na_not_ambers_f1(results, tmp_path):
    """The blind model's metrics: pope.f1 null (it never said yes) while AMBER's sections carry f1 = 66.7. The
    scorecard must show n/a for POPE F1, never AMBER's number, in the table, the TSV and the page."""
    import json

    path = results / "metrics/blind.json"
    doc = json.loads(path.read_text())
    doc["pope"]["f1"] = None
    doc["pope"]["precision"] = None
    doc["amber"]["overall"]["f1"] = 66.7
    doc["amber"]["action"] = {"accuracy": 50.0, "precision": 50.0, "recall": 100.0, "f1": 66.7, "n": 2}
    write_json(path, doc)
    row = scorecard(Results(results)).filter(pl.col("model") == "blind").row(0, named=True)
    assert row["POPE F1"] is None and row["AMBER F1 (%)"] == 66.7
    out = tmp_path / "t"
    write_table_files(results, {"scorecard": out / "scorecard.tsv"})
    lines = [line.split("\t") for line in (out / "scorecard.tsv").read_text().splitlines()]
    blind = dict(zip(lines[0], next(r for r in lines if r[0] == "blind")))
    assert blind["POPE F1"] == "n/a" and float(blind["AMBER F1 (%)"]) == 66.7
    text = build_summary(results, tmp_path / "s.html", ReportOptions(gallery_size=2, dpi=40)).read_text()
    section = text[text.index('<section id="metrics"') : text.index('<section id="radar"')]
    table = section[: section.index("</table>")]
    head = re.findall(r"<th>([^<]*)</th>", table)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", re.search(r"<tr><td class=\"text\">blind</td>.*?</tr>", table)[0])
    cells = dict(zip(head, cells))
    assert cells["POPE F1"] == "n/a" and cells["AMBER F1 (%)"] == "66.7"
    # The radar draws no POPE F1 axis (not shared by all models) and never AMBER's percent on a 0-1 axis.
    from halluflow.report.collect import scorecard_table
    from halluflow.report.figures import radar

    labels = [t.get_text() for t in radar(scorecard_table(Results(results))).axes[0].get_xticklabels()]
    assert "POPE F1" not in labels and "AMBER F1 (%)" in labels


def test_a_number_outside_its_range_or_of_the_wrong_type_is_an_error(results):
    import json

    path = results / "metrics/blind.json"
    doc = json.loads(path.read_text())
    doc["pope"]["f1"] = 66.7  # a percent where POPE's fraction belongs
    write_json(path, doc)
    with pytest.raises(InputError, match=r"metrics/blind.json: pope.f1: 66.7 is outside the range \[0, 1\] of pope.f1"):
        scorecard(Results(results))
    doc["pope"]["f1"] = "0.5"
    write_json(path, doc)
    with pytest.raises(InputError, match=r"pope.f1: expected a number for pope.f1, got '0.5'"):
        scorecard(Results(results))


def test_metrics_table_lists_catalogue_entries_with_locations(results):
    from halluflow.report.collect import metrics_long

    full = metrics_long(Results(results))
    row = full.filter(pl.col("metric") == "pope.f1").row(0, named=True)
    assert row["label"] == "POPE F1" and row["better"] == "higher"
    # no breakdown rows (by_distribution.<group>... has parameters) and no uncatalogued key
    assert not any(m.startswith("by") for m in full["metric"].to_list())
    assert "amber.overall.f1" in full["metric"].to_list()
