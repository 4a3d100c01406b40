"""Hostile inputs, third round: configs, manifests, release files and imports. Each case asserts the exit code,
exactly one error line (or the correct reading), no traceback, and every input unchanged; the cases that used to
hang run in a subprocess under a timeout. None repeats tests/test_hostile_io.py or tests/test_hostile_http.py.

Classes: readers (regular files only, size caps), config (aliases, nesting, encoding, duplicate keys, anchored
patterns, bounded integers), release integrity (duplicated ids, empty questions, exports of a release that fails
verify, sha256 case, the real target in a write error) and the VLMEvalKit import (a real CSV/TSV parser)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

from halluflow.cli import main
from halluflow.config import check_shape, validate_config
from halluflow.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
EXE = Path(sys.executable).with_name("halluflow")


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root`: a file by the sha256 of its bytes, anything else by its kind (FIFO, link, ...)."""
    out = {}
    for path in sorted(root.rglob("*")):
        mode = path.lstat().st_mode
        rel = path.relative_to(root).as_posix()
        out[rel] = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(mode) else stat.filemode(mode)[0]
    return out


def one_line(code: int, text: str, *needles: str, exit_code: int = 1) -> str:
    """Exit code `exit_code`, exactly one non-empty line holding every needle, no traceback."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert code == exit_code, text
    assert "Traceback" not in text, text
    assert len(lines) == 1, text
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def run(args: list[str], cwd: Path, timeout: float = 60, env: dict | None = None, stdin=None):
    """The installed `halluflow` in a subprocess (a hang fails the test at `timeout` instead of blocking it)."""
    started = time.monotonic()
    proc = subprocess.run(
        [str(EXE), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        stdin=stdin,
    )
    proc.elapsed = time.monotonic() - started
    return proc


def rehash(release_dir: Path, rel: str) -> None:
    """Record a changed file's sha256 and size in the manifest, as a hand-edited release would (it then verifies)."""
    manifest = json.loads((release_dir / "manifest.json").read_text())
    data = (release_dir / rel).read_bytes()
    manifest["files"][rel] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (release_dir / "manifest.json").write_text(json.dumps(manifest))


# ============================================================================ readers: regular files only, capped
def test_verify_refuses_a_manifest_that_is_a_fifo_at_once(release, tmp_path):
    manifest = release / "manifest.json"
    manifest.unlink()
    os.mkfifo(manifest)  # nobody ever writes to it: a blocking read would wait forever
    before = snapshot(release)
    proc = run(["release", "verify", str(release)], tmp_path, timeout=60)
    one_line(proc.returncode, proc.stdout, "manifest.json", "FIFO")
    assert "Traceback" not in proc.stderr and snapshot(release) == before and proc.elapsed < 30


def test_verify_refuses_a_manifest_linked_to_dev_zero(release, tmp_path):
    manifest = release / "manifest.json"
    manifest.unlink()
    manifest.symlink_to("/dev/zero")
    proc = run(["release", "verify", str(release)], tmp_path, timeout=60)
    one_line(proc.returncode, proc.stdout, "manifest.json", "character device")
    assert "Traceback" not in proc.stderr and manifest.is_symlink()


def test_verify_refuses_a_3_gb_manifest_without_reading_it(release, tmp_path):
    manifest = release / "manifest.json"
    with open(manifest, "r+b") as fh:
        fh.truncate(3 << 30)  # sparse: 3 GiB long, no disk used
    proc = run(["release", "verify", str(release)], tmp_path, timeout=60)
    one_line(proc.returncode, proc.stdout, "manifest.json", "3 GiB", "larger than")
    assert manifest.stat().st_size == 3 << 30


def test_export_refuses_a_manifest_that_is_a_fifo_at_once(release, tmp_path):
    (release / "manifest.json").unlink()
    os.mkfifo(release / "manifest.json")
    proc = run(["release", "export", str(release), "--format", "llava", "--out", str(tmp_path / "x")], tmp_path)
    one_line(proc.returncode, proc.stderr, "FIFO")
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())


