# Detect each image's scene objects in one shard (rule detect): the detector loads once, images go in batches.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

import polars as pl

from halluflow.ode.detection import detect_shard, detector_kwargs, image_labels
from halluflow.devices import set_threads
from halluflow.io import write_parquet
from halluflow.registry import create

set_threads(snakemake.threads)
section = snakemake.params.detection
root = Path(snakemake.input.images).parent.parent  # image paths are relative to results/<release>
images = pl.read_parquet(snakemake.input.images)
labels = image_labels(images, pl.read_parquet(snakemake.input.scenes), pl.read_parquet(snakemake.input.prompts),
                      scenes_path=snakemake.input.scenes, prompts_path=snakemake.input.prompts)
detector = create("detector", detector_kwargs(section, snakemake.params.model))
log.info("detector: %s", detector.describe().as_dict())
write_parquet(snakemake.output.table, detect_shard(images, labels, root, detector, section["batch_size"]))
