"""The Dots-and-Boxes environment: a ``State`` pytree and pure ``init`` / ``step`` / ``observe`` functions.

All functions act on one game; ``jax.vmap`` them for a batch (``Env`` does nothing else). Shapes are static
per board size, so a jitted step compiles once per size.

Rules (the same as OpenSpiel's ``dots_and_boxes``): players alternate drawing one undrawn line; a player who
completes one or two boxes scores them and moves again; the game ends when every line is drawn, or, with
``early_termination``, as soon as one player holds more than half of the boxes (the game-termination
strategy of Li, Chi and Chang, "An Improved AlphaZero Self-Play Strategy for Dots and Boxes": the result can
no longer change). Player 0 moves first.

Conventions, as in pgx:

* ``rewards`` holds each player's reward for the last step: ``+1`` / ``-1`` to the winner / loser on the
  step that ends the game, ``0`` for a draw and on every other step.
* An illegal action inside jit (an already drawn line or an index outside ``0..L-1``) ends the game at once:
  the board is left as it was, the mover gets ``-1`` and the opponent ``+1``. The user-facing helpers in
  ``dabjax.game.notation`` raise ``ValueError`` instead.
* Stepping a terminated state is a no-op: the very same state (rewards included) comes back.
* ``legal_action_mask`` is the undrawn lines while the game runs; at a terminal state every action is marked
  legal, so that a batched search over finished games never normalises an empty mask (pgx does the same).
  Do not read it at a terminal state; ``lines`` tells which lines are drawn.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dabjax.game.geometry import BoardGeometry, board_geometry

SCORE_PLANE_SCALE = 0.25  # The paper's third input plane: (own - opponent boxes) * 0.25.
PAPER_PLANES = 3  # The paper's input: lines, claimed boxes, score margin.
NUM_PLANES = 4  # ... plus the parity of the undrawn lines (see ``observe``).


@struct.dataclass
class State:
    """One game (or, with leading batch axes, many). ``L`` lines, ``B`` boxes.

    Attributes:
      lines: bool ``[L]``, drawn lines (OpenSpiel numbering).
      box_owner: int8 ``[B]``, the player who claimed each box, ``-1`` if unclaimed.
      scores: int32 ``[2]``, boxes held by player 0 and player 1.
      current_player: int32 ``[]``, the player to move (0 or 1).
      num_moves: int32 ``[]``, lines drawn so far (the move number of the next move).
      terminated: bool ``[]``.
      truncated: bool ``[]``, always False (pgx field; the game has no step limit).
      legal_action_mask: bool ``[L]``, see the module docstring for its value at a terminal state.
      rewards: float32 ``[2]``, each player's reward for the last step.
    """

    lines: jax.Array
    box_owner: jax.Array
    scores: jax.Array
    current_player: jax.Array
    num_moves: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    legal_action_mask: jax.Array
    rewards: jax.Array

    @property
    def margin(self) -> jax.Array:
        """int32 ``[]``: score of the player to move minus the opponent's."""
        own = jnp.take_along_axis(self.scores, self.current_player[..., None], axis=-1)[..., 0]
        return 2 * own - self.scores.sum(-1)


# A batched policy: ``agent(geometry, key, states) -> actions``, ``states`` with leading axis ``N``, ``actions``
# int32 ``[N]``. Handcrafted, search and network agents all have this signature.
Agent = Callable[[BoardGeometry, jax.Array, "State"], jax.Array]


def init(geometry: BoardGeometry) -> State:
    """The empty board, player 0 to move."""
    return State(
        lines=jnp.zeros(geometry.num_lines, jnp.bool_),
        box_owner=-jnp.ones(geometry.num_boxes, jnp.int8),
        scores=jnp.zeros(2, jnp.int32),
        current_player=jnp.int32(0),
        num_moves=jnp.int32(0),
        terminated=jnp.bool_(False),
        truncated=jnp.bool_(False),
        legal_action_mask=jnp.ones(geometry.num_lines, jnp.bool_),
        rewards=jnp.zeros(2, jnp.float32),
    )


