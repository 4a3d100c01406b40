from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.cedi.comparison import write_section
from halluflow.io import read_json

grades = {m: read_json(p) for m, p in zip(snakemake.params.models, snakemake.input.grades)}
section = write_section(grades, snakemake.output.section)
log.info("cedi comparison: %d radar axes rows for %d model(s)", len(section["tables"][0]["rows"]), len(grades))