def test_release_diff_refuses_a_3_gb_manifest_without_reading_it(tmp_path, capsys):
    from helpers import make_lineage_release

    a = make_lineage_release(tmp_path, "a", [("standard", "dog", "frisbee")])
    b = make_lineage_release(tmp_path, "b", [("standard", "dog", "grass")])
    with open(b / "manifest.json", "r+b") as fh:
        fh.truncate(3 << 30)
    code = main(["release", "diff", str(a), str(b)])
    one_line(code, capsys.readouterr().err, "manifest.json", "3 GiB", "larger than")


def test_an_input_that_is_dev_zero_is_refused_not_read(tmp_path):
    (tmp_path / "labels.jsonl").write_text(json.dumps({"question_id": 1, "text": "Is there a dog?", "label": "yes"}))
    proc = run(["score", "pope", "--answers", "/dev/zero", "--labels", "labels.jsonl"], tmp_path, timeout=60)
    one_line(proc.returncode, proc.stderr, "/dev/zero", "character device")


def test_an_endless_pipe_stops_at_the_input_cap(tmp_path):
    (tmp_path / "labels.jsonl").write_text(json.dumps({"question_id": 1, "text": "Is there a dog?", "label": "yes"}))
    yes = subprocess.Popen(["yes", '{"question_id": 1, "answer": "yes"}'], stdout=subprocess.PIPE)
    try:
        proc = run(
            ["score", "pope", "--answers", "/dev/stdin", "--labels", "labels.jsonl"],
            tmp_path,
            timeout=60,
            env={"HALLUFLOW_MAX_INPUT_BYTES": str(1 << 20)},
            stdin=yes.stdout,
        )
    finally:
        yes.kill()
        yes.wait()
    one_line(proc.returncode, proc.stderr, "/dev/stdin", "larger than 1 MiB")


@pytest.mark.parametrize("form", ["lines", "array"])
def test_a_deep_record_in_an_lmms_eval_file_is_one_line(tmp_path, capsys, form):
    deep = "[" * 100_000 + "]" * 100_000
    text = f'{{"doc_id": 0, "filtered_resps": {deep}}}\n'
    path = tmp_path / "m" / "x_samples_t.jsonl"
    path.parent.mkdir()
    path.write_text(text if form == "lines" else f"[{text}]")
    before = snapshot(tmp_path)
    code = main(["import", "lmms-eval", str(path), "--out", str(tmp_path / "a.jsonl")])
    one_line(code, capsys.readouterr().err, str(path), "nested deeper than 64")
    assert snapshot(tmp_path) == before


# ============================================================================ config
BASE = str(REPO / "config.yaml")


