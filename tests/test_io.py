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
