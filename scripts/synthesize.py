# Synthesize one image shard (rule synthesize): the model loads once, images are generated in fixed batches.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.devices import set_threads
from halluflow.io import write_parquet
from halluflow.registry import create
from halluflow.ode.synthesis import read_prompts, synthesize_shard, synthesizer_kwargs

set_threads(snakemake.threads)
section = snakemake.params.synthesis
# results/<release>/images/<shard>.parquet -> results/<release>: image paths are relative to the release folder
root = Path(snakemake.output.table).parent.parent
prompts = read_prompts(snakemake.input.prompts, shard=snakemake.wildcards.shard)
synthesizer = create("synthesizer", synthesizer_kwargs(section, snakemake.params.model))
log.info("synthesizer: %s", synthesizer.describe().as_dict())
table = synthesize_shard(prompts, root, snakemake.wildcards.shard, synthesizer, section["batch_size"])
write_parquet(snakemake.output.table, table)
