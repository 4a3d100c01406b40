"""The label audit's interval and its independence rules (`halluflow release audit`).

The interval is checked against a hypergeometric tail summed here by brute force from binomial coefficients (exact
fractions), not against audit.py's own helper; the release is built here with known contents: 64 existence items
over 32 images, a sample of 62 at the default margin, 6 labels made wrong by hand."""

from __future__ import annotations

import csv
import io
import json
from fractions import Fraction
from math import comb

import polars as pl
import pytest
from PIL import Image

from halluflow.backends.base import VLM, BackendInfo, Detection, Detector, Result
from halluflow.cli import main
from halluflow.errors import ConfigError
from halluflow.io import sha256_bytes
from halluflow.models.model import Model
from halluflow.ode.audit import apply_labels, audit_release, group_rate, hypergeom_interval, oracle_choice
from halluflow.ode.release import package_release, verify_release

RED, BLUE = (255, 0, 0), (0, 0, 255)
SHOWN = {RED: "dog", BLUE: "cat"}


# ---- the exact interval, by brute force ---------------------------------------------------------------------------


def tail_at_least(x: int, draws: int, wrong: int, population: int) -> Fraction:
    """P(X >= x): X wrong labels among `draws` items drawn without replacement from `population`, `wrong` of them
    wrong; summed term by term."""
    total = comb(population, draws)
    return sum(
        (Fraction(comb(wrong, j) * comb(population - wrong, draws - j), total) for j in range(x, draws + 1)),
        Fraction(0),
    )


def tail_at_most(x: int, draws: int, wrong: int, population: int) -> Fraction:
    total = comb(population, draws)
    return sum(
        (Fraction(comb(wrong, j) * comb(population - wrong, draws - j), total) for j in range(0, x + 1)),
        Fraction(0),
    )


def brute_interval(low_x: int, high_x: int, draws: int, population: int, alpha: float) -> tuple[int, int]:
    """Every K (wrong labels in the population) that neither tail rejects at alpha / 2: its least and largest."""
    a = Fraction(str(alpha)) / 2  # the decimal level exactly: a tail equal to it is kept (a closed interval)
    possible = [k for k in range(population + 1)]
    lows = [
        k
        for k in possible
        if k >= low_x and population - k >= draws - low_x and tail_at_least(low_x, draws, k, population) >= a
    ]
    highs = [k for k in possible if k >= high_x and tail_at_most(high_x, draws, k, population) >= a]  # fmt: skip
    return min(lows), max(highs)


@pytest.mark.parametrize(
    "population,draws,xs",
    [(7, 3, range(0, 4)), (20, 9, range(0, 10)), (64, 62, (0, 1, 6, 20)), (40, 1, (0, 1)), (30, 29, (0, 5))],
)
def test_hypergeometric_interval_against_a_brute_force_sum(population, draws, xs):
    for x in xs:
        for alpha in (0.05, 0.01):
            assert hypergeom_interval(x, x, draws, population, alpha) == brute_interval(x, x, draws, population, alpha)
        # unresolved sampled items: counted right for the lower end, wrong for the upper
        if x + 2 <= draws:
            assert hypergeom_interval(x, x + 2, draws, population, 0.05) == brute_interval(x, x + 2, draws, population, 0.05)  # fmt: skip


def test_census_and_empty_cells_need_no_probability():
    assert hypergeom_interval(6, 8, 64, 64, 0.05) == (6, 8)  # every item drawn: what the labels allow, no more
    assert hypergeom_interval(0, 0, 0, 12, 0.05) == (0, 12)  # nothing drawn: anything
    full = group_rate([{"population": 5, "sampled": 5, "labelled": 5, "errors": 0, "unresolved": 0}])
    assert full["kind"] == "census" and full["interval"] == [0.0, 0.0] and full["bonferroni_cells"] == 0


