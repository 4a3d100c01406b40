"""The label audit (`halluflow release audit`): hand-worked sample sizes and Wilson intervals, the verifiers' counts
on a tiny release built here (a colour detector and a colour-reading oracle whose verdicts are known), the labels
CSV round trip into DATACARD and manifest (`release verify` still passes), and the annotation page in Chromium."""

from __future__ import annotations

import csv
import html
import io
import json
import re

import polars as pl
import pytest
from browser import chromium, console_errors, require_chromium
from PIL import Image

from halluflow.backends.base import VLM, BackendInfo, Detection, Detector, Result
from halluflow.cli import main
from halluflow.errors import InputError
from halluflow.io import sha256_bytes
from halluflow.models.model import Model
from halluflow.ode.audit import (
    allocate,
    apply_labels,
    audit_release,
    group_rate,
    interval_text,
    sample_size,
    wilson_interval,
    with_audit_section,
)
from halluflow.ode.release import package_release, update_release, verify_release

Z95 = 1.959963984540054  # the 97.5% normal quantile, from a table
COLOUR_OBJECT = {(255, 0, 0): "dog", (0, 0, 255): "cat"}


# ---- statistics, worked by hand -------------------------------------------------------------------------------


def test_sample_sizes_worked_by_hand():
    # n0 = z^2 p (1 - p) / e^2 = 3.841459 * 0.25 / 0.000625 = 1536.58; n = n0 / (1 + (n0 - 1) / N), rounded up
    assert sample_size(1000) == 607  # 1536.58 / (1 + 1535.58 / 1000) = 1536.58 / 2.53558 = 606.01
    assert sample_size(50) == 49  # 1536.58 / (1 + 1535.58 / 50) = 1536.58 / 31.7117 = 48.45
    assert sample_size(10**9) == 1537  # no correction left: ceil(1536.58)
    assert sample_size(10**9, margin=0.05) == 385  # 3.841459 * 0.25 / 0.0025 = 384.15, the textbook 385
    assert sample_size(10**9, expected=0.1) == 554  # 3.841459 * 0.09 / 0.000625 = 553.17
    assert sample_size(10**9, confidence=0.99) == 2654  # 2.575829^2 * 0.25 / 0.000625 = 2653.9
    assert sample_size(3) == 3 and sample_size(0) == 0


def test_wilson_intervals_worked_by_hand():
    # 3 of 50: p = 0.06, z^2/n = 3.841459/50 = 0.0768292; centre = (0.06 + 0.0384146) / 1.0768292 = 0.0913929;
    # half = 1.959964 / 1.0768292 * sqrt(0.06 * 0.94 / 50 + 3.841459 / 10000) = 1.820131 * 0.0388863 = 0.0707782
    low, high = wilson_interval(3, 50)
    assert low == pytest.approx(0.0913929 - 0.0707782, abs=1e-6) and round(low, 4) == 0.0206
    assert high == pytest.approx(0.0913929 + 0.0707782, abs=1e-6) and round(high, 4) == 0.1622
    # 0 of 10: [0, z^2 / (n + z^2)] = [0, 3.841459 / 13.841459]
    low, high = wilson_interval(0, 10)
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(3.841459 / 13.841459, abs=1e-6)


def test_group_rate_of_a_census_and_of_cells_without_labels():
    # every item labelled, none wrong: the rate is known exactly ("exact (census)", never "[0.0%, 0.0%]")
    full = group_rate([{"population": 5, "sampled": 5, "labelled": 5, "errors": 0, "unresolved": 0}])
    assert full["kind"] == "census" and interval_text(full) == "exact (census)"
    # a cell without labels is named, left out of the point estimate and covered whole by the interval
    part = group_rate(
        [
            {"population": 5, "sampled": 0, "labelled": 0, "errors": 0, "unresolved": 0},
            {"population": 5, "sampled": 5, "labelled": 5, "errors": 1, "unresolved": 0},
        ]
    )
    assert part["strata_without_labels"] == 1 and part["error_rate"] == pytest.approx(0.2)
    assert part["wrong"] == [1, 6] and part["interval"] == pytest.approx([0.1, 0.6])


