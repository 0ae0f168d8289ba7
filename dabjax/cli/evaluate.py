"""``dabjax evaluate COMMAND`` (also ``python evaluate.py COMMAND`` in a clone, ``python -m dabjax.cli.evaluate``):
arena and Elo ratings (with pictures of its games), Elo over training, accuracy by move number, training plots,
and play in the terminal or in the browser (``dabjax arena``, ``dabjax play`` and ``dabjax serve`` are shortcuts).
See docs/evaluate.md, docs/watch_and_play.md and docs/cli.md.

Agents (``--agents``, ``--opponent``, ``--anchors``): the same specs for every command, arena, play and serve alike,
made by ``dabjax.evaluation.agent_registry.make_agent`` (its ``SPEC_HELP``: random | level1 | level2 | greedy |
mcts:SIMS | alphabeta:DEPTH | solver | ckpt:PATH[:SIMS] | pretrained:RxC[:SIMS] | td:PATH |
mcts-net:PATH:SIMS:THRESHOLD | openspiel-mcts:SIMS, each optionally +exact[:SECONDS]; ckpt:, pretrained: and
alphabeta: optionally on a clock, @Ns). ``arena --seconds-per-move N`` puts every agent that takes a clock on one.
"""

from __future__ import annotations

import argparse
import csv
import json
import pathlib
import re
import sys
import time

import jax
import numpy as np
from tqdm import tqdm

from dabjax import package_data
from dabjax.cli import DEBUG_FLAG_HELP, run_subcommand, users_input
from dabjax.evaluation import agent_registry, arena, elo
from dabjax.game import env as env_lib
from dabjax.game import record
from dabjax.game.geometry import board_geometry, parse_board_size
from dabjax.runs import run_dir as run_dir_lib
from dabjax.solvers import labelled

AGENT_HELP = agent_registry.SPEC_HELP


# --- output helpers -------------------------------------------------------------------------------------


