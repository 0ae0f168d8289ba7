"""Evaluation: matches between agents (arena), Elo ratings, agents by name (agent registry), the shipped
pretrained agents, exact play where it is cheap, the periodic evaluation of a run, any agent as an OpenSpiel
bot (``as_openspiel_bot``), pictures and plots."""
