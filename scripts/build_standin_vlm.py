# Build a tiny random stand-in VLM (rule build_standin_vlm) with the shared stand-in machinery.
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.backends.transformers_vlm import build_tiny_smolvlm
from halluflow.standins import build_standin, builder_kinds, register_builder

if "smolvlm" not in builder_kinds():
    register_builder("smolvlm", build_tiny_smolvlm)
build = snakemake.params.build
path = build_standin(build["builder"], snakemake.output.model, seed=build["seed"], **build["args"])
log.info("built stand-in VLM %r (%s) into %s", snakemake.wildcards.vlm, build["builder"], path)