def laughs(levels: int = 9, indent: str = "") -> str:
    """A "billion laughs" YAML block: 9 aliases of 9 aliases ... (9**levels strings once expanded)."""
    lines = [f'{indent}l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"{indent}l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


def plan(tmp_path: Path, text: str | bytes, timeout: float = 60):
    config = tmp_path / "c.yaml"
    config.write_bytes(text if isinstance(text, bytes) else text.encode())
    before = snapshot(tmp_path)
    proc = run(["plan", "--configfile", str(config), "--base", BASE], tmp_path, timeout=timeout)
    assert snapshot(tmp_path) == before
    return proc


def test_billion_laughs_under_an_unknown_key_is_refused_fast(tmp_path):
    proc = plan(tmp_path, "junk:\n" + laughs(indent="  "))
    one_line(proc.returncode, proc.stderr, "c.yaml", "junk", "expands to more than")
    assert proc.elapsed < 30


def test_billion_laughs_under_style_tags_is_refused_fast(tmp_path):
    text = laughs() + "ode:\n  prompts:\n    style_tags: *l8\n"
    proc = plan(tmp_path, text)
    one_line(proc.returncode, proc.stderr, "c.yaml", "expands to more than")
    assert proc.elapsed < 30


def test_billion_laughs_as_snakemake_loads_it_is_refused_by_validate_config():
    """Snakemake reads the config itself (PyYAML, aliases shared): validate_config walks each shared value once."""
    config = yaml.safe_load(laughs() + "ode:\n  prompts:\n    style_tags: *l8\n")
    started = time.monotonic()
    with pytest.raises(ConfigError, match="expands to more than"):
        validate_config(config)
    assert time.monotonic() - started < 5


def test_billion_laughs_in_a_typed_section_is_refused_before_it_is_copied():
    from halluflow.config_types import Ode

    section = yaml.safe_load(laughs() + "prompts:\n  style_tags: *l8\n")
    started = time.monotonic()
    with pytest.raises(ConfigError, match="expands to more than"):
        Ode.from_dict(section)
    assert time.monotonic() - started < 5


def test_aliases_nested_in_aliases_count_at_their_full_depth():
    # each alias is 10 lists deep and holds the previous one: 20 short lines, 200 levels once expanded
    lines = ["a0: &a0 " + "[" * 10 + "]" * 10]
    lines += [f"a{i}: &a{i} " + "[" * 10 + f"*a{i - 1}" + "]" * 10 for i in range(1, 20)]
    config = yaml.safe_load("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match="nested deeper than 32 levels once its aliases are expanded"):
        check_shape(config)


def test_a_value_containing_itself_is_one_line():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ConfigError, match="contains itself"):
        check_shape({"ode": {"prompts": {"style_tags": loop}}})


def test_small_aliases_and_merge_keys_still_work(tmp_path):
    text = "models:\n  - &base {name: a, backend: blind}\n  - <<: *base\n    name: b\n"
    proc = plan(tmp_path, text)  # a merge key is not a duplicate key, a small alias no bomb
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "text, needle",
    [
        ("x: " + "[" * 100_000 + "]" * 100_000 + "\n", "nesting depth"),
        ("x:\n" + "- " * 100_000 + "a\n", "nesting depth"),
        ("seed: 1\nx: " + "[" * 40 + "]" * 40 + "\n", "nested deeper than 32"),
    ],
    ids=["flow-100k", "block-100k", "flow-40"],
)
def test_deep_yaml_is_one_line(tmp_path, text, needle):
    proc = plan(tmp_path, text)
    one_line(proc.returncode, proc.stderr, "c.yaml", needle)


def test_a_latin1_config_is_one_line_naming_the_file(tmp_path):
    proc = plan(tmp_path, "release: d\xe9mo\n".encode("latin-1"))
    one_line(proc.returncode, proc.stderr, "c.yaml", "not UTF-8", "line 1")


@pytest.mark.parametrize(
    "text, key, line",
    [
        ("release: a\nrelease: b\n", "'release'", "line 2"),
        ("seed: 1\node:\n  graph: {}\n  queries: {}\n  graph: {}\n", "'graph'", "line 5"),
        ("models:\n  - name: a\n    backend: blind\n    name: b\n", "'name'", "line 4"),
    ],
    ids=["top", "nested", "in-a-list"],
)
def test_duplicate_keys_are_refused_naming_key_and_line(tmp_path, text, key, line):
    proc = plan(tmp_path, text)
    one_line(proc.returncode, proc.stderr, "c.yaml", key, line, "twice")


@pytest.mark.parametrize(
    "text, key",
    [
        ('release: "demo\\n"\n', "release"),
        ('models:\n  - {name: "m\\n", backend: blind}\n', "models.0.name"),
        ('synthesis:\n  device: "cpu\\n"\n', "synthesis.device"),
    ],
    ids=["release", "model-name", "device"],
)
def test_a_trailing_newline_does_not_pass_an_anchored_pattern(tmp_path, text, key):
    proc = plan(tmp_path, text)
    one_line(proc.returncode, proc.stderr, key, "does not match")


@pytest.mark.parametrize("value", ["9" * 400, str(2**63), str(-(2**63))], ids=["400-digits", "2**63", "-2**63"])
def test_an_integer_out_of_64_bits_is_refused(tmp_path, value):
    proc = plan(tmp_path, f"seed: {value}\n")
    one_line(proc.returncode, proc.stderr, "'seed'", "out of range")


def test_the_largest_64_bit_seed_is_accepted():
    assert check_shape({"seed": 2**63 - 1}) is None


# ============================================================================ release and answers integrity
def answer_ode(release_dir: Path, out: Path, capsys) -> tuple[int, str]:
    code = main(
        ["answer", "run", "--source", "ode", "--questions", str(release_dir), "--backend", "blind", "--out", str(out)]
    )
    return code, capsys.readouterr().err