def test_allocation_is_proportional_with_one_per_stratum():
    assert allocate({"a": 50, "b": 30, "c": 20}, 10) == {"a": 5, "b": 3, "c": 2}
    assert allocate({"a": 50, "b": 30, "c": 20}, 7) == {"a": 4, "b": 2, "c": 1}  # 3.5, 2.1, 1.4: a keeps .5
    assert allocate({"a": 1, "b": 1000}, 10) == {"a": 1, "b": 9}  # the small stratum still gets one
    assert allocate({"a": 50, "b": 30, "c": 20}, 2) == {"a": 1, "b": 1, "c": 0}  # too few for one each
    assert allocate({"a": 3, "b": 0}, 5) == {"a": 3, "b": 0}


# ---- a tiny release with known contents -------------------------------------------------------------------------

IMAGES = {  # image id -> (colour, distribution)
    "std-0": ((255, 0, 0), "standard"),
    "std-1": ((0, 0, 255), "standard"),
    "rnd-0": ((255, 0, 0), "random"),
    "rnd-1": ((0, 0, 255), "random"),
}
OTHER = {"dog": "cat", "cat": "dog"}


def _queries() -> list[dict]:
    rows = []

    def q(image_id, query_type, question, truth, target, attribute_kind=None):
        rows.append(
            {
                "query_id": f"{image_id}-{len(rows):02d}",
                "image_id": image_id,
                "image": f"images/{image_id}.png",
                "scene_id": image_id,
                "task": "generative" if query_type == "generative" else "discriminative",
                "distribution": IMAGES[image_id][1],
                "pair_kind": "entity_entity",
                "query_type": query_type,
                "attribute_kind": attribute_kind,
                "question": question,
                "truth": truth,
                "target": target,
                "objects": [target],
            }
        )

    for image_id, (colour, _) in IMAGES.items():
        shown = COLOUR_OBJECT[colour]
        q(image_id, "generative", "Please describe this picture.", None, None)
        q(image_id, "existence", f"Is there a {shown} in the picture?", "yes", shown)
        other = OTHER[shown]
        # rnd-1 states a wrong "yes": a dog on the blue (cat) image
        q(image_id, "existence", f"Is there a {other} in the picture?", "yes" if image_id == "rnd-1" else "no", other)
        q(image_id, "counterfactual", "Is there a kite in the picture?", "no", "kite")
        q(image_id, "attribute", f"Is the {shown} red?", "yes" if colour == (255, 0, 0) else "no", shown, "state")
    q("std-0", "attribute", 'Is the dog "red", really?', "yes", "dog", "state")  # quotes and a comma in CSV
    q("std-1", "attribute", "Is the cat blue?", "no", "cat", "state")  # wrong: the cat is blue
    q("std-0", "count", "Is there one dog?", "yes", "dog")
    return rows


def _png(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), colour).save(buf, format="PNG")
    return buf.getvalue()


def build_release(tmp_path, stand_in: bool = True):
    root = tmp_path / "results"
    for image_id, (colour, _) in IMAGES.items():
        (root / "images").mkdir(parents=True, exist_ok=True)
        (root / "images" / f"{image_id}.png").write_bytes(_png(colour))
    ids = list(IMAGES)
    accepted = pl.DataFrame(
        {
            "image_id": ids,
            "scene_id": ids,
            "distribution": [IMAGES[i][1] for i in ids],
            "pair_kind": ["entity_entity"] * 4,
            "path": [f"images/{i}.png" for i in ids],
        }
    )
    images = accepted.select(
        "image_id",
        "path",
        pl.Series("sha256", [sha256_bytes(_png(IMAGES[i][0])) for i in ids]),
        pl.lit("tiny-flux").alias("model"),
        pl.lit(None, dtype=pl.String).alias("revision"),
        pl.lit(stand_in).alias("stand_in"),
    )
    release = tmp_path / "results" / "release"
    package_release(
        release,
        root=root,
        accepted=accepted,
        queries=pl.DataFrame(_queries()),
        scenes=accepted.select("scene_id", "distribution", "pair_kind"),
        images=[images],
        detections=[],
        config={"seed": 3, "ode": {"filter": {"keep_threshold": 0.0, "exclusion_threshold": 0.6}}},
        seed=3,
        name="tiny",
    )
    return release


