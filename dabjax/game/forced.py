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

import functools

import jax
import jax.numpy as jnp
from flax import struct

from dabjax.game import chains as chains_lib
from dabjax.game import endgame as endgame_lib
from dabjax.game import env as env_lib
from dabjax.game.geometry import BoardGeometry
from dabjax.game.loops import repeat_on_lanes, repeat_while


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


@struct.dataclass
class _CaptureSets:
    """The forced-capture rule on bit boards (uint32 ``[W]`` each): the open sides of the unclaimed boxes
    (four boards), the two-sided boxes, the capturable boxes and the forced ones among them."""

    open_sides: tuple[jax.Array, jax.Array, jax.Array, jax.Array]
    two_sided: jax.Array
    capturable: jax.Array
    forced_box: jax.Array


def _capture_sets(geometry: BoardGeometry, sets: chains_lib.BoxSets, game_over: jax.Array) -> _CaptureSets:
    """Which boxes are capturable and which captures are forced (module docstring), for every box at once:
    walking two boxes on along a chain is a few shifts and logical operations on sets of boxes."""
    across_each_side = functools.partial(chains_lib.across_each_side, geometry)
    open_sides = sets.open_sides
    one, two = chains_lib.side_classes(open_sides)
    capturable = jnp.where(game_over, jnp.uint32(0), one)

    def by_another_side(towards):
        """Plane d: two-sided boxes entered by side d whose other undrawn side is in ``towards``."""
        towards = [plane & near for plane, near in zip(open_sides, towards)]
        return tuple(two & open_sides[side] & chains_lib.union_of_others(towards, side) for side in range(4))

    # From a capturable box b, its only undrawn side l leads to b2; a two-sided b2 leaves by m to b3; a
    # two-sided b3 leaves to b4. Plane d of each set is "entered by side d".
    # b3 is two-sided and does not lead on to a capturable b4:
    goes_on = tuple(two & plane & ~stops for plane, stops in zip(open_sides, by_another_side(across_each_side(one))))
    # b2 is two-sided and leads to such a b3:
    second_leads_on = by_another_side(chains_lib.facing(geometry, goes_on))
    lone = chains_lib.union(plane & ~near for plane, near in zip(open_sides, across_each_side(two)))
    continues = chains_lib.union(
        plane & near for plane, near in zip(open_sides, chains_lib.facing(geometry, second_leads_on))
    )
    return _CaptureSets(
        open_sides=open_sides, two_sided=two, capturable=capturable, forced_box=capturable & (lone | continues)
    )


def _choice(geometry: BoardGeometry, rule: _CaptureSets) -> CaptureChoice:
    forced = chains_lib.any_bit(rule.forced_box)
    # The capture by the lowest-index forced box (or capturable box, when none is forced).
    chosen = chains_lib.lowest_bit(jnp.where(forced, rule.forced_box, rule.capturable))
    take_mask = chains_lib.lines_of_sides(geometry, [plane & chosen for plane in rule.open_sides])
    # Otherwise both lines of every capturable box's pair: its own side l, and the two sides {l, m} of the
    # two-sided box b2 across it (m is the handout).
    option = rule.capturable & ~rule.forced_box
    near_option = chains_lib.across_each_side(geometry, option)
    handout_box = rule.two_sided & chains_lib.union(plane & near for plane, near in zip(rule.open_sides, near_option))
    options = chains_lib.lines_of_sides(geometry, [plane & (option | handout_box) for plane in rule.open_sides])
    return CaptureChoice(
        has_capture=chains_lib.any_bit(rule.capturable),
        forced=forced,
        take=jnp.argmax(take_mask).astype(jnp.int32),
        mask=jnp.where(forced, take_mask, options),
    )


def capture_choice(geometry: BoardGeometry, state: env_lib.State) -> CaptureChoice:
    """Which captures and handouts are worth searching in one position (no component labels needed)."""
    return _choice(geometry, _capture_sets(geometry, chains_lib.box_sets(geometry, state), state.terminated))


