"""DiffusersSynthesizer on a tiny random FLUX built offline: real from_pretrained + FluxPipeline code path."""

from __future__ import annotations

import sys

import numpy as np
import polars as pl
import pytest

from halluflow.backends.base import ImagePrompt
from halluflow.errors import BackendError, ConfigError, InputError, MissingExtraError
from halluflow.io import sha256_file, write_parquet
from halluflow.models.registry import create
from halluflow.models.standins import build_standin
from halluflow.ode.synthesis import IMAGE_SCHEMA, read_prompts, synthesize_shard, synthesizer_kwargs

SMALL = dict(steps=2, height=32, width=48)


@pytest.fixture(scope="module")
def flux_dir(tmp_path_factory):
    return build_standin("flux", tmp_path_factory.mktemp("models") / "tiny-flux", seed=0)


@pytest.fixture(scope="module")
def synth(flux_dir):
    return create("synthesizer", {"backend": "diffusers", "model": str(flux_dir), "device": "cpu", **SMALL})


def _prompts(n=5, shard="000"):
    return pl.DataFrame(
        {
            "image_id": [f"img-{i}" for i in range(n)],
            "scene_id": [f"scene-{i // 2}" for i in range(n)],
            "shard": [shard] * n,
            "prompt": [f"a red dog and a cat number {i}" for i in range(n)],
            "negative_prompt": ["(bad anatomy)"] * n,
            "seed": [100 + i for i in range(n)],
        }
    )


def test_loads_with_from_pretrained_and_says_stand_in(synth, flux_dir):
    info = synth.describe()
    assert info.stand_in is True and info.model == str(flux_dir) and info.backend == "diffusers"
    assert type(synth.pipe).__name__ == "FluxPipeline"


def test_same_seed_same_bytes_other_seed_other_image(synth):
    a = synth.generate([ImagePrompt("a", "a dog", "", 1), ImagePrompt("b", "a dog", "", 2)])
    b = synth.generate([ImagePrompt("a", "a dog", "", 1), ImagePrompt("b", "a dog", "", 2)])
    assert [im.size for im in a] == [(48, 32), (48, 32)]  # PIL size is (width, height)
    assert all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(a, b))
    assert not np.array_equal(np.asarray(a[0]), np.asarray(a[1]))


def test_shard_writes_pngs_and_table(synth, tmp_path):
    table = synthesize_shard(_prompts(), tmp_path, "000", synth, batch_size=2)
    assert table.schema == pl.Schema(IMAGE_SCHEMA)
    assert table["image_id"].to_list() == [f"img-{i}" for i in range(5)]
    row = table.row(3, named=True)
    assert row["path"] == "images/000/img-3.png"
    assert row["sha256"] == sha256_file(tmp_path / row["path"])
    assert (row["width"], row["height"], row["seed"], row["stand_in"]) == (48, 32, 103, True)
    assert row["scene_id"] == "scene-1" and row["revision"] is None


def test_resume_reuses_valid_pngs_and_regenerates_damaged_ones(synth, tmp_path):
    first = synthesize_shard(_prompts(), tmp_path, "000", synth, batch_size=2)
    (tmp_path / "images/000/img-4.png").unlink()
    (tmp_path / "images/000/img-1.png").write_bytes(b"truncated")
    before = (tmp_path / "images/000/img-2.png").stat().st_mtime_ns
    second = synthesize_shard(_prompts(), tmp_path, "000", synth, batch_size=2)
    # Batches are regenerated whole, so the bytes equal an uninterrupted run's.
    assert second.equals(first)
    assert sha256_file(tmp_path / "images/000/img-1.png") == first["sha256"][1]
    assert (tmp_path / "images/000/img-2.png").stat().st_mtime_ns == before  # untouched batch reused


def test_changed_settings_are_not_reused(synth, flux_dir, tmp_path):
    first = synthesize_shard(_prompts(2), tmp_path, "000", synth, batch_size=2)
    other = create(
        "synthesizer", {"backend": "diffusers", "model": str(flux_dir), "device": "cpu", **{**SMALL, "steps": 3}}
    )
    second = synthesize_shard(_prompts(2), tmp_path, "000", other, batch_size=2)
    assert set(first["sha256"]).isdisjoint(second["sha256"])


