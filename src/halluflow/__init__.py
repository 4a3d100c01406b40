"""halluflow: measure hallucination in vision-language models (ODE, CAOS, CEDI, UniHall/SAMF, POPE, CHAIR, AMBER)."""

__version__ = "0.1.0"
