"""Rule package_release: accepted images + scenes + queries -> release/ with manifest.json and DATACARD.md."""
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

import polars as pl

from halluflow.ode.release import package_release

manifest = package_release(
    Path(snakemake.output.manifest).parent,  # results/<release>/release
    root=Path(snakemake.input.scenes).parents[1],  # results/<release>: image paths are relative to it
    accepted=pl.read_parquet(snakemake.input.accepted),
    rejected=pl.read_parquet(snakemake.input.rejected),
    queries=pl.read_parquet(snakemake.input.queries),
    scenes=pl.read_parquet(snakemake.input.scenes),
    images=[pl.read_parquet(p) for p in snakemake.input.images],
    detections=[pl.read_parquet(p) for p in snakemake.input.detections],
    config=dict(snakemake.params.config),
    seed=snakemake.params.seed,
    name=snakemake.params.name,
    parent=snakemake.params.parent,
    graph_sources=list(snakemake.input.graph_sources),
)
log.info("release %s: %d files, stand-ins used: %s", snakemake.params.name, len(manifest["files"]),
         manifest["stand_ins_used"])
