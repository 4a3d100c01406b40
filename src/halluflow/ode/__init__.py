"""ODE (Open-Set Dynamic Evaluation, seed 002): scene sampling, prompts, detector filtering and queries.

The concept graph (`graph`), synthesis, detection, release packaging, scoring and diagnosis live here too.
"""
