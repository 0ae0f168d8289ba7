"""Evaluation: matches between agents (arena), Elo ratings, agents by name (agent registry), the shipped
pretrained agents, and plots."""
