"""The game, the bottom floor: board geometry, the pure environment (``State``, ``init``, ``step``,
``observe``), move notation, random playouts, the exact analysis the search uses (chains and loops,
simple-endgame values, forced captures), and what every agent builds on: the handcrafted policies
(``policies``: levels 0-2, the greedy opening policy), the host-agent protocol (``host_agent``) and compiled
matches between jax agents (``match``). Imports nothing else of dabjax."""
