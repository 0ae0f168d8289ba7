"""The backward start-step curriculum (the paper's section 4.2.2, Table 2).

Self-play searches from the start step ``st`` on; earlier moves are the greedy opening policy's. ``st``
starts at a configured move number (default: half the lines) and moves back by ``beta`` after an iteration
when either ``iterations since the last advance >= mit`` or ``mqr >= mqrth and nvr >= nvrth`` (measured on
that iteration's searched positions). At ``st = 0`` stage 2 begins: every move is searched and the value
target becomes ``w z + (1 - w) Q``. Host-side and pure: the state is three integers.
"""

from __future__ import annotations

import dataclasses

from dabjax.config import CurriculumSection


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
