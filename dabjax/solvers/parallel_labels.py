"""Labels positions with the position solver on several cores (``dabjax.solvers.labelled.build_set``).

The positions are cut into chunks of consecutive positions, solved by worker processes started with "spawn"
(the parent has imported JAX, which runs threads: a forked child could inherit a held lock). Each worker
keeps one ``PositionSolver`` (numba loads its compiled code per process; a 134 MB transposition table per
worker) for all the chunks it gets, so its table persists between positions as in the one-process build.
Labels are exact whatever the table holds, so the set equals the one-process build, position for position,
except where a position's ``time_limit`` runs out in one build and not in the other.

This module holds only NumPy and solver code: the workers never sample positions or run JAX (they import it,
as every ``dabjax`` module does through ``dabjax/__init__``: part of their start, docs/lab/solver.md,
"Speeds").
"""

from __future__ import annotations

import concurrent.futures
import math
import multiprocessing
import signal
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterator

import numpy as np

from dabjax.game.geometry import board_geometry
from dabjax.solvers import position_solver, retrograde

# Chunks per worker (at least): small enough that the workers finish together, large enough that the
# inter-process traffic (a few KB a chunk) is nothing next to the solving.
_CHUNKS_PER_WORKER = 8
_MAX_CHUNK = 16

_solver: position_solver.PositionSolver | None = None  # the worker's own solver (set by ``_start_worker``)


def empty_labels(count: int, num_lines: int) -> dict[str, np.ndarray]:
    """The label arrays of ``count`` positions before solving: ``finished`` bool ``[N]``, ``value`` int8
    ``[N]``, ``best_margin`` and ``best_result`` bool ``[N, L]``, ``move_values`` int8 ``[N, L]``
    (``retrograde.ILLEGAL`` where not computed)."""
    return {
        "finished": np.zeros(count, bool),
        "value": np.zeros(count, np.int8),
        "best_margin": np.zeros((count, num_lines), bool),
        "best_result": np.zeros((count, num_lines), bool),
        "move_values": np.full((count, num_lines), retrograde.ILLEGAL, np.int8),
    }


def solve_into(solver: position_solver.PositionSolver, labels: dict, i: int, lines: np.ndarray, margin: int,
               move_values: bool, time_limit: float) -> float:
    """Solves one position (bool ``[L]`` lines, the mover's margin so far) and writes its labels at index
    ``i`` of ``labels`` (``empty_labels``); returns the seconds it took."""
    solution = solver.solve(lines, margin, move_values=move_values, time_limit=time_limit)
    labels["finished"][i] = solution.finished
    if solution.finished:
        labels["value"][i] = solution.value
        labels["best_margin"][i] = solution.best_margin_moves
        labels["best_result"][i] = solution.best_result_moves
        if move_values:
            labels["move_values"][i] = solution.move_values
    return solution.seconds


def _start_worker(rows: int, cols: int) -> None:
    global _solver
    # Ctrl-C in a terminal reaches every process of the group: the parent alone decides (it stops the build
    # and ends the workers), so a worker never dies half-way through a chunk with a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    geometry = board_geometry(rows, cols)
    # numba compiles the search kernel in each new process: here, not inside the first position's time limit.
    position_solver.compile_kernels(geometry)
    _solver = position_solver.PositionSolver(geometry)


def _solve_chunk(lines: np.ndarray, margin: np.ndarray, move_values: bool, time_limit: float) -> dict:
    """In a worker: ``empty_labels`` of the chunk's ``K`` positions (bool ``[K, L]``, int ``[K]``), solved."""
    labels = empty_labels(lines.shape[0], lines.shape[1])
    for i in range(lines.shape[0]):
        solve_into(_solver, labels, i, lines[i], int(margin[i]), move_values, time_limit)
    return labels


def chunk_bounds(move_numbers: np.ndarray, workers: int) -> list[tuple[int, int]]:
    """``[start, stop)`` ranges covering ``N`` positions in order (int ``[N]`` move numbers, grouped): chunks
    never span two move numbers (positions of one move number cost alike, so a chunk's time is predictable)
    and hold at most ``_MAX_CHUNK`` positions, and about ``_CHUNKS_PER_WORKER`` per worker of a move number's
    positions, so that no worker is left alone with a long last chunk and an interrupted build loses little."""
    move_numbers = np.asarray(move_numbers)
    bounds = []
    group_start = 0
    while group_start < move_numbers.shape[0]:
        group_stop = group_start + 1
        while group_stop < move_numbers.shape[0] and move_numbers[group_stop] == move_numbers[group_start]:
            group_stop += 1
        count = group_stop - group_start
        size = max(1, min(_MAX_CHUNK, math.ceil(count / (workers * _CHUNKS_PER_WORKER))))
        bounds.extend((start, min(start + size, group_stop)) for start in range(group_start, group_stop, size))
        group_start = group_stop
    return bounds


