# halluflow: hallucination evaluation of vision-language models (ODE, CAOS, CEDI, UniHall/SAMF, POPE, CHAIR, AMBER).
# Thin by design: config + validation + one rule file per stage; all logic lives in src/halluflow.
from glob import glob

from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"


wildcard_constraints:
    shard=r"\d{3}",
    release=r"[A-Za-z0-9._-]+",



for _rule_file in sorted(glob(str(Path(workflow.basedir) / "rules" / "*.smk"))):
    if not _rule_file.endswith("common.smk"):

        include: _rule_file


rule all:
    input:
        get_final_output(),
    default_target: True
