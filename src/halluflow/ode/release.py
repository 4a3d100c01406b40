"""Benchmark release of ODE (Tu, Hu, Sang, CVPR 2025, §3 "dynamic, contamination-free
releases") and `halluflow release verify`.

A release folder holds the accepted images (by content, `images/<image_id>.png`), scenes and queries (parquet +
JSONL), DATACARD.md and manifest.json: the sha256 of every file, the config, seed, package versions, the models
used and whether they were stand-ins. No timestamps or absolute paths: same inputs give a byte-identical folder.
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path
from typing import Any

import polars as pl

from ..config_types import Ode
from ..errors import InputError
from ..io import (
    building_folder,
    link_or_copy,
    not_regular,
    read_json,
    safe_join,
    safe_name,
    sha256_bytes,
    sha256_file,
    write_bytes,
    write_json,
    write_jsonl,
    write_parquet,
    write_text,
)
from ..models.fetch import lock_record
from ..progress import progress
from .hub import write_hub_files
from .lineage import MAX_MANIFEST_BYTES
from .task import task_definition, task_hash

MANIFEST = "manifest.json"
FORMAT = "halluflow-release/1"
_SHA256 = re.compile(r"[0-9a-fA-F]{64}\Z")
PACKAGES = (
    "halluflow",
    "numpy",
    "polars",
    "networkx",
    "torch",
    "diffusers",
    "transformers",
    "ultralytics",
    "snakemake",
)


def package_versions(names=PACKAGES) -> dict[str, str | None]:
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def models_used(tables: dict[str, list[pl.DataFrame]]) -> list[dict]:
    """Distinct (role, model, revision, stand_in) rows of the image/detection tables: what was loaded. A stand-in
    carries no revision (it is built locally from a seed; a table made before backends dropped it may still hold the
    hub revision of the model it stood in for)."""
    seen = set()
    for role, dfs in tables.items():
        for df in dfs:
            if df.height == 0 or "model" not in df.columns:
                continue
            cols = [c for c in ("model", "revision", "stand_in") if c in df.columns]
            for row in df.select(cols).unique().iter_rows(named=True):
                stand_in = bool(row.get("stand_in", False))
                seen.add((role, row.get("model"), None if stand_in else row.get("revision"), stand_in))
    return [
        {"role": r, "model": m, "revision": v, "stand_in": s}
        for r, m, v, s in sorted(seen, key=lambda t: tuple("" if x is None else str(x) for x in t))
    ]


PAPER_KEEP_THRESHOLD = 0.65  # ODE's paper: an image whose entity scores below 0.65 is discarded
ODE_CODE_KEEP_THRESHOLD = 0.2  # ODE's released code


def keep_threshold_text(keep: float) -> str:
    """What a keep threshold means for the images, in the DATACARD's words."""
    if keep <= 0:
        return f"keep threshold {keep}: every image is kept whatever the detector scores, so images were NOT checked for their objects"
    if keep < PAPER_KEEP_THRESHOLD:
        return (
            f"keep threshold {keep}: an image is kept when the detector finds each of its objects with at least this "
            f"confidence, below the paper's {PAPER_KEEP_THRESHOLD} (ODE's released code uses {ODE_CODE_KEEP_THRESHOLD}), "
            "so fainter detections pass"
        )
    paper = " (the paper's)" if keep == PAPER_KEEP_THRESHOLD else ""
    return f"keep threshold {keep}{paper}: an image is kept when the detector finds each of its objects with at least this confidence"


