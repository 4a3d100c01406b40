"""`halluflow models fetch`: stage every weight a config names for offline jobs."""

from __future__ import annotations

import os
from pathlib import Path

from .command import Command

_FETCH_DESCRIPTION = (
    "Download every weight a config names (Hub models, ultralytics assets, YOLO-World's CLIP text encoder) into one "
    "cache on a machine with internet, and write a lock of resolved revisions and file hashes; with --check, verify "
    "a cache against its lock (no network)."
)


def _fetch_epilog() -> str:
    # Made when shown: the constants live in halluflow.models.fetch, imported only then.
    from halluflow.models.fetch import HUB_SUBDIR, LOCK_ENV, LOCK_NAME, ULTRALYTICS_SUBDIR

    return f"""examples:
  halluflow models fetch --configfile configs/ode-paper.yaml --cache /shared/halluflow-models
  halluflow models fetch --configfile configs/ode-paper.yaml --cache /shared/halluflow-models --check
  halluflow models fetch --configfile configs/ode-paper.yaml --cache /shared/halluflow-models --pin pinned.yaml
then, on the compute nodes (no internet):
  export HF_HUB_OFFLINE=1 HF_HUB_CACHE=/shared/halluflow-models/{HUB_SUBDIR}
  export {LOCK_ENV}=/shared/halluflow-models/{LOCK_NAME}
  yolo settings weights_dir=/shared/halluflow-models/{ULTRALYTICS_SUBDIR}   # only for an ultralytics detector
The config files are merged as Snakemake merges them: ./config.yaml (when present) first, then each --configfile.
Gated models (FLUX.1-dev) need a login: `huggingface-cli login` or the HF_TOKEN environment variable."""


def _configure_fetch(parser) -> None:
    from halluflow.models.fetch import LOCK_NAME

    parser.add_argument("--configfile", nargs="+", required=True, metavar="C", help="config file(s), merged in order")
    parser.add_argument("--cache", required=True, metavar="DIR", help="cache folder to stage the weights into")
    parser.add_argument(
        "--lock", dest="out", default=None, metavar="FILE", help=f"lock file to write (default DIR/{LOCK_NAME})"
    )
    parser.add_argument("--check", action="store_true", help="verify the cache against the lock; download nothing")
    parser.add_argument("--dry-run", action="store_true", help="list what would be downloaded; download nothing")
    parser.add_argument(
        "--pin",
        metavar="FILE",
        default=None,
        help="also write the last --configfile to FILE with every Hub revision set to the commit in the lock "
        "(with --check: from the existing lock)",
    )


def _run_fetch(args) -> int:
    from halluflow.models.fetch import (
        LOCK_NAME,
        ULTRALYTICS_SUBDIR,
        check_lock,
        fetch,
        locked_files,
        merged_config,
        offline_env,
        plan,
    )

    config = merged_config(args.configfile)
    if args.check:
        doc = check_lock(args.out or Path(args.cache) / LOCK_NAME, args.cache)
        n = len(locked_files(doc, Path(args.cache)))
        print(f"{n} locked files match {args.out or Path(args.cache) / LOCK_NAME}")
        _pin(args, doc, args.out or Path(args.cache) / LOCK_NAME)
        return 0
    hub_models, assets = plan(config)
    if args.dry_run:
        for m in hub_models:
            print(f"hub\t{m.repo}\t{m.revision}\t{', '.join(m.roles)}")
        for a in assets:
            print(f"asset\t{a.path}\t{a.url}\t{', '.join(a.roles)}")
        return 0
    doc = fetch(config, args.cache, args.out)
    n_files = sum(len(m["files"]) for m in doc["models"]) + len(doc["assets"])
    print(f"staged {len(doc['models'])} hub models and {len(doc['assets'])} assets ({n_files} files) in {args.cache}")
    print(f"lock: {args.out or Path(args.cache) / LOCK_NAME}")
    for key, value in offline_env(args.cache, args.out).items():
        print(f"export {key}={value}")
    if doc["assets"]:
        print(f"yolo settings weights_dir={Path(args.cache).resolve() / ULTRALYTICS_SUBDIR}")
    _pin(args, doc, args.out or Path(args.cache) / LOCK_NAME)
    return 0


def _pin(args, doc: dict, lock: str | os.PathLike) -> None:
    from halluflow.io import sha256_file
    from halluflow.models.fetch import pin_config

    if args.pin:
        changed = pin_config(args.configfile[-1], {**doc, "sha256": sha256_file(lock)}, args.pin)
        print(f"pinned {len(changed)} revision(s) of {args.configfile[-1]} in {args.pin}: {', '.join(changed) or '-'}")


_FETCH = Command(
    "fetch",
    "stage every weight a config names into one cache for offline jobs and write the lock (or --check it)",
    _configure_fetch,
    _run_fetch,
    description=_FETCH_DESCRIPTION,
    epilog=_fetch_epilog,
)

COMMANDS = (_FETCH,)
