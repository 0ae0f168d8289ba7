"""dabjax: a JAX, accelerator-native trainer for Dots-and-Boxes agents (the BoxesZero method).

The packages stand in floors, each importing only from the floors below it (anywhere in a module, inside
functions too), so no two packages import each other (docs/architecture.md; tests/test_style.py checks it):

    game < search < solvers < training < baselines < evaluation < runs < cli

* ``game``: the rules and everything every agent needs: geometry, the environment, notation, playouts, the
  chain and endgame analysis, the handcrafted policies, the host-agent protocol, compiled matches;
* ``search``: the policy-value network and the mctx search;
* ``solvers``: exact play: retrograde tables, the numba position solver, labelled position sets;
* ``training``: configs, self-play, the learner, checkpoints (loading one for play included);
* ``baselines``: the other methods to measure against (alpha-beta, TD learning, MCTS with a network cut-off,
  OpenSpiel's MCTS), built on the floors below;
* ``evaluation``: agents by name, matches, Elo, the shipped agents, pictures, the periodic evaluation of runs, the
  web game's session;
* ``runs``: a run on disk: the run directory, its lock and the resumable loop, BoxesZero and TD runs, warm starts,
  the exact labels training may use, sweep directories, the closing summary;
* ``cli``: the ``dabjax`` commands: argument parsing, printing, the HTTP shell.

``package_data`` (built-in configs and data sets by name) imports nothing of dabjax; this module imports only
the game. On an NVIDIA GPU whose driver, CUDA runtime and jaxlib run them correctly, importing it adds XLA's command
buffers for while loops and conditionals to ``XLA_FLAGS``, so that the GPU runs the search's loops without the host;
on another GPU it logs one line saying why not, and without a GPU it changes nothing
(``dabjax.game.loops.enable_command_buffers`` says why the import does it; ``DABJAX_COMMAND_BUFFERS=0`` or ``1``
forces them off or on).
"""

from dabjax.game import loops as _loops
from dabjax.game.env import Env, State, init, observe, step
from dabjax.game.geometry import BoardGeometry, board_geometry, parse_board_size

_loops.enable_command_buffers()  # before any backend starts: importing these modules computes nothing

__version__ = "0.1.0"

__all__ = [
    "BoardGeometry",
    "Env",
    "State",
    "board_geometry",
    "init",
    "observe",
    "parse_board_size",
    "step",
]
