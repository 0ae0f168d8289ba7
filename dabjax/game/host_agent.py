"""The host-agent protocol: agents that run on the host, game by game, beside the jittable ``env.Agent``.

An agent is any ``fn(geometry, key, states) -> int32 [N]`` (``dabjax.game.env.Agent``). Most are pure jax
functions (the handcrafted policies, the searches). Some cannot be jitted: alpha-beta and the exact solver
(numba), OpenSpiel's MCTS bot (Python). They subclass ``HostAgent`` and implement ``act``, which sees NumPy
states and, when the agent asks for it (``needs_history``), each game's move list. The arena
(``dabjax.evaluation.arena``) asks them only for the games where they are to move.

The protocol lives with the game, below every agent, so that the baselines and the solvers can define host
agents without importing the arena that plays them.
"""

from __future__ import annotations

import abc
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import env as env_lib
from dabjax.game.geometry import BoardGeometry


class HostAgent(abc.ABC):
    """An agent that runs on the host (not jittable). Subclasses implement ``act``.

    ``needs_history``: the agent needs each game's move list (OpenSpiel's bots rebuild their game from it);
    it can then only be used where histories are known (the arena's ``play_match``, terminal play), not on
    bare states.
    """

    name: str = "host"
    needs_history: bool = False

    @abc.abstractmethod
    def act(
        self,
        geometry: BoardGeometry,
        rng: np.random.Generator,
        states: env_lib.State,
        histories: Sequence[Sequence[int]] | None,
    ) -> np.ndarray:
        """int32 ``[N]``: a move for each of the ``N`` games of ``states`` (NumPy leaves); ``histories`` are
        the lines drawn so far in each game, in order."""

    def __call__(self, geometry: BoardGeometry, key: jax.Array, states: env_lib.State) -> jax.Array:
        """The common agent signature, outside jit (for accuracy tables and the like)."""
        if self.needs_history:
            raise ValueError(
                f"agent {self.name!r} needs the move history of each game; use it in matches or terminal play"
            )
        actions = self.act(geometry, rng_from_key(key), env_lib.to_numpy(states), None)
        return jnp.asarray(actions, jnp.int32)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def mover_margins(scores: np.ndarray, current_player: np.ndarray) -> np.ndarray:
    """int32 ``[...]``: the mover's boxes minus the opponent's, from NumPy ``scores`` (``[..., 2]``) and
    ``current_player`` (``[...]``). ``State.margin`` in NumPy: on NumPy leaves that property runs JAX op by op,
    which compiles each op on its first use, a pause a host agent on a clock cannot afford."""
    scores = np.asarray(scores)
    own = np.take_along_axis(scores, np.asarray(current_player)[..., None].astype(np.int64), axis=-1)[..., 0]
    return (2 * own - scores.sum(-1)).astype(np.int32)


def rng_from_key(key: jax.Array) -> np.random.Generator:
    """A NumPy generator seeded from a JAX key (host agents draw their tie-breaks from it)."""
    return np.random.default_rng(np.asarray(jax.random.randint(key, (4,), 0, 2**31 - 1)).tolist())


def is_host_agent(agent) -> bool:
    """Whether ``agent`` runs on the host (a ``HostAgent``) rather than under jit."""
    return isinstance(agent, HostAgent)
