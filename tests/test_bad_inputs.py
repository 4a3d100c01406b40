"""Bad inputs: each is refused with a clear one-line error naming the offending file / item, and
leaves no half-written output behind. Config errors are covered in tests/test_config.py; release tampering in
tests/test_workflow.py; HTTP null / huge answers at the answer stage in tests/test_openai_http.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from helpers import REPO, make_graph
from PIL import Image

from halluflow.answer import answer_shard
from halluflow.backends.transformers_vlm import load_image
from halluflow.errors import HalluflowError
from halluflow.models import registry
from halluflow.models.model import ModelUnderTest
from halluflow.models.standins import build_standin
from halluflow.ode.detection import detect_shard
from halluflow.ode.graph import build_graph
from halluflow.ode.scoring import score_answers
from halluflow.samf import workflow as samf_workflow
from halluflow.samf.operators import load_image as samf_load_image
from halluflow.sources import load_source


def png(path: Path, seed: int = 0, size: int = 32) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8)).save(path)
    return path


def truncate(path: Path) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # header intact: PIL opens it, decoding fails
    return path


def pope_set(root: Path, images: list[str], present: int | None = None) -> Path:
    """POPE label file asking about `images`; the first `present` of them exist as PNGs under root/images."""
    for i, name in enumerate(images[:present] if present is not None else images):
        if ".." not in name:
            png(root / "images" / name, seed=i)
    rows = [
        {"question_id": i, "image": name, "text": "Is there a dog in the image?", "label": "yes"}
        for i, name in enumerate(images)
    ]
    (root / "pope.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root / "pope.jsonl"


def answer_pope(tmp_path: Path, label_file: Path) -> None:
    """The answer stage with the prior model on a POPE set (its table would go to out/answers/000.parquet)."""
    out = tmp_path / "out" / "answers" / "000.parquet"
    queries, root = load_source("pope", label_file, tmp_path / "images")
    spec = {"name": "prior", "backend": "prior", "args": {"graph": str(make_graph(tmp_path / "graph"))}}
    answer_shard(queries, root, ModelUnderTest(spec), tmp_path / "out" / "cache", out)


def unihall_instance(image_path: str) -> dict:
    return {
        "instance_id": "110001",
        "meta_inf": {"category": "object", "subtype": "existence", "risk_level": 1},
        "source_inf": {"source_dataset": "test", "source_id": "0"},
        "seed_data": {"type": "YON", "image_path": image_path, "question": "Is there a dog?", "ground_truth": "Yes"},
    }


def make_unihall(tmp_path: Path, image_path: str) -> None:
    """samf_instances on a UniHall file (writes out/instances.json + out/split.parquet when it succeeds)."""
    png(tmp_path / "data" / "images" / "0.png")
    (tmp_path / "data" / "unihall.json").write_text(json.dumps([unihall_instance(image_path)]))
    samf = samf_workflow_config()
    samf["source"] = {"format": "unihall", "path": str(tmp_path / "data" / "unihall.json"), "images": None}
    out = tmp_path / "out" / "instances.json"
    samf_workflow.make_instances(samf, None, "test", 0, out, tmp_path / "out" / "split.parquet")


def samf_workflow_config() -> dict:
    from halluflow.config import load_config

    return load_config(REPO / "config.yaml")["samf"]


@pytest.fixture(scope="module")
def owl(tmp_path_factory):
    path = build_standin("owlv2", tmp_path_factory.mktemp("models") / "tiny-owlv2", seed=0)
    return registry.create("detector", {"backend": "transformers", "model": str(path), "device": "cpu"})


def graph_case(fmt: str, content, suffix: str = ".json"):
    def run(tmp_path: Path) -> Path:
        src = tmp_path / f"annotations{suffix}"
        src.write_text(content if isinstance(content, str) else json.dumps(content))
        build_graph({"format": fmt, "path": str(src)})

    return run


AMBER = [{"id": 1, "type": "generative", "truth": ["dog", "grass"], "hallu": ["cat"]}]
COCO = {
    "images": [{"id": 1}],
    "annotations": [{"image_id": 1, "category_id": 18}],
    "categories": [{"id": 18, "name": "dog"}],
}
VISUAL_GENOME = [{"image_id": 1, "objects": [{"names": ["dog"]}]}]


def text_file(path: Path) -> Path:
    path.write_text("not an image")
    return path


def detect_truncated(tmp_path: Path, owl=None) -> Path:
    png(tmp_path / "images" / "000" / "a.png", seed=0)
    truncate(png(tmp_path / "images" / "000" / "b.png", seed=1))
    images = pl.DataFrame({"image_id": ["a", "b"], "path": ["images/000/a.png", "images/000/b.png"]})
    detect_shard(images, {"a": ["dog"], "b": ["dog"]}, tmp_path, owl)


# name -> (action(tmp_path) that must raise, regex the one-line error must match); outputs go under tmp_path/out
CASES = {
    "graph: AMBER file read as COCO": (
        graph_case("coco", AMBER),
        r"annotations\.json: COCO instances JSON lacks 'annotations'",
    ),
    "graph: COCO file read as AMBER": (graph_case("amber", COCO), r"annotations\.json: expected AMBER's JSON array"),
    "graph: COCO file read as Visual Genome": (
        graph_case("visual_genome", COCO),
        r"annotations\.json: expected Visual Genome",
    ),
    "graph: AMBER file read as Visual Genome": (
        graph_case("visual_genome", AMBER),
        r"annotations\.json: image 0 lacks 'objects'",
    ),
    "graph: not JSON": (graph_case("coco", "id,object\n1,dog\n"), r"annotations\.json: not valid JSON"),
    "graph: table without the object column": (
        graph_case("table", "img,thing\n1,dog\n", ".csv"),
        r"annotations\.csv: column 'image_id' not found",
    ),
    "graph: VG objects not a list of images": (
        graph_case("visual_genome", [1, 2]),
        r"annotations\.json: image 0 is not an object",
    ),
    "static set: missing image": (
        lambda t: answer_pope(t, pope_set(t, ["a.jpg", "b.jpg"], present=1)),
        r"1 image\(s\) missing under .*images: b\.jpg",
    ),
    "static set: image escaping its folder": (
        lambda t: answer_pope(t, pope_set(t, ["a.jpg", "../../etc/passwd"])),
        r"image path '\.\./\.\./etc/passwd' escapes its folder",
    ),
    "UniHall: image escaping its folder": (
        lambda t: make_unihall(t, "../../etc/passwd"),
        r"unihall\.json: instance 110001: field 'seed_data\.image_path': image path '\.\./\.\./etc/passwd' escapes",
    ),
    "UniHall: missing image": (
        lambda t: make_unihall(t, "images/9.png"),
        r"unihall\.json: instance 110001: field 'seed_data\.image_path': 'images/9\.png' not found",
    ),
    "VLM: truncated PNG": (
        lambda t: load_image(str(truncate(png(t / "x.png")))),
        r"image .*x\.png: corrupt or truncated image",
    ),
    "VLM: not an image": (lambda t: load_image(str(text_file(t / "x.png"))), r"image .*x\.png: not a readable image"),
    "SAMF: truncated PNG": (
        lambda t: samf_load_image(unihall_instance("x.png"), truncate(png(t / "x.png")).parent),
        r"instance 110001: image .*x\.png: corrupt or truncated image",
    ),
    "detect: truncated PNG": ("detect", r"image of 'b' .*b\.png: corrupt or truncated image"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_refused_by_name(case, tmp_path, request):
    action, message = CASES[case]
    if action == "detect":
        action = lambda t: detect_truncated(t, request.getfixturevalue("owl"))  # noqa: E731 - model only here
    with pytest.raises(HalluflowError) as info:
        action(tmp_path)
    text = str(info.value)
    assert "\n" not in text, text
    assert re.search(message, text), text
    # No half-written output: no final file under the output folders, no temporary left behind.
    produced = [
        p
        for p in tmp_path.rglob("*")
        if p.is_file() and ("out" in p.relative_to(tmp_path).parts[:1] and "cache" not in p.parts)
    ]
    assert produced == [] and not list(tmp_path.rglob("*.part")), produced


def test_cli_reports_one_line_and_writes_nothing(tmp_path):
    src = tmp_path / "amber.json"
    src.write_text(json.dumps(AMBER))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "halluflow.cli",
            "graph",
            "build",
            "--format",
            "coco",
            "--path",
            str(src),
            "--out",
            str(tmp_path / "graph"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == f"halluflow: error: {src}: COCO instances JSON lacks 'annotations'"
    assert "Traceback" not in proc.stderr and not (tmp_path / "graph").exists()


def test_empty_huge_and_missing_answers_are_scored_not_crashed():
    """An empty answer, a 10 MB yes/no answer and a 1 MB caption (the answer stage truncates at answer.max_answer_chars,
    a user may raise it), and no text at all (failed request)."""
    huge = "yes " * 2_500_000
    queries = pl.DataFrame(
        {
            "query_id": ["d-empty", "d-huge", "d-none", "g-empty", "g-huge", "g-none"],
            "distribution": ["standard"] * 6,
            "pair_kind": ["entity_entity"] * 6,
            "task": ["discriminative"] * 3 + ["generative"] * 3,
            "query_type": ["existence"] * 3 + ["generative"] * 3,
            "attribute_kind": [None] * 6,
            "truth": ["yes"] * 3 + [None] * 3,
            "objects": [["dog"]] * 6,
        }
    )
    answers = pl.DataFrame(
        {
            "query_id": queries["query_id"],
            "model": ["m"] * 6,
            "answer": ["", huge, None, "", "a dog and a cat " * 62_500, None],
            "status": ["ok", "ok", "failed", "ok", "ok", "failed"],
        }
    )
    scored = score_answers(queries, answers, ["dog", "cat"]).sort("query_id")
    row = {r["query_id"]: r for r in scored.to_dicts()}
    assert row["d-huge"]["parsed"] == "yes" and row["d-huge"]["correct"] is True
    # Every mention counts, as CHAIR counts them; the long answer is scored in full, not refused.
    assert set(row["g-huge"]["hallucinated_objects"]) == {"cat"} and row["g-huge"]["n_mentions"] == 125_000
    # No text = nothing to judge: neither counted right nor wrong; an empty answer is a failure like a null one
    # (POPE's evaluate.py would read "" as "yes"; an empty caption would be a perfect CHAIR score).
    assert row["d-none"]["correct"] is None and row["g-none"]["hallucinated"] is None
    assert row["d-empty"]["answer"] == "" and row["d-empty"]["failed"] and row["d-empty"]["parsed"] is None
    assert row["g-empty"]["failed"] and row["g-empty"]["hallucinated"] is None
    exact = score_answers(queries, answers, ["dog", "cat"], parser="exact").filter(pl.col("query_id") == "d-empty")
    assert exact["parsed"][0] is None and exact["hallucinated"][0] is None


# ---------------------------------------------------------------- the bad-input matrix: every CLI reader
# Each case: a command over small valid files, one file or option spoiled → a non-zero exit, ONE line on stderr
# naming the problem, no traceback, and no output file written.
NON_UTF8 = b'{"x": "\xff\xfe caf\xe9"}\n'


def _cli_files(root: Path) -> dict[str, Path]:
    def put(name: str, data) -> Path:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        elif isinstance(data, str):
            path.write_text(data)
        else:
            path.write_text(
                json.dumps(data) if not isinstance(data, tuple) else "".join(json.dumps(r) + "\n" for r in data)
            )
        return path

    f = {
        "labels": put(
            "labels.jsonl",
            tuple(
                {"question_id": i, "image": "a.jpg", "text": "Is there a dog?", "label": "yes" if i % 2 else "no"}
                for i in range(4)
            ),
        ),
        "answers": put(
            "answers.jsonl", tuple({"question_id": i, "answer": "Yes" if i % 2 else "No"} for i in range(4))
        ),
        "captions": put("captions.jsonl", ({"image_id": 1, "caption": "A dog on a sofa."},)),
        "truth": put("truth.jsonl", ({"image_id": 1, "objects": ["dog"]},)),
        "synonyms": put("synonyms.txt", "dog, puppy\ncouch, sofa\n"),
        "amber/annotations.json": put(
            "amber/annotations.json",
            [
                {"id": 1, "type": "generative", "truth": ["dog"], "hallu": ["cat"]},
                {"id": 2, "type": "discriminative-hallucination", "truth": "no"},
            ],
        ),
        "amber/relation.json": put("amber/relation.json", {"dog": ["puppy"], "cat": []}),
        "amber/safe_words.txt": put("amber/safe_words.txt", "image\n"),
        "responses": put("responses.json", [{"id": 1, "response": "A dog."}, {"id": 2, "response": "No"}]),
        "objects": put("objects.jsonl", ({"image_id": 1, "objects": ["dog", "cat"]},)),
        "caos_truth": put("caos_truth.jsonl", ({"image_id": 1, "objects": ["dog"]},)),
        "frequent": put("frequent.txt", "dog\ncat\n"),
        "vectors": put("vectors.tsv", "dog\t1\t0\ncat\t0\t1\n"),
        "unihall": put("unihall.json", [unihall_instance("0.png")]),
        "ghr_answers": put("ghr_answers.jsonl", ({"instance_id": "110001", "answer": "Yes"},)),
        "sg_truth": put("sg_truth.json", {"objects": [{"id": 0, "name": "dog", "attributes": []}], "relations": []}),
        "sg_pred": put("sg_pred.json", {"objects": [{"id": 0, "name": "dog", "attributes": []}], "relations": []}),
    }
    png(root / "0.png")
    return f


def _cmd(name: str, f: dict[str, Path], out: Path) -> list[str]:
    return {
        "pope": ["score", "pope", "--answers", f["answers"], "--labels", f["labels"], "--out", out],
        "chair": [
            "score",
            "chair",
            "--captions",
            f["captions"],
            "--truth",
            f["truth"],
            "--synonyms",
            f["synonyms"],
            "--out",
            out,
        ],
        "amber": [
            "score",
            "amber",
            "--responses",
            f["responses"],
            "--annotations",
            f["amber/annotations.json"].parent,
            "--out",
            out,
        ],
        "caos": [
            "score",
            "caos",
            "--objects",
            f["objects"],
            "--truth",
            f["caos_truth"],
            "--frequent",
            f["frequent"],
            "--embedder",
            "table",
            "--vectors",
            f["vectors"],
            "--synonyms",
            "none",
            "--out",
            out,
        ],
        "ghr": ["score", "ghr", "--instances", f["unihall"], "--answers", f["ghr_answers"]],
        "ged": ["sg", "ged", "--truth", f["sg_truth"], "--pred", f["sg_pred"]],
        "mutate": [
            "fuzz",
            "mutate",
            "--instance",
            f["unihall"],
            "--op",
            "constraint_stack",
            "--level",
            "1",
            "--out",
            out.parent / "mutated",
        ],
        "convert_pope": ["fuzz", "convert", "--source", "pope", "--input", f["labels"], "--out", out],
        "convert_amber": [
            "fuzz",
            "convert",
            "--source",
            "amber",
            "--input",
            f["amber/annotations.json"],
            "--queries",
            f["amber/annotations.json"],
            "--out",
            out,
        ],
    }[name]


def _spoil(f: dict[str, Path], key: str, data) -> None:
    path = f[key]
    if isinstance(data, bytes):
        path.write_bytes(data)
    elif isinstance(data, tuple):
        path.write_text("".join(json.dumps(r) + "\n" for r in data))
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data))


MATRIX = [
    # (command, file key, new content or None, extra args, expected message)
    *[
        (cmd, key, NON_UTF8, [], "not UTF-8")
        for cmd, key in [
            ("pope", "answers"),
            ("pope", "labels"),
            ("chair", "captions"),
            ("chair", "truth"),
            ("chair", "synonyms"),
            ("amber", "responses"),
            ("amber", "amber/annotations.json"),
            ("amber", "amber/relation.json"),
            ("amber", "amber/safe_words.txt"),
            ("caos", "objects"),
            ("caos", "caos_truth"),
            ("caos", "frequent"),
            ("ghr", "unihall"),
            ("ghr", "ghr_answers"),
            ("ged", "sg_truth"),
            ("ged", "sg_pred"),
            ("mutate", "unihall"),
            ("convert_pope", "labels"),
        ]
    ],
    (
        "pope",
        "answers",
        tuple({"question_id": i, "answer": ""} for i in range(4)),
        [],
        "4 of 4 answers failed or are empty",
    ),
    (
        "pope",
        "answers",
        tuple({"question_id": i, "answer": "x", "status": "failed"} for i in range(4)),
        [],
        "4 of 4 answers failed",
    ),
    ("pope", "answers", ({"question_id": 0, "answer": 1},), [], "answer is 1, expected a string"),
    ("pope", "answers", ({"question_id": 0, "answer": True},), [], "answer is true, expected a string"),
    ("pope", "answers", ({"question_id": 0, "answer": ["yes"]},), [], 'answer is \\["yes"\\], expected a string'),
    (
        "pope",
        "answers",
        ({"question_id": 0, "answer": "Yes"}, {"question_id": 1, "text": "No"}),
        [],
        "mix 'answer' and 'text'",
    ),
    ("pope", "answers", None, ["--max-failed-fraction", "2"], "--max-failed-fraction: must be between 0 and 1, got 2"),
    ("pope", "answers", None, ["--max-failed-fraction", "nan"], "must be between 0 and 1, got nan"),
    ("pope", "labels", ({"question_id": 0, "label": "maybe"},), [], "label 'maybe'"),
    ("chair", "truth", ({"image_id": 1, "objects": [1, 2]},), [], "objects must be names"),
    ("chair", "synonyms", "\n\n", [], "holds no synonyms"),
    ("chair", "captions", ({"image_id": 1, "caption": ""},), [], "1 of 1 answers failed or are empty"),
    ("amber", "amber/annotations.json", [{"id": 1, "type": "generative", "hallu": []}], [], "has no 'truth'"),
    (
        "amber",
        "amber/annotations.json",
        {"id": 1, "type": "generative", "truth": []},
        [],
        "expected AMBER's JSON array",
    ),
    (
        "amber",
        "amber/annotations.json",
        [{"id": 1, "type": "discriminative-hallucination", "truth": 1}],
        [],
        "expected yes/no",
    ),
    ("amber", "responses", [], [], "no responses"),
    ("amber", "responses", [{"id": 1, "response": ""}, {"id": 2, "response": ""}], [], "2 of 2 answers failed"),
    ("amber", "responses", [{"id": 1, "response": 3}], [], "string 'response'"),
    ("caos", "objects", ({"image_id": 1, "objects": [1, None, {}]},), [], "must be a list of object names"),
    ("ghr", "ghr_answers", ({"instance_id": "110001", "answer": ""},), [], "1 of 1 answers failed or are empty"),
    ("ghr", "ghr_answers", ({"instance_id": "110001", "answer": "Yes", "text": "No"},), [], "mixes 'answer' and"),
    ("ged", None, None, ["--timeout", "-1"], "--timeout: must be a finite number > 0, got -1"),
    ("ged", None, None, ["--timeout", "nan"], "--timeout: must be a finite number > 0, got nan"),
    ("convert_pope", None, None, ["--limit", "-3"], "--limit: must be ≥ 1, got -3"),
]


@pytest.mark.parametrize(
    "cmd, key, content, extra, message",
    MATRIX,
    ids=[f"{m[0]}-{m[1] or ' '.join(m[3])}-{i}" for i, m in enumerate(MATRIX)],
)
def test_bad_input_matrix(tmp_path, capsys, cmd, key, content, extra, message):
    from halluflow.cli import main

    f = _cli_files(tmp_path / "in")
    out = tmp_path / "out" / "result.json"
    argv = [str(a) for a in _cmd(cmd, f, out)]
    capsys.readouterr()
    assert main(argv) == 0, capsys.readouterr().err  # the valid files pass
    if out.exists():
        out.unlink()
    if key is not None and content is not None:
        _spoil(f, key, content)
    try:
        rc = main(argv + [str(e) for e in extra])
    except SystemExit as exc:  # argparse refuses an option value: its usage line + one error line
        rc = exc.code
    assert rc not in (0, None)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(message, err), err
    if not err.startswith("usage:"):
        assert err.count("\n") == 1 and err.startswith("halluflow: error: "), err
    assert not out.exists()  # nothing half-written


@pytest.mark.parametrize("case", ["mutate_out_is_a_file", "convert_bad_parquet", "convert_amber_non_utf8_queries"])
def test_bad_fuzz_inputs_are_one_line(tmp_path, capsys, case):
    from halluflow.cli import main

    f = _cli_files(tmp_path / "in")
    out = tmp_path / "out" / "instances.json"
    if case == "mutate_out_is_a_file":
        argv, message = _cmd("mutate", f, out)[:-1] + [f["labels"]], "is a file; give a folder"
    elif case == "convert_bad_parquet":
        bad = tmp_path / "in" / "queries.parquet"
        bad.write_bytes(b"PAR1 this is not parquet")
        argv, message = ["fuzz", "convert", "--source", "ode", "--input", bad, "--out", out], "not a readable parquet"
    else:
        queries = tmp_path / "in" / "query.json"
        queries.write_bytes(NON_UTF8)
        argv = _cmd("convert_amber", f, out)
        argv[argv.index("--queries") + 1] = queries
        message = "query.json: not UTF-8"
    assert main([str(a) for a in argv]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and re.search(message, err), err
    assert not out.exists()


def _release_with(tmp_path: Path, case: str) -> Path:
    release = tmp_path / "release"
    release.mkdir()
    manifest = release / "manifest.json"
    if case == "non_utf8":
        manifest.write_bytes(b'{"files": {"\xff": {}}}')
    elif case == "folder":
        manifest.mkdir()
    elif case == "nul":
        manifest.write_text(json.dumps({"files": {"a\u0000b.png": {"sha256": "0"}}}))
    else:
        manifest.write_text(json.dumps({"files": {"a" * 5000 + ".png": {"sha256": "0"}}}))
    return release


@pytest.mark.parametrize(
    "case, message",
    [
        ("non_utf8", "manifest.json: not UTF-8"),
        ("folder", "manifest.json: is a folder"),
        ("nul", r"'a\\x00b.png': listed path is not a usable file name"),
        ("long_path", r"'a{20,}\.\.\.: listed path is not a usable file name"),
    ],
)
def test_bad_release_manifest_is_reported_per_line(tmp_path, capsys, case, message):
    from halluflow.cli import main

    assert main(["release", "verify", str(_release_with(tmp_path, case))]) == 1
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err + printed.out
    lines = printed.out.splitlines()
    assert len(lines) == 1 and len(lines[0]) < 300 and re.search(message, lines[0]), lines


def test_samf_failed_answers_have_no_ghr(tmp_path):
    """A failed or empty answer has no GHR/BHR (it used to score GHR 0, a perfect answer): left out of every mean,
    counted as n_failed, including in `score ghr`'s answer file (status failed, or an empty answer)."""
    from halluflow.samf.metrics import MetricSuite, read_answers, score_rows, summarize
    from halluflow.samf.pipeline import _reward

    inst = unihall_instance("0.png")
    for answer in ("", "  ", None):
        row = MetricSuite().score(inst, answer)
        assert row["failed"] and row["ghr"] is None and row["bhr"] is None
    assert MetricSuite().score(inst, "No.")["ghr"] == 1
    second = {**inst, "instance_id": "110002"}
    rows = score_rows([inst, second], {"110001": None, "110002": "No."}, metrics=("ghr",))
    summary = summarize(rows)
    assert (summary["n"], summary["n_failed"], summary["ghr"]) == (1, 1, 1.0)
    assert _reward([{"score": None}, {"score": 1.0}]) == 1.0
    answers = tmp_path / "a.jsonl"
    answers.write_text(
        '{"instance_id": "110001", "answer": "Yes", "status": "failed"}\n{"instance_id": "110002", "answer": ""}\n'
    )
    assert read_answers(answers, {"110001", "110002"}) == {"110001": None, "110002": None}


