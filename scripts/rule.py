# The script of every rule: runs the rule's function in halluflow.workflow (RULES names it, by rule name).
from halluflow.workflow import run

run(snakemake)
