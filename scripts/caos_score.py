"""Rule caos_score: one model's generative answers + release queries + graph nodes (or a coco source's instances)
-> caos/<model>.{json,...}."""

from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.caos.scores import run_workflow

summary = run_workflow(
    answers=list(snakemake.input.answers),
    # the release's manifest.json; absent for a coco source, whose queries and truth come from answer.source
    release_dir=str(Path(snakemake.input.release).parent) if "release" in snakemake.input.keys() else None,
    nodes=snakemake.input.nodes if "nodes" in snakemake.input.keys() else None,
    source=snakemake.params.source if "source" in snakemake.input.keys() else None,
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
    log.info(
        "%s: CAOS_T %s CAOS_X %s CAOS_K %s over %d hallucinated objects",
        name,
        s["caos_t"],
        s["caos_x"],
        s["caos_k"],
        s["n_hallucinated"],
    )
