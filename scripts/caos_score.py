"""Rule caos_score: one model's generative answers + release queries + graph nodes -> caos/<model>.{json,...}."""
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.caos.scores import run_workflow

summary = run_workflow(
    answers=list(snakemake.input.answers),
    release_dir=str(Path(snakemake.input.release).parent),  # the input is the release's manifest.json
    nodes=snakemake.input.nodes,
    metrics=list(snakemake.input.metrics),
    cfg=snakemake.params.caos,
    model=snakemake.wildcards.model,
    oracle_members=snakemake.params.oracle_members,
    default_llm=snakemake.params.llm,
    models_cache=snakemake.params.models_cache,
    out_summary=snakemake.output.summary,
    out_objects=snakemake.output.objects,
    out_captions=snakemake.output.captions,
)
for name, s in summary["embedders"].items():
    log.info("%s: CAOS_T %s CAOS_X %s CAOS_K %s over %d hallucinated objects", name, s["caos_t"], s["caos_x"],
             s["caos_k"], s["n_hallucinated"])
