"""The backward start-step curriculum (the paper's section 4.2.2, Table 2).

Self-play searches from the start step ``st`` on; earlier moves are the greedy opening policy's. ``st``
starts at a configured move number (default: half the lines) and moves back by ``beta`` after an iteration
when either ``iterations since the last advance >= mit`` or ``mqr >= mqrth and nvr >= nvrth`` (measured on
that iteration's searched positions). At ``st = 0`` stage 2 begins: every move is searched and the value
target becomes ``w z + (1 - w) Q``. Host-side and pure: the state is three integers.

Revisiting (``revisit``, not in the paper): a share of each iteration's games starts its search at a start
step drawn uniformly from ``[st, initial st]`` instead of ``st``, so positions reached by the greedy opening
at every stage already passed keep coming into the buffer. Without it, once ``st`` has moved back the
middle-game positions come only from the network's own play, and on 3x3 its value is much less accurate on
the greedy opening's positions than on its own (measured, with what revisiting changed: docs/lab/training.md,
"Revisiting earlier start steps")."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from dabjax.training.config import CurriculumSection


@dataclasses.dataclass(frozen=True)
class CurriculumState:
    start_step: int
    last_advance: int  # iteration of the last advance (or of the start)

    @property
    def stage(self) -> int:
        return 2 if self.start_step == 0 else 1


def advance(
    config: CurriculumSection, state: CurriculumState, iteration: int, mqr: float, nvr: float
) -> tuple[CurriculumState, bool]:
    """The state after ``iteration`` (whose ratios are ``mqr``, ``nvr``), and whether ``st`` moved back."""
    if state.start_step == 0 or not config.backward:
        return state, False
    stuck = iteration + 1 - state.last_advance >= config.max_iterations_per_step
    ready = mqr >= config.mq_ratio_threshold and nvr >= config.nv_ratio_threshold
    if not (stuck or ready):
        return state, False
    return CurriculumState(start_step=max(0, state.start_step - config.beta), last_advance=iteration + 1), True


def game_start_steps(
    key: jax.Array, start_step: jax.Array, initial_start_step: int, num_games: int, revisit: float
) -> jax.Array:
    """int32 ``[num_games]``: each game's start step. A share ``revisit`` of the games (each independently)
    gets a uniform draw from ``[start_step, initial_start_step]``, the rest ``start_step`` (int32 ``[]``).
    Jit-able."""
    key_pick, key_step = jax.random.split(key)
    start_step = jnp.asarray(start_step, jnp.int32)
    revisiting = jax.random.uniform(key_pick, (num_games,)) < revisit
    upper = jnp.maximum(jnp.int32(initial_start_step), start_step)
    drawn = jax.random.randint(key_step, (num_games,), start_step, upper + 1, jnp.int32)
    return jnp.where(revisiting, drawn, start_step)