def completed_boxes(geometry: BoardGeometry, lines: jax.Array, action: jax.Array) -> jax.Array:
    """bool ``[2]``: which of the (up to two) boxes beside ``action`` have all four sides in ``lines``.

    ``geometry.line_boxes[action]`` names the boxes; padding slots are always False.
    """
    boxes = jnp.asarray(geometry.line_boxes)[action]
    valid = jnp.asarray(geometry.line_box_valid)[action]
    sides = lines[jnp.asarray(geometry.box_lines)[jnp.maximum(boxes, 0)]]  # [2, 4]
    return valid & sides.all(axis=-1)


def _result_rewards(scores: jax.Array) -> jax.Array:
    """float32 ``[2]``: +1 / -1 / 0 for each player from the final scores."""
    diff = jnp.sign(scores[0] - scores[1]).astype(jnp.float32)
    return jnp.stack([diff, -diff])


def _ends(geometry: BoardGeometry, early_termination: bool, over: jax.Array, top_score: jax.Array) -> jax.Array:
    """bool ``[]``: ``over`` (the game ended by the lines), or, under the majority rule, ``top_score`` (the
    larger score, int ``[]``) above half the boxes. Without the rule ``over`` comes back as it is."""
    if early_termination:
        return over | ((2 * top_score) > geometry.num_boxes)
    return over


def _apply_legal(geometry: BoardGeometry, state: State, action: jax.Array, early_termination: bool) -> State:
    num_lines, num_boxes = geometry.num_lines, geometry.num_boxes
    player = state.current_player
    # A one-hot update instead of a scatter: cheaper under vmap on every backend.
    lines = state.lines | (jnp.arange(num_lines) == action)
    completed = completed_boxes(geometry, lines, action)  # [2]
    beside = jnp.asarray(geometry.line_boxes)[action]  # [2]
    claimed = ((jnp.arange(num_boxes)[None, :] == beside[:, None]) & completed[:, None]).any(0)
    box_owner = jnp.where(claimed, player.astype(jnp.int8), state.box_owner)
    gained = completed.sum(dtype=jnp.int32)
    scores = state.scores + gained * (jnp.arange(2) == player).astype(jnp.int32)
    num_moves = state.num_moves + 1
    terminated = _ends(geometry, early_termination, num_moves >= num_lines, scores.max())
    next_player = jnp.where(gained > 0, player, 1 - player).astype(jnp.int32)
    rewards = jnp.where(terminated, _result_rewards(scores), jnp.zeros(2, jnp.float32))
    return state.replace(
        lines=lines,
        box_owner=box_owner,
        scores=scores,
        current_player=next_player,
        num_moves=num_moves,
        terminated=terminated,
        legal_action_mask=~lines | terminated,
        rewards=rewards,
    )


def _apply_illegal(state: State) -> State:
    loser = state.current_player
    rewards = jnp.where(jnp.arange(2) == loser, -1.0, 1.0).astype(jnp.float32)
    return state.replace(
        terminated=jnp.bool_(True),
        legal_action_mask=jnp.ones_like(state.legal_action_mask),
        rewards=rewards,
    )


def is_legal_action(geometry: BoardGeometry, state: State, action: jax.Array) -> jax.Array:
    """bool ``[]``: the game is running and ``action`` is an undrawn line."""
    action = jnp.asarray(action, jnp.int32)
    in_range = (action >= 0) & (action < geometry.num_lines)
    undrawn = ~state.lines[jnp.clip(action, 0, geometry.num_lines - 1)]
    return in_range & undrawn & ~state.terminated


def step(geometry: BoardGeometry, state: State, action: jax.Array, early_termination: bool = False) -> State:
    """Draws line ``action`` (int, ``[]``). Pure and jit-able; ``geometry`` and ``early_termination`` are static.

    See the module docstring for illegal actions and terminal states.
    """
    action = jnp.asarray(action, jnp.int32)
    legal = is_legal_action(geometry, state, action)
    safe_action = jnp.clip(action, 0, geometry.num_lines - 1)
    stepped = _apply_legal(geometry, state, safe_action, early_termination)
    punished = _apply_illegal(state)
    result = jax.tree_util.tree_map(
        lambda a, b: jnp.where(legal, a, b), stepped, punished
    )
    return jax.tree_util.tree_map(
        lambda old, new: jnp.where(state.terminated, old, new), state, result
    )


