# halluflow: hallucination evaluation of vision-language models (ODE, CAOS, CEDI, UniHall/SAMF, POPE, CHAIR, AMBER).
# Thin by design: the config is checked by the library, one rule file per stage, all logic in src/halluflow.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


report: "report/workflow.rst"


wildcard_constraints:
    shard=r"\d{3}",
    release=r"[A-Za-z0-9._-]+",


# Input functions and the stage plan (which stages run on this config, and why the others do not).
include: "rules/common.smk"
# Stage files in data-flow order: a rule names its inputs through `rules.<upstream>.output.<key>`.
include: "rules/standins.smk"
# Real weights staged for offline compute nodes (`snakemake models_fetch`) and the lock every run checks.
include: "rules/models.smk"
include: "rules/ode.smk"
include: "rules/images.smk"
include: "rules/release.smk"
include: "rules/answer.smk"
include: "rules/score.smk"
# ODE's fine-tuning loop (planned only when finetune.enabled): needs the answer and score rules above.
include: "rules/finetune.smk"
include: "rules/caos.smk"
include: "rules/cedi.smk"
include: "rules/samf.smk"
include: "rules/report.smk"
# One page per paper in its layout (snakemake paper_ode | paper_caos | paper_samf | paper_cedi); not in `rule all`.
include: "rules/paper.smk"
# What `rule all` asks for: the final files of the planned stages.
include: "rules/targets.smk"


rule all:
    default_target: True
    input:
        get_final_output(),