def searchable_mask(geometry: BoardGeometry, state: env_lib.State) -> jax.Array:
    """bool ``[L]``: the moves worth searching; the legal moves when no box is capturable."""
    return searchable_from_choice(state, capture_choice(geometry, state))


def searchable_from_choice(state: env_lib.State, choice: CaptureChoice) -> jax.Array:
    """bool ``[L]``: ``searchable_mask`` from the position's ``capture_choice``."""
    return jnp.where(choice.has_capture, choice.mask, state.legal_action_mask)


def is_forced(choice: CaptureChoice) -> jax.Array:
    """bool ``[]``: exactly one move is worth searching (a capture)."""
    return choice.has_capture & choice.forced


@struct.dataclass
class _Settle:
    """The forced-capture loop's carry for one position: the bit boards as captures draw lines, the boxes
    taken, the moves played and boxes gained so far, the rule on the current boards, and the position's own
    figures that tell when the game is over (its end flag, moves, and the mover's and opponent's scores)."""

    sets: chains_lib.BoxSets
    taken: jax.Array
    count: jax.Array
    gained: jax.Array
    rule: _CaptureSets
    terminated: jax.Array
    num_moves: jax.Array
    own: jax.Array
    other: jax.Array


def _settle_start(geometry: BoardGeometry, state: env_lib.State) -> _Settle:
    sets = chains_lib.box_sets(geometry, state)
    player = state.current_player
    return _Settle(sets=sets, taken=jnp.zeros_like(sets.unclaimed), count=jnp.int32(0), gained=jnp.int32(0),
                   rule=_capture_sets(geometry, sets, state.terminated), terminated=state.terminated,
                   num_moves=state.num_moves, own=state.scores[player], other=state.scores[1 - player])


def _settle_going(geometry: BoardGeometry, settle: _Settle) -> jax.Array:
    return chains_lib.any_bit(settle.rule.forced_box) & (settle.count < geometry.num_boxes)


def _settle_step(env: env_lib.Env, settle: _Settle) -> _Settle:
    """One forced capture: the lowest-index forced box (``capture_choice``'s ``take``)."""
    rule, sets = settle.rule, settle.sets
    take = [plane & chains_lib.lowest_bit(rule.forced_box) for plane in rule.open_sides]
    geometry = env.geometry
    drawn = [mine | theirs for mine, theirs in zip(take, chains_lib.facing(geometry, take))]  # both boxes
    undrawn = tuple(plane & ~line for plane, line in zip(sets.undrawn, drawn))
    completed = sets.unclaimed & ~chains_lib.union(undrawn)
    sets = chains_lib.BoxSets(undrawn=undrawn, unclaimed=sets.unclaimed & ~completed)
    count, gained = settle.count + 1, settle.gained + chains_lib.count_bits(completed)
    over = env.ends(settle.terminated | (settle.num_moves + count >= geometry.num_lines),
                    jnp.maximum(settle.own + gained, settle.other))
    return settle.replace(sets=sets, taken=settle.taken | completed, count=count, gained=gained,
                          rule=_capture_sets(geometry, sets, over))


def _settle_end(env: env_lib.Env, state: env_lib.State,
                settle: _Settle) -> tuple[env_lib.State, jax.Array, CaptureChoice]:
    """The state after the loop's captures (rebuilt once, ``env.draw_captures``), their number, and the
    ``capture_choice`` where it stopped."""
    geometry = env.geometry
    lines = ~chains_lib.lines_of_sides(geometry, settle.sets.undrawn)
    after = env.draw_captures(state, lines, chains_lib.unpack(geometry, settle.taken))
    return after, settle.count, _choice(geometry, settle.rule)