def test_chair_and_amber_leave_failed_answers_out_and_count_them(tmp_path, capsys):
    from halluflow.cli import main

    f = _cli_files(tmp_path / "in")
    _spoil(
        f,
        "captions",
        (
            {"image_id": 1, "caption": "A dog on a sofa."},
            {"image_id": 1, "caption": "  "},
            {"image_id": 1, "caption": "A dog.", "status": "failed"},
        ),
    )
    assert main([str(a) for a in _cmd("chair", f, tmp_path / "c.json")] + ["--max-failed-fraction", "0.7"]) == 0
    m = json.loads(capsys.readouterr().out)
    # only "A dog on a sofa." is scored: the couch is not in the truth → CHAIR_s 1 (an empty caption scored 0)
    assert (m["n_failed"], m["chair_s"]) == (2, 1.0)
    _spoil(f, "responses", [{"id": 1, "response": ""}, {"id": 2, "response": "No"}])
    assert main([str(a) for a in _cmd("amber", f, tmp_path / "a.json")] + ["--max-failed-fraction", "0.5"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["n_failed"] == 1 and m["generative"]["n"] == 0 and m["generative"]["chair"] is None
    assert m["existence"]["accuracy"] == 99.9  # 1 / 1.001: AMBER starts its counters at 0.001
