"""The game: board geometry, the pure environment (``State``, ``init``, ``step``, ``observe``), move notation,
random playouts, and the exact analysis the search uses (chains and loops, simple-endgame values, forced
captures). Imports nothing else of dabjax."""
