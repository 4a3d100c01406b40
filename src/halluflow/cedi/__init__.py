"""CEDI (Li et al., "Contextualized Evaluation of Vision Language Models through Dynamic, Multi-turn Interactions"):
contextualized, multi-turn examination of a VLM over a scene graph, graded by scene-graph GED.

scene_graph: truth graphs (ODE scenes, Visual Genome, COCO), validation and merging instances by name; examiner: the
four-question-type state machine, context, random/LLM switch, template/LLM question writer and the caption /
prompt-only baselines; parser: transcript → claims →
predicted scene graph and rule-based per-turn judgements; ged: CEDI's graph edit distance (exact MILP or networkx) and its hal/miss split;
grader: per-model grades (GED, SG ΔCon, per-turn hallucination rates, the judge of each) and the `halluflow sg ged`
command; wordnet: WordNet 3.0 noun synsets for the object-name match.
"""

# POPE's negative-sampling strategies of the pope examiner (examiner.py), here so `halluflow plan` and the workflow's
# planning count CEDI turns without importing the examiner (and networkx).
POPE_STRATEGIES = ("random", "popular", "adversarial")
