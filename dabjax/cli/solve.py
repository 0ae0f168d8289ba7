"""``dabjax solve`` (also ``python -m dabjax.cli.solve``): the exact value of a position and of each of its moves.

    dabjax solve --board 2x2                                   # the empty board: who wins with perfect play
    dabjax solve --board 3x3 --moves "h 0 0; v 0 1; h 3 2"     # a position, as a move list (dabjax.game.notation)
    dabjax solve --board 5x5 --moves "0 1 2 ..." --seconds 60  # line indices work too; a budget for big boards

Boards of up to 24 lines (3x3, 2x4) are answered from the whole-board retrograde table (built in seconds the first
time, then cached on disk: ``dabjax.solvers.retrograde``); larger ones by the alpha-beta position solver within
``--seconds`` of wall time (``dabjax.solvers.position_solver``), which proves middle-game positions of 5x5 (move 22)
in about a second and the empty 4x4 board in minutes. Both through ``dabjax.evaluation.exact_play.analyse_position``,
the analysis board of ``dabjax serve``. The solver runs on every core (``--threads``, at most 8 by default): a
position it does not prove quickly on one is searched by all of them together, and its per-move searches run side by
side. Exit status 1 when the budget runs out before the position is proved.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from dabjax.cli import run_subcommand, users_input
from dabjax.evaluation import exact_play
from dabjax.game import notation
from dabjax.game.geometry import BoardGeometry, board_geometry, parse_board_size
from dabjax.solvers.labelled import TABLE_LABEL_MAX_LINES
from dabjax.solvers.position_solver import PositionSolver, default_threads, solver_refusal


def result_text(margin: int) -> str:
    """``"wins by 3"``, ``"draws"`` or ``"loses by 1"`` for a final margin of the side to move."""
    return f"wins by {margin}" if margin > 0 else f"loses by {-margin}" if margin < 0 else "draws"


def solve_text(geometry: BoardGeometry, moves: str, seconds: float, threads: int | None = None) -> tuple[str, bool]:
    """``(report, proved)``: the position after ``moves`` (a move list in ``dabjax.game.notation``), the result
    for the side to move under perfect play and every legal line's exact final margin, best first; ``proved``
    False when the solver's budget of ``seconds`` ran out first. ``threads``: the position solver's (None:
    ``default_threads()``, every core)."""
    state = notation.state_from_moves(geometry, moves)
    lines = [notation.render(geometry, state)]
    scores = np.asarray(state.scores)
    if bool(state.terminated):
        lines.append(f"the game is over: A {int(scores[0])} - B {int(scores[1])}")
        return "\n".join(lines), True
    mover = int(state.current_player)
    solver = None
    if solver_refusal(geometry) is None and geometry.num_lines > TABLE_LABEL_MAX_LINES:
        solver = PositionSolver(geometry, threads=default_threads() if threads is None else threads)
    analysis = exact_play.analyse_position(geometry, np.asarray(state.lines), int(state.margin), seconds, solver)
    label = notation.PLAYER_LABELS[mover]
    if not analysis.finished:
        lines.append(f"not proved within {seconds:g} s by the position solver: raise --seconds, or solve a later "
                     "position")
        return "\n".join(lines), False
    legal = ~np.asarray(state.lines)
    best = int(analysis.final_margins[legal].max())
    lines.append(f"{label} to move {result_text(best)} with perfect play (final margin {best:+d}; "
                 f"{analysis.source}, {analysis.seconds:.1f} s)")
    lines.append(f"each line's final margin for {label} (* keeps the best result, ! the best margin):")
    order = sorted(np.flatnonzero(legal), key=lambda line: (-int(analysis.final_margins[line]), int(line)))
    for line in order:
        marks = ("*" if analysis.best_result[line] else " ") + ("!" if analysis.best_margin[line] else " ")
        lines.append(f"  {notation.move_name(geometry, int(line)):<8} (line {int(line):>2})  "
                     f"{int(analysis.final_margins[line]):+3d} {marks}".rstrip())
    return "\n".join(lines), True


def cmd_solve(args) -> int:
    with users_input():
        if not args.seconds > 0:  # NaN too
            raise ValueError(f"--seconds must be > 0, got {args.seconds}")
        if args.threads is not None and args.threads < 1:
            raise ValueError(f"--threads must be at least 1, got {args.threads}")
        geometry = board_geometry(*parse_board_size(args.board))
        notation.state_from_moves(geometry, args.moves)  # read here, so that only a bad move list is the user's
    text, proved = solve_text(geometry, args.moves, args.seconds, args.threads)
    print(text)
    return 0 if proved else 1


def build_parser(prog: str = "python -m dabjax.cli.solve") -> argparse.ArgumentParser:
    """The ``solve`` command's parser."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--board", required=True, help="board size RxC in boxes, e.g. 3x3")
    parser.add_argument("--moves", default="",
                        help="the position as the moves played from the empty board: 'h R C' / 'v R C' or line "
                             "indices, separated by ';' (indices also by spaces); default: the empty board")
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="the position solver's wall-time budget, for boards over 24 lines (default 10)")
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help="the position solver's threads (default: every core, at most 8)")
    parser.set_defaults(handler=cmd_solve)
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m dabjax.cli.solve") -> int:
    """The ``solve`` command; returns its exit status (1: not proved in time; 2: a bad board or move list)."""
    return run_subcommand(build_parser(prog).parse_args(argv), prog)


if __name__ == "__main__":
    sys.exit(main())
