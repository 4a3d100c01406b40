"""Atomic writes, readers and path safety in halluflow.io."""

from __future__ import annotations

import json
import os
import stat
import threading

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
        (
            lambda p: p.write_text("[" * 100_000),
            r"x\.json: (JSON nested (too deeply|deeper than 64 levels)|not valid JSON)",
        ),
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


def test_check_target_accepts_files_and_new_paths_only(tmp_path):
    (tmp_path / "file").write_text("x")
    assert io.check_target(tmp_path / "file") == (tmp_path / "file").resolve()
    assert io.check_target(tmp_path / "new" / "file") == (tmp_path / "new" / "file").resolve()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for name, kind in (("fifo", "a FIFO"), ("dir", "a folder"), ("dangling", "a dangling symbolic link")):
        with pytest.raises(InputError, match=f"exists and is {kind}"):
            io.write_text(tmp_path / name, "y")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode) and (tmp_path / "dangling").is_symlink()
    assert io.check_target(tmp_path / "dir", folder=True) == (tmp_path / "dir").resolve()


def test_a_symlinked_target_keeps_its_link(tmp_path):
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    io.write_text(tmp_path / "link.json", "new")
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_text() == "new"


def test_inputs_of_the_command_are_never_overwritten(tmp_path):
    (tmp_path / "labels.json").write_text("labels")
    folder = tmp_path / "annotations"
    folder.mkdir()
    (folder / "a.json").write_text("{}")
    with io.command_scope({"--labels": tmp_path / "labels.json", "--annotations": folder}):
        with pytest.raises(InputError, match="is also the input --labels of this command"):
            io.write_text(tmp_path / "labels.json", "over")
        io.read_json(folder / "a.json")  # read from an input folder: protected as well
        with pytest.raises(InputError, match="read from --annotations"):
            io.write_json(folder / "a.json", {"over": 1})
        io.write_text(folder / "new.json", "a new file beside the inputs is fine")
    assert (tmp_path / "labels.json").read_text() == "labels" and (folder / "a.json").read_text() == "{}"


def test_owned_folder_refuses_names_that_escape_it(tmp_path):
    with io.owned_folder(tmp_path / "out"):
        io.write_text(tmp_path / "out" / "task" / "x.yaml", "inside")
        for name in ("../x.yaml", "task/../../x.yaml"):
            with pytest.raises(InputError, match="resolves outside the folder"):
                io.write_text(tmp_path / "out" / name, "outside")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with pytest.raises(InputError, match="resolves outside"):
        io.link_or_copy(tmp_path / "out/task/x.yaml", tmp_path / "y", within=tmp_path / "out")
    assert not (tmp_path / "y").exists()


@pytest.mark.parametrize("name", ["../x", "a/b", "..", ".", "", " ", "a\\b", "a\0b", "tab\there", "x" * 256])
def test_safe_name_refuses_anything_but_one_plain_name(name):
    with pytest.raises(InputError, match="not a plain file name"):
        io.safe_name(name, "--task")


def test_replace_folder_keeps_the_old_one_until_the_new_one_is_in(tmp_path, monkeypatch):
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "old.txt").write_text("finished")
    (tmp_path / "built").mkdir()
    (tmp_path / "built" / "new.txt").write_text("new")
    real_rename = os.rename

    def failing(src, dst):
        if str(src).endswith("built"):
            raise OSError(28, "No space left on device")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", failing)
    with pytest.raises(OSError):
        io.replace_folder(tmp_path / "built", tmp_path / "dest")
    assert (tmp_path / "dest" / "old.txt").read_text() == "finished"
    monkeypatch.setattr(os, "rename", real_rename)
    io.replace_folder(tmp_path / "built", tmp_path / "dest")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest"] and (tmp_path / "dest" / "new.txt").exists()


def test_read_jsonl_splits_on_newline_only(tmp_path):
    path = tmp_path / "a.jsonl"
    rows = [{"a": "one\u2028two"}, {"a": "form\x0cfeed\x1cand\x1d\x1e\x85"}, {"a": "line\rreturn"}]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert io.read_jsonl(path) == rows


def test_readers_take_fifos_and_name_corrupt_parquet(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(b'{"a": 1}\n{"a": 2}\n'), daemon=True)
    writer.start()
    with io.command_scope({}):
        assert io.read_jsonl(fifo) == [{"a": 1}, {"a": 2}]
        assert io.read_jsonl(fifo) == [{"a": 1}, {"a": 2}]  # a second reader of the same pipe gets the same bytes
    writer.join(10)
    bad = tmp_path / "t.parquet"
    bad.write_bytes(b"PAR1 half a table")
    with pytest.raises(InputError, match=f"{bad}: not a readable parquet file"):
        io.read_parquet(bad)
    with pytest.raises(InputError, match=f"{bad}: not a readable parquet file"):
        io.parquet_columns(bad)
    with pytest.raises(InputError, match="file not found"):
        io.read_parquet(tmp_path / "missing.parquet")
