"""ODE (Tu et al., "ODE: Open-Set Evaluation of Hallucinations in Multimodal Large Language Models", CVPR 2025).

The concept graph (`graph`), synthesis, detection, release packaging, scoring and diagnosis live here too.
"""
