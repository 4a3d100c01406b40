# Real weights for compute nodes without internet (halluflow.models.fetch). `snakemake models_fetch` (never part of
# the default target; a local rule, so on Slurm it runs on the submit host, which has internet) stages every Hub
# model and ultralytics file this config names into one cache and writes its lock. A run started with
# HALLUFLOW_MODELS_LOCK set checks every locked file first (a changed one stops the run in one line) and keeps the
# Hub offline for every job, so a job loads only what the lock names.
import os

from halluflow.errors import HalluflowError
from halluflow.models.fetch import LOCK_ENV, LOCK_NAME, check_lock

MODELS_FETCH_CACHE = os.environ.get("HALLUFLOW_MODELS_CACHE", "resources/hub-cache")

if os.environ.get(LOCK_ENV):
    try:
        check_lock(os.environ[LOCK_ENV])
    except HalluflowError as _exc:
        raise SystemExit(f"halluflow: {_exc}")
    # Jobs inherit this environment (Slurm: sbatch exports it), so none of them reaches the Hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_CACHE", str(Path(os.environ[LOCK_ENV]).resolve().parent / "hub"))


localrules:
    models_fetch,


rule models_fetch:
    output:
        lock=f"{MODELS_FETCH_CACHE}/{LOCK_NAME}",
    log:
        "logs/models/models_fetch.log",
    conda:
        # huggingface_hub comes with transformers/diffusers there; the ultralytics files are plain downloads.
        "../envs/models.yaml"
    params:
        # the merged config: every model it names is staged
        config=config,
    script:
        "../scripts/rule.py"