class ColourDetector(Detector):
    """Scores 0.9 for the object the image's colour shows (red: dog, blue: cat), 0.05 for any other label."""

    def describe(self):
        return BackendInfo(role="detector", backend="colour", model="colour-detector", revision=None, stand_in=False)

    def detect(self, images, labels):
        out = []
        for im, ls in zip(images, labels):
            shown = COLOUR_OBJECT[im.getpixel((0, 0))]
            out.append([Detection(lab, 0.9 if lab == shown else 0.05, (0.0, 0.0, 4.0, 4.0)) for lab in ls])
        return out


class ColourOracle(VLM):
    """An oracle member that reads the image's colour: yes when the question names the object shown (and says
    'red' only of a red image); `abstain` answers neither yes nor no."""

    def __init__(self, name: str, abstain: bool = False):
        self.name, self.abstain = name, abstain

    def describe(self):
        return BackendInfo(role="vlm", backend="colour", model=self.name, revision=None, stand_in=False)

    def answer(self, requests):
        return [r.text for r in self.answer_results(requests)]

    def answer_results(self, requests):
        out = []
        for r in requests:
            with Image.open(r.image_path) as im:
                colour = im.convert("RGB").getpixel((0, 0))
            shown = COLOUR_OBJECT[colour]
            yes = shown in r.prompt and ("red" not in r.prompt or colour == (255, 0, 0))
            out.append(Result("I cannot tell." if self.abstain else ("Yes." if yes else "No.")))
        return out


@pytest.fixture
def audited(tmp_path):
    release = build_release(tmp_path)
    out = tmp_path / "results" / "audit"
    summary = audit_release(
        release,
        out,
        detector=ColourDetector(),
        oracle_members=[
            Model("vlm", ColourOracle("reader"), name="reader"),
            Model("vlm", ColourOracle("mute", abstain=True), name="mute"),
        ],
        margin=0.3,
    )
    return release, out, summary


def test_verifier_counts_on_a_known_release(audited):
    release, out, summary = audited
    counts = {(r["query_type"], r["distribution"]): r for r in summary["by_query_type_distribution"]}
    # 4 images x (2 existence, 1 counterfactual, 1 attribute) + 2 attribute + 1 count = 19 yes/no items
    assert summary["items"] == 19 and sum(r["items"] for r in counts.values()) == 19
    assert {k: v["items"] for k, v in counts.items()} == {
        ("attribute", "random"): 2,
        ("attribute", "standard"): 4,
        ("count", "standard"): 1,
        ("counterfactual", "random"): 2,
        ("counterfactual", "standard"): 2,
        ("existence", "random"): 4,
        ("existence", "standard"): 4,
    }
    # the detector judges the 12 object items; it contradicts only rnd-1's wrong "yes, a dog"
    assert {k: (v["detector_judged"], v["detector_disagrees"]) for k, v in counts.items()} == {
        ("attribute", "random"): (0, 0),
        ("attribute", "standard"): (0, 0),
        ("count", "standard"): (0, 0),
        ("counterfactual", "random"): (2, 0),
        ("counterfactual", "standard"): (2, 0),
        ("existence", "random"): (4, 1),
        ("existence", "standard"): (4, 0),
    }
    # the oracle (one reader, one member that abstains: majority of 1 to 0) judges all 19 and finds both errors
    assert all(v["oracle_judged"] == v["items"] for v in counts.values())
    assert {k: v["oracle_disagrees"] for k, v in counts.items() if v["oracle_disagrees"]} == {
        ("existence", "random"): 1,
        ("attribute", "standard"): 1,
    }
    assert summary["totals"] == {
        "detector_judged": 12,
        "detector_disagrees": 1,
        "oracle_judged": 19,
        "oracle_disagrees": 2,
        "oracle_undecided": 0,
        "flagged": 2,
    }
    table = pl.read_parquet(out / "verifiers.parquet")
    flagged = sorted(table.filter("flagged")["question"].to_list())
    assert flagged == ["Is the cat blue?", "Is there a dog in the picture?"]
    assert set(table["oracle_abstain"].to_list()) == {1}  # the mute member abstained on every item
    assert summary["stand_in_verifiers"] is False and summary["warning"] is None
    assert verify_release(release) == []  # the audit wrote nothing into the release