def threshold_lines(config: dict) -> list[str]:
    """Every threshold that decided which images and questions a release holds."""
    filt = (config.get("ode") or {}).get("filter") or {}
    det = config.get("detection") or {}
    lines = []
    if "keep_threshold" in filt:
        lines.append(f"- Detector filter: {keep_threshold_text(filt['keep_threshold'])} (`ode.filter.keep_threshold`).")
    if "exclusion_threshold" in filt:
        lines.append(
            f"- Exclusion threshold {filt['exclusion_threshold']}: an object detected at or above it is never asked "
            "as absent (`ode.filter.exclusion_threshold`)."
        )
    if "keep_threshold" in filt:
        lines.append(
            f"- Count questions: boxes at or above the keep threshold ({filt['keep_threshold']}), overlapping ones "
            "merged, give the count."
        )
    if "box_threshold" in det:
        lines.append(
            f"- Detector box threshold {det['box_threshold']}: weaker boxes are not recorded; at most "
            f"{det.get('max_detections')} boxes per image (`detection.box_threshold`, `detection.max_detections`)."
        )
    if "balance" in filt:
        lines.append(f"- Balanced across distributions: {filt['balance']} (`ode.filter.balance`).")
    return lines


def negative_prompt_lines(config: dict) -> list[str]:
    """The negative prompts per pair kind and, per generator, whether they reached the model: a FLUX pipeline runs
    the negative pass only with true_cfg_scale > 1 (see backends/diffusers_synthesizer.py)."""
    prompts = (config.get("ode") or {}).get("prompts") or {}
    negative = prompts.get("negative_prompt")
    synthesis = config.get("synthesis")
    if negative is None or not synthesis:
        return []
    from .prompts import DEFAULT_NEGATIVE, per_kind

    kinds = per_kind(negative, DEFAULT_NEGATIVE, "negative_prompt")
    lines = [
        f"- Negative prompt, {kind.replace('_', '+')}: " + (f"`{text}`" if text else "none")
        for kind, text in kinds.items()
    ]
    if not any(kinds.values()):
        return lines
    from ..models import generators

    for gen in generators(synthesis):
        stand_in = gen.get("stand_in") or {}
        flux = (stand_in.get("enabled") and stand_in.get("builder") == "flux") or "flux" in str(
            gen.get("model", "")
        ).lower()
        scale = gen.get("true_cfg_scale")
        if gen.get("backend", "diffusers") != "diffusers":
            state = f"handed to the {gen.get('backend')} backend"
        elif flux and (scale is None or float(scale) <= 1):
            state = (
                "DROPPED: a FLUX pipeline uses the negative prompt only when synthesis.true_cfg_scale > 1 (here "
                + ("unset" if scale is None else str(scale))
                + ")"
            )
        elif flux:
            state = f"applied (FLUX with true_cfg_scale {scale}: two passes per image)"
        else:
            state = "passed to the pipeline (one without a negative_prompt argument drops it; the synthesis log warns)"
        lines.append(f"- Negative prompts with generator {gen['name']}: {state}.")
    return lines


def domain_line(config: dict) -> str:
    """The concept domain the release was restricted to (ode.domain, halluflow.ode.domain), or the whole graph."""
    domain = (config.get("ode") or {}).get("domain")
    parts = []
    if domain and domain.get("concepts"):
        parts.append("concepts " + ", ".join(map(str, domain["concepts"])))
    if domain and domain.get("categories"):
        parts.append(
            "categories " + ", ".join(map(str, domain["categories"])) + f" (table {domain.get('category_table')})"
        )
    if domain and domain.get("neighbourhood_of"):
        parts.append(
            "within " + f"{domain.get('hops', 1)} hop(s) of " + ", ".join(map(str, domain["neighbourhood_of"]))
        )
    if not parts:
        return "- Domain: the whole concept graph (`ode.domain` unset)."
    keep_env = domain.get("keep_environments", True)
    return (
        "- Domain (`ode.domain`): "
        + "; ".join(parts)
        + ("; environments co-occurring with a kept entity kept." if keep_env else "; no other environments.")
    )


