"""`halluflow release validity`: per-model scores on an ODE release and a static real-image set restricted to their
shared concepts, their differences (ODE's Fig. 7), and Spearman / Kendall rank correlations across models.

The hand-built runs give four models known accuracies on both sides (every other question is answered wrongly, so
counting one that should be left out changes the numbers); the expected rank correlations are worked by hand below.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

# Correct answers out of 10 shared questions per side. Ranks (ascending): ODE D<B<C<A, real D<C<A<B.
# Spearman: d = (A 4-3, B 2-4, C 3-2, D 1-1) = (1, -2, 1, 0), sum d^2 = 6, rho = 1 - 6*6 / (4*(16-1)) = 0.4.
# Kendall: of the 6 pairs, AB and BC are discordant, AC AD BD CD concordant: tau = (4 - 2) / 6 = 1/3.
ODE_CORRECT = {"A": 9, "B": 7, "C": 8, "D": 5}
REAL_CORRECT = {"A": 8, "B": 9, "C": 6, "D": 5}
SHARED = ["dog", "car"]


def _flip(x: str) -> str:
    return "no" if x == "yes" else "yes"


def _ode_run(root: Path, correct: dict[str, int]) -> Path:
    """An ODE result folder: release/queries.parquet, scores/<model>/answers.parquet, metrics/<model>.json."""
    rows = []
    for i in range(10):  # existence questions on shared concepts (counterfactual ones among them)
        rows.append(
            (f"q{i}", "existence" if i < 8 else "counterfactual", None, SHARED[i % 2], "yes" if i % 2 else "no")
        )
    rows += [(f"u{i}", "existence", None, "unicorn", "yes") for i in range(4)]  # not in the real set
    rows += [(f"a{i}", "attribute", "action", "dog", "yes") for i in range(3)]  # not an existence question
    rows += [(f"c{i}", "count", None, "Car", "no") for i in range(3)]
    queries = pl.DataFrame(rows, schema=["query_id", "query_type", "attribute_kind", "target", "truth"], orient="row")
    (root / "release").mkdir(parents=True)
    queries.drop("truth").write_parquet(root / "release" / "queries.parquet")
    for model, k in correct.items():
        truth = queries["truth"].to_list()
        parsed = [t if i < k else _flip(t) for i, t in enumerate(truth)]  # wrong after the first k, and off-scope
        scored = pl.DataFrame(
            {"query_id": queries["query_id"], "truth": truth, "parsed": parsed, "failed": [False] * len(truth)}
        )
        (root / "scores" / model).mkdir(parents=True)
        scored.write_parquet(root / "scores" / model / "answers.parquet")
        (root / "metrics").mkdir(exist_ok=True)
        doc = {"model": model, "parser": "pope", "positive": "yes", "stand_in": model == "D"}
        (root / "metrics" / f"{model}.json").write_text(json.dumps(doc))
    return root


def _pope_run(root: Path, correct: dict[str, int]) -> tuple[Path, Path]:
    """A POPE-source result folder (answers/<model>/0.parquet, metrics/<model>.json) and its label file."""
    labels = [
        {
            "question_id": i + 1,
            "image": f"img{i}.jpg",
            "text": f"Is there a {SHARED[i % 2]} in the image?",
            "label": "yes" if i % 3 else "no",
        }
        for i in range(10)
    ]
    labels += [
        {"question_id": 100 + i, "image": "z.jpg", "text": "Is there a zebra in the image?", "label": "yes"}
        for i in range(4)
    ]
    labels.append({"question_id": 200, "image": "f.jpg", "text": "Is there a dog in the image?", "label": "yes"})
    path = root / "labels.jsonl"
    root.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in labels))
    for model, k in correct.items():
        answers = []
        for i, r in enumerate(labels):
            right = i < k
            word = r["label"] if right else _flip(r["label"])
            status = "failed" if r["question_id"] == 200 else "ok"  # a failed request: never scored
            answers.append(
                {"query_id": str(r["question_id"]), "model": model, "answer": word.title() + ".", "status": status}
            )
        (root / "run" / "answers" / model).mkdir(parents=True)
        pl.DataFrame(answers).write_parquet(root / "run" / "answers" / model / "0.parquet")
        (root / "run" / "metrics").mkdir(exist_ok=True)
        doc = {"model": model, "source": "pope", "stand_in": False, "pope": {"parser": "pope", "positive": "yes"}}
        (root / "run" / "metrics" / f"{model}.json").write_text(json.dumps(doc))
    return root / "run", path


@pytest.fixture
def runs(tmp_path):
    ode = _ode_run(tmp_path / "ode", ODE_CORRECT)
    real, labels = _pope_run(tmp_path / "pope", REAL_CORRECT)
    return ode, real, labels


def test_four_models_hand_worked(runs):
    from halluflow.validity import validity

    ode, real, labels = runs
    doc = validity(ode, real, str(labels), n_resamples=300, seed=3)
    assert doc["shared_concepts"] == ["car", "dog"]
    assert doc["n_questions"] == {"ode": 10, "real": 11}
    rows = {r["model"]: r for r in doc["models"]}
    for m in "ABCD":
        assert rows[m]["ode"]["value"] == pytest.approx(ODE_CORRECT[m] / 10)
        assert rows[m]["real"]["value"] == pytest.approx(REAL_CORRECT[m] / 10)
        assert rows[m]["difference"]["value"] == pytest.approx((ODE_CORRECT[m] - REAL_CORRECT[m]) / 10)
        assert rows[m]["ode"]["n"] == 10 and rows[m]["real"]["n"] == 10 and rows[m]["real"]["n_failed"] == 1
        for side in ("ode", "real", "difference"):
            cell = rows[m][side]
            assert cell["ci_low"] <= cell["value"] + 1e-12 and cell["value"] - 1e-12 <= cell["ci_high"]
    assert rows["D"]["stand_in"] and not rows["A"]["stand_in"] and doc["stand_in"]
    rho, tau = doc["correlation"]["spearman"], doc["correlation"]["kendall"]
    assert rho["value"] == pytest.approx(0.4) and tau["value"] == pytest.approx(1 / 3)
    assert rho["n_models"] == 4 and -1 <= rho["ci_low"] <= rho["ci_high"] <= 1
    assert doc["metric"] == "pope.accuracy"
    # seeded: the same seed gives the same document
    assert validity(ode, real, str(labels), n_resamples=300, seed=3) == doc


def test_rank_correlations_ties_and_constants():
    from halluflow.validity import rank_correlations

    # x ranks 1, 2.5, 2.5, 4; y ranks 1..4: rho = Pearson of ranks = 0.9487 (sqrt(0.9)); tau-b = 5/sqrt(5*6)
    got = rank_correlations([0.1, 0.5, 0.5, 0.9], [1, 2, 3, 4])
    assert got["spearman"] == pytest.approx(0.9**0.5)
    assert got["kendall"] == pytest.approx(5 / (30**0.5))
    assert rank_correlations([0.2, 0.2, 0.2], [1, 2, 3]) == {"spearman": None, "kendall": None}
    assert rank_correlations([0.1, 0.2], [0.2, 0.1]) == {"spearman": None, "kendall": None}


def test_fewer_than_three_models_is_undefined(tmp_path):
    from halluflow.validity import table, validity

    ode = _ode_run(tmp_path / "ode", ODE_CORRECT)
    real, labels = _pope_run(tmp_path / "pope", {m: REAL_CORRECT[m] for m in "AB"})
    doc = validity(ode, real, str(labels), n_resamples=50)
    assert [r["model"] for r in doc["models"]] == ["A", "B"] and doc["unpaired_models"] == ["C", "D"]
    for key in ("spearman", "kendall"):
        assert doc["correlation"][key]["value"] is None
        assert "at least 3" in doc["correlation"][key]["undefined"]
    text = table(doc)
    assert "Spearman rho: undefined" in text and "Kendall tau-b: undefined" in text


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "halluflow.cli", "release", "validity", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_table_and_out(runs, tmp_path):
    ode, real, labels = runs
    out = tmp_path / "v" / "validity.json"
    done = _cli(str(ode), str(real), "--labels", str(labels), "--metric", "f1", "--resamples", "200", "--out", str(out))
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["metric"] == "pope.f1" and doc["n_resamples"] == 200
    lines = done.stdout.splitlines()
    assert lines[1].split()[:2] == ["model", "ODE"]
    assert any(line.startswith("D (stand-in)") for line in lines)
    assert any(line.startswith("Spearman rho: ") and "over 4 models" in line for line in lines)
    assert "(stand-in) = a tiny random stand-in model" in done.stdout


def test_bad_inputs_one_line(runs, tmp_path):
    ode, real, labels = runs
    none_shared = tmp_path / "other.jsonl"
    none_shared.write_text(
        json.dumps({"question_id": 1, "image": "a.jpg", "text": "Is there a yak in the image?", "label": "yes"}) + "\n"
    )
    shifted = tmp_path / "shifted.jsonl"  # a label file of other question ids than the run answered
    shifted.write_text(
        json.dumps({"question_id": 9999, "image": "a.jpg", "text": "Is there a dog in the image?", "label": "no"})
        + "\n"
    )
    for args, says in (
        ([str(ode), str(real), "--labels", str(none_shared)], "no concept shared"),
        ([str(real), str(real), "--labels", str(labels)], "not an ODE release"),
        ([str(ode), str(tmp_path / "nowhere"), "--labels", str(labels)], "no metrics/<model>.json"),
        ([str(ode), str(real), "--labels", str(shifted)], "answers none of the 1 existence questions"),
    ):
        done = _cli(*args)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_amber_existence_questions(tmp_path):
    """An AMBER run: only its existence questions (discriminative-hallucination) on shared concepts count, read by
    AMBER's exact Yes/No rule ("yes." is no answer under it: unknown, never correct)."""
    from halluflow.validity import validity

    ode = _ode_run(tmp_path / "ode", {m: ODE_CORRECT[m] for m in "ABC"})
    notes, queries = [], []
    for i in range(8):
        notes.append({"id": i + 1, "type": "discriminative-hallucination", "truth": "yes" if i % 2 else "no"})
        queries.append({"id": i + 1, "image": f"AMBER_{i}.jpg", "query": f"Is there a {SHARED[i % 2]} in this image?"})
    notes.append({"id": 9, "type": "discriminative-attribute-state", "truth": "yes"})  # not existence
    queries.append({"id": 9, "image": "AMBER_9.jpg", "query": "Is the dog running in this image?"})
    notes.append({"id": 10, "type": "discriminative-hallucination", "truth": "yes"})  # not a shared concept
    queries.append({"id": 10, "image": "AMBER_10.jpg", "query": "Is there a zebra in this image?"})
    (tmp_path / "annotations.json").write_text(json.dumps(notes))
    (tmp_path / "query.json").write_text(json.dumps(queries))
    run = tmp_path / "amber-run"
    right = {"A": 8, "B": 6, "C": 4}  # correct answers among the 8 existence questions; the rest wrong
    for model, k in right.items():
        rows = []
        for i, note in enumerate(notes):
            word = note["truth"] if i < k else _flip(note["truth"])
            text = word.title() if not (model == "C" and i == 0) else "yes."  # C's first: unknown to AMBER's rule
            rows.append({"query_id": str(note["id"]), "model": model, "answer": text, "status": "ok"})
        (run / "answers" / model).mkdir(parents=True)
        pl.DataFrame(rows).write_parquet(run / "answers" / model / "0.parquet")
        (run / "metrics").mkdir(exist_ok=True)
        (run / "metrics" / f"{model}.json").write_text(json.dumps({"model": model, "source": "amber"}))
    doc = validity(
        ode, run, str(tmp_path / "query.json"), annotations=str(tmp_path / "annotations.json"), n_resamples=100
    )
    assert doc["real"]["source"] == "amber" and doc["n_questions"]["real"] == 8
    got = {r["model"]: r["real"]["value"] for r in doc["models"]}
    assert got == pytest.approx({"A": 1.0, "B": 0.75, "C": 3 / 8})
    assert {r["model"]: r["real"]["parser"] for r in doc["models"]} == {"A": "amber", "B": "amber", "C": "amber"}
    # ODE A 0.9 > C 0.8 > B 0.7; AMBER A > B > C: rho = 1 - 6*(0+1+1)/(3*8) = 0.5, tau = (2 - 1)/3
    assert doc["correlation"]["spearman"]["value"] == pytest.approx(0.5)
    assert doc["correlation"]["kendall"]["value"] == pytest.approx(1 / 3)


