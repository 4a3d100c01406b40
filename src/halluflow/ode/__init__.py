"""ODE (Open-Set Dynamic Evaluation, seed 002): scene sampling, prompts, detector filtering and queries.

The concept graph they all read lives in `halluflow.graph` (shared with the other methods).
"""