def rewrite_queries(release_dir: Path, change) -> None:
    queries = change(pl.read_parquet(release_dir / "queries.parquet"))
    queries.write_parquet(release_dir / "queries.parquet")
    rehash(release_dir, "queries.parquet")
    assert main(["release", "verify", str(release_dir)]) == 0  # the hand-edited release verifies


def test_duplicated_query_ids_are_refused_before_any_request(release, tmp_path, capsys):
    rewrite_queries(release, lambda q: pl.concat([q, q.head(2)]))
    capsys.readouterr()
    before = snapshot(release)
    code, err = answer_ode(release, tmp_path / "a.jsonl", capsys)
    one_line(code, err, "2 query id(s) appear more than once", "'q1'")
    assert not (tmp_path / "a.jsonl").exists() and not (tmp_path / "a.jsonl.cache").exists()
    assert snapshot(release) == before


@pytest.mark.parametrize("which", ["all-null", "one-blank"])
def test_empty_questions_are_refused_before_any_request(release, tmp_path, capsys, which):
    def blank(q):
        if which == "all-null":
            return q.with_columns(pl.lit(None, dtype=pl.String).alias("question"))
        return q.with_columns(
            pl.when(pl.col("query_id") == "q4").then(pl.lit("  ")).otherwise("question").alias("question")
        )

    rewrite_queries(release, blank)
    capsys.readouterr()
    code, err = answer_ode(release, tmp_path / "a.jsonl", capsys)
    n = "5 of 5" if which == "all-null" else "1 of 5"
    one_line(code, err, f"{n} queries have an empty question")
    assert not (tmp_path / "a.jsonl").exists() and not (tmp_path / "a.jsonl.cache").exists()


def test_duplicated_pope_question_ids_are_refused(tmp_path, capsys):
    rows = [
        {"question_id": 1, "image": "a.png", "text": "Is there a dog in the image?", "label": "yes"},
        {"question_id": 1, "image": "a.png", "text": "Is there a cat in the image?", "label": "no"},
    ]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = snapshot(tmp_path)
    argv = ["answer", "run", "--source", "pope", "--questions", str(labels), "--images", str(tmp_path)]
    code = main([*argv, "--backend", "blind", "--out", str(tmp_path / "a.jsonl")])
    one_line(code, capsys.readouterr().err, "more than once")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("damage", ["altered", "unlisted", "missing"])
def test_export_of_a_release_that_fails_verify_is_refused(release, tmp_path, capsys, damage):
    if damage == "altered":
        (release / "DATACARD.md").write_text("edited\n")
    elif damage == "unlisted":
        (release / "extra.txt").write_text("x")
    else:
        next((release / "images").iterdir()).unlink()
    before = snapshot(release)
    out = tmp_path / "exports"
    code = main(["release", "export", str(release), "--format", "llava", "--out", str(out)])
    one_line(code, capsys.readouterr().err, "fails verification", "release verify")
    assert not out.exists() and snapshot(release) == before


