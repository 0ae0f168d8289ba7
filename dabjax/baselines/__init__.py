"""Baselines to measure against: the handcrafted agents (levels 0-2, the greedy opening policy), depth-limited
alpha-beta, TD(lambda) learning, MCTS with a value-network cut-off, and OpenSpiel's MCTS bot."""
