# Convert the packaged SmolLM2-135M-Instruct GGUF into a Hugging Face folder once (rule build_local_llm, ~25 s).
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.models.packaged import convert_packaged_llm

path = convert_packaged_llm(snakemake.output.model)
log.info("converted the packaged SmolLM2 GGUF into %s", path)
