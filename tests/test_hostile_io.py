"""Hostile inputs and outputs at the command line: each case asserts the exit code, exactly one error line, no
traceback, and that nothing was lost (every input's bytes unchanged, a device or FIFO still what it was, no file
written outside the folder the command owns)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from helpers import make_graph
from PIL import Image

from halluflow.cli import main

LABELS = [
    {"question_id": "000", "image": "a.png", "text": "Is there a dog in the image?", "label": "yes"},
    {"question_id": "001", "image": "a.png", "text": "Is there a unicorn in the image?", "label": "no"},
    {"question_id": "²", "image": "a.png", "text": "Is there a cloud in the image?", "label": "yes"},
    {"question_id": 7, "image": "a.png", "text": "Is there a frisbee in the image?", "label": "no"},
]


def snapshot(root: Path) -> dict[str, str]:
    """Every file under `root` (recursively) with the sha256 of its bytes, and every other entry with its kind."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        mode = path.lstat().st_mode
        out[rel] = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(mode) else stat.filemode(mode)[0]
    return out


def refused(code: int, err: str, *needles: str, exit_code: int = 1) -> str:
    """The command exited `exit_code` with exactly one error line, mentioning each needle, and no traceback."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == exit_code, err
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def packaged(release):  # noqa: F811  (test_export's fixture, under a name of this module)
    return release


@pytest.fixture
def pope(tmp_path):
    """A POPE label file (zero-padded, non-ASCII-digit and integer ids), answers for it, and their bytes."""
    labels, answers = tmp_path / "labels.jsonl", tmp_path / "answers.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in LABELS))
    answers.write_text("".join(json.dumps({"question_id": r["question_id"], "answer": "yes"}) + "\n" for r in LABELS))
    return labels, answers


# ------------------------------------------------------------------------------------------------ targets
@pytest.mark.parametrize("which", ["answers", "labels"])
def test_score_pope_out_on_its_own_input_is_refused(pope, tmp_path, capsys, which):
    labels, answers = pope
    target = answers if which == "answers" else labels
    before = snapshot(tmp_path)
    code = main(["score", "pope", "--answers", str(answers), "--labels", str(labels), "--out", str(target)])
    refused(code, capsys.readouterr().err, str(target), f"--{which}", "refusing")
    assert snapshot(tmp_path) == before


def test_answer_run_out_on_its_labels_is_refused_before_any_request(pope, tmp_path, capsys):
    labels, _ = pope
    before = snapshot(tmp_path)
    argv = ["answer", "run", "--source", "pope", "--questions", str(labels), "--images", str(tmp_path)]
    code = main([*argv, "--backend", "prior", "--arg", f"graph={tmp_path}", "--out", str(labels)])
    refused(code, capsys.readouterr().err, str(labels), "--questions")
    assert snapshot(tmp_path) == before  # no cache folder either: refused before the model was built


def test_out_through_a_symlink_to_an_input_is_refused(pope, tmp_path, capsys):
    labels, answers = pope
    (tmp_path / "link.json").symlink_to(answers)
    before = snapshot(tmp_path)
    code = main(
        ["score", "pope", "--answers", str(answers), "--labels", str(labels), "--out", str(tmp_path / "link.json")]
    )
    refused(code, capsys.readouterr().err, "--answers")
    assert snapshot(tmp_path) == before and (tmp_path / "link.json").is_symlink()


def test_out_on_a_character_device_leaves_it_a_device(pope, tmp_path, capsys):
    labels, answers = pope
    device = tmp_path / "null"  # a character device of our own, never the real /dev/null
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD")
    code = main(["score", "pope", "--answers", str(answers), "--labels", str(labels), "--out", str(device)])
    refused(code, capsys.readouterr().err, str(device), "character device")
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


def test_out_on_a_fifo_leaves_it_a_fifo_and_never_blocks(pope, tmp_path, capsys):
    labels, answers = pope
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code = main(["score", "pope", "--answers", str(answers), "--labels", str(labels), "--out", str(fifo)])
    refused(code, capsys.readouterr().err, str(fifo), "FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_out_on_a_folder_keeps_the_folder(pope, tmp_path, capsys):
    labels, answers = pope
    folder = tmp_path / "keep"
    folder.mkdir()
    (folder / "work.txt").write_text("finished work")
    before = snapshot(tmp_path)
    code = main(["score", "pope", "--answers", str(answers), "--labels", str(labels), "--out", str(folder)])
    refused(code, capsys.readouterr().err, str(folder), "folder")
    assert snapshot(tmp_path) == before


def test_a_failed_write_names_the_users_file_not_the_temp_file(pope, tmp_path, capsys, monkeypatch):
    labels, answers = pope
    out = tmp_path / "metrics.json"
    out.write_text("old, finished")

    def full_disk(src, dst):  # what a full disk does to the final rename
        raise OSError(28, "No space left on device", str(src))

    monkeypatch.setattr(os, "replace", full_disk)
    code = main(["score", "pope", "--answers", str(answers), "--labels", str(labels), "--out", str(out)])
    line = refused(code, capsys.readouterr().err, str(out), "No space left")
    assert ".part" not in line
    assert out.read_text() == "old, finished" and sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["answers.jsonl", "labels.jsonl", "metrics.json"]
    )


# ------------------------------------------------------------------------------------------------ outside the folder
def test_export_task_with_a_path_writes_nothing_outside(packaged, tmp_path, capsys):
    before = snapshot(tmp_path)
    out = tmp_path / "exports" / "tasks"
    code = main(["release", "export", str(packaged), "--format", "lmms-eval", "--out", str(out), "--task", "../../x"])
    refused(code, capsys.readouterr().err, "--task", "not a plain file name")
    assert snapshot(tmp_path) == before


def test_manifest_release_name_with_a_path_is_refused_and_verify_reports_it(packaged, tmp_path, capsys):
    manifest = json.loads((packaged / "manifest.json").read_text())
    manifest["release"] = "../../../outside"
    (packaged / "manifest.json").write_text(json.dumps(manifest))
    before = snapshot(tmp_path)
    code = main(["release", "export", str(packaged), "--format", "lmms-eval", "--out", str(tmp_path / "tasks")])
    refused(code, capsys.readouterr().err, "manifest.json", "release name")
    assert snapshot(tmp_path) == before
    assert main(["release", "verify", str(packaged)]) == 1
    assert "release name" in capsys.readouterr().out


def test_export_into_its_own_release_is_refused(packaged, tmp_path, capsys):
    before = snapshot(tmp_path)
    code = main(["release", "export", str(packaged), "--format", "llava", "--out", str(packaged / "exports")])
    refused(code, capsys.readouterr().err, "inside the release")
    assert snapshot(tmp_path) == before


def test_answer_run_name_with_a_path_writes_no_cache_outside(pope, tmp_path, capsys):
    labels, _ = pope
    work = tmp_path / "work"
    work.mkdir()
    before = snapshot(tmp_path)
    argv = ["answer", "run", "--source", "pope", "--questions", str(labels), "--images", str(tmp_path)]
    argv += ["--backend", "prior", "--arg", f"graph={tmp_path}", "--name", "../../x", "--out", str(work / "a.jsonl")]
    refused(main(argv), capsys.readouterr().err, "--name", "not a plain file name")
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------------------------------------ release verify
def test_verify_reports_a_fifo_and_an_empty_folder(packaged, capsys):
    os.mkfifo(packaged / "images" / "stray")
    (packaged / "empty").mkdir()
    assert main(["release", "verify", str(packaged)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("images/stray:") and "FIFO" in line for line in out), out
    assert any(line.startswith("empty/:") and "empty folder" in line for line in out), out


def test_verify_reports_a_listed_file_replaced_by_a_fifo(packaged, capsys):
    (packaged / "queries.jsonl").unlink()
    os.mkfifo(packaged / "queries.jsonl")
    assert main(["release", "verify", str(packaged)]) == 1  # and does not hang reading the FIFO
    assert "queries.jsonl: is a FIFO (named pipe), not a regular file" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ corrupt parquet
def corrupt(path: Path) -> bytes:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a truncated table: the magic bytes at the end are gone
    return path.read_bytes()


def test_corrupt_parquet_in_release_export_is_one_line(packaged, tmp_path, capsys):
    data = corrupt(packaged / "queries.parquet")
    # listed with its new sha256, so the release verifies (export refuses one that does not) and the reader meets it
    manifest = json.loads((packaged / "manifest.json").read_text())
    manifest["files"]["queries.parquet"] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (packaged / "manifest.json").write_text(json.dumps(manifest))
    code = main(["release", "export", str(packaged), "--format", "llava", "--out", str(tmp_path / "o")])
    refused(code, capsys.readouterr().err, str(packaged / "queries.parquet"), "not a readable parquet file")
    assert (packaged / "queries.parquet").read_bytes() == data and not (tmp_path / "o" / "llava.json").exists()


def test_corrupt_parquet_in_release_diff_is_one_line(tmp_path, capsys):
    from helpers import make_lineage_release as lineage_release

    a = lineage_release(tmp_path, "a", [("standard", "dog", "frisbee")])
    b = lineage_release(tmp_path, "b", [("standard", "dog", "grass")])
    data = corrupt(b / "scenes.parquet")
    refused(main(["release", "diff", str(a), str(b)]), capsys.readouterr().err, str(b / "scenes.parquet"), "parquet")
    assert (b / "scenes.parquet").read_bytes() == data


def test_corrupt_parquet_in_score_compare_is_one_line(tmp_path, capsys):
    bad = tmp_path / "answers.parquet"
    bad.write_bytes(b"PAR1 not really")
    refused(main(["score", "compare", "--scores", str(bad)]), capsys.readouterr().err, str(bad), "parquet")


def test_filter_images_job_log_names_the_corrupt_table(tmp_path):
    """The job's log (stderr of the `script:` process) holds one line naming the file, as the CLI does."""
    images = tmp_path / "images" / "000.parquet"
    images.parent.mkdir()
    pl.DataFrame({"image_id": ["a"], "path": ["images/000/a.png"]}).write_parquet(images)
    data = corrupt(images)
    log = tmp_path / "filter_images.log"
    script = f"""
from types import SimpleNamespace
from halluflow.snakemake_glue import setup
setup(SimpleNamespace(log=[{str(log)!r}], threads=1, rule="filter_images"))
from halluflow.workflow.release import filter_images
filter_images([{str(images)!r}], [{str(images)!r}], "scenes.parquet", {{}}, 0, "a.parquet", "r.parquet")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    refused(proc.returncode, log.read_text(), str(images), "not a readable parquet file")
    assert images.read_bytes() == data and not (tmp_path / "a.parquet").exists()


# ------------------------------------------------------------------------------------------------ arguments and ids
@pytest.mark.parametrize("value", ["1e11", "0", "2.5", "nan", "many"])
def test_compare_resamples_out_of_range_is_one_line(tmp_path, capsys, value):
    metrics = tmp_path / "m.json"
    metrics.write_text("{}")
    refused(main(["score", "compare", "--metrics", str(metrics), "--resamples", value]), capsys.readouterr().err, value)


def test_ids_come_back_exactly_as_given(pope, tmp_path, capsys):
    """Zero-padded ids stay strings, "²" does not crash after the answers were paid for, 7 stays an integer; then
    `score pope` finds an answer for every label."""
    labels, _ = pope
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(tmp_path / "a.png")
    graph = make_graph(tmp_path / "graph")
    out = tmp_path / "out.jsonl"
    argv = ["answer", "run", "--source", "pope", "--questions", str(labels), "--images", str(tmp_path)]
    assert main([*argv, "--backend", "prior", "--arg", f"graph={graph}", "--out", str(out)]) == 0
    ids = sorted((json.loads(line)["question_id"] for line in out.read_text().splitlines()), key=str)
    assert ids == sorted((r["question_id"] for r in LABELS), key=str)
    assert {type(i) for i in ids} == {str, int} and "000" in ids and 7 in ids
    capsys.readouterr()
    assert main(["score", "pope", "--answers", str(out), "--labels", str(labels)]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == len(LABELS)


def test_standin_build_refuses_a_folder_that_is_not_a_stand_in(tmp_path, capsys, monkeypatch):
    from halluflow.models import standins

    def never(out, seed=0):  # pragma: no cover - the refusal comes first
        raise AssertionError("the builder ran")

    # a builder of this test only (the table is global: other tests list its kinds)
    monkeypatch.setitem(standins._BUILDERS, "hostile-io-test", never)
    work = tmp_path / "thesis"
    work.mkdir()
    (work / "chapter1.tex").write_text("months of work")
    before = snapshot(tmp_path)
    code = main(["standin", "build", "hostile-io-test", str(work)])
    refused(code, capsys.readouterr().err, str(work), "not a stand-in folder")
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------------------------------------ streams
def run_shell(command: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("halluflow")
    return subprocess.run(
        ["bash", "-c", command.replace("halluflow ", f"{exe} ")],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "command, stdin",
    [
        ("halluflow score pope --answers <(cat answers.jsonl) --labels <(cat labels.jsonl)", None),
        ("halluflow score pope --answers /dev/stdin --labels labels.jsonl", "answers.jsonl"),
        ("cat labels.jsonl | halluflow score pope --answers answers.jsonl --labels /dev/stdin", None),
    ],
    ids=["process-substitution", "dev-stdin", "pipe"],
)
def test_scores_read_from_pipes(pope, tmp_path, command, stdin):
    before = snapshot(tmp_path)
    proc = run_shell(command, tmp_path, (tmp_path / stdin).read_bytes() if stdin else None)
    assert proc.returncode == 0, proc.stderr.decode()
    metrics = json.loads(proc.stdout)
    assert metrics["n"] == len(LABELS) and metrics["accuracy"] == 0.5
    assert snapshot(tmp_path) == before


def test_scores_read_from_a_fifo(pope, tmp_path, capsys):
    labels, answers = pope
    fifo = tmp_path / "answers.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(answers.read_bytes()), daemon=True)
    writer.start()
    assert main(["score", "pope", "--answers", str(fifo), "--labels", str(labels)]) == 0
    writer.join(10)
    assert json.loads(capsys.readouterr().out)["n"] == len(LABELS)


def test_a_bad_record_in_a_pipe_is_one_line(pope, tmp_path):
    labels, _ = pope
    proc = run_shell(
        "halluflow score pope --answers /dev/stdin --labels labels.jsonl", tmp_path, b'{"question_id": [1]}\n'
    )
    refused(proc.returncode, proc.stderr.decode(), "/dev/stdin")


def test_u2028_inside_an_answer_is_not_a_line_break(pope, tmp_path, capsys):
    labels, _ = pope
    answers = tmp_path / "answers2.jsonl"
    # a file the fast reader refuses (ids of two types) goes line by line: U+2028 and \x1c are inside strings there
    rows = [{"question_id": r["question_id"], "answer": "yes\u2028\x1cno\x0c"} for r in LABELS]
    answers.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert main(["score", "pope", "--answers", str(answers), "--labels", str(labels)]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == len(LABELS)


def test_align_reads_process_substitution_like_files():
    """No suffix to go by: the format comes from the content (CSV, JSON Lines), and the numbers are the same."""
    fixtures = Path(__file__).parent / "fixtures" / "align"
    files = run_shell("halluflow align human --human labels.csv --metrics metrics.jsonl", fixtures)
    piped = run_shell("halluflow align human --human <(cat labels.csv) --metrics <(cat metrics.jsonl)", fixtures)
    assert files.returncode == piped.returncode == 0, piped.stderr.decode()
    as_files, as_pipes = json.loads(files.stdout), json.loads(piped.stdout)
    assert as_pipes["human"]["n"] == 8
    # the same agreement numbers; only the file names differ (/dev/fd/N instead of labels.csv, metrics.jsonl)
    for result in (as_files, as_pipes):
        result["human"].pop("source")
    assert [as_files["human"], *as_files["metrics"].values()] == [as_pipes["human"], *as_pipes["metrics"].values()]


def test_standin_rebuild_replaces_a_stand_in_only_once_the_new_one_is_complete(tmp_path, capsys, monkeypatch):
    from halluflow.models import standins

    def build(out, seed=0, fail=False):
        (Path(out) / "weights.bin").write_bytes(bytes([seed]) * 8)
        if fail:
            raise standins.ConfigError("the builder gave up half-way")

    monkeypatch.setitem(standins._BUILDERS, "hostile-io-test", build)
    model = tmp_path / "tiny"
    assert main(["standin", "build", "hostile-io-test", str(model), "--seed", "1"]) == 0
    before = snapshot(tmp_path)
    code = main(["standin", "build", "hostile-io-test", str(model), "--seed", "2", "--arg", "fail=true"])
    refused(code, capsys.readouterr().err, "gave up half-way")
    assert snapshot(tmp_path) == before  # the old stand-in whole, no half-built folder beside it
    assert main(["standin", "build", "hostile-io-test", str(model), "--seed", "2"]) == 0
    assert (model / "weights.bin").read_bytes() == bytes([2]) * 8 and sorted(p.name for p in tmp_path.iterdir()) == [
        "tiny"
    ]