def observe(geometry: BoardGeometry, state: State) -> jax.Array:
    """float32 ``[2R+1, 2C+1, 4]``, from the side to move.

    Planes 0-2 are the paper's input: 1 where a line is drawn; 1 where a box is claimed (by either player);
    ``(own score - opponent score) * 0.25`` everywhere. Dots and empty cells are 0 in the first two planes.
    Plane 3, our addition: 1 everywhere when an odd number of lines is still undrawn, else 0. Who gets
    control of the long chains is a parity question (the long chain rule), and a convolutional network
    cannot count the drawn lines modulo 2 by itself: trained on exact labels, a network without this plane
    predicted the sign of 3x3 values at moves 4-12 barely better than chance, and 0.76-0.99 with it
    (docs/training.md, "The parity plane"). ``NetworkConfig.parity_plane=False`` restores the paper's
    three planes.
    """
    return observation_from(geometry, state.lines, state.box_owner >= 0, state.margin)


def observation_from(geometry: BoardGeometry, lines: jax.Array, claimed: jax.Array, margin: jax.Array) -> jax.Array:
    """The observation of one position given compactly: lines bool ``[L]``, claimed bool ``[B]`` and the
    mover's margin so far (int ``[]``). See ``observe``."""
    height, width = geometry.grid_shape
    cell_line = jnp.asarray(geometry.cell_line.reshape(-1))
    cell_box = jnp.asarray(geometry.cell_box.reshape(-1))
    # Index -1 (no line / no box at this cell) reads a padding False appended at the end.
    lines = jnp.concatenate([lines, jnp.zeros(1, jnp.bool_)])
    claimed = jnp.concatenate([claimed, jnp.zeros(1, jnp.bool_)])
    line_plane = lines[cell_line].astype(jnp.float32)
    box_plane = claimed[cell_box].astype(jnp.float32)
    score_plane = jnp.full(height * width, SCORE_PLANE_SCALE, jnp.float32) * jnp.asarray(margin, jnp.float32)
    undrawn = geometry.num_lines - jnp.sum(lines.astype(jnp.int32))
    parity_plane = jnp.full(height * width, undrawn % 2, jnp.float32)
    planes = [line_plane, box_plane, score_plane, parity_plane]
    return jnp.stack(planes, axis=-1).reshape(height, width, NUM_PLANES)


# --- symmetries -----------------------------------------------------------------------------------------


def symmetric_state(geometry: BoardGeometry, state: State, sym: jax.Array) -> State:
    """The image of a state under symmetry ``sym`` (int ``[]``, ``0 <= sym < geometry.num_symmetries``)."""
    line_gather = jnp.asarray(geometry.sym_line_gather)[sym]
    box_gather = jnp.asarray(geometry.sym_box_gather)[sym]
    return state.replace(
        lines=state.lines[line_gather],
        box_owner=state.box_owner[box_gather],
        legal_action_mask=state.legal_action_mask[line_gather],
    )


def symmetric_action(geometry: BoardGeometry, action: jax.Array, sym: jax.Array) -> jax.Array:
    """int32: the image of line ``action`` under symmetry ``sym``."""
    return jnp.asarray(geometry.sym_line_map)[sym, action]


def symmetric_lines(geometry: BoardGeometry, values: jax.Array, sym: jax.Array) -> jax.Array:
    """``[..., L]`` per-line values (policy, legal mask, line flags) mapped by symmetry ``sym``."""
    return jnp.take(values, jnp.asarray(geometry.sym_line_gather)[sym], axis=-1)


def symmetric_observation(geometry: BoardGeometry, observation: jax.Array, sym: jax.Array) -> jax.Array:
    """``[..., H, W, P]`` observation mapped by symmetry ``sym`` (the grid is permuted, planes kept)."""
    height, width = geometry.grid_shape
    flat = observation.reshape(observation.shape[:-3] + (height * width, observation.shape[-1]))
    flat = jnp.take(flat, jnp.asarray(geometry.sym_cell_gather)[sym], axis=-2)
    return flat.reshape(observation.shape)


# --- the pgx-style object -------------------------------------------------------------------------------