def play_forced_moves_with_choice(
    env: env_lib.Env, state: env_lib.State
) -> tuple[env_lib.State, jax.Array, CaptureChoice]:
    """``play_forced_moves``, and the ``capture_choice`` of the position it stops at (the loop has it).

    The loop runs on bit boards (each forced move takes the lowest-index forced box, as ``capture_choice``'s
    ``take``); the state is rebuilt once at the end (``env.draw_captures``).
    """
    settle = repeat_while(functools.partial(_settle_going, env.geometry), functools.partial(_settle_step, env),
                          _settle_start(env.geometry, state), chains_lib.STEPS_PER_TURN)
    return _settle_end(env, state, settle)


def play_forced_moves_on_lanes(
    env: env_lib.Env, states: env_lib.State, lanes: int | None = None
) -> tuple[env_lib.State, jax.Array, CaptureChoice]:
    """``play_forced_moves_with_choice`` on a batch of ``N`` states (``[N]`` results): the loop's first turn on
    the whole batch, then the positions still capturing, gathered into ``lanes`` slots
    (``loops.repeat_on_lanes``; None: the whole batch): the same results, with the batch's few long captures run
    on fewer lanes."""
    batch = states.lines.shape[0]
    start = jax.vmap(functools.partial(_settle_start, env.geometry))(states)
    settle = repeat_on_lanes(functools.partial(_settle_going, env.geometry), functools.partial(_settle_step, env),
                             start, chains_lib.STEPS_PER_TURN, batch if lanes is None else lanes)
    return jax.vmap(lambda s, c: _settle_end(env, s, c))(states, settle)


def play_forced_moves(
    env: env_lib.Env, state: env_lib.State
) -> tuple[env_lib.State, jax.Array]:
    """Plays forced captures until a real decision (or the end): ``(state, number of moves played)``.

    Each forced move captures at least one box, so at most ``B`` moves are played. The player to move is
    unchanged (captures keep the turn).
    """
    state, count, _ = play_forced_moves_with_choice(env, state)
    return state, count


def _solved_after_forced(
    env: env_lib.Env, state: env_lib.State, mover: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Plays forced moves, then (solved, exact final margin for ``mover``) if a simple endgame is reached."""
    after, _ = play_forced_moves(env, state)
    solved, margin = endgame_lib.simple_endgame_margin(env.geometry, after)
    return solved, jnp.where(after.current_player == mover, margin, -margin)


MAX_EXACT_OPTIONS = 4  # Capture positions with more searchable moves are left to the search.


def exact_value(
    env: env_lib.Env, state: env_lib.State
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(solved, margin, best_move)`` for positions that reduce exactly to a simple endgame.

    Solved: terminal states; simple endgames (the opener's move from ``endgame.opener_move``); and capture
    positions with at most ``MAX_EXACT_OPTIONS`` searchable moves each of which, after the forced captures
    that follow, reaches a simple endgame or the end (this decides the controller's keep-or-give-up choice,
    the paper's Theorem 2, by exact values). ``margin`` int32 ``[]`` is the final margin of the player to
    move; ``best_move`` int32 ``[]`` an optimal move (arbitrary at terminal states). With
    the majority rule (``env.early_termination``) the game may stop early, so only the sign of ``margin`` is
    exact there.
    """
    geometry = env.geometry
    components = chains_lib.analyse(geometry, state, only_simple_endgames=True)
    simple, simple_margin = endgame_lib.simple_endgame_margin(geometry, state, components)
    opener = endgame_lib.opener_move(geometry, state, components)
    choice = capture_choice(geometry, state)
    mover = state.current_player
    (candidates,) = jnp.nonzero(choice.mask, size=MAX_EXACT_OPTIONS, fill_value=-1)
    few = choice.mask.sum() <= MAX_EXACT_OPTIONS

    def value_of(action):
        child = env.step(state, jnp.maximum(action, 0))
        solved, margin = _solved_after_forced(env, child, mover)
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
    solved, _, move = exact_value(env_lib.Env.of(geometry), state)
    return solved & ~state.terminated, move
