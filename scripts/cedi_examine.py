from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.cedi.pipeline import examine_model

examine_model(
    snakemake.params.config,
    snakemake.params.model,
    release_dir=Path(snakemake.input.release).parent,  # the input is the release's manifest.json
    graph_dir=Path(snakemake.input.nodes).parent,
    out_transcripts=snakemake.output.transcripts,
    out_truth=snakemake.output.truth,
    models_cache=snakemake.params.models_cache,
    accepted=snakemake.input.accepted,
)