class Env:
    """The game on one board under one rule, pgx style: ``init(key)``, ``step(state, action)``, ``observe(state)``.

    The board (``geometry``) and the rule travel together as this one object through forced captures, the
    endgame analysis, search, self-play and agents. Hashable, so a jit static argument. Its methods act on a
    single game and are pure: wrap them in ``jax.jit(jax.vmap(...))`` for batches.

    Args:
      rows, cols: board size in boxes (5x5 is the standard 60-line board).
      early_termination: end the game once a player holds more than half the boxes.
    """

    num_players = 2

    def __init__(self, rows: int = 3, cols: int = 3, early_termination: bool = False):
        self.geometry = board_geometry(rows, cols)
        self.early_termination = bool(early_termination)

    @classmethod
    def of(cls, geometry: BoardGeometry, early_termination: bool = False) -> "Env":
        """The environment of ``geometry``'s board under the given rule."""
        return cls(geometry.rows, geometry.cols, early_termination)

    @property
    def id(self) -> str:
        return f"dots_and_boxes_{self.geometry.name}"

    @property
    def num_actions(self) -> int:
        return self.geometry.num_lines

    @property
    def observation_shape(self) -> tuple[int, int, int]:
        return (*self.geometry.grid_shape, NUM_PLANES)

    def init(self, key: jax.Array | None = None) -> State:
        """The empty board. ``key`` is accepted for pgx compatibility; the start is deterministic."""
        del key
        return init(self.geometry)

    def step(self, state: State, action: jax.Array, key: jax.Array | None = None) -> State:
        """One move; ``key`` is accepted for pgx compatibility (the game has no chance)."""
        del key
        return step(self.geometry, state, action, self.early_termination)

    def draw_captures(self, state: State, lines: jax.Array, claimed: jax.Array) -> State:
        """The position after the player to move drew the new lines of ``lines`` one after another, each of them
        completing a box: what as many ``step`` calls give, in one go (the turn is kept throughout).

        ``lines`` bool ``[L]`` is every drawn line afterwards (those of ``state`` included), ``claimed`` bool
        ``[B]`` the boxes the new lines completed. The caller vouches for the moves (forced captures; the game
        ends no earlier than after the last). With no new line the state comes back unchanged.
        """
        player = state.current_player
        count = (lines & ~state.lines).sum(dtype=jnp.int32)
        scores = state.scores + claimed.sum(dtype=jnp.int32) * (jnp.arange(2) == player).astype(jnp.int32)
        num_moves = state.num_moves + count
        terminated = self.ends(num_moves >= self.geometry.num_lines, scores.max())
        after = state.replace(
            lines=lines,
            box_owner=jnp.where(claimed, player.astype(jnp.int8), state.box_owner),
            scores=scores,
            num_moves=num_moves,
            terminated=terminated,
            legal_action_mask=~lines | terminated,
            rewards=jnp.where(terminated, _result_rewards(scores), jnp.zeros(2, jnp.float32)),
        )
        return jax.tree_util.tree_map(lambda old, new: jnp.where(count > 0, new, old), state, after)

    def ends(self, over: jax.Array, top_score: jax.Array) -> jax.Array:
        """bool ``[]``: the game is over: ``over`` (every line drawn, or already over), or, under this
        environment's majority rule, ``top_score`` (the larger score, int ``[]``) above half the boxes."""
        return _ends(self.geometry, self.early_termination, over, top_score)

    def observe(self, state: State) -> jax.Array:
        return observe(self.geometry, state)

    def _key(self) -> tuple:
        return (self.geometry, self.early_termination)

    def __repr__(self) -> str:
        return f"Env({self.geometry.name}, early_termination={self.early_termination})"

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Env) and self._key() == other._key()


def as_env(board: BoardGeometry | Env) -> Env:
    """``board`` as an ``Env``: an ``Env`` as it is; a ``BoardGeometry`` under the standard rule (the game ends
    when every line is drawn). For the user-facing helpers (``dabjax.game.notation``, ``dabjax.game.record``),
    which most callers give a bare board."""
    return board if isinstance(board, Env) else Env.of(board)


def batch_init(geometry: BoardGeometry, batch_size: int) -> State:
    """``batch_size`` empty boards (leading axis on every field)."""
    single = init(geometry)
    return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (batch_size,) + x.shape), single)


def to_numpy(state: State) -> State:
    """The same state with NumPy leaves (for host-side code: rendering, solvers, tests)."""
    return jax.tree_util.tree_map(np.asarray, state)