def test_read_prompts_picks_the_shard_and_checks_columns(tmp_path):
    df = pl.concat([_prompts(3, "000"), _prompts(2, "001").with_columns(pl.col("image_id") + "b")])
    write_parquet(tmp_path / "p.parquet", df)
    assert read_prompts(tmp_path / "p.parquet", "001")["image_id"].to_list() == ["img-0b", "img-1b"]
    write_parquet(tmp_path / "bad.parquet", df.drop("seed"))
    with pytest.raises(InputError, match=r"bad.parquet: missing column\(s\) seed"):
        read_prompts(tmp_path / "bad.parquet")
    write_parquet(tmp_path / "dup.parquet", pl.concat([_prompts(2), _prompts(1)]))
    with pytest.raises(InputError, match="duplicate image_id 'img-0'"):
        read_prompts(tmp_path / "dup.parquet")
    with pytest.raises(InputError, match="missing.parquet: file not found"):
        read_prompts(tmp_path / "missing.parquet")


def test_image_id_cannot_escape_the_release(synth, tmp_path):
    bad = _prompts(1).with_columns(pl.lit("../../evil").alias("image_id"))
    with pytest.raises(InputError, match="image_id .*evil.* is not a plain file name"):
        synthesize_shard(bad, tmp_path / "out", "000", synth)


def test_config_errors_name_the_key(flux_dir, tmp_path):
    bad_args = create("synthesizer", {"backend": "diffusers", "model": str(flux_dir), "call_args": {"colour": 1}})
    with pytest.raises(ConfigError, match=r"synthesis.call_args: colour not accepted by FluxPipeline"):
        bad_args.generate([ImagePrompt("a", "a dog", "", 1)])
    with pytest.raises(BackendError, match=r"synthesis.model '.*nowhere'"):
        _ = create("synthesizer", {"backend": "diffusers", "model": str(flux_dir.parent / "nowhere")}).pipe
    with pytest.raises(BackendError, match=r"synthesis.model '.*': folder has no model_index.json"):
        create("synthesizer", {"backend": "diffusers", "model": str(tmp_path)})


def test_complete_shard_never_loads_the_model(synth, flux_dir, tmp_path):
    first = synthesize_shard(_prompts(3), tmp_path, "000", synth, batch_size=2)
    fresh = create("synthesizer", {"backend": "diffusers", "model": str(flux_dir), "device": "cpu", **SMALL})
    assert synthesize_shard(_prompts(3), tmp_path, "000", fresh, batch_size=2).equals(first)
    assert fresh._pipe is None


def test_kwargs_from_config_section():
    section = {
        "backend": "diffusers",
        "model": "hub/id",
        "revision": "abc",
        "stand_in": {"enabled": True},
        "batch_size": 4,
        "steps": 2,
        "dtype": "auto",
    }
    assert synthesizer_kwargs(section, "resources/models/tiny-flux") == {
        "backend": "diffusers",
        "model": "resources/models/tiny-flux",
        "revision": "abc",
        "steps": 2,
        "dtype": "auto",
    }