def test_upper_case_sha256_verifies(release, capsys):
    manifest = json.loads((release / "manifest.json").read_text())
    for meta in manifest["files"].values():
        meta["sha256"] = meta["sha256"].upper()
    (release / "manifest.json").write_text(json.dumps(manifest))
    assert main(["release", "verify", str(release)]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out.startswith("ok: ")


def test_a_sha256_that_is_not_hex_is_said_clearly(release, capsys):
    manifest = json.loads((release / "manifest.json").read_text())
    manifest["files"]["DATACARD.md"]["sha256"] = "not-a-digest"
    (release / "manifest.json").write_text(json.dumps(manifest))
    code = main(["release", "verify", str(release)])
    one_line(code, capsys.readouterr().out, "DATACARD.md", "no sha256 in the manifest")


def test_a_read_only_file_system_names_the_real_target(tmp_path, capsys, monkeypatch):
    rows = [{"question_id": 1, "image": "a.png", "text": "Is there a dog in the image?", "label": "yes"}]
    labels, answers = tmp_path / "labels.jsonl", tmp_path / "answers.jsonl"
    labels.write_text(json.dumps(rows[0]) + "\n")
    answers.write_text(json.dumps({"question_id": 1, "answer": "yes"}) + "\n")
    before = snapshot(tmp_path)

    def read_only(prefix="", suffix="", dir=None, **_):  # what mkstemp meets on a read-only mount
        raise OSError(errno.EROFS, "Read-only file system", os.path.join(dir, f"{prefix}k2j3h4{suffix}"))

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    code = main(
        ["score", "pope", "--answers", str(answers), "--labels", str(labels), "--out", str(tmp_path / "m.json")]
    )
    line = one_line(code, capsys.readouterr().err, "m.json", "Read-only file system")
    assert ".part" not in line and snapshot(tmp_path) == before


# ============================================================================ VLMEvalKit import: a real parser
def vlm(tmp_path: Path, data: bytes, name: str = "m_d_POPE.tsv"):
    path = tmp_path / "m" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return path


def import_vlm(path: Path, capsys):
    before = snapshot(path.parent)
    out = path.parent.parent / "answers.jsonl"
    code = main(["import", "vlmevalkit", str(path), "--out", str(out)])
    captured = capsys.readouterr()
    assert snapshot(path.parent) == before
    rows = [json.loads(line) for line in out.read_text().splitlines()] if code == 0 else None
    return code, captured, rows


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"\xef\xbb\xbfindex\tquestion\tprediction\n1\tq\tYes\n2\tq\tNo\n", {"1": "Yes", "2": "No"}),
        (
            b'index\tprediction\n1\t"a dog?\tno, a cat"\n2\t"two\nlines"\n',
            {"1": "a dog?\tno, a cat", "2": "two\nlines"},
        ),
        (b'index\tprediction\n1\t"He said ""yes"""\n', {"1": 'He said "yes"'}),
        (b"index\tprediction\r\n1\tYes\r\n\r\n2\tNo\r\n", {"1": "Yes", "2": "No"}),
    ],
    ids=["bom", "quoted-tab-and-newline", "doubled-quotes", "crlf-blank-line"],
)
def test_vlmevalkit_tsv_is_read_as_a_tsv(tmp_path, capsys, data, expected):
    code, captured, rows = import_vlm(vlm(tmp_path, data), capsys)
    assert code == 0, captured.err
    assert {r["query_id"]: r["answer"] for r in rows} == expected


def test_vlmevalkit_csv_with_a_quoted_comma(tmp_path, capsys):
    path = vlm(tmp_path, b'index,prediction\n1,"Yes, there is."\n2,No\n', "m_d.csv")
    code, captured, rows = import_vlm(path, capsys)
    assert code == 0, captured.err
    assert [r["answer"] for r in rows] == ["Yes, there is.", "No"]


@pytest.mark.parametrize(
    "data, needles",
    [
        (b"index\tprediction\n1\ta dog?\tno, a cat\n2\tNo\n", ("line 2", "3 fields where the header has 2", "tab")),
        (b"index\tquestion\tprediction\n1\tq\n2\tq\tNo\n", ("line 2", "2 fields where the header has 3")),
        (b"index\tprediction\tprediction\n1\tYes\tNo\n", ("'prediction' appears 2 times",)),
        (b'index\tprediction\n1\tYes\n2\t"No\n3\tYes\n', ("line 3", "never closed")),
        (b'index\tprediction\n1\t"Yes\n2\tNo\n3\tYes"\n4\tNo\n', ("line 2", "rows of their own")),
        (b"index\tquery_id\tquery_id\tprediction\n1\ta\tb\tYes\n", ("'query_id' appears 2 times",)),
    ],
    ids=["unquoted-tab", "short-first-row", "two-predictions", "unterminated-quote", "quote-closed-later", "two-ids"],
)
def test_vlmevalkit_bad_tables_are_one_line(tmp_path, capsys, data, needles):
    path = vlm(tmp_path, data)
    code, captured, _ = import_vlm(path, capsys)
    one_line(code, captured.err, str(path), *needles)
    assert not (tmp_path / "answers.jsonl").exists()
