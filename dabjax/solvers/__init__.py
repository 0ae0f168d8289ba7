"""Exact solvers, the measuring stick: whole-board retrograde tables (up to 31 lines), the numba alpha-beta
position solver and its board kernels, and solver-labelled position sets."""
