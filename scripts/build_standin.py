# Build a tiny random stand-in model (rules build_standin_synthesizer / build_standin_detector).
from halluflow.snakemake_glue import setup

log = setup(snakemake)

from halluflow.models.standins import build_standin

cfg = snakemake.params.stand_in
path = build_standin(cfg["builder"], snakemake.output.model, seed=cfg["seed"], **cfg["args"])
log.info("built stand-in %r (%s) into %s", cfg["name"], cfg["builder"], path)