def solve_chunks(
    rows: int,
    cols: int,
    lines: np.ndarray,
    margin: np.ndarray,
    move_numbers: np.ndarray,
    bounds: list[tuple[int, int]],
    *,
    workers: int,
    move_values: bool,
    time_limit: float,
) -> Iterator[tuple[int, int, dict[str, np.ndarray]]]:
    """Solves the chunks ``bounds`` (``[start, stop)`` ranges) of ``N`` positions (bool ``[N, L]`` lines, int
    ``[N]`` margins and move numbers), yielding ``(start, stop, labels)`` for each chunk as it is done
    (``empty_labels`` of its positions; in the order the chunks finish), in ``workers`` processes (1: in this
    process, in the order given).

    Raises RuntimeError naming the chunk's positions and move numbers when a worker fails or dies. Closing
    the generator (e.g. on KeyboardInterrupt in the consumer) cancels the chunks not yet started.
    """
    count = lines.shape[0]
    if workers == 1:
        geometry = board_geometry(rows, cols)
        if bounds:  # compiled before the first position's time limit starts (``_start_worker``)
            position_solver.compile_kernels(geometry)
        solver = position_solver.PositionSolver(geometry)
        for start, stop in bounds:
            chunk = empty_labels(stop - start, lines.shape[1])
            for i in range(start, stop):
                solve_into(solver, chunk, i - start, lines[i], int(margin[i]), move_values, time_limit)
            yield start, stop, chunk
        return
    if not bounds:
        return
    context = multiprocessing.get_context("spawn")
    pool = concurrent.futures.ProcessPoolExecutor(min(workers, len(bounds)), mp_context=context,
                                                  initializer=_start_worker, initargs=(rows, cols))
    finished = False
    try:
        futures = {pool.submit(_solve_chunk, lines[start:stop], margin[start:stop], move_values, time_limit):
                   (start, stop) for start, stop in bounds}
        for future in concurrent.futures.as_completed(futures):
            start, stop = futures[future]
            try:
                chunk = future.result()
            except Exception as error:  # the worker's traceback is chained (concurrent.futures)
                numbers = sorted({int(n) for n in move_numbers[start:stop]})
                why = ("a worker process died (out of memory? each holds a 134 MB table)"
                       if isinstance(error, BrokenProcessPool) else f"{type(error).__name__}: {error}")
                raise RuntimeError(f"labelling positions {start}..{stop - 1} of {count} (move numbers "
                                   f"{numbers}) failed in a worker process: {why}") from error
            yield start, stop, chunk
        finished = True
    finally:
        if finished:
            pool.shutdown(wait=True)
        else:  # stopped (Ctrl-C, an error, the consumer gone): end the workers now, not after their chunks
            workers_running = list(getattr(pool, "_processes", {}).values())  # no public way to end them
            pool.shutdown(wait=False, cancel_futures=True)
            for process in workers_running:
                process.terminate()


def solve_parallel(
    rows: int,
    cols: int,
    lines: np.ndarray,
    margin: np.ndarray,
    move_numbers: np.ndarray,
    *,
    workers: int,
    move_values: bool,
    time_limit: float,
    progress: Callable[[str], None] | None = None,
) -> dict[str, np.ndarray]:
    """``empty_labels`` of ``N`` positions (bool ``[N, L]`` lines, int ``[N]`` margins and move numbers),
    solved by ``workers`` processes (``solve_chunks``), in the positions' order. ``progress`` receives a line
    per finished chunk."""
    count, num_lines = lines.shape
    labels = empty_labels(count, num_lines)
    done = 0
    for start, stop, chunk in solve_chunks(rows, cols, lines, margin, move_numbers,
                                           chunk_bounds(move_numbers, workers), workers=workers,
                                           move_values=move_values, time_limit=time_limit):
        for name, value in chunk.items():
            labels[name][start:stop] = value
        done += stop - start
        if progress is not None:
            progress(f"move {move_numbers[start]}: {done}/{count} solved ({workers} workers; this chunk of "
                     f"{stop - start}: {int((~chunk['finished']).sum())} unfinished)")
    return labels