def _datacard(
    name: str,
    counts: dict,
    models: list[dict],
    stand_ins: bool,
    seed: int,
    config: dict,
    lineage_card=(),
    resources: dict | None = None,
) -> str:
    lines = [f"# Data card: {name}", ""]
    filter_lines = [*threshold_lines(config), *negative_prompt_lines(config), domain_line(config)]
    if stand_ins:
        lines += [
            "> **WARNING: made with randomly initialised STAND-IN models.** Images and detections are noise;",
            "> this release tests the pipeline, it does not measure any model. Do not report numbers from it.",
            "",
        ]
    support = counts.get("label_support")
    if support and support.get("line"):
        lines += [f"> **{support['line']}.**", ""]
    lines += [
        "## What",
        "An ODE-style (open-set dynamic evaluation, Tu et al., CVPR 2025) hallucination benchmark release made by",
        "halluflow: synthetic images of concept pairs sampled from a co-occurrence graph, with generative and",
        "yes/no questions whose answers are known by construction.",
        "",
        "## How",
        "concept graph -> scenes (standard / long-tail / random / fictional x entity+entity / entity+environment)",
        "-> text-to-image synthesis -> open-vocabulary detector filter -> queries. "
        f"Master seed {seed}; the full config is in manifest.json.",
        "",
        *filter_lines,
        "",
        "## Models",
    ]
    for m in models:
        if m["stand_in"]:
            lines.append(f"- {m['role']}: {m['model']} - STAND-IN (random weights built locally; no hub revision)")
            continue
        revision = f" (revision {m['revision']})" if m["revision"] else ""
        lines.append(f"- {m['role']}: {m['model']}{revision}")
    if not models:
        lines.append("- (none recorded)")
    lines += [
        "",
        "## Contents",
        f"- images: {counts['images']}",
        f"- scenes: {counts['scenes']}",
        f"- queries: {counts['queries']}",
    ]
    checked = counts.get("truths_not_checked")
    if checked is not None:
        lines.append(
            f'- "no" questions about an object (existence, counterfactual): {checked["no_object_questions"]}; '
            f"about an object the detector was not prompted with or saw: {checked['not_checked']} "
            "(counted from the detection tables' per-image vocabulary)"
        )
    if counts["rejected"] is not None:
        lines.append(f"- images rejected by the detector filter: {counts['rejected']}")
        lines += [f"  - {kind}: {n}" for kind, n in counts["rejected_by_reason"].items()]
    later = {k: v for k, v in (counts.get("accepted_by_attempt") or {}).items() if k != "0"}
    if later:
        lines.append(
            "- images accepted after regeneration (new seed, prompt stressing the missed object): "
            + ", ".join(f"{v} on attempt {k}" for k, v in later.items())
            + " (attempt 0 = first generation)"
        )
    lines += ["", "| distribution | pair kind | images | queries |", "|---|---|---|---|"]
    for row in counts["by_distribution"]:
        lines.append(f"| {row['distribution']} | {row['pair_kind']} | {row['images']} | {row['queries']} |")
    lines += ["", "| query type | yes | no | open |", "|---|---|---|---|"]
    for row in counts["by_query_type"]:
        lines.append(f"| {row['query_type']} | {row['yes']} | {row['no']} | {row['open']} |")
    lines += ["", *task_card(task_definition(config.get("answer")))]
    if support:
        from .support import support_card

        lines += ["", *support_card(support)]
    if counts.get("meaning"):
        from .meaning import meaning_card

        lines += ["", *meaning_card(counts["meaning"])]
    lines += ["", *lineage_card]
    if resources:
        lines += [
            "## Resources that shaped the questions",
            "Shipped or configured tables the scenes, prompts and questions were built from (sha256, also in",
            "manifest.json under `resources`):",
            "",
            *[f"- `{path}`: {sha}" for path, sha in sorted(resources.items())],
            "",
        ]
    lines += [
        "## Files",
        "`images/<image_id>.png`, `scenes.parquet`, `queries.parquet`, `queries.jsonl`;",
        "`metadata.jsonl` + `README.md` make the folder load with `datasets.load_dataset(<dir>)`;",
        "`manifest.json` lists every file with its sha256: check with `halluflow release verify <dir>`.",
        "",
    ]
    return "\n".join(lines)


