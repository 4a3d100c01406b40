# Rule models_fetch: every Hub model and ultralytics file the merged config names -> the cache + its lock file.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.models.fetch import fetch

# The cache is the lock's folder (rules/models.smk: $HALLUFLOW_MODELS_CACHE/models.lock.json).
fetch(snakemake.config, str(Path(snakemake.output.lock).parent), snakemake.output.lock, log=log.info)