def test_sample_is_stratified_and_sized(audited):
    _, out, summary = audited
    sample = pl.read_parquet(out / "sample.parquet")
    design = {(s["query_type"], s["distribution"]): s for s in summary["sample"]["strata"]}
    # margin 0.3: n0 = 3.841459 * 0.25 / 0.09 = 10.671; existence N = 8: 10.671 / (1 + 9.671 / 8) = 4.83 -> 5,
    # split 2.5 / 2.5 and the tie goes to the first stratum (random); attribute N = 6: 10.671 / 2.4785 = 4.31 -> 5
    assert (design["existence", "random"]["sampled"], design["existence", "standard"]["sampled"]) == (3, 2)
    assert design["attribute", "random"]["sampled"] + design["attribute", "standard"]["sampled"] == 5
    assert design["count", "standard"]["sampled"] == 1
    assert sample.height == sum(s["sampled"] for s in design.values()) == summary["sample"]["size"]
    for (qt, dist), s in design.items():
        assert sample.filter((pl.col("query_type") == qt) & (pl.col("distribution") == dist)).height == s["sampled"]
    assert sample["truth"].is_in(["yes", "no"]).all()


def _write_labels(path, sample: pl.DataFrame, label_of) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["query_id", "image_id", "query_type", "distribution", "question", "truth", "label"])
        for r in sample.iter_rows(named=True):
            w.writerow([r["query_id"], r["image_id"], r["query_type"], r["distribution"], r["question"], r["truth"],
                        label_of(r)])  # fmt: skip


def _true_answer(row) -> str:
    colour = IMAGES[row["image_id"]][0]
    shown = COLOUR_OBJECT[colour]
    q = row["question"]
    return "yes" if shown in q and ("red" not in q or colour == (255, 0, 0)) else "no"


def test_labels_round_trip_into_datacard_and_manifest(audited, tmp_path, capsys):
    release, out, _ = audited
    sample = pl.read_parquet(out / "sample.parquet")
    labels = tmp_path / "labels.csv"
    # the annotator answers what the image shows, except one existence item left unsure
    unsure = sample.filter(pl.col("query_type") == "existence")["query_id"][0]
    _write_labels(labels, sample, lambda r: "unsure" if r["query_id"] == unsure else _true_answer(r))
    assert main(["release", "audit", str(release), "--labels", str(labels)]) == 0
    printed = capsys.readouterr().out
    assert verify_release(release) == []  # DATACARD.md, README.md and manifest.json re-hashed
    manifest = json.loads((release / "manifest.json").read_text())
    rates = manifest["audit"]["labels"]
    # expected by hand: an error is a sampled wrong stated truth; each cell (query type x distribution x stated
    # answer) weighted N_c / N over the labelled cells of its query type
    wrong = {r["query_id"] for r in sample.iter_rows(named=True) if _true_answer(r) != r["truth"]}
    cells = {}
    for r in sample.iter_rows(named=True):
        c = cells.setdefault((r["query_type"], r["distribution"], r["truth"]), {"labelled": 0, "errors": 0})
        if r["query_id"] != unsure:
            c["labelled"] += 1
            c["errors"] += r["query_id"] in wrong
    items = pl.read_parquet(release / "queries.parquet").filter(pl.col("truth").is_in(["yes", "no"]))
    population = {tuple(k): n for *k, n in items.group_by("query_type", "distribution", "truth").len().iter_rows()}
    for qt in ("attribute", "count", "counterfactual", "existence"):
        keys = [k for k in cells if k[0] == qt and cells[k]["labelled"]]
        n_pop = sum(population[k] for k in keys)
        expected = sum(population[k] / n_pop * cells[k]["errors"] / cells[k]["labelled"] for k in keys)
        got = rates["by_query_type"][qt]
        assert got["error_rate"] == pytest.approx(expected, abs=1e-6), qt
        assert got["labelled"] == sum(cells[k]["labelled"] for k in keys)
        assert got["population"] == sum(n for k, n in population.items() if k[0] == qt)
        assert got["interval"][0] <= got["errors"] / got["population"] <= got["interval"][1]
    assert rates["unsure"] == 1 and rates["labelled"] == sample.height - 1
    assert rates["overall"]["errors"] == len(wrong - {unsure})
    card = (release / "DATACARD.md").read_text()
    assert card.count("## Label audit") == 1 and "| overall |" in card and "95% interval" in card
    assert "| existence | random | 4 | 1 of 4 | 1 of 4 | 1 |" in card
    assert "## Label audit" in (release / "README.md").read_text()  # the dataset card carries the data card
    assert "\n  overall " in printed and "recorded in" in printed
    # a second label file replaces the section (and the manifest entry), never stacks them
    _write_labels(labels, sample, lambda r: r["truth"])
    assert main(["release", "audit", str(release), "--labels", str(labels)]) == 0
    card = (release / "DATACARD.md").read_text()
    assert card.count("## Label audit") == 1 and f"| overall | 19 | {sample.height} | 0 | 0.0% |" in card
    assert verify_release(release) == []


