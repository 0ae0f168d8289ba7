"""Search: the policy-value network, the mctx search over the true game with its prunings, search-tree node
extraction (node-filtered augmentation), and the agents that search. Builds on ``dabjax.game``."""
