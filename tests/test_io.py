"""Atomic writes, readers and path safety in halluflow.io."""

from __future__ import annotations

import json

import polars as pl
import pytest

from halluflow import io
from halluflow.errors import InputError


def test_atomic_path_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "out.json"
    with pytest.raises(RuntimeError):
        with io.atomic_path(target) as tmp:
            tmp.write_text("partial")
            raise RuntimeError("killed")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_write_json_is_deterministic(tmp_path):
    io.write_json(tmp_path / "a.json", {"b": 1, "a": [1, 2]})
    io.write_json(tmp_path / "b.json", {"a": [1, 2], "b": 1})
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_parquet_bytes_reproducible(tmp_path):
    df = pl.DataFrame({"x": [1, 2, 3], "y": ["a", "b", "c"]})
    io.write_parquet(tmp_path / "1.parquet", df)
    io.write_parquet(tmp_path / "2.parquet", df)
    assert (tmp_path / "1.parquet").read_bytes() == (tmp_path / "2.parquet").read_bytes()


def test_read_jsonl_accepts_arrays_and_reports_line(tmp_path):
    arr = tmp_path / "a.json"
    arr.write_text(json.dumps([{"question_id": 1}, {"question_id": 2}]))
    assert [r["question_id"] for r in io.read_jsonl(arr)] == [1, 2]
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(InputError, match=r"b.jsonl:2"):
        io.read_jsonl(bad)
    with pytest.raises(InputError, match="not found"):
        io.read_jsonl(tmp_path / "missing.jsonl")


def test_safe_join_refuses_escapes(tmp_path):
    assert io.safe_join(tmp_path, "images/a.png") == (tmp_path / "images" / "a.png").resolve()
    for evil in ("../../etc/passwd", "/etc/passwd", "images/../../x"):
        with pytest.raises(InputError, match="escapes its folder"):
            io.safe_join(tmp_path, evil)


def test_stable_hash_ignores_key_order():
    assert io.stable_hash({"a": 1, "b": 2}) == io.stable_hash({"b": 2, "a": 1})
    assert io.sha256_bytes(b"abc").startswith("ba7816bf")


def test_atomic_files_get_umask_permissions(tmp_path):
    import os
    import stat

    io.write_text(tmp_path / "x.txt", "hello")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE((tmp_path / "x.txt").stat().st_mode) == 0o666 & ~mask


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p.write_bytes(b'{"a": "caf\xe9"}\n'), r"x\.json: not UTF-8 text \(byte 10, line 1\)"),
        (lambda p: p.mkdir(), r"x\.json: is a folder, expected a file"),
        (lambda p: None, r"x\.json: file not found"),
        (lambda p: p.write_text("[" * 100_000), r"x\.json: (JSON nested too deeply|not valid JSON)"),
    ],
)
def test_readers_fail_with_one_line_naming_the_file(tmp_path, make, message):
    path = tmp_path / "x.json"
    make(path)
    for reader in (io.read_json, io.read_jsonl, io.read_text):
        if reader is io.read_text and "JSON" in message:
            continue
        with pytest.raises(InputError, match=message) as info:
            reader(path)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("relative", ["a\0b.png", "a" * 5000])
def test_safe_join_refuses_unusable_names_in_one_line(tmp_path, relative):
    try:
        path = io.safe_join(tmp_path, relative)
    except InputError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400
    else:  # a long name is a valid path string; only opening it fails, and that is the caller's one-line error
        assert path.parent == tmp_path.resolve()
