"""Stand-in builder registry: atomic folders, markers, clear errors (tiny random models, no downloads)."""

from __future__ import annotations

import sys

import pytest

from halluflow.errors import ConfigError, MissingExtraError
from halluflow.io import read_json
from halluflow.models.standins import (
    MARKER,
    build_standin,
    builder_kinds,
    register_builder,
    standin_info,
    tiny_clip_tokenizer,
    tiny_t5_tokenizer,
)


def _write_two_files(out_dir, seed=0, size=3):
    (out_dir / "weights.bin").write_bytes(bytes([seed]) * size)
    return {"size": size}


def _fail_halfway(out_dir, seed=0):
    (out_dir / "half.bin").write_bytes(b"x")
    raise RuntimeError("builder crashed")


def _needs_diffusers(out_dir, seed=0):
    import diffusers  # noqa: F401


def test_builtin_kinds_are_registered():
    assert {
        "flux",
        "owlv2",
        "grounding_dino",
        "yolo",
        "yolo_world",
        "smolvlm",
        "llava",
        "llava_next",
        "qwen2_vl",
        "gemma3",
    } <= set(builder_kinds())


def test_unknown_kind_lists_known_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown stand-in kind 'nope'; known: .*owlv2"):
        build_standin("nope", tmp_path / "m")


def test_callable_builder_writes_folder_and_marker(tmp_path):
    register_builder("test-two-files", _write_two_files)
    out = build_standin("test-two-files", tmp_path / "m", seed=7, size=5)
    assert (out / "weights.bin").read_bytes() == bytes([7]) * 5
    marker = read_json(out / MARKER)
    assert marker == {"kind": "test-two-files", "seed": 7, "config": {"size": 5}, "stand_in": True, "size": 5}
    assert standin_info(out)["kind"] == "test-two-files"
    # a weights file inside a stand-in folder is recognised too (ultralytics loads model.pt)
    assert standin_info(out / "weights.bin")["seed"] == 7
    assert standin_info(tmp_path) is None


def test_rebuild_replaces_the_folder(tmp_path):
    register_builder("test-two-files", _write_two_files)
    out = build_standin("test-two-files", tmp_path / "m", seed=1)
    (out / "stale.txt").write_text("left over")
    build_standin("test-two-files", out, seed=2)
    assert not (out / "stale.txt").exists()
    assert (out / "weights.bin").read_bytes() == bytes([2]) * 3


def test_failed_build_leaves_nothing_behind(tmp_path):
    register_builder("test-crash", _fail_halfway)
    with pytest.raises(RuntimeError, match="builder crashed"):
        build_standin("test-crash", tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_missing_package_names_the_extra(tmp_path, monkeypatch):
    register_builder("test-needs-diffusers", _needs_diffusers)
    monkeypatch.setitem(sys.modules, "diffusers", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'halluflow\[models\]'"):
        build_standin("test-needs-diffusers", tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_unknown_builder_setting_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="unknown keys colour for 'owlv2'"):
        build_standin("owlv2", tmp_path / "m", colour="red")


def test_tiny_tokenizers_round_trip_text():
    clip = tiny_clip_tokenizer(77)
    ids = clip("A red dog").input_ids
    # byte-level, lower-cased by CLIP's normaliser, framed by start/end tokens
    assert ids[0] == clip.bos_token_id and ids[-1] == clip.eos_token_id
    assert clip.decode(ids, skip_special_tokens=True).replace(" ", "") == "areddog"
    t5 = tiny_t5_tokenizer(32)
    ids = t5("a red dog").input_ids
    assert ids[-1] == t5.eos_token_id and t5.unk_token_id not in ids
    assert t5.decode(ids, skip_special_tokens=True) == "a red dog"


def test_same_seed_same_weights(tmp_path):
    a = build_standin("owlv2", tmp_path / "a", seed=3, image_size=32, patch_size=8)
    b = build_standin("owlv2", tmp_path / "b", seed=3, image_size=32, patch_size=8)
    c = build_standin("owlv2", tmp_path / "c", seed=4, image_size=32, patch_size=8)
    weights = [(p / "model.safetensors").read_bytes() for p in (a, b, c)]
    assert weights[0] == weights[1] != weights[2]


def test_cli_builds_and_reports_errors(tmp_path, capsys):
    from halluflow.cli import main

    assert (
        main(["standin", "build", "owlv2", str(tmp_path / "m"), "--arg", "image_size=32", "--arg", "patch_size=8"]) == 0
    )
    assert read_json(tmp_path / "m" / MARKER)["config"] == {"image_size": 32, "patch_size": 8}
    assert main(["standin", "build", "nope", str(tmp_path / "x")]) == 1
    assert "unknown stand-in kind 'nope'" in capsys.readouterr().err
    assert main(["standin", "build", "owlv2", str(tmp_path / "y"), "--arg", "novalue"]) == 1
    assert "--arg 'novalue': expected KEY=VALUE" in capsys.readouterr().err