def test_cells_combine_by_bonferroni_and_summed_counts():
    a = {"population": 20, "sampled": 9, "labelled": 9, "errors": 2, "unresolved": 0}
    b = {"population": 30, "sampled": 29, "labelled": 28, "errors": 5, "unresolved": 1}
    census = {"population": 4, "sampled": 4, "labelled": 4, "errors": 1, "unresolved": 0}
    got = group_rate([a, b, census], 0.95)
    la, ha = brute_interval(2, 2, 9, 20, 0.025)  # two cells with sampling error: each at 1 - 0.05 / 2
    lb, hb = brute_interval(5, 6, 29, 30, 0.025)
    assert got["wrong"] == [la + lb + 1, ha + hb + 1] and got["bonferroni_cells"] == 2
    assert got["interval"] == pytest.approx([(la + lb + 1) / 54, (ha + hb + 1) / 54], abs=1e-6)
    assert got["kind"] == "sampled"
    # point estimate: each cell's rate weighted by its share of the items
    assert got["error_rate"] == pytest.approx(20 / 54 * 2 / 9 + 30 / 54 * 5 / 28 + 4 / 54 * 1 / 4, abs=1e-6)


# ---- a release of 64 existence items ------------------------------------------------------------------------------


def _png(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return buf.getvalue()


def build_release(tmp_path, detector_model: str | None = None):
    """32 images (16 per distribution, red = dog, blue = cat), each asked "a dog?" and "a cat?": 64 existence items,
    32 stated "yes" and 32 "no", all true; and one count item. `detector_model`: a detector recorded as the one
    that filtered the images."""
    root = tmp_path / "results"
    (root / "images").mkdir(parents=True)
    ids, colours, rows = [], {}, []
    for i in range(32):
        image_id = f"{'std' if i % 2 else 'rnd'}-{i:02d}"
        colour = RED if i % 4 < 2 else BLUE
        ids.append(image_id)
        colours[image_id] = colour
        (root / "images" / f"{image_id}.png").write_bytes(_png(colour))
        for obj in ("dog", "cat"):
            rows.append(
                {
                    "query_id": f"{image_id}-{obj}",
                    "image_id": image_id,
                    "image": f"images/{image_id}.png",
                    "scene_id": image_id,
                    "task": "discriminative",
                    "distribution": "standard" if i % 2 else "random",
                    "pair_kind": "entity_entity",
                    "query_type": "existence",
                    "attribute_kind": None,
                    "question": f"Is there a {obj} in the picture?",
                    "truth": "yes" if SHOWN[colour] == obj else "no",
                    "target": obj,
                    "objects": [obj],
                }
            )
    rows.append({**rows[0], "query_id": "count-0", "query_type": "count", "question": "Is there one dog?"})
    accepted = pl.DataFrame(
        {
            "image_id": ids,
            "scene_id": ids,
            "distribution": ["standard" if i % 2 else "random" for i in range(32)],
            "pair_kind": ["entity_entity"] * 32,
            "path": [f"images/{i}.png" for i in ids],
        }
    )
    images = accepted.select(
        "image_id",
        "path",
        pl.Series("sha256", [sha256_bytes(_png(colours[i])) for i in ids]),
        pl.lit("tiny-flux").alias("model"),
        pl.lit(None, dtype=pl.String).alias("revision"),
        pl.lit(True).alias("stand_in"),
    )
    detections = []
    if detector_model:
        detections = [
            accepted.select(
                "image_id",
                pl.lit("dog").alias("label"),
                pl.lit(0.9).alias("score"),
                pl.lit(detector_model).alias("model"),
                pl.lit("0123abcd").alias("revision"),
                pl.lit(False).alias("stand_in"),
            )
        ]
    release = root / "release"
    package_release(
        release,
        root=root,
        accepted=accepted,
        queries=pl.DataFrame(rows),
        scenes=accepted.select("scene_id", "distribution", "pair_kind"),
        images=[images],
        detections=detections,
        config={"seed": 5, "ode": {"filter": {"keep_threshold": 0.0, "exclusion_threshold": 0.6}}},
        seed=5,
        name="sixty-four",
    )
    return release, colours


class Colour(Detector):
    def describe(self):
        return BackendInfo(role="detector", backend="colour", model="colour-detector", revision=None, stand_in=False)

    def detect(self, images, labels):
        return [
            [Detection(lab, 0.9 if lab == SHOWN[im.getpixel((0, 0))] else 0.05, (0, 0, 2, 2)) for lab in ls]
            for im, ls in zip(images, labels)
        ]


class Mute(VLM):
    """An oracle member that never answers yes or no: it decides nothing."""

    def describe(self):
        return BackendInfo(role="vlm", backend="mute", model="mute", revision=None, stand_in=False)

    def answer(self, requests):
        return ["I cannot tell." for _ in requests]

    def answer_results(self, requests):
        return [Result("I cannot tell.") for _ in requests]


def _label_csv(path, sample: pl.DataFrame, label_of) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["query_id", "truth", "label"])
        for r in sample.iter_rows(named=True):
            w.writerow([r["query_id"], r["truth"], label_of(r)])


