"""UniHall + SAMF ("Unified Hallucination Fuzzing for Multimodal Large Language Models"; "the UniHall/SAMF
paper" elsewhere in this package): instance schema and taxonomy, mutation operators, self-adaptive fuzzing
controllers (UCB / epsilon-greedy bandits, hill climbing) and the GHR/BHR/SHR/GHS metric suite.

Import the submodules directly (`halluflow.samf.operators`, `.controllers`, `.metrics`); nothing heavy loads here.
"""
