"""CEDI (seed 000): contextualized, multi-turn examination of a VLM over a scene graph, graded by scene-graph GED.

scene_graph: truth graphs (ODE scenes, Visual Genome, COCO) and validation; examiner: the four-question-type state
machine, context, template/LLM question writer and the caption / prompt-only baselines; parser: transcript → claims →
predicted scene graph and rule-based per-turn judgements; ged: CEDI's graph edit distance and its hal/miss split;
grader: per-model grades (GED, SG ΔCon, per-turn hallucination rates) and the `halluflow sg ged` command.
"""