def test_missing_diffusers_names_the_extra(monkeypatch, flux_dir):
    monkeypatch.setitem(sys.modules, "diffusers", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'halluflow\[models\]'"):
        create("synthesizer", {"backend": "diffusers", "model": str(flux_dir)})


def _dry_run(repo, *args):
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr


def test_rules_plan_stand_ins_offline_and_one_gpu_job_per_shard(repo):
    out = _dry_run(repo, "--forcerun", "synthesize", "detect", "--configfile", str(repo / "configs/ode-paper.yaml"))
    # real weights: no synthesizer/detector stand-in builds (the models-under-test list is another section), one
    # synthesize and one detect job per image shard (32 in the paper config)
    assert "build_standin_synthesizer" not in out
    assert "build_standin_detector" not in out
    counts = dict(line.split() for line in out.splitlines() if line.startswith(("synthesize ", "detect ")))
    assert counts == {"synthesize": "32", "detect": "32"}


def test_rebuilt_stand_in_is_not_reused(tmp_path):
    model = tmp_path / "models" / "flux"
    build_standin("flux", model, seed=0)
    first = synthesize_shard(
        _prompts(2),
        tmp_path,
        "000",
        create("synthesizer", {"backend": "diffusers", "model": str(model), **SMALL}),
        batch_size=2,
    )
    build_standin("flux", model, seed=1)  # same folder, other weights
    second = synthesize_shard(
        _prompts(2),
        tmp_path,
        "000",
        create("synthesizer", {"backend": "diffusers", "model": str(model), **SMALL}),
        batch_size=2,
    )
    assert set(first["sha256"]).isdisjoint(second["sha256"])


def test_negative_prompt_reaches_flux_only_with_true_cfg_scale(flux_dir, caplog):
    """FluxPipeline runs the negative pass only when true_cfg_scale > 1; otherwise the prompt is dropped, loudly."""

    def images(synthesizer, negative):
        return np.asarray(synthesizer.generate([ImagePrompt("a", "a dog", negative, 7)])[0])

    plain = create("synthesizer", {"backend": "diffusers", "model": str(flux_dir), "device": "cpu", **SMALL})
    with caplog.at_level("WARNING"):
        assert np.array_equal(images(plain, "(bad anatomy)"), images(plain, ""))
    assert "ignores the negative prompt unless true_cfg_scale > 1" in caplog.text
    true_cfg = create(
        "synthesizer", {"backend": "diffusers", "model": str(flux_dir), "device": "cpu", "true_cfg_scale": 2.0, **SMALL}
    )
    assert not np.array_equal(images(true_cfg, "(bad anatomy)"), images(true_cfg, ""))
    assert true_cfg.settings()["true_cfg_scale"] == 2.0 and "true_cfg_scale" not in plain.settings()


@pytest.mark.usefixtures("one_torch_thread")
def test_rejected_image_is_regenerated_and_accepted_on_a_later_attempt(synth, tmp_path):
    """Two rounds on the stand-ins: round 0's rejects get new seeds and a prompt stressing the missed object,
    round 1 accepts some; every attempt stays in the audit (rejected table) with its attempt number."""
    from halluflow.ode.detection import detect_shard, image_labels
    from halluflow.ode.filtering import filter_images, read_rounds, retry_prompts

    owl = create(
        "detector",
        {
            "backend": "transformers",
            "device": "cpu",
            "box_threshold": 0.0,
            "model": str(build_standin("owlv2", tmp_path / "owl", seed=0)),
        },
    )
    scenes = pl.DataFrame(
        {
            "scene_id": [f"s{i}" for i in range(6)],
            "distribution": "standard",
            "pair_kind": "entity_environment",
            "object_a": "dog",
            "object_b": "grass",
        }
    )
    prompts = pl.DataFrame(
        {
            "image_id": [f"s{i}-i00" for i in range(6)],
            "scene_id": [f"s{i}" for i in range(6)],
            "shard": "000",
            "prompt": "a dog in a grass, (Photography)",
            "negative_prompt": "",
            "seed": list(range(6)),
        }
    )
    write_parquet(tmp_path / "prompts.parquet", prompts)

    def round_(table, shard):
        images = synthesize_shard(table, tmp_path, shard, synth, batch_size=3)
        write_parquet(tmp_path / f"images-{shard}.parquet", images)
        dets = detect_shard(images, image_labels(images, scenes), tmp_path, owl)
        write_parquet(tmp_path / f"det-{shard}.parquet", dets)
        return images, dets

    images0, dets0 = round_(read_prompts(tmp_path / "prompts.parquet", "000"), "000")
    scores = filter_images(images0, dets0, scenes, keep_threshold=0.0, exclusion_threshold=1.0)[0]["max_score_a"]
    keep = float(scores.median())  # about half of round 0 fails
    retry = retry_prompts(prompts, images0, dets0, scenes, attempt=1, seed=9, keep_threshold=keep)
    assert 0 < retry.height < 6 and set(retry["attempt"]) == {1} and set(retry["shard"]) == {"000-a1"}
    assert set(retry["source_shard"]) == {"000"}  # the round job "000-a1" holds image shard 000's rejects
    assert all(p == "a dog in a grass, (clear and obvious dog)(Photography)" for p in retry["prompt"])
    assert not set(retry["seed"]) & set(prompts["seed"])
    write_parquet(tmp_path / "retry.parquet", retry)
    round_(read_prompts(tmp_path / "retry.parquet", "000-a1"), "000-a1")

    images, dets = read_rounds(
        [tmp_path / "images-000.parquet", tmp_path / "images-000-a1.parquet"],
        [tmp_path / "det-000.parquet", tmp_path / "det-000-a1.parquet"],
    )
    accepted, rejected = filter_images(
        images, dets, scenes, keep_threshold=keep, exclusion_threshold=1.0, root=tmp_path
    )
    later = accepted.filter(pl.col("attempt") == 1)
    assert later.height >= 1 and all(p.startswith("images/000-a1/") for p in later["path"])
    audit = rejected.filter(pl.col("image_id").is_in(later["image_id"].implode()))
    assert audit.height == later.height and set(audit["attempt"]) == {0}  # its failed first attempt is kept
    assert accepted["image_id"].n_unique() == accepted.height  # one image per id in the release
    assert accepted.height + rejected.filter(pl.col("attempt") == 1).height == 6


def test_round_jobs_are_packed_by_rejects_and_generator():
    """A regeneration round's jobs: consecutive image shards packed up to the largest first-round shard, never
    across text-to-image models; a shard's rejects never split; no rejects, no job."""
    from halluflow.ode.filtering import pack_round

    prompts = pl.DataFrame({"shard": [f"{i % 4:03d}" for i in range(40)]})  # 4 shards of 10 images
    rejects = ["000"] * 3 + ["001"] * 6 + ["002"] * 2 + ["003"] * 9
    assert pack_round(prompts, rejects, 1) == {"000": "000-a1", "001": "000-a1", "002": "002-a1", "003": "003-a1"}
    assert pack_round(prompts, ["001", "003"], 2) == {"001": "001-a2", "003": "001-a2"}
    # shards 000-001 are one model's, 002-003 another's: a job never holds both
    split = pack_round(prompts, ["001", "002"], 1, generators=["flux", "flux", "sd", "sd"])
    assert split == {"001": "001-a1", "002": "002-a1"}
    assert pack_round(prompts, [], 1) == {}


def test_packed_round_job_gives_the_images_of_per_shard_jobs(synth, tmp_path):
    """Batches never mix image shards: an image regenerated in a job holding several shards' rejects is byte for
    byte the image a job of its shard alone makes (batched kernels round differently, so packing must not move
    batch boundaries)."""
    a, b = _prompts(3, shard="000"), _prompts(3, shard="001")
    b = b.with_columns(("b" + pl.col("image_id")).alias("image_id"), (pl.col("seed") + 50).alias("seed"))
    alone = pl.concat(
        [synthesize_shard(t, tmp_path / "alone", s, synth, batch_size=2) for t, s in ((a, "000"), (b, "001"))]
    )
    write_parquet(
        tmp_path / "plan.parquet",
        pl.concat([a, b]).rename({"shard": "source_shard"}).with_columns(pl.lit("000-a1").alias("shard")),
    )
    rows = read_prompts(tmp_path / "plan.parquet", "000-a1")
    assert rows["source_shard"].to_list() == ["000"] * 3 + ["001"] * 3  # each image shard's rows together
    packed = synthesize_shard(rows, tmp_path / "packed", "000-a1", synth, batch_size=2)
    assert dict(zip(packed["image_id"], packed["sha256"])) == dict(zip(alone["image_id"], alone["sha256"]))
    from halluflow.ode.filtering import batches

    ids = [[r["image_id"] for r in batch] for batch in batches(rows.to_dicts(), 2)]
    assert ids == [["img-0", "img-1"], ["img-2"], ["bimg-0", "bimg-1"], ["bimg-2"]]
    # a first-round shard (no source_shard column) is cut in fixed batches as before
    assert [len(batch) for batch in batches(_prompts(5).to_dicts(), 2)] == [2, 2, 1]