@pytest.mark.slow  # needs the default run, then runs Snakemake again on a POPE source
def test_demo_with_a_pope_source(default_run, tmp_path):
    """The demo release beside the same three models on POPE (peer label file, placeholder images): the CLI prints
    the table and both correlations, and the workflow target writes the same document."""
    import yaml
    from helpers import SHARED_DATA
    from PIL import Image
    from workflow_utils import copy_run, run_snakemake

    from halluflow.validity import ode_existence

    pope_file = SHARED_DATA / "pope-rucaibox" / "coco" / "coco_pope_popular.json"
    if not pope_file.exists():
        pytest.skip(f"peer data {pope_file} not present")
    work = copy_run(default_run["dir"], tmp_path / "wf")
    concepts = set(ode_existence(work / "results" / "ode-demo")[0]["concept"].to_list())
    chosen, per = [], {}
    for line in pope_file.read_text().splitlines():  # two questions per (object, label) the release also asks about
        row = json.loads(line)
        obj = row["text"].removeprefix("Is there a ").removeprefix("n ").removesuffix(" in the image?")
        if obj in concepts and per.get((obj, row["label"]), 0) < 2 and len(chosen) < 12:
            per[(obj, row["label"])] = per.get((obj, row["label"]), 0) + 1
            chosen.append(row)
    assert chosen, f"no POPE question about the demo release's concepts {sorted(concepts)}"
    labels = tmp_path / "pope.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in chosen))
    for i, name in enumerate(sorted({r["image"] for r in chosen})):
        (tmp_path / "images").mkdir(exist_ok=True)
        Image.new("RGB", (32, 32), (40 * i % 255, 90, 160)).save(tmp_path / "images" / name)
    source = {"kind": "pope", "path": str(labels), "images": str(tmp_path / "images")}
    (work / "pope.yaml").write_text(
        yaml.safe_dump({"release": "pope-test", "shards": {"images": 1, "answers": 1}, "answer": {"source": source}})
    )
    run_snakemake(work, "--cores", "2", "--configfile", "config.yaml", "pope.yaml", timeout=900)

    out = tmp_path / "validity.json"
    args = [str(work / "results" / "ode-demo"), str(work / "results" / "pope-test"), "--labels", str(labels)]
    done = _cli(*args, "--seed", "42", "--out", str(out))
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    models = yaml.safe_load((work / "config.yaml").read_text())["models"]
    assert [r["model"] for r in doc["models"]] == sorted(m["name"] for m in models)
    assert doc["real"]["source"] == "pope" and doc["n_questions"]["real"] == len(chosen)
    assert any(r["stand_in"] for r in doc["models"]) and "(stand-in)" in done.stdout
    for key, name in (("spearman", "Spearman rho: "), ("kendall", "Kendall tau-b: ")):
        line = next(x for x in done.stdout.splitlines() if x.startswith(name))
        c = doc["correlation"][key]
        assert ("undefined" in line) == ("undefined" in c) and ("undefined" in c) == (c["value"] is None)
    print(done.stdout)
    # every chosen question is about a shared concept, so the POPE side is the POPE run's own number
    for row in doc["models"]:
        run_metrics = json.loads((work / "results" / "pope-test" / "metrics" / f"{row['model']}.json").read_text())
        assert row["real"]["value"] == pytest.approx(run_metrics["pope"]["accuracy"])

    validity_cfg = {"validity": {"source": {"kind": "pope", "path": str(labels)}, "results": "results/pope-test"}}
    (work / "validity.yaml").write_text(yaml.safe_dump(validity_cfg))
    target = "results/ode-demo/validity/validity.json"
    # the target before --configfile (which takes every word after it); only the missing output triggers a job
    proc = run_snakemake(
        work,
        "--cores",
        "2",
        target,
        "--rerun-triggers",
        "mtime",
        "--configfile",
        "config.yaml",
        "validity.yaml",
        timeout=600,
    )
    assert "release_validity" in proc.stdout + proc.stderr
    by_rule = json.loads((work / target).read_text())
    assert by_rule["models"] == doc["models"] and by_rule["correlation"] == doc["correlation"]


