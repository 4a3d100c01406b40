from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.cedi.pipeline import examine_model

# cedi.source ode: the release (its manifest.json is the input), concept graph and detector labels; visual_genome /
# coco: none of them (the annotation file and image folder come from the config)
release = getattr(snakemake.input, "release", None)
nodes = getattr(snakemake.input, "nodes", None)
examine_model(
    snakemake.params.config,
    snakemake.params.model,
    release_dir=Path(release).parent if release else None,
    graph_dir=Path(nodes).parent if nodes else None,
    out_transcripts=snakemake.output.transcripts,
    out_truth=snakemake.output.truth,
    models_cache=snakemake.params.models_cache,
    accepted=getattr(snakemake.input, "accepted", None),
)
