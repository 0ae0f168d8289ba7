"""Exact solvers, the measuring stick: whole-board retrograde tables (up to 31 lines), the numba alpha-beta
position solver and its kernels (``board_kernels``: the board and its chains; ``board_keys``; ``move_ordering``;
``endgame_values``: the exact simple-endgame recursion, which tests/endgame_checks.py checks the jitted one
against), and solver-labelled position sets."""
