"""Forced captures (the paper's chain-loop pruning, section 3.1) and exact play into simple endgames.

A box is *capturable* when it has one undrawn side ``l``. Let ``b2`` be the box across ``l``:

* if ``l`` leads to the edge of the board or to a box with one or three-plus undrawn sides, taking with
  ``l`` is optimal (a lone box, a domino, a box at a junction; an opened 2-chain opened by its middle is
  taken whole): nothing that scores after ``l`` failed to score before it, so any line of play is at
  least as good with ``l`` played first;
* if ``b2`` has exactly two undrawn sides ``{l, m}`` and the chain goes on past ``b2`` (``m`` leads to
  another two-sided box whose far side does not end at a capturable box), taking is optimal too: in an
  opened chain take all but the last two boxes, in an opened loop all but the last four;
* otherwise ``b`` ends an opened chain (two boxes left) or an opened loop (four left, ``m`` its middle
  line): the real choices are ``l`` (take) and ``m`` (the double-dealing handout).

When some capture is forced, that move alone is worth searching. Otherwise the moves worth searching are
the ``{l, m}`` pairs of every capturable box: any other move that does not score is no better than taking
first and playing it afterwards. (With several opened components the handout should go to the last one
handled, which is why all pairs stay.) Tests check against exact solves that the best move inside the mask
is as good as the best move overall, on every capture position of small boards.

``searchable_mask`` returns those moves (all legal moves when nothing is capturable); ``play_forced_moves``
plays forced captures until a real decision (the macro step of chain-loop pruning); ``exact_value`` and
``endgame_move`` combine them with the simple-endgame evaluator.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from dabjax import chains as chains_lib
from dabjax import endgame as endgame_lib
from dabjax import env as env_lib
from dabjax.geometry import BoardGeometry


@struct.dataclass
class CaptureChoice:
    """The pruning decision of one position (``L`` lines).

    Attributes:
      has_capture: bool ``[]``, some box is capturable (and the game is running).
      forced: bool ``[]``, one capture is optimal: ``take``.
      take: int32 ``[]``, a capturing line (the forced one when ``forced``).
      mask: bool ``[L]``, the moves worth searching (meaningful when ``has_capture``).
    """

    has_capture: jax.Array
    forced: jax.Array
    take: jax.Array
    mask: jax.Array


def capture_choice(
    geometry: BoardGeometry, state: env_lib.State, components: chains_lib.Components | None = None
) -> CaptureChoice:
    """Which captures and handouts are worth searching in one position (no component labels needed)."""
    if components is None:
        sides, capturable = chains_lib.side_counts(geometry, state)
    else:
        sides, capturable = components.undrawn_sides, components.capturable
    num_boxes, num_lines = geometry.num_boxes, geometry.num_lines
    undrawn = chains_lib.undrawn_sides(geometry, state.lines)  # [B, 4]
    box_lines = jnp.asarray(geometry.box_lines)
    neighbours = jnp.asarray(geometry.box_neighbours)
    capturable = capturable & ~state.terminated
    boxes = jnp.arange(num_boxes, dtype=jnp.int32)

    # Walking along a chain without searching: a box with exactly two undrawn sides, entered by one of
    # them, leaves by the other, whose line is (sum of its undrawn lines) - (entry line) and whose far box
    # is (sum of (box across + 1) over its undrawn sides) - (box entered from + 1) - 1, -1 for the edge.
    line_sum = (undrawn * box_lines).sum(-1)  # [B]
    across_sum = (undrawn * (neighbours + 1)).sum(-1)  # [B]

    def sides_of(box):
        return jnp.where(box >= 0, sides[jnp.maximum(box, 0)], 0)

    def walk(box, entry_line, came_from):
        box = jnp.maximum(box, 0)
        return line_sum[box] - entry_line, across_sum[box] - came_from - 2

    # For every box as if capturable: its missing side l and the box b2 across it.
    take_line = line_sum  # a capturable box's only undrawn line
    second = across_sum - 1  # [B], -1 = edge
    lone = capturable & (sides_of(second) != 2)
    # b2 has sides {l, m}; m leads to b3; if b3 has two sides, its far side leads to b4.
    handout_lines, third = walk(second, take_line, boxes)
    _, fourth = walk(third, handout_lines, second)
    third_two_sided = (third >= 0) & (sides_of(third) == 2)
    continues = third_two_sided & ~((fourth >= 0) & (sides_of(fourth) == 1))
    forced_box = capturable & (lone | continues)
    forced = forced_box.any()
    chosen = jnp.where(forced, jnp.argmax(forced_box), jnp.argmax(capturable))
    lines = jnp.arange(num_lines, dtype=jnp.int32)
    option_box = capturable & ~forced_box
    pairs = (lines[:, None] == take_line[None, :]) | (lines[:, None] == handout_lines[None, :])  # [L, B]
    options = (pairs & option_box[None, :]).any(-1)
    take = take_line[chosen].astype(jnp.int32)
    mask = jnp.where(forced, lines == take, options)
    return CaptureChoice(has_capture=capturable.any(), forced=forced, take=take, mask=mask)


def searchable_mask(
    geometry: BoardGeometry, state: env_lib.State, components: chains_lib.Components | None = None
) -> jax.Array:
    """bool ``[L]``: the moves worth searching; the legal moves when no box is capturable."""
    choice = capture_choice(geometry, state, components)
    return jnp.where(choice.has_capture, choice.mask, state.legal_action_mask)


def is_forced(choice: CaptureChoice) -> jax.Array:
    """bool ``[]``: exactly one move is worth searching (a capture)."""
    return choice.has_capture & choice.forced


def play_forced_moves(
    geometry: BoardGeometry, state: env_lib.State, early_termination: bool = False
) -> tuple[env_lib.State, jax.Array]:
    """Plays forced captures until a real decision (or the end): ``(state, number of moves played)``.

    Each forced move captures at least one box, so at most ``B`` moves are played. The player to move is
    unchanged (captures keep the turn).
    """

    def cond(carry):
        state, count = carry
        return is_forced(capture_choice(geometry, state)) & (count < geometry.num_boxes)

    def body(carry):
        state, count = carry
        action = capture_choice(geometry, state).take
        return env_lib.step(geometry, state, action, early_termination), count + 1

    return jax.lax.while_loop(cond, body, (state, jnp.int32(0)))


def _solved_after_forced(
    geometry: BoardGeometry, state: env_lib.State, mover: jax.Array, early_termination: bool
) -> tuple[jax.Array, jax.Array]:
    """Plays forced moves, then (solved, exact final margin for ``mover``) if a simple endgame is reached."""
    after, _ = play_forced_moves(geometry, state, early_termination)
    solved, margin = endgame_lib.simple_endgame_margin(geometry, after)
    return solved, jnp.where(after.current_player == mover, margin, -margin)


MAX_EXACT_OPTIONS = 4  # Capture positions with more searchable moves are left to the search.


def exact_value(
    geometry: BoardGeometry, state: env_lib.State, early_termination: bool = False
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(solved, margin, best_move)`` for positions that reduce exactly to a simple endgame.

    Solved: terminal states; simple endgames (the opener's move from ``endgame.opener_move``); and capture
    positions with at most ``MAX_EXACT_OPTIONS`` searchable moves each of which, after the forced captures
    that follow, reaches a simple endgame or the end (this decides the controller's keep-or-give-up choice,
    the paper's Theorem 2, by exact values). ``margin`` int32 ``[]`` is the final margin of the player to
    move; ``best_move`` int32 ``[]`` an optimal move (arbitrary at terminal states). With
    ``early_termination`` the game may stop early, so only the sign of ``margin`` is exact there.
    """
    components = chains_lib.analyse(geometry, state)
    simple, simple_margin = endgame_lib.simple_endgame_margin(geometry, state, components)
    opener = endgame_lib.opener_move(geometry, state, components)
    choice = capture_choice(geometry, state, components)
    mover = state.current_player
    (candidates,) = jnp.nonzero(choice.mask, size=MAX_EXACT_OPTIONS, fill_value=-1)
    few = choice.mask.sum() <= MAX_EXACT_OPTIONS

    def value_of(action):
        child = env_lib.step(geometry, state, jnp.maximum(action, 0), early_termination)
        solved, margin = _solved_after_forced(geometry, child, mover, early_termination)
        present = action >= 0
        return solved | ~present, jnp.where(present, margin, -(1 << 20))

    solved_each, margin_each = jax.vmap(value_of)(candidates)
    capture_solved = choice.has_capture & few & solved_each.all()
    best = jnp.argmax(margin_each)

    solved = simple | capture_solved
    margin = jnp.where(simple, simple_margin, margin_each[best])
    move = jnp.where(simple, opener, candidates[best])
    return solved, margin.astype(jnp.int32), move.astype(jnp.int32)


def endgame_move(geometry: BoardGeometry, state: env_lib.State) -> tuple[jax.Array, jax.Array]:
    """``(is_exact, action)``: an optimal move where ``exact_value`` solves the position."""
    solved, _, move = exact_value(geometry, state)
    return solved & ~state.terminated, move