def task_card(task: dict) -> list[str]:
    """The DATACARD's task section: how each query kind is asked and read (manifest.json `task`)."""
    disc, gen = task["kinds"]["discriminative"], task["kinds"]["generative"]
    return [
        "## Task",
        f"How every tool asks and reads this release (manifest.json `task`, hash `{task_hash(task)}`): the",
        "answer stage, the lmms-eval and VLMEvalKit exports and `halluflow score release` use it; a run that asks or",
        "reads otherwise says so in its metrics (`task.overrides`).",
        "",
        f"- yes/no questions: prompt `{disc['template']}`, at most {disc['max_new_tokens']} new tokens, "
        f"read by the `{disc['reader']}` reader (halluflow.metrics.parsers)",
        f"- descriptions: prompt `{gen['template']}`, at most {gen['max_new_tokens']} new tokens",
        "- system prompt: " + (f"`{task['system_prompt']}`" if task.get("system_prompt") else "none"),
        "",
    ]


def _truths_not_checked(
    accepted: pl.DataFrame, queries: pl.DataFrame, images: list, detections: list, config: dict
) -> dict | None:
    """ "No" object questions whose object the detector was not prompted with, or scored at or above the exclusion
    threshold, counted from the detection tables (queries.unverified_truths); None when they record no vocabulary."""
    from .filtering import accepted_detections
    from .queries import no_object_questions, unverified_truths

    if not detections or not all("vocabulary" in d.columns for d in detections):
        return None
    threshold = Ode.from_dict(config.get("ode") or {}).filter.exclusion_threshold
    bad = unverified_truths(queries, accepted_detections(accepted, images, detections), threshold)
    return {"no_object_questions": no_object_questions(queries).height, "not_checked": bad.height}


def _label_support(accepted: pl.DataFrame, queries: pl.DataFrame, images: list, detections: list) -> dict | None:
    """How many yes/no labels the detector supports at the paper threshold (halluflow.ode.support), from the
    detections of the round each released image was accepted on (every table's rows of the released images when
    the image and detection tables do not pair up)."""
    from .filtering import accepted_detections
    from .support import label_support

    tables = [d for d in detections if d.height and "image_id" in d.columns]
    if not tables:
        table = None
    elif len(images) == len(detections):
        table = accepted_detections(accepted, images, detections)
    else:
        table = pl.concat(tables, how="diagonal_relaxed").filter(pl.col("image_id").is_in(accepted["image_id"]))
    return label_support(queries, table, PAPER_KEEP_THRESHOLD)


def resource_name(path: str | Path) -> str:
    """How a manifest names a resource: `resources/<name>` for a table halluflow ships (wherever it is installed:
    no absolute path of this machine in a release), otherwise the path as the config wrote it."""
    from ..resources import resource_path

    shipped = resource_path("").resolve()
    try:
        return "resources/" + Path(path).resolve().relative_to(shipped).as_posix()
    except ValueError:
        return Path(path).as_posix()


def rejection_kind(reason: str) -> str:
    """Group a filter reason for counting ("object_a 'dog' max score 0.1 < ..." -> "object_a below keep threshold";
    "attempt 2: ..." -> "... (attempt 2)" when images were regenerated)."""
    attempt = re.match(r"attempt (\d+): ", reason)
    if attempt:
        return f"{rejection_kind(reason[attempt.end() :])} (attempt {attempt.group(1)})"
    parts = []
    for clause in reason.split("; "):
        if "< keep threshold" in clause:
            parts.append(f"{clause.split()[0]} below keep threshold")
        elif clause.startswith("balanced out"):
            parts.append("balanced out")
        elif clause.startswith("image file"):
            parts.append("image file missing")
        else:
            parts.append(clause)
    return " + ".join(parts)


