"""CAOS ("Evaluating Hallucination in Large Vision-Language Models based on Context-Aware Object Similarities"):
object extraction from captions (`extract`), the optional VLM oracle and the CAOS_T / CAOS_X / CAOS_K scores
(`scores`)."""
