"""Scoring: POPE / AMBER / CHAIR as the anchors compute them (exact, vectorised) and the ODE breakdowns.

Submodules import polars only; nothing here loads a model.
"""
