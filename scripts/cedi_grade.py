from halluflow.snakemake_glue import setup

log = setup(snakemake)

from pathlib import Path

from halluflow.cedi.pipeline import grade_model

grades = grade_model(
    snakemake.params.config,
    transcripts=snakemake.input.transcripts,
    truth_graphs=snakemake.input.truth,
    graph_dir=Path(snakemake.input.nodes).parent if getattr(snakemake.input, "nodes", None) else None,
    out_grades=snakemake.output.grades,
    out_per_turn=snakemake.output.per_turn,
    out_pred=snakemake.output.pred,
)
log.info("cedi grades: ged %s, hallucination rate %s", grades.get("ged"), grades.get("hallucination_rate"))
