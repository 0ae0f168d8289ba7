"""Baselines to measure against: depth-limited alpha-beta, TD(lambda) learning, MCTS with a value-network
cut-off, and OpenSpiel's MCTS bot (``openspiel_mcts``). The handcrafted policies (levels 0-2, the greedy opening
policy) live with the game (``dabjax.game.policies``)."""
