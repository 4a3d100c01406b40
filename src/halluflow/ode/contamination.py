"""Validity and contamination check of a release against real reference images (`halluflow release contamination`).

ODE ("open-set dynamic evaluation", Tu et al.) regenerates benchmarks so that test images are new and cannot sit
in a model's training data. This check embeds the release's images and a reference folder the user names (e.g.
COCO val) with an image embedder (CLIP / SigLIP / DINOv2) and reports:
- the Fréchet distance between the two embedding sets (how far the synthetic images are from real ones: the
  Fréchet Inception Distance formula, on whichever embedder is configured);
- per release image, its nearest reference image and cosine similarity; images at or above `--threshold`, or
  byte-identical to a reference image, are flagged as possible contamination (near-duplicates);
- a 2-D projection (PCA of both sets) coloured by distribution.

With `--contaminated`, a third folder of real images known to be (or deliberately made) part of the models'
training data, ODE's three-way view (its Fig. 5: synthetic vs contaminated vs clean real images): the Fréchet distance
and mean nearest-neighbour similarity between each pair of the three sets, and all three in the projection. ODE
finds the contaminated images forming a distribution of their own while the synthetic ones align with the clean
real ones; `three_way.synthetic_closer_to_clean` says which of the two the release is nearer to.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import polars as pl

from ..errors import InputError
from ..io import open_rgb, parquet_columns, read_parquet, sha256_file, write_json, write_parquet
from ..progress import get_logger, progress

DEFAULT_THRESHOLD = 0.95
STANDIN_THRESHOLD = 0.9999
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
log = get_logger(__name__)


def frechet_distance(a: np.ndarray, b: np.ndarray, eps: float = 1e-6) -> float:
    """||mu_a - mu_b||^2 + Tr(S_a + S_b - 2 (S_a S_b)^1/2), as in the FID of Heusel et al. (2017)."""
    from scipy import linalg

    if len(a) < 2 or len(b) < 2:
        raise InputError("the Fréchet distance needs at least two images on each side")
    mu_a, mu_b = a.mean(0), b.mean(0)
    cov_a, cov_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    cov_a, cov_b = np.atleast_2d(cov_a), np.atleast_2d(cov_b)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", linalg.LinAlgWarning)
        covmean = linalg.sqrtm(cov_a @ cov_b)
    if caught or not np.isfinite(covmean).all():
        # Fewer images than dimensions make the product singular: offset the diagonals, as pytorch-fid does.
        offset = np.eye(cov_a.shape[0]) * eps
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", linalg.LinAlgWarning)
            covmean = linalg.sqrtm((cov_a + offset) @ (cov_b + offset))
    covmean = np.real(covmean)
    diff = mu_a - mu_b
    return float(max(diff @ diff + np.trace(cov_a) + np.trace(cov_b) - 2 * np.trace(covmean), 0.0))


def nearest_neighbours(release: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index and cosine similarity of each release embedding's nearest reference embedding (rows L2-normalised)."""
    sims = release @ reference.T
    idx = sims.argmax(axis=1)
    return idx, sims[np.arange(len(release)), idx]


def projection_2d(*sets: np.ndarray) -> list[np.ndarray]:
    """PCA of all sets together onto their first two components (deterministic sign)."""
    stacked = np.concatenate(sets)
    centred = stacked - stacked.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    comps = vt[:2]
    signs = np.sign(comps[np.arange(len(comps)), np.abs(comps).argmax(axis=1)])
    comps = comps * np.where(signs == 0, 1, signs)[:, None]
    points = centred @ comps.T
    if points.shape[1] < 2:
        points = np.pad(points, ((0, 0), (0, 2 - points.shape[1])))
    out, start = [], 0
    for s in sets:
        out.append(points[start : start + len(s)])
        start += len(s)
    return out


def _reference_files(folder: Path, option: str = "--reference") -> list[Path]:
    if not folder.is_dir():
        raise InputError(f"{option} {folder}: not a folder")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise InputError(f"{option} {folder}: no images ({', '.join(IMAGE_SUFFIXES)})")
    return files