def test_bad_labels_are_one_line_and_change_nothing(audited, tmp_path, capsys):
    release, out, _ = audited
    before = (release / "manifest.json").read_bytes()
    sample = pl.read_parquet(out / "sample.parquet")
    bad = tmp_path / "bad.csv"
    _write_labels(bad, sample, lambda r: "maybe")
    assert main(["release", "audit", str(release), "--labels", str(bad)]) == 1
    assert "label 'maybe' is not one of yes, no, unsure" in capsys.readouterr().err
    bad.write_text("query_id,label\nnot-sampled,yes\n")
    assert main(["release", "audit", str(release), "--labels", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "line 2: query_id 'not-sampled' is not in this audit's sample" in err and "Traceback" not in err
    first = sample.row(0, named=True)
    bad.write_text(f"query_id,truth,label\n{first['query_id']},{'no' if first['truth'] == 'yes' else 'yes'},yes\n")
    assert main(["release", "audit", str(release), "--labels", str(bad)]) == 1
    assert "is not the release's" in capsys.readouterr().err
    assert (release / "manifest.json").read_bytes() == before and verify_release(release) == []
    with pytest.raises(InputError, match="no audit to label"):
        apply_labels(release, tmp_path / "elsewhere", bad)


def test_update_release_refuses_what_it_must_not_touch(tmp_path):
    release = build_release(tmp_path)
    with pytest.raises(InputError, match="notes.txt is not a file of this release"):
        update_release(release, {"notes.txt": "x"}, {})
    with pytest.raises(InputError, match="key 'files' describes the build"):
        update_release(release, {}, {"files": {}})
    (release / "stray.txt").write_text("x")
    with pytest.raises(InputError, match="does not verify"):
        update_release(release, {"DATACARD.md": "x"}, {})


def test_audit_section_is_replaced_not_stacked():
    card = "# Data card\n\n## Files\nx\n"
    once = with_audit_section(card, "## Label audit\n\nfirst\n")
    twice = with_audit_section(once, "## Label audit\n\nsecond\n")
    assert twice.count("## Label audit") == 1 and "second" in twice and "first" not in twice
    assert twice.startswith("# Data card\n\n## Files\nx\n")
    middle = with_audit_section("# C\n\n## Label audit\n\nold\n\n## Later\ny\n", "## Label audit\n\nnew\n")
    assert middle == "# C\n\n## Label audit\n\nnew\n\n## Later\ny\n"


def test_cli_with_stand_in_detector_says_so(tmp_path, capsys, monkeypatch):
    """The offline default: a tiny random OWLv2 (other weights than the release's) re-judges the object items."""
    monkeypatch.chdir(tmp_path)  # no ./config.yaml: the schema's audit defaults
    release = build_release(tmp_path)
    assert main(["release", "audit", str(release), "--oracle", "none"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("WARNING: the verifiers are randomly initialised STAND-IN models")
    summary = json.loads((tmp_path / "results" / "audit" / "audit.json").read_text())
    assert summary["stand_in_verifiers"] is True and summary["verifiers"]["detector"]["stand_in"] is True
    assert summary["verifiers"]["detector"]["model"] == "tiny-owlv2 stand-in (seed 1)"  # no temporary path
    table = pl.read_parquet(tmp_path / "results" / "audit" / "verifiers.parquet")
    judged = table.filter(pl.col("detector_says").is_not_null())
    assert judged.height == 12 and summary["totals"]["oracle_judged"] == 0
    # the counts are those of the per-item verdicts: score >= the release's exclusion threshold 0.6 means "yes"
    says = ["yes" if s >= 0.6 else "no" for s in judged["detector_score"].to_list()]
    assert says == judged["detector_says"].to_list()
    assert summary["totals"]["detector_disagrees"] == sum(s != t for s, t in zip(says, judged["truth"].to_list()))


def test_cli_refuses_a_stand_in_detector_for_a_real_release(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    release = build_release(tmp_path, stand_in=False)
    assert main(["release", "audit", str(release), "--oracle", "none"]) == 1
    err = capsys.readouterr().err
    assert "audit detector (--detector, config key audit.detector): the release was made with real models" in err
    assert "Traceback" not in err
    assert main(["release", "audit", str(release), "--oracle", "none", "--out", str(release / "audit")]) == 1
    assert "inside the release" in capsys.readouterr().err


# ---- the page in a browser --------------------------------------------------------------------------------------


def test_annotation_page_in_headless_chromium(audited, tmp_path):
    require_chromium()
    release, out, summary = audited
    page = out / "annotate.html"
    text = page.read_text()
    assert "http://" not in text and "https://" not in text  # nothing fetched: images are data URIs
    sample = pl.read_parquet(out / "sample.parquet")
    dom = chromium(page.as_uri(), "--dump-dom", profile=tmp_path / "dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'id="save"' in dom.stdout and 'id="audit-data"' in dom.stdout and "<img" in dom.stdout
    assert f"1 / {sample.height}" in dom.stdout  # the script ran and shows the first item
    assert not console_errors(dom), console_errors(dom)
    # ?selftest presses the arrows, then y / n / u through the page's own key handler, and writes the CSV
    run = chromium(page.as_uri() + "?selftest", "--dump-dom", profile=tmp_path / "selftest")
    assert run.returncode == 0, run.stderr[-2000:]
    match = re.search(r'<pre id="selftest-csv" data-navigation="(\w+)">(.*?)</pre>', run.stdout, re.S)
    assert match and match.group(1) == "ok"
    saved = html.unescape(match.group(2))
    rows = list(csv.DictReader(io.StringIO(saved, newline="")))
    expected = []
    for i, r in enumerate(sample.iter_rows(named=True)):  # the pattern the self-test presses
        flip = {"yes": "no", "no": "yes"}[r["truth"]]
        expected.append(flip if i % 10 == 3 else "unsure" if i % 10 == 7 else r["truth"])
    assert [r["label"] for r in rows] == expected
    assert [r["question"] for r in rows] == sample["question"].to_list()  # quotes and commas survive
    labels = tmp_path / "labels-tiny.csv"
    labels.write_text(saved, encoding="utf-8")
    record = apply_labels(release, out, labels)
    n_errors = sum(i % 10 == 3 for i in range(sample.height))
    assert record["labels"]["overall"]["errors"] == n_errors
    assert record["labels"]["unsure"] == sum(i % 10 == 7 for i in range(sample.height))
    assert verify_release(release) == []
    shot = tmp_path / "audit.png"
    snap = chromium(page.as_uri(), f"--screenshot={shot}", "--window-size=1200,900", profile=tmp_path / "shot")
    assert snap.returncode == 0, snap.stderr[-2000:]
    with Image.open(shot) as img:
        assert img.size == (1200, 900)
        assert img.getpixel((5, 5))[0] < 60  # the dark header is drawn


# ---- settings and wiring ----------------------------------------------------------------------------------------


def test_settings_come_from_schema_then_config_then_options():
    from halluflow.errors import ConfigError
    from halluflow.models import oracle_specs
    from halluflow.ode.audit import audit_settings

    assert audit_settings({})["margin"] == 0.025 and audit_settings({})["detector"] is None
    cfg = {"audit": {"margin": 0.05, "confidence": 0.9}}
    assert audit_settings(cfg, {"margin": 0.01, "confidence": None}) | {} == {
        **audit_settings({}),
        "margin": 0.01,
        "confidence": 0.9,
    }
    with pytest.raises(ConfigError, match="audit.colour"):
        audit_settings({"audit": {"colour": 1}})
    models = [
        {"name": "v", "backend": "transformers"},
        {"name": "b", "backend": "blind"},
        {"name": "p", "backend": "prior"},
    ]
    # default: every model that looks at the image; caos.oracle.members first when set; [] none; names by name
    assert [m["name"] for m in oracle_specs({"models": models})] == ["v"]
    caos = {"oracle": {"members": ["p"]}}
    assert [m["name"] for m in oracle_specs({"models": models, "caos": caos})] == ["p"]
    assert oracle_specs({"models": models}, []) == []
    assert [m["name"] for m in oracle_specs({"models": models}, ["b", "v"])] == ["b", "v"]
    with pytest.raises(ConfigError, match="audit oracle 'x': not a `models:` entry"):
        oracle_specs({"models": models}, ["x"])


def test_workflow_plans_the_audit_only_when_asked(tmp_path):
    from workflow_utils import copy_workflow, run_snakemake

    work = copy_workflow(tmp_path / "wf")
    asked = run_snakemake(work, "-n", "results/ode-demo/audit/audit.json")
    planned = re.compile(r"^\s*release_audit\s+1\s*$", re.M)  # a row of the job-count table
    assert planned.search(asked.stdout + asked.stderr)
    default = run_snakemake(work, "-n")
    assert not planned.search(default.stdout + default.stderr)
    assert "report_release_audit" in default.stdout + default.stderr  # the table was printed


def test_report_shows_the_audit_beside_the_release(audited, tmp_path):
    from halluflow.report.summary import ReportOptions, build_summary

    release, out, _ = audited
    root = release.parent  # results/<release>: the report reads its scenes/ beside release/ and audit/
    scenes = pl.read_parquet(release / "scenes.parquet").with_columns(
        pl.lit("dog").alias("object_a"), pl.lit("cat").alias("object_b")
    )
    (root / "scenes").mkdir()
    scenes.write_parquet(root / "scenes" / "scenes.parquet")
    page = build_summary(root, tmp_path / "before.html", ReportOptions(gallery_size=1, dpi=30)).read_text()
    audit = page[page.index("<h3>Label audit</h3>") :]
    # existence / random: 4 items, the detector judged 4 and disagreed on 1, the oracle too, 1 flagged
    assert "<td>4</td><td>4</td><td>1</td><td>4</td><td>1</td><td>1</td>" in audit
    assert "no human labels recorded yet" in audit
    sample = pl.read_parquet(out / "sample.parquet")
    labels = tmp_path / "labels.csv"
    _write_labels(labels, sample, lambda r: r["truth"])
    apply_labels(release, out, labels)
    page = build_summary(root, tmp_path / "after.html", ReportOptions(gallery_size=1, dpi=30)).read_text()
    audit = page[page.index("<h3>Label audit</h3>") :]
    assert (
        "Human label-error rates" in audit
        and f'<td class="text">overall</td><td>19</td><td>{sample.height}</td>' in audit
    )
    assert "RePOPE" in audit and "exact (census)" in audit


def test_labels_from_a_fifo(audited, tmp_path):
    """Labels may come through a pipe: read once, hashed from what was read."""
    import hashlib
    import os
    import threading

    release, out, _ = audited
    sample = pl.read_parquet(out / "sample.parquet")
    plain = tmp_path / "labels.csv"
    _write_labels(plain, sample, lambda r: r["truth"])
    fifo = tmp_path / "labels.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(plain.read_bytes()))
    writer.start()
    assert main(["release", "audit", str(release), "--labels", str(fifo)]) == 0
    writer.join(timeout=10)
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["audit"]["labels"]["labels_sha256"] == hashlib.sha256(plain.read_bytes()).hexdigest()
    assert manifest["audit"]["labels"]["overall"]["errors"] == 0 and verify_release(release) == []
