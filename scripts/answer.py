# Answer one shard of queries with one model under test (rule answer).
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.answer import run_answer_job

p = snakemake.params.answer
stats = run_answer_job(
    p, shard=int(snakemake.wildcards.shard), out_path=snakemake.output.answers, threads=snakemake.threads
)
log.info("done: %s", stats)
