"""Image synthesis for ODE (Tu, Hu, Sang, CVPR 2025, §3.2 "image generation"): one image per prompt row, seeded per image.

The paper generates with FLUX.1-dev; ODE's code (github Iridescent-y/ODE) calls an HTTP text-to-image API at 768×768 with 30–32 steps.
The backend (halluflow.backends.diffusers_synthesizer.DiffusersSynthesizer) runs any diffusers text-to-image
pipeline (FLUX by default); here: the shard job (`synthesize_shard`) and `build_tiny_flux`, the offline stand-in
(a random FLUX pipeline of ~1 MB) that the backend loads with `from_pretrained`.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

import polars as pl

from ..backends.base import ImagePrompt, Synthesizer
from ..errors import BackendError, ConfigError, InputError
from ..io import read_jsonl, read_parquet, safe_join, sha256_bytes, sha256_file, stable_hash, write_bytes, write_jsonl
from ..models.standins import tiny_clip_tokenizer, tiny_t5_tokenizer
from ..progress import get_logger, progress
from .filtering import batches

log = get_logger(__name__)

_SAFE_ID = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*\Z")

PROMPT_COLUMNS = {
    "image_id": pl.Utf8,
    "scene_id": pl.Utf8,
    "shard": pl.Utf8,
    "prompt": pl.Utf8,
    "negative_prompt": pl.Utf8,
    "seed": pl.Int64,
}

IMAGE_SCHEMA = {
    "image_id": pl.Utf8,
    "scene_id": pl.Utf8,
    "path": pl.Utf8,
    "sha256": pl.Utf8,
    "width": pl.Int64,
    "height": pl.Int64,
    "model": pl.Utf8,
    "revision": pl.Utf8,
    "seed": pl.Int64,
    "stand_in": pl.Boolean,
    "attempt": pl.Int64,  # generation round (0 = first; regenerated rejects: 1, 2, ...)
}


def build_tiny_flux(
    out_dir: Path, seed: int = 0, hidden: int = 32, layers: int = 1, max_text_length: int = 512, **_ignored: Any
) -> dict:
    """A random FLUX pipeline with the real classes (diffusers' own test sizes): ~1 MB, 0.1 s per 128 px image.

    The VAE downsamples 8× and FLUX packs 2×2 latent patches, so height/width must be multiples of 16."""
    if _ignored:
        raise ConfigError(f"synthesis.stand_in.args: unknown keys {', '.join(sorted(_ignored))} for 'flux'")
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    clip_tok = tiny_clip_tokenizer(77)
    t5_tok = tiny_t5_tokenizer(max_text_length)
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(clip_tok),
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_attention_heads=2,
            num_hidden_layers=2,
            max_position_embeddings=77,
            projection_dim=hidden,
            # Pooling reads the hidden state at the end-of-text token, so its id must match the tokenizer's.
            eos_token_id=clip_tok.eos_token_id,
            bos_token_id=clip_tok.bos_token_id,
            pad_token_id=clip_tok.pad_token_id,
        )
    )
    text_encoder_2 = T5EncoderModel(
        T5Config(
            vocab_size=len(t5_tok),
            d_model=hidden,
            d_kv=8,
            d_ff=2 * hidden,
            num_layers=2,
            num_heads=4,
            relative_attention_num_buckets=8,
            decoder_start_token_id=0,
            pad_token_id=0,
            eos_token_id=1,
        )
    )
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        block_out_channels=(8, 16, 16, 16),
        layers_per_block=1,
        norm_num_groups=4,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        use_quant_conv=False,
        use_post_quant_conv=False,
        shift_factor=0.0609,
        scaling_factor=1.5035,
    )
    transformer = FluxTransformer2DModel(
        patch_size=1,
        in_channels=16,
        num_layers=layers,
        num_single_layers=layers,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=hidden,
        pooled_projection_dim=hidden,
        axes_dims_rope=[4, 4, 8],
    )
    pipe = FluxPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=clip_tok,
        text_encoder_2=text_encoder_2,
        tokenizer_2=t5_tok,
        transformer=transformer,
    )
    pipe.save_pretrained(out_dir)
    return {"pipeline": "FluxPipeline", "note": "random weights: images are colour noise"}


# ---- one shard -------------------------------------------------------------------------------------------------


def read_prompts(path: str | os.PathLike, shard: str | None = None) -> pl.DataFrame:
    """The prompt table (make_prompts), checked for the columns and ids this stage relies on."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    df = read_parquet(path)
    missing = [c for c in PROMPT_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
    df = df.select(
        [pl.col(c).cast(t) for c, t in PROMPT_COLUMNS.items()]
        + [(pl.col("attempt") if "attempt" in df.columns else pl.lit(0)).cast(pl.Int64).alias("attempt")]
        # a regeneration round's job holds the rejects of several image shards: each row's own (make_prompts) shard
        + [
            (pl.col("source_shard") if "source_shard" in df.columns else pl.col("shard"))
            .cast(pl.Utf8)
            .alias("source_shard")
        ]
    )
    dup = df.filter(pl.col("image_id").is_duplicated())["image_id"].unique().sort().to_list()
    if dup:
        raise InputError(f"{path}: duplicate image_id {dup[0]!r}")
    for col in ("image_id", "prompt", "seed"):
        bad = df.filter(pl.col(col).is_null())
        if bad.height:
            raise InputError(f"{path}: null {col} in row of image_id {bad['image_id'][0]!r}")
    if shard is not None:
        df = df.filter(pl.col("shard") == shard)
    return df.sort("source_shard", "image_id")


def _png_bytes(image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def synthesize_shard(
    prompts: pl.DataFrame, root: str | os.PathLike, shard: str, synthesizer: Synthesizer, batch_size: int = 4
) -> pl.DataFrame:
    """Generate the shard's images into root/images/<shard>/ and return the image table.

    Resumable: after each batch a sidecar (images/<shard>.resume.jsonl) records each PNG's sha256 and a key of
    everything that produced it (model, settings, the whole batch's prompts and seeds). A restarted job reuses a
    batch only when every key and sha256 still match, so resumed output is byte-identical to an uninterrupted run.
    """
    if batch_size < 1:
        raise ConfigError(f"synthesis.batch_size must be >= 1, got {batch_size}")
    if len(prompts):  # on CUDA the backend sizes batches to its memory budget; on the CPU batch_size stands
        batch_size = synthesizer.fit_batch_size(batch_size)
    root = Path(root)
    bad = [i for i in prompts["image_id"].to_list() if not _SAFE_ID.match(i)]
    if bad:
        # ids become file names: anything else could escape images/<shard>/ or collide after normalisation
        raise InputError(f"prompts: image_id {bad[0]!r} is not a plain file name ([A-Za-z0-9_-][A-Za-z0-9._-]*)")
    info = synthesizer.describe()
    settings = synthesizer.settings()
    resume_path = root / "images" / f"{shard}.resume.jsonl"
    done = {r["image_id"]: r for r in read_jsonl(resume_path)} if resume_path.exists() else {}
    rows = prompts.to_dicts()
    records: dict[str, dict] = {}
    reused = 0
    for batch in progress(batches(rows, batch_size), desc=f"synthesize shard {shard}", unit="batch"):
        key = stable_hash(
            {
                "model": info.model,
                "revision": info.revision,
                "backend": info.backend,
                "settings": settings,
                "batch": [[r["image_id"], r["prompt"], r["negative_prompt"], r["seed"]] for r in batch],
            }
        )
        paths = [safe_join(root, f"images/{shard}/{r['image_id']}.png") for r in batch]
        reusable = all(
            done.get(r["image_id"], {}).get("key") == key
            and p.exists()
            and sha256_file(p) == done[r["image_id"]]["sha256"]
            for r, p in zip(batch, paths)
        )
        if reusable:
            for r in batch:
                records[r["image_id"]] = done[r["image_id"]]
            reused += len(batch)
            continue
        images = synthesizer.generate(
            [ImagePrompt(r["image_id"], r["prompt"], r["negative_prompt"] or "", int(r["seed"])) for r in batch]
        )
        if len(images) != len(batch):
            raise BackendError(f"synthesizer returned {len(images)} images for a batch of {len(batch)}")
        for r, p, image in zip(batch, paths, images):
            data = _png_bytes(image)
            write_bytes(p, data)
            records[r["image_id"]] = {
                "image_id": r["image_id"],
                "key": key,
                "sha256": sha256_bytes(data),
                "width": image.width,
                "height": image.height,
            }
        done.update({r["image_id"]: records[r["image_id"]] for r in batch})
        write_jsonl(resume_path, [done[k] for k in sorted(done)])
    table = [
        {
            "image_id": r["image_id"],
            "scene_id": r["scene_id"],
            "path": f"images/{shard}/{r['image_id']}.png",
            "sha256": records[r["image_id"]]["sha256"],
            "width": records[r["image_id"]]["width"],
            "height": records[r["image_id"]]["height"],
            "model": info.model,
            "revision": info.revision,
            "seed": int(r["seed"]),
            "stand_in": info.stand_in,
            "attempt": int(r.get("attempt") or 0),
        }
        for r in rows
    ]
    log.info("shard %s: %d images (%d reused from a previous run)", shard, len(rows), reused)
    return pl.DataFrame(table, schema=IMAGE_SCHEMA)


def synthesizer_kwargs(section: dict, model: str) -> dict:
    """Backend kwargs from the `synthesis:` config block (workflow-only keys dropped)."""
    kwargs = {
        k: v
        for k, v in section.items()
        if k not in ("backend", "model", "stand_in", "batch_size", "max_attempts", "generators", "name", "share")
    }
    return {"backend": section["backend"], "model": model, **kwargs}