def _release_images(release_dir: Path) -> pl.DataFrame:
    queries = release_dir / "queries.parquet"
    if not queries.is_file():
        raise InputError(f"{release_dir}: not a release folder (queries.parquet missing)")
    cols = [c for c in ("image_id", "distribution", "pair_kind") if c in parquet_columns(queries)]
    table = read_parquet(queries, columns=cols).unique("image_id").sort("image_id")
    if "distribution" not in table.columns:
        table = table.with_columns(pl.lit("release").alias("distribution"))
    return table.with_columns(pl.format("images/{}.png", pl.col("image_id")).alias("path"))


def _embed(embedder, paths: list[Path], what: str) -> np.ndarray:
    chunks = []
    batch = 32
    for start in progress(range(0, len(paths), batch), desc=f"embed {what}", total=-(-len(paths) // batch)):
        chunks.append(embedder.embed_images([open_rgb(p, what) for p in paths[start : start + batch]]))
    return np.concatenate(chunks)


def _plot(
    path: Path,
    points_release: np.ndarray,
    distributions: list[str],
    points_reference: np.ndarray,
    stand_in: bool,
    points_contaminated: np.ndarray | None = None,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..io import atomic_path

    fig, ax = plt.subplots(figsize=(5.5, 4.5), dpi=110)
    clean = "clean reference" if points_contaminated is not None else "reference"
    ax.scatter(points_reference[:, 0], points_reference[:, 1], s=14, c="#bbbbbb", label=clean, marker="x")
    if points_contaminated is not None:
        ax.scatter(
            points_contaminated[:, 0], points_contaminated[:, 1], s=16, c="#d62728", label="contaminated", marker="^"
        )
    for dist in sorted(set(distributions)):
        mask = np.array([d == dist for d in distributions])
        ax.scatter(points_release[mask, 0], points_release[mask, 1], s=16, label=dist, alpha=0.85)
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    title = "release vs " + ("contaminated and clean" if points_contaminated is not None else "reference")
    title += " images (PCA of embeddings)"
    ax.set_title(title + ("\nSTAND-IN embedder: only identical images are meaningful" if stand_in else ""), fontsize=9)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)


def three_way(synthetic: np.ndarray, contaminated: np.ndarray, clean: np.ndarray) -> dict:
    """ODE's Fig. 5 in numbers: the Fréchet distance and the mean nearest-neighbour cosine similarity (each image of
    the first set to its nearest of the second) between every pair of the three embedding sets."""
    sets = {"synthetic": synthetic, "contaminated": contaminated, "clean": clean}
    pairs = (("synthetic", "clean"), ("synthetic", "contaminated"), ("contaminated", "clean"))
    fd = {
        f"{a}_{b}": frechet_distance(sets[a], sets[b]) if len(sets[a]) >= 2 and len(sets[b]) >= 2 else None
        for a, b in pairs
    }
    nn = {f"{a}_{b}": float(nearest_neighbours(sets[a], sets[b])[1].mean()) for a, b in pairs}
    closer = None
    if fd["synthetic_clean"] is not None and fd["synthetic_contaminated"] is not None:
        closer = fd["synthetic_clean"] < fd["synthetic_contaminated"]
    return {
        "n": {k: len(v) for k, v in sets.items()},
        "frechet_distance": fd,
        "nn_similarity_mean": nn,
        "synthetic_closer_to_clean": closer,
    }


def check_contamination(
    release_dir: str | Path,
    reference_dir: str | Path,
    out_dir: str | Path,
    embedder,
    threshold: float | None = None,
    contaminated_dir: str | Path | None = None,
) -> dict:
    """Run the check with a built image embedder; writes contamination.json/.parquet and projection.png.

    Default threshold: 0.95 for a real embedder; 0.9999 (identical images only) for a stand-in, whose random
    embeddings put every pair of images close together. `contaminated_dir`: the three-way view (three_way).
    """
    release_dir, reference_dir, out_dir = Path(release_dir), Path(reference_dir), Path(out_dir)
    info = embedder.describe()
    if threshold is None:
        threshold = STANDIN_THRESHOLD if info.stand_in else DEFAULT_THRESHOLD
    if not 0 < threshold <= 1:
        raise InputError(f"--threshold {threshold}: expected a cosine similarity in (0, 1]")
    images = _release_images(release_dir)
    release_paths = [release_dir / p for p in images["path"]]
    reference_paths = _reference_files(reference_dir)
    emb_rel = _embed(embedder, release_paths, "release image")
    emb_ref = _embed(embedder, reference_paths, "reference image")
    idx, sims = nearest_neighbours(emb_rel, emb_ref)
    ref_sha = {}
    for p in reference_paths:
        ref_sha.setdefault(sha256_file(p), p)
    exact = [ref_sha.get(sha256_file(p)) for p in release_paths]
    table = images.with_columns(
        pl.Series("nearest_reference", [str(reference_paths[i].relative_to(reference_dir)) for i in idx]),
        pl.Series("similarity", sims.astype(np.float64)),
        pl.Series("identical_file", [e is not None for e in exact]),
    ).with_columns(
        ((pl.col("similarity") >= threshold) | pl.col("identical_file")).alias("flagged"),
        pl.lit(info.stand_in).alias("stand_in"),
    )
    fid = frechet_distance(emb_rel, emb_ref) if len(emb_rel) >= 2 and len(emb_ref) >= 2 else None
    flagged = table.filter(pl.col("flagged"))
    result = {
        "release": str(release_dir),
        "reference": str(reference_dir),
        "n_release": len(release_paths),
        "n_reference": len(reference_paths),
        "frechet_distance": fid,
        "threshold": threshold,
        "nn_similarity": {"mean": float(sims.mean()), "median": float(np.median(sims)), "max": float(sims.max())},
        "n_flagged": flagged.height,
        "flagged": flagged.select("image_id", "nearest_reference", "similarity", "identical_file").to_dicts(),
        "by_distribution": [
            {
                "distribution": d,
                "n": g.height,
                "nn_similarity_mean": float(g["similarity"].mean()),
                "n_flagged": int(g["flagged"].sum()),
            }
            for (d,), g in sorted(table.group_by(["distribution"]), key=lambda t: t[0])
        ],
        "embedder": info.as_dict(),
        "stand_in": info.stand_in,
    }
    emb_con = None
    if contaminated_dir is not None:
        contaminated_paths = _reference_files(Path(contaminated_dir), "--contaminated")
        emb_con = _embed(embedder, contaminated_paths, "contaminated image")
        result["contaminated"] = str(contaminated_dir)
        result["three_way"] = three_way(emb_rel, emb_con, emb_ref)
    if info.stand_in:
        result["note"] = (
            "STAND-IN embedder (random weights): the Fréchet distance and similarities are noise; "
            "only identical images (similarity 1.0) are meaningful"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    write_parquet(out_dir / "contamination.parquet", table)
    if emb_con is None:
        pr, pf = projection_2d(emb_rel, emb_ref)
        pc = None
    else:
        pr, pf, pc = projection_2d(emb_rel, emb_ref, emb_con)
    _plot(out_dir / "projection.png", pr, table["distribution"].to_list(), pf, info.stand_in, pc)
    write_json(out_dir / "contamination.json", result)
    if flagged.height:
        log.warning(
            "%d release image(s) flagged as possible contamination (similarity >= %s or identical file)",
            flagged.height,
            threshold,
        )
    return result


def check_with_model(
    release_dir: str | Path,
    reference_dir: str | Path,
    out_dir: str | Path,
    *,
    model: str | None,
    revision: str | None,
    device: str,
    threshold: float | None,
    contaminated_dir: str | Path | None,
) -> dict:
    """`check_contamination` with the image embedder `model` (hub id or folder; None: a tiny random DINOv2
    stand-in, built in a temporary folder, that only detects identical images)."""
    import tempfile

    from ..models.registry import create
    from ..models.standins import build_standin

    with tempfile.TemporaryDirectory(prefix="halluflow-dinov2-") as tmp:
        if not model:
            model = str(build_standin("dinov2", Path(tmp) / "tiny-dinov2", seed=0))
        embedder = create(
            "image_embedder", {"backend": "transformers", "model": model, "revision": revision, "device": device}
        )
        return check_contamination(
            release_dir, reference_dir, out_dir, embedder, threshold=threshold, contaminated_dir=contaminated_dir
        )