def _flip(r) -> str:
    return {"yes": "no", "no": "yes"}[r["truth"]]


def test_six_wrong_of_62_labelled_covers_every_rate_the_unlabelled_allow(tmp_path, capsys):
    release, _ = build_release(tmp_path)
    out = tmp_path / "results" / "audit"
    summary = audit_release(release, out, detector=Colour())  # default margin 0.025: 62 of 64 existence items
    sample = pl.read_parquet(out / "sample.parquet")
    existence = sample.filter(pl.col("query_type") == "existence")
    assert existence.height == 62 and summary["sample"]["size"] == 63
    # 6 deliberate flips: 3 stated "yes", 3 stated "no"
    wrong = set(existence.filter(pl.col("truth") == "yes")["query_id"][:3].to_list())
    wrong |= set(existence.filter(pl.col("truth") == "no")["query_id"][:3].to_list())
    labels = tmp_path / "labels.csv"
    _label_csv(labels, sample, lambda r: _flip(r) if r["query_id"] in wrong else r["truth"])
    assert main(["release", "audit", str(release), "--labels", str(labels)]) == 0
    printed = capsys.readouterr().out
    rates = json.loads((release / "manifest.json").read_text())["audit"]["labels"]
    ex = rates["by_query_type"]["existence"]
    assert (ex["errors"], ex["labelled"], ex["population"]) == (6, 62, 64)
    low, high = ex["interval"]
    # every rate consistent with the 2 unlabelled items: 6/64 = 9.4% to 8/64 = 12.5%
    assert low <= 6 / 64 and high >= 8 / 64
    # and no narrower than the exact finite-population interval of 6 wrong in a simple random sample of 62 of 64
    exact_low, exact_high = brute_interval(6, 6, 62, 64, 0.05)
    assert (exact_low, exact_high) == (6, 7)  # alone it would leave out 8 wrong (P = 28/2016 < 0.025)
    assert low <= exact_low / 64 and high >= exact_high / 64
    # the split by stated answer, RePOPE's form, beside RePOPE's rates
    split = {(r["query_type"], r["truth"]): r for r in rates["by_query_type_answer"]}
    assert split["existence", "yes"]["errors"] == 3 and split["existence", "no"]["errors"] == 3
    assert split["existence", "yes"]["population"] == 32 and split["existence", "no"]["population"] == 32
    assert rates["by_answer"]["yes"]["errors"] == 3 and rates["repope"]["yes"] == 0.093
    card = (release / "DATACARD.md").read_text()
    assert "| query type / stated answer |" in card and "RePOPE (POPE)" in card
    assert '| existence / "yes" | 32 |' in card and "9.3%" in card and "1.7%" in card
    assert 'existence / "no"' in printed and "RePOPE, POPE: 1.7%" in printed and "RePOPE, POPE: 9.3%" in printed
    # the count item (1 of 1, labelled, right) is a census
    assert rates["by_query_type"]["count"]["kind"] == "census" and "exact (census)" in card
    assert "[0.0%, 0.0%]" not in card and verify_release(release) == []


def test_two_sampled_but_unlabelled_items_give_the_census_bounds(tmp_path, capsys):
    release, _ = build_release(tmp_path)
    out = tmp_path / "results" / "audit"
    audit_release(release, out, detector=Colour(), margin=0.01)  # n = 64 of 64: a census
    sample = pl.read_parquet(out / "sample.parquet")
    existence = sample.filter(pl.col("query_type") == "existence")["query_id"].to_list()
    assert len(existence) == 64
    wrong, blank = set(existence[:6]), set(existence[6:8])
    labels = tmp_path / "labels.csv"
    _label_csv(labels, sample, lambda r: "" if r["query_id"] in blank else _flip(r) if r["query_id"] in wrong else r["truth"])  # fmt: skip
    record = apply_labels(release, out, labels)
    ex = record["labels"]["by_query_type"]["existence"]
    assert ex["kind"] == "census-bounds" and ex["wrong"] == [6, 8]
    assert ex["interval"] == pytest.approx([6 / 64, 8 / 64], abs=1e-6)
    assert "[9.4%, 12.5%] (census bounds)" in (release / "DATACARD.md").read_text()


