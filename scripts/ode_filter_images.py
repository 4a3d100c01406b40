"""Rule filter_images: image + detection tables of all shards -> filtered/{accepted,rejected}.parquet."""
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

import polars as pl

from halluflow.io import write_parquet
from halluflow.ode.filtering import filter_images, require_accepted

cfg = snakemake.params.filter
images = pl.concat([pl.read_parquet(p) for p in snakemake.input.images], how="diagonal_relaxed")
detections = pl.concat([pl.read_parquet(p) for p in snakemake.input.detections], how="diagonal_relaxed")
accepted, rejected = filter_images(images, detections, pl.read_parquet(snakemake.input.scenes),
                                   keep_threshold=cfg["keep_threshold"],
                                   exclusion_threshold=cfg["exclusion_threshold"], balance=cfg["balance"],
                                   seed=snakemake.params.seed,
                                   root=Path(snakemake.input.scenes).parents[1])  # results/<release>
for image_id, reason in rejected.select("image_id", "reason").iter_rows():
    log.info("rejected %s: %s", image_id, reason)
require_accepted(accepted, rejected, cfg["keep_threshold"])
write_parquet(snakemake.output.accepted, accepted)
write_parquet(snakemake.output.rejected, rejected)
log.info("accepted %d, rejected %d (keep threshold %s)", accepted.height, rejected.height, cfg["keep_threshold"])