def _counts(
    accepted: pl.DataFrame, queries: pl.DataFrame, scenes: pl.DataFrame, rejected: pl.DataFrame | None = None
) -> dict:
    by_dist = []
    for (dist, kind), grp in sorted(accepted.group_by(["distribution", "pair_kind"]), key=lambda g: g[0]):
        q = queries.filter((pl.col("distribution") == dist) & (pl.col("pair_kind") == kind)).height
        by_dist.append({"distribution": dist, "pair_kind": kind, "images": grp.height, "queries": q})
    by_type = []
    for (qt,), grp in sorted(queries.group_by(["query_type"]), key=lambda g: g[0]):
        by_type.append(
            {
                "query_type": qt,
                "yes": grp.filter(pl.col("truth") == "yes").height,
                "no": grp.filter(pl.col("truth") == "no").height,
                "open": grp["truth"].null_count(),
            }
        )
    reasons: dict[str, int] = {}
    for reason in rejected["reason"].to_list() if rejected is not None and rejected.height else []:
        kind = rejection_kind(reason)
        reasons[kind] = reasons.get(kind, 0) + 1
    attempts = dict(sorted(accepted.group_by("attempt").len().iter_rows())) if "attempt" in accepted.columns else {}
    return {
        "images": accepted.height,
        "scenes": scenes.height,
        "queries": queries.height,
        "rejected": rejected.height if rejected is not None else None,
        "accepted_by_attempt": {str(k): v for k, v in attempts.items()},
        "rejected_by_reason": dict(sorted(reasons.items())),
        "by_distribution": by_dist,
        "by_query_type": by_type,
    }


def package_release(
    release_dir: str | Path,
    *,
    root: str | Path,
    accepted: pl.DataFrame,
    queries: pl.DataFrame,
    scenes: pl.DataFrame,
    images: list[pl.DataFrame],
    detections: list[pl.DataFrame],
    config: dict,
    seed: int,
    name: str,
    rejected: pl.DataFrame | None = None,
    parent: str | None = None,
    graph_sources: list[str] = (),
    graph: tuple[pl.DataFrame, pl.DataFrame] | None = None,
    resources: list[str] = (),
    meaning: dict | None = None,
) -> dict:
    """Write the release folder (built beside it, then renamed into place) and return the manifest.

    `meaning`: make_queries' report of what each meaning rule removed (queries/meaning.json), for the manifest's
    `counts.meaning` and the DATACARD (halluflow.ode.meaning).

    `resources`: the tables that shaped the scenes, prompts and questions (noun lexicon, attribute words, synonym
    table, G_H seed ...); their sha256 go into the manifest (`resources`) and the DATACARD.

    `parent`: the parent release folder (ODE lineage): the manifest records the chain of ancestors it names, with
    their concept pairs. `graph_sources`: annotation files the concept graph was built from; their sha256 go into the
    manifest. `graph` (nodes, edges): the concept graph, for the DATACARD's Standard drift from its top band.
    """
    from .lineage import lineage as read_lineage
    from .lineage import lineage_record

    ancestors = read_lineage(parent) if parent else []
    lineage, ids, lineage_card = lineage_record(
        name=name, seed=seed, config=config, scenes=scenes, queries=queries, ancestors=ancestors, graph=graph
    )
    sources = {}
    for path in graph_sources:
        if not Path(path).is_file():
            raise InputError(f"graph source {path}: not found")
        sources[str(path)] = sha256_file(path)
    shaping = {}
    for path in resources:
        if not Path(path).is_file():
            raise InputError(f"question resource {path}: not found")
        shaping[resource_name(path)] = sha256_file(path)
    safe_name(name, "release name")  # it becomes the default name of export folders and lmms-eval tasks
    # The old release stays whole until the new one is complete (a failure anywhere leaves it as it was).
    with building_folder(release_dir) as tmp:
        manifest = _build(
            tmp,
            root,
            accepted,
            queries,
            scenes,
            images,
            detections,
            config,
            seed,
            name,
            rejected,
            lineage_card,
            shaping,
            meaning=meaning,
        )
        manifest["lineage"] = lineage
        manifest["ids"] = ids
        manifest["graph_sources"] = sources
        manifest["resources"] = shaping
        write_json(tmp / MANIFEST, manifest)
    return manifest