def test_the_releases_own_detector_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    release, _ = build_release(tmp_path, detector_model="google/owlv2-base-patch16-ensemble")
    for name in ("google/owlv2-base-patch16-ensemble", "Google/OWLv2-base-patch16-ensemble"):
        assert main(["release", "audit", str(release), "--detector", name, "--oracle", "none"]) == 1
        err = capsys.readouterr().err.strip()
        assert "is the release's own detector google/owlv2-base-patch16-ensemble (revision 0123abcd)" in err
        assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "results" / "audit").exists()


def test_a_copy_of_the_release_detector_folder_is_refused(tmp_path):
    folder = tmp_path / "owl"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "owlv2"}')
    release, _ = build_release(tmp_path, detector_model=str(folder))
    copy = tmp_path / "owl-copy"
    copy.mkdir()
    (copy / "config.json").write_text('{"model_type": "owlv2"}')

    class Copy(Colour):
        def describe(self):
            return BackendInfo(role="detector", backend="transformers", model=str(copy), stand_in=False)

    with pytest.raises(ConfigError, match="is the release's own detector"):
        audit_release(release, tmp_path / "audit", detector=Copy())


def test_oracle_members_under_test_are_refused_unless_allowed(tmp_path, capsys):
    config = {
        "models": [
            {"name": "qwen", "backend": "transformers", "args": {"model": "Qwen/Qwen2-VL-2B-Instruct"}},
            {"name": "llava", "backend": "transformers", "args": {"model": "llava-hf/llava-1.5-7b-hf"}},
        ],
        "caos": {
            "oracle": {
                "members": [
                    "qwen",
                    {"backend": "transformers", "args": {"model": "llava-hf/llava-1.5-7b-hf"}},  # the same model
                    {"backend": "transformers", "args": {"model": "OpenGVLab/InternVL2-2B"}},
                ]
            }
        },
    }
    with pytest.raises(ConfigError, match=r"qwen is a model under test .*--allow-dependent-oracle"):
        oracle_choice(config, ["qwen"], False)
    specs, record = oracle_choice(config, ["qwen"], True)
    assert [s["name"] for s in specs] == ["qwen"] and record["dependent_members"] == ["qwen"]
    # the default oracle leaves the models under test (by name or by model) out and says so
    specs, record = oracle_choice(config, None, False)
    assert [s["args"]["model"] for s in specs] == ["OpenGVLab/InternVL2-2B"]
    assert record["left_out_dependent"] == ["qwen", "oracle-1"]
    # allowed by choice: every output says so
    release, _ = build_release(tmp_path)
    out = tmp_path / "results" / "audit"
    summary = audit_release(
        release, out, detector=Colour(), oracle_members=[Model("vlm", Mute(), name="qwen")], dependent_oracle=["qwen"]
    )
    assert summary["independence"]["note"].startswith("DEPENDENT ORACLE: qwen is a model under test")
    sample = pl.read_parquet(out / "sample.parquet")
    labels = tmp_path / "labels.csv"
    _label_csv(labels, sample, lambda r: r["truth"])
    assert main(["release", "audit", str(release), "--labels", str(labels)]) == 0
    assert "WARNING: DEPENDENT ORACLE: qwen" in capsys.readouterr().out
    assert "**DEPENDENT ORACLE: qwen" in (release / "DATACARD.md").read_text()


def test_judges_that_decide_nothing_leave_the_rate_to_human_labels(tmp_path, capsys):
    release, _ = build_release(tmp_path)
    out = tmp_path / "results" / "audit"
    summary = audit_release(release, out, oracle_members=[Model("vlm", Mute(), name="mute")])
    assert summary["totals"]["oracle_judged"] == 0
    assert "rests on human labels only" in summary["human_only"]
    sample = pl.read_parquet(out / "sample.parquet")
    labels = tmp_path / "labels.csv"
    _label_csv(labels, sample, lambda r: r["truth"])
    assert main(["release", "audit", str(release), "--labels", str(labels)]) == 0
    assert "decided none of the 65 yes/no items" in capsys.readouterr().out
    assert "rests on human labels only" in (release / "DATACARD.md").read_text()