class _ColourEmbedder:
    """Embeds an image as its unit-length mean colour (deterministic; no model)."""

    def describe(self):
        from halluflow.backends.base import BackendInfo

        return BackendInfo(role="embedder", backend="table", model="mean-colour")

    def embed_images(self, images):
        import numpy as np

        rows = np.asarray([np.asarray(im, dtype=float).reshape(-1, 3).mean(0) + 1.0 for im in images])
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _images(folder: Path, colours) -> None:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for i, colour in enumerate(colours):
        Image.new("RGB", (8, 8), colour).save(folder / f"{i:03d}.png")


def test_contamination_three_way_view(tmp_path):
    """ODE's Fig. 5 in numbers: synthetic images near the clean real ones, contaminated ones apart."""
    from halluflow.ode.contamination import check_contamination

    release = tmp_path / "release"
    near = [(40 + 7 * i, 120 - 3 * i, 200 - 5 * i) for i in range(6)]
    _images(release / "images", near)
    ids = [f"{i:03d}" for i in range(6)]
    pl.DataFrame({"image_id": ids, "distribution": ["standard", "fictional"] * 3}).write_parquet(
        release / "queries.parquet"
    )
    _images(tmp_path / "clean", [(45 + 6 * i, 118 - 2 * i, 195 - 4 * i) for i in range(6)])
    _images(tmp_path / "contaminated", [(230 - 4 * i, 30 + 5 * i, 20 + 3 * i) for i in range(5)])
    out = tmp_path / "out"
    result = check_contamination(
        release, tmp_path / "clean", out, _ColourEmbedder(), contaminated_dir=tmp_path / "contaminated"
    )
    view = result["three_way"]
    assert view["n"] == {"synthetic": 6, "contaminated": 5, "clean": 6}
    fd, nn = view["frechet_distance"], view["nn_similarity_mean"]
    assert fd["synthetic_clean"] < fd["synthetic_contaminated"] and fd["synthetic_clean"] < fd["contaminated_clean"]
    assert nn["synthetic_clean"] > nn["synthetic_contaminated"] and nn["synthetic_clean"] > nn["contaminated_clean"]
    assert view["synthetic_closer_to_clean"] is True
    assert json.loads((out / "contamination.json").read_text())["three_way"] == view
    assert (out / "projection.png").stat().st_size > 0
    # without the third folder the document has no three-way view
    plain = check_contamination(release, tmp_path / "clean", tmp_path / "out2", _ColourEmbedder())
    assert "three_way" not in plain