def _build(
    tmp: Path,
    root: str | Path,
    accepted: pl.DataFrame,
    queries: pl.DataFrame,
    scenes: pl.DataFrame,
    images: list[pl.DataFrame],
    detections: list[pl.DataFrame],
    config: dict,
    seed: int,
    name: str,
    rejected: pl.DataFrame | None,
    lineage_card: list[str] = (),
    resources: dict | None = None,
    meaning: dict | None = None,
) -> dict:
    """Every file of the release but manifest.json into `tmp`; returns the manifest without its lineage."""
    from .meaning import meaning_record

    sha_of = {}  # by path: a regenerated image has one row (and file) per attempt under the same id
    for df in images:
        if "sha256" in df.columns:
            sha_of.update(zip(df["path"] if "path" in df.columns else df["image_id"], df["sha256"]))
    for image_id, path in progress(
        accepted.select("image_id", "path").sort("image_id").iter_rows(),
        desc="release images",
        total=accepted.height,
    ):
        src = safe_join(root, path)
        if not src.is_file():
            raise InputError(f"accepted image {image_id}: file {path} not found under {root}")
        data = src.read_bytes()
        if sha_of.get(path) and sha256_bytes(data) != sha_of[path]:
            raise InputError(f"accepted image {image_id}: {path} does not match the sha256 in its image table")
        write_bytes(tmp / "images" / f"{image_id}.png", data)
    kept_scenes = scenes.filter(pl.col("scene_id").is_in(accepted["scene_id"].unique().to_list())).sort("scene_id")
    queries = queries.sort(["image_id", "query_id"])
    write_parquet(tmp / "scenes.parquet", kept_scenes)
    write_parquet(tmp / "queries.parquet", queries)
    write_jsonl(tmp / "queries.jsonl", queries.iter_rows(named=True))
    models = models_used({"synthesizer": images, "detector": detections})
    stand_ins = any(m["stand_in"] for m in models)
    counts = _counts(accepted, queries, kept_scenes, rejected)
    counts["truths_not_checked"] = _truths_not_checked(accepted, queries, images, detections, config)
    counts["label_support"] = _label_support(accepted, queries, images, detections)
    counts["meaning"] = meaning_record(queries, meaning)
    card = _datacard(name, counts, models, stand_ins, seed, config, lineage_card, resources)
    write_text(tmp / "DATACARD.md", card)
    write_hub_files(tmp, name, queries, card)
    files = {}
    for path in sorted(p for p in tmp.rglob("*") if p.is_file()):
        rel = path.relative_to(tmp).as_posix()
        files[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    return {
        "format": FORMAT,
        "release": name,
        "seed": seed,
        "config": config,
        "packages": package_versions(),
        "models": models,
        "models_lock": lock_record(),  # the commit of every Hub model when the run checked a lock (models fetch)
        "stand_ins_used": stand_ins,
        "task": task_definition(config.get("answer")),  # how every tool asks and reads it (ode/task.py)
        "counts": counts,
        "files": files,
    }


def update_release(release_dir: str | Path, texts: dict[str, str], manifest_keys: dict) -> dict:
    """Rewrite listed text files of a finished release and set top-level manifest keys, re-hashing what changed.

    Only a release that verifies is updated, only files its manifest lists may be rewritten, and the keys that
    describe the build itself (files, format, release, seed, config, counts, lineage, task) are never replaced. Like
    `package_release`, the new folder is built beside the old one (unchanged files hard-linked) and swapped in whole,
    so a failure anywhere leaves the release exactly as it was and `release verify` passes afterwards."""
    release_dir = Path(release_dir)
    problems = verify_release(release_dir)
    if problems:
        raise InputError(f"{release_dir}: does not verify ({problems[0]}); refusing to update it")
    manifest = read_manifest(release_dir)
    unlisted = sorted(set(texts) - set(manifest["files"]))
    if unlisted:
        raise InputError(f"{release_dir}: {unlisted[0]} is not a file of this release; only listed files are updated")
    protected = sorted(
        set(manifest_keys) & {"files", "format", "release", "seed", "config", "counts", "lineage", "task"}
    )
    if protected:
        raise InputError(f"{release_dir / MANIFEST}: key {protected[0]!r} describes the build and is not updated")
    with building_folder(release_dir, "updating") as tmp:
        files = {}
        for rel in sorted(manifest["files"]):
            if rel in texts:
                write_text(tmp / rel, texts[rel])
            else:
                link_or_copy(release_dir / rel, tmp / rel)
            files[rel] = {"sha256": sha256_file(tmp / rel), "bytes": (tmp / rel).stat().st_size}
        manifest = {**manifest, **manifest_keys, "files": files}
        write_json(tmp / MANIFEST, manifest)
    return manifest


def read_manifest(release_dir: str | Path) -> Any:
    """The release's manifest.json: a regular file of at most MAX_MANIFEST_BYTES, through the JSON decoding guard
    (InputError in one line naming it otherwise)."""
    return read_json(Path(release_dir) / MANIFEST, max_bytes=MAX_MANIFEST_BYTES, regular=True)


def sha256_text(value: Any) -> str | None:
    """A manifest's sha256 as lower-case hex (upper-case hex is the same digest), None when it is not one."""
    return value.lower() if isinstance(value, str) and _SHA256.match(value) else None


def verify_release(release_dir: str | Path) -> list[str]:
    """Problems found (empty = verified): missing/altered listed files, unlisted files, a bad manifest."""
    release_dir = Path(release_dir)
    if not release_dir.is_dir():
        return [f"{release_dir}: not a folder"]
    try:
        manifest = read_manifest(release_dir)
    except InputError as exc:
        return [str(exc)]
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        return [f"{release_dir / MANIFEST}: no 'files' table"]
    problems = []
    name = manifest.get("release")
    if name is not None:
        try:
            safe_name(name, "release name")
        except InputError as exc:  # exports name their folders after it: "../../x" would write outside --out
            problems.append(f"{MANIFEST}: {exc}")
    for rel, meta in sorted(files.items()):
        shown = rel if rel.isprintable() and len(rel) <= 200 else ascii(rel)[:200] + ("..." if len(rel) > 200 else "")
        if "\0" in rel or len(rel) > 4096 or any(len(part) > 255 for part in rel.split("/")):
            problems.append(f"{shown}: listed path is not a usable file name (NUL byte or too long)")
            continue
        try:
            path = safe_join(release_dir, rel)
        except InputError:
            problems.append(f"{shown}: listed path escapes the release folder")
            continue
        kind = not_regular(path)
        if kind:
            problems.append(f"{shown}: is {kind}, not a regular file")
        elif not path.is_file():
            problems.append(f"{shown}: missing")
        elif not isinstance(meta, dict) or sha256_text(meta.get("sha256")) is None:
            problems.append(f"{shown}: no sha256 in the manifest (64 hex digits)")
        elif sha256_file(path) != sha256_text(meta["sha256"]):
            problems.append(f"{shown}: sha256 differs from manifest")
    for path in sorted(release_dir.rglob("*")):
        rel = path.relative_to(release_dir).as_posix()
        if path.is_dir() and not path.is_symlink():
            if not any(path.iterdir()):  # a release holds files only: an empty folder is something unlisted
                problems.append(f"{rel}/: empty folder, not listed in manifest")
        elif rel != MANIFEST and rel not in files:
            kind = not_regular(path)
            problems.append(f"{rel}: not listed in manifest" + (f" ({kind})" if kind else ""))
    return problems