def format_table(rows: list[dict], columns: list[str]) -> str:
    """A fixed-width text table of ``rows`` (dicts) with the given columns; floats to 3 significant places."""

    def cell(value):
        if isinstance(value, float):
            return "nan" if np.isnan(value) else f"{value:.3g}" if abs(value) < 10 else f"{value:.0f}"
        return str(value)

    cells = [[cell(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


def write_csv(path: pathlib.Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def write_json(path: pathlib.Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def _geometry(text: str):
    return board_geometry(*parse_board_size(text))


def _split(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def elo_rows(fit: elo.EloFit, games: np.ndarray, points: np.ndarray) -> list[dict]:
    """Rows sorted by Elo: name, Elo, 95% interval, games and score share."""
    rows = []
    for i, name in enumerate(fit.names):
        played = games[i].sum()
        rows.append(dict(agent=name, elo=round(float(fit.ratings[i]), 1), ci_low=round(float(fit.ci_low[i]), 1),
                         ci_high=round(float(fit.ci_high[i]), 1), games=int(played),
                         score=float(points[i].sum() / played) if played else float("nan")))
    return sorted(rows, key=lambda r: -r["elo"])


def rate(names: list[str], pairs: list[arena.PairResult], anchor: str | None, prior_draws: float):
    games, points = elo.tables_from_results(
        names, [(p.name_a, p.name_b, p.result.wins, p.result.draws, p.result.losses) for p in pairs]
    )
    fit = elo.fit_elo(names, games, points, anchor=anchor, prior_draws=prior_draws)
    return fit, elo_rows(fit, games, points)


def _play_with_progress(geometry, agents, pairs, args, description: str) -> list[arena.PairResult]:
    bar = tqdm(total=len(pairs), desc=description, unit="pair")

    def done(pair: arena.PairResult):
        bar.set_postfix_str(f"{pair.name_a} vs {pair.name_b}: {pair.result.score:.2f}")
        bar.update()

    try:
        return arena.play_pairings(env_lib.Env.of(geometry, args.early_termination), agents, pairs,
                                   jax.random.PRNGKey(args.seed), args.games, args.openings, on_pair_done=done)
    finally:
        bar.close()


def positive_seconds(text: str) -> float:
    """argparse type of ``--seconds-per-move``: a finite number of seconds > 0."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"seconds a move must be a number > 0, e.g. 1 or 0.5, got {text!r}")
    return seconds


def on_clock(names: list[str], seconds: float) -> tuple[dict[str, str], list[str], list[str]]:
    """``--seconds-per-move``: every spec whose kind takes a clock (``agent_registry.CLOCK_KINDS``) and has none
    gets ``@Ns``. Returns ``(clocked, no_clock, exact)``: ``{spec: spec@Ns}`` for the specs it changed, the specs
    of kinds that take no clock, and the ``+exact`` specs (they solve on a budget of their own, and ``+exact`` and
    ``@Ns`` do not go together). A spec with a clock of its own keeps it; a malformed spec is left to
    ``make_agent``, which names it."""
    clocked, no_clock, exact = {}, [], []
    for name in names:
        try:
            spec = agent_registry.parse_agent_spec(name)
        except ValueError:
            continue
        if spec.clock_seconds is not None:
            continue  # its own clock wins
        if spec.kind not in agent_registry.CLOCK_KINDS:
            no_clock.append(name)
        elif spec.exact_seconds is not None:
            exact.append(name)
        else:
            clocked[name] = f"{name}{agent_registry.CLOCK_MARK}{seconds:g}s"
    return clocked, no_clock, exact


def prepare_clocks(agents: dict, write=print) -> None:
    """Compiles every clock agent (``ClockAgent.prepare``) before the first move, saying so: it takes seconds to
    minutes, which would otherwise look like a first move that hangs."""
    for name, agent in agents.items():
        if callable(getattr(agent, "prepare", None)):
            write(f"preparing the clock of {name} (compiling its searches) ...")
            agent.prepare()


def clock_summaries(agents: dict) -> dict[str, str]:
    """``{name: agent.summary()}`` of the agents that keep one (clock agents: moves by source, the slowest move
    against the budget, the ladder, the compile time)."""
    return {name: agent.summary() for name, agent in agents.items() if callable(getattr(agent, "summary", None))}


# --- commands -------------------------------------------------------------------------------------------


def cmd_arena(args) -> int:
    with users_input():
        geometry = _geometry(args.board)
        if args.save_games and not args.out:
            raise ValueError("--save-games needs --out (the games are written to OUT/games/)")
        if args.save_games < 0:
            raise ValueError(f"--save-games must be at least 0, got {args.save_games}")
        names = _split(args.agents)
        vs, anchor = args.vs, args.anchor
        if vs:
            names = [vs] + [n for n in names if n != vs]
        if len(names) < 2:
            raise ValueError(f"--agents needs at least two agents, got {names}")
        if args.seconds_per_move is not None:
            clocked, no_clock, exact = on_clock(names, args.seconds_per_move)
            # --vs and --anchor name the agents as written; they play (and are rated) on the clock
            names = [clocked.get(n, n) for n in names]
            vs, anchor = clocked.get(vs, vs), clocked.get(anchor, anchor)
            if no_clock:
                print(f"played without a clock: {', '.join(no_clock)}")
            if exact:
                print(f"played without a clock, on their +exact budget (for a clock write SPEC@Ns instead): "
                      f"{', '.join(exact)}")
        agents = agent_registry.make_agents(names, geometry)
        anchor = anchor or ("random" if "random" in names else names[0])
        if anchor not in names:
            raise ValueError(f"--anchor {anchor!r} is not one of the agents {names}")
    pairs = arena.one_vs_many_pairs(vs, names) if vs else arena.round_robin_pairs(names)
    prepare_clocks(agents)  # outside the match's time
    start = time.time()
    results = _play_with_progress(geometry, agents, pairs, args, f"{geometry.name} arena")
    seconds = time.time() - start
    clocks = clock_summaries(agents)
    fit, ratings = rate(names, results, anchor, args.prior_draws)
    pair_rows = [p.as_row() for p in results]
    print(format_table(pair_rows, ["agent_a", "agent_b", "games", "wins", "draws", "losses", "score", "mean_margin"]))
    print()
    print(f"Elo (anchor {anchor} = 0, 95% CI from the observed Fisher information):")
    print(format_table(ratings, ["agent", "elo", "ci_low", "ci_high", "games", "score"]))
    print(f"\n{len(results)} pairings x {args.games} games on {geometry.name} in {seconds:.0f} s")
    if clocks:
        print("clocks:")
        for line in clocks.values():
            print(f"  {line}")
    if args.out:
        out = pathlib.Path(args.out)
        settings = dict(board=geometry.name, agents=names, vs=vs, games_per_pair=args.games,
                        openings=args.openings, early_termination=args.early_termination, seed=args.seed,
                        anchor=anchor, prior_draws=args.prior_draws, seconds_per_move=args.seconds_per_move,
                        seconds=seconds, command=" ".join(sys.argv))
        write_json(out / "arena.json", dict(settings=settings, pairs=pair_rows, elo=ratings, clocks=clocks))
        write_csv(out / "pairs.csv", pair_rows)
        write_csv(out / "elo.csv", ratings)
        print(f"wrote {out / 'arena.json'}, {out / 'pairs.csv'}, {out / 'elo.csv'}")
        if args.save_games:
            for pair in results:
                folder = save_games(env_lib.Env.of(geometry, args.early_termination), pair, args.save_games,
                                    out / "games", args.game_format)
                print(f"wrote {min(args.save_games, pair.result.games)} games of {pair.name_a} vs {pair.name_b} "
                      f"to {folder}")
    return 0


def _file_name(text: str) -> str:
    """An agent spec as a file name: ``ckpt:runs/a:32`` -> ``ckpt_runs_a_32``."""
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_") or "agent"


def save_games(env: env_lib.Env, pair: arena.PairResult, count: int, root: pathlib.Path,
               game_format: str) -> pathlib.Path:
    """Writes the first ``count`` games of a pairing (played in ``env``) under ``root/A-vs-B/``: ``game-K.gif``
    (animated) or ``game-K/move-NNN.png`` (``game_format`` gif / frames), and ``games.json`` with each game's
    record."""
    geometry = env.geometry
    from dabjax.evaluation import render
    from dabjax.game import notation

    folder = root / f"{_file_name(pair.name_a)}-vs-{_file_name(pair.name_b)}"
    games = pair.games
    records = []
    for number in range(min(count, len(games.histories))):
        seat_a = int(games.a_player[number])
        names = (pair.name_a, pair.name_b) if seat_a == 0 else (pair.name_b, pair.name_a)
        moves = games.histories[number]
        scenes = render.game_scenes(geometry, record.replay(env, moves), names)
        if game_format == "gif":
            written = render.write_gif(folder / f"game-{number}.gif", scenes)
        else:
            written = render.write_frames(folder / f"game-{number}", scenes)[0].parent
        records.append(dict(game=number, file=written.name, players=list(names), moves=moves,
                            move_names=[notation.move_name(geometry, m) for m in moves],
                            opening_moves=games.opening_moves, scores=games.scores[number].tolist()))
    write_json(folder / "games.json", dict(board=geometry.name, agent_a=pair.name_a, agent_b=pair.name_b,
                                           games=records))
    return folder


def cmd_elo_curve(args) -> int:
    from dabjax.evaluation import plots
    geometry, anchors, agents, points = _elo_curve_agents(args)
    pairs = arena.round_robin_pairs(anchors)
    pairs += [(name, anchor) for curve in points.values() for name, _, _ in curve for anchor in anchors]
    results = _play_with_progress(geometry, agents, pairs, args, "Elo over training")
    fit, ratings = rate(list(agents), results, anchors[0], args.prior_draws)
    print(format_table(ratings, ["agent", "elo", "ci_low", "ci_high", "games", "score"]))
    curves = {}
    for label, curve in points.items():
        index = [fit.names.index(name) for name, _, _ in curve]
        curves[label] = dict(iteration=[it for _, it, _ in curve], wall_time=[w for _, _, w in curve],
                             elo=fit.ratings[index].tolist(), ci_low=fit.ci_low[index].tolist(),
                             ci_high=fit.ci_high[index].tolist())
    out = pathlib.Path(args.out)
    png = plots.plot_elo_curves(curves, out / "elo_curve.png", {a: fit.rating(a) for a in anchors})
    write_json(out / "elo_curve.json", dict(anchors=anchors, curves=curves, elo=ratings,
                                            pairs=[p.as_row() for p in results]))
    write_csv(out / "elo_curve.csv", [
        dict(run=label, iteration=it, wall_time=w, elo=e, ci_low=lo, ci_high=hi)
        for label, c in curves.items()
        for it, w, e, lo, hi in zip(c["iteration"], c["wall_time"], c["elo"], c["ci_low"], c["ci_high"])
    ])
    print(f"wrote {png}, {out / 'elo_curve.json'}, {out / 'elo_curve.csv'}")
    return 0


def _elo_curve_agents(args):
    """``elo-curve``'s board, anchors, agents (the anchors' and every rated checkpoint's, by name) and curve
    points ``{label: [(agent name, iteration, wall time)]}``; errors are the user's (``users_input``)."""
    from dabjax.training import checkpoint as checkpoint_lib  # the trainer's module
    with users_input():
        geometry = _geometry(args.board)
        runs = [pathlib.Path(r) for r in args.runs]
        labels = _split(args.labels) if args.labels else [r.name for r in runs]
        if len(labels) != len(runs):
            raise ValueError(f"--labels names {len(labels)} runs but {len(runs)} run directories were given")
        anchors = _split(args.anchors)
        agents = agent_registry.make_agents(anchors, geometry)
        points: dict[str, list[tuple[str, int, float]]] = {}
        for label, run in zip(labels, runs):
            checkpoints = checkpoint_lib.list_checkpoints(run)
            if not checkpoints:
                raise FileNotFoundError(f"run {run} has no checkpoints under {run / 'checkpoints'}")
            points[label] = []
            for iteration, path, wall_time in checkpoints[:: args.every]:
                name = f"{label}@{iteration}"
                spec = f"ckpt:{path}" + (f":{args.sims}" if args.sims is not None else "")
                agents[name] = agent_registry.make_agent(spec, geometry)
                points[label].append((name, int(iteration), float(wall_time)))
    return geometry, anchors, agents, points


def cmd_accuracy(args) -> int:
    from dabjax.evaluation import plots
    with users_input():
        data = labelled.load(package_data.labelled_set_file(args.set))
        geometry = data.geometry
        if args.board and _geometry(args.board) != geometry:
            raise ValueError(f"--board {args.board} does not match the labelled set {args.set} ({geometry.name})")
        names = _split(args.agents)
        agents = agent_registry.make_agents(names, geometry)
    key = jax.random.PRNGKey(args.seed)
    results = {}
    for name in tqdm(names, desc="accuracy", unit="agent"):
        results[name] = labelled.accuracy_by_move_number(agents[name], data, key, args.batch_size)
    numbers = results[names[0]].move_numbers
    table = [dict(move=int(n), positions=int(results[names[0]].count[i]),
                  **{name: float(results[name].best_result[i]) for name in names})
             for i, n in enumerate(numbers)]
    print(f"best-result move share by move number ({args.set}, {len(data)} positions):")
    print(format_table(table, ["move", "positions"] + names))
    overall = {name: float(np.average(results[name].best_result, weights=results[name].count)) for name in names}
    print("overall: " + ", ".join(f"{n} {v:.3f}" for n, v in overall.items()))
    out = pathlib.Path(args.out)
    long_rows = [dict(agent=name, move=int(n), positions=int(acc.count[i]), best_result=float(acc.best_result[i]),
                      best_margin=float(acc.best_margin[i]), mean_margin_loss=float(acc.mean_margin_loss[i]),
                      illegal=int(acc.illegal[i]))
                 for name, acc in results.items() for i, n in enumerate(acc.move_numbers)]
    write_csv(out / "accuracy.csv", long_rows)
    write_json(out / "accuracy.json", dict(set=str(args.set), overall_best_result=overall, rows=long_rows))
    png = plots.plot_accuracy({n: r.move_numbers for n, r in results.items()},
                              {n: r.best_result for n, r in results.items()}, out / "accuracy.png")
    print(f"wrote {png}, {out / 'accuracy.csv'}, {out / 'accuracy.json'}")
    return 0


def cmd_plots(args) -> int:
    from dabjax.evaluation import plots
    run = pathlib.Path(args.run)
    with users_input():
        metrics = run_dir_lib.read_metrics(run)
    out = pathlib.Path(args.out) if args.out else (run if run.is_dir() else run.parent) / "plots"
    for png in plots.plot_training(metrics, out):
        print(f"wrote {png}")
    return 0


def cmd_play(args) -> int:
    from dabjax.cli import play

    with users_input():
        geometry = _geometry(args.board)
        agent = agent_registry.make_agent(args.opponent, geometry)
    human = 0 if args.first == "human" else 1
    prepare_clocks({args.opponent: agent})
    play.play_game(geometry, agent, human_player=human, seed=args.seed, agent_name=args.opponent)
    for line in clock_summaries({args.opponent: agent}).values():
        print(line)
    return 0


def cmd_serve(args) -> int:
    from dabjax.cli import serve

    with users_input():
        geometry = _geometry(args.board)
    serve.serve(geometry, args.opponent, host=args.host, port=args.port, seed=args.seed,
                human_first=args.first == "human", open_browser=args.open)
    return 0


# --- the parser -----------------------------------------------------------------------------------------


def build_parser(prog: str = "evaluate.py") -> argparse.ArgumentParser:
    """The ``evaluate`` command's parser (``prog``: how the usage lines name the command)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Evaluate Dots-and-Boxes agents: arena with Elo ratings, Elo over training, accuracy by "
                    "move number, training plots, and play in the terminal or the browser. Boards count boxes "
                    "(3x3 = 24 lines).",
        epilog=f"Agents: {AGENT_HELP}. Run '{prog} COMMAND --help' for a command's options.",
    )
    parser.add_argument("--debug", action="store_true", help=DEBUG_FLAG_HELP)
    # Each command takes --debug after its name too; SUPPRESS leaves the value given before it alone.
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_FLAG_HELP)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_command in (_add_arena, _add_elo_curve, _add_accuracy, _add_plots, _add_play, _add_serve):
        add_command(commands, [debug])
    return parser


def _add_match_options(p: argparse.ArgumentParser, games: int) -> None:
    """The options of the commands that play matches (arena, elo-curve): board, games, openings, the Elo fit."""
    p.add_argument("--board", default="3x3", help="board size RxC in boxes (default 3x3)")
    p.add_argument("--games", type=int, default=games, help=f"games per pairing, even (default {games})")
    p.add_argument("--openings", type=int, default=2,
                   help="random lines opening every game, each opening played with both seats (default 2)")
    p.add_argument("--early-termination", action="store_true",
                   help="end a game once a player holds more than half of the boxes")
    p.add_argument("--prior-draws", type=float, default=0.5,
                   help="virtual draws added per pairing in the Elo fit (keeps all-win records finite)")
    p.add_argument("--seed", type=int, default=0)


def _add_human_game_options(p: argparse.ArgumentParser) -> None:
    """The options of the commands where a person plays an agent (play, serve)."""
    p.add_argument("--board", default="3x3", help="board size RxC in boxes (default 3x3)")
    p.add_argument("--opponent", default="greedy", help=f"the agent to play (default greedy): {AGENT_HELP}")
    p.add_argument("--first", choices=("human", "agent"), default="human",
                   help="who moves first (default human)")
    p.add_argument("--seed", type=int, default=0)


def _add_arena(commands, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "arena", parents=parents, help="round robin (or one vs many) with Elo ratings; JSON and CSV results",
        description="Plays every pair of --agents (or --vs AGENT against each of the others), the first player "
                    "alternating, and fits Elo ratings by maximum likelihood (Bradley-Terry, draws = half "
                    "points) with 95%% confidence intervals.")
    p.add_argument("--agents", required=True, help=f"comma-separated agents: {AGENT_HELP}")
    p.add_argument("--vs", help="one-vs-many: this agent plays each of --agents (default: round robin)")
    p.add_argument("--anchor", help="agent rated 0 (default: random if present, else the first agent)")
    p.add_argument("--out", help="directory for arena.json, pairs.csv and elo.csv")
    p.add_argument("--save-games", type=int, default=0, metavar="N",
                   help="also draw the first N games of each pairing into OUT/games/A-vs-B/ (default 0)")
    p.add_argument("--game-format", choices=("gif", "frames"), default="gif",
                   help="saved games as animated GIFs or as one PNG per move (default gif)")
    clock_kinds = ", ".join(k + ":" for k in agent_registry.CLOCK_KINDS)
    p.add_argument("--seconds-per-move", type=positive_seconds, metavar="N",
                   help=f"put every agent that takes a clock ({clock_kinds}) and has none on one: SPEC becomes "
                        f"SPEC@Ns (about N seconds a move at most); the others play as they are, and are named. "
                        f"The clock agents' slowest moves are printed at the end")
    _add_match_options(p, 100)
    p.set_defaults(handler=cmd_arena)


def _add_elo_curve(commands, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "elo-curve", parents=parents,
        help="rate a run's checkpoints against fixed anchors; plot Elo over iterations and time",
        description="Each checkpoint of each RUN plays every anchor; anchors play each other; one Elo fit "
                    "(first anchor = 0). Writes elo_curve.png/.json/.csv (the paper's Figures 8, 10, 13).")
    p.add_argument("runs", nargs="+", help="run directories (with checkpoints/<iteration>/)")
    p.add_argument("--labels", help="comma-separated curve labels, one per run (default: directory names)")
    p.add_argument("--anchors", default="random,level2,mcts:200",
                   help="comma-separated anchor agents, the first rated 0 (default random,level2,mcts:200)")
    p.add_argument("--sims", type=int, help="simulations for the checkpoints (default: their config; 0 = raw policy)")
    p.add_argument("--every", type=int, default=1, help="rate every K-th checkpoint (default 1)")
    p.add_argument("--out", default="elo_curve", help="output directory (default ./elo_curve)")
    _add_match_options(p, 40)
    p.set_defaults(handler=cmd_elo_curve)


def _add_accuracy(commands, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "accuracy", parents=parents, help="share of optimal moves by move number on a labelled set (Tables 3, 4)",
        description="For each agent, the share of positions (per move number) where it plays a best-result "
                    "move, a best-margin move, and its mean margin loss; table, CSV, JSON and a PNG plot.")
    p.add_argument("--set", default="3x3",
                   help="labelled set: a built-in set's name (3x3, 4x4, 5x5) or a .npz file (default 3x3)")
    p.add_argument("--agents", required=True, help=f"comma-separated agents: {AGENT_HELP}")
    p.add_argument("--board", help="optional check: must match the set's board")
    p.add_argument("--batch-size", type=int, default=1024, help="positions per agent call")
    p.add_argument("--out", default="accuracy", help="output directory (default ./accuracy)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=cmd_accuracy)


def _add_plots(commands, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "plots", parents=parents,
        help="training figures from a run's metrics.jsonl (losses, st, mqr/nvr, replay heat map, evaluation)",
        description="Writes losses.png, start_step.png, mqr_nvr.png, samples_by_move.png (Figure 11) and, when "
                    "the run evaluated itself, evaluation.png.")
    p.add_argument("run", help="run directory (or its metrics.jsonl)")
    p.add_argument("--out", help="output directory (default RUN/plots)")
    p.set_defaults(handler=cmd_plots)


def _add_play(commands, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "play", parents=parents, help="play against an agent in the terminal",
        description="Moves: 'h R C' (horizontal line, R = dot row 0..rows, C = 0..cols-1), 'v R C' (vertical "
                    "line, R = 0..rows-1, C = dot column 0..cols) or the OpenSpiel line index. Commands: "
                    "moves, help, quit. Illegal or malformed moves are refused with the reason.")
    _add_human_game_options(p)
    p.set_defaults(handler=cmd_play)


def _add_serve(commands, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "serve", parents=parents, help="play against an agent in the browser (a local web page)",
        description="Starts a local web server and prints its URL. The page shows the board; click a line to "
                    "draw it, the agent answers. Scores, whose turn it is and the result are shown, illegal "
                    "clicks are refused with the reason, a new game can start with either side first, and the "
                    "top moves of a search agent's search (mcts:SIMS, ckpt:PATH, pretrained:RxC) can be shown, and "
                    "the agent put on a clock of N seconds a move (ckpt:, pretrained: and alphabeta: agents).")
    _add_human_game_options(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 = any free port)")
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    p.set_defaults(handler=cmd_serve)


def main(argv: list[str] | None = None, prog: str = "evaluate.py") -> int:
    """The ``evaluate`` command; returns its exit status (2: a user's mistake, named on stderr; another failure
    is one line, ``dabjax.cli.run_guarded``)."""
    args = build_parser(prog).parse_args(argv)
    for name in ("games",):
        value = getattr(args, name, None)
        if value is not None and (value < 2 or value % 2):
            print(f"error: --games must be even and at least 2 (the first player alternates), got {value}",
                  file=sys.stderr)
            return 2
    return run_subcommand(args, prog)


if __name__ == "__main__":
    sys.exit(main(prog="python -m dabjax.cli.evaluate"))
