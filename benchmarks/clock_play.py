"""Play on a clock (``SPEC@Ns``, ``dabjax.evaluation.clock``): what the solver proves in time, equal-time matches, and
the best-result share of a clock agent by move.

    python benchmarks/clock_play.py solve --board 5x5 --moves 16-22 --per-move 10 --limit 5
    python benchmarks/clock_play.py solve --board 4x4 --moves 6-12 --per-move 10 --limit 5
    python benchmarks/clock_play.py match --board 5x5 --agent pretrained:5x5@2s \\
        --opponent pretrained:5x5:4096+exact:2 --games 200
    python benchmarks/clock_play.py match --board 5x5 --agent pretrained:5x5@2s --opponent alphabeta:12@2s
    python benchmarks/clock_play.py accuracy --agent pretrained:4x4@1s --set 4x4 --moves 12-39 --per-move 10
    python benchmarks/clock_play.py bounded --agent pretrained:4x4 --set 4x4 --nodes 20000
    python benchmarks/clock_play.py tree --network pretrained:4x4 --set 4x4 --simulations 64

* ``solve``: positions reached as in the labelled sets (``labelled.sample_positions``), each proven twice on fresh
  solvers of the default threads: the result class (``PositionSolver.prove_result``, with the board's shipped
  network as first guess and move order, as the clock agent runs it) and the exact value with best-margin moves
  (``solve(result_moves=False)``, what ``+exact`` runs). Per move: the share of results proven within 1 s
  ("result"), the share of proofs with a keeping move ("+move") and of exact solves ("margin") finished within 1 s
  and within ``--limit``, the median seconds of each, and the proofs' nodes (``--threads 1``: deterministic).
* ``match``: ``--games`` arena games (first player alternating, ``--opening`` random lines), the agent's wins,
  draws and losses, and each clock agent's slowest move against its budget (compiling before the first move is
  reported apart).
* ``accuracy``: the best-result share by move on a labelled set (``--per-move`` positions of each move number),
  as ``dabjax evaluate accuracy`` scores it (``--no-leaf-proofs``: a clock agent without its proofs of promising
  leaves).
* ``bounded``: whether a bounded proof inside self-play's search would pay: by move, the positions a proof of
  ``--nodes`` nodes settles that the endgame evaluator does not, and among them those the agent's search gets
  wrong (what such a proof could correct at most).

* ``tree``: proven values inside the search tree (``search.proofs``): the network's search at ``--simulations``
  with and without them, on every position of a labelled set (``--per-move`` of each move number with it): the
  best-result share by move, the share of roots the tree proves, and the search's time per position (batches of
  ``--batch``), as self-play would pay it.

Prints figures and writes them to ``--out`` (JSON); not a test. Time it alone on the machine.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import pathlib
import time

import jax
import numpy as np

from dabjax import package_data
from dabjax.cli.label import parse_move_numbers
from dabjax.evaluation import agent_registry, arena, exact_play
from dabjax.evaluation.clock import compiled_forward
from dabjax.game import endgame
from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry, parse_board_size
from dabjax.runs.source_commit import source_commit
from dabjax.search import mcts
from dabjax.solvers import labelled
from dabjax.solvers.position_solver import PositionSolver, default_threads


def _guesses(geometry, positions, network: str | None):
    """``(orders [N, L], guesses [N])``: the network's move order and the sign of its value, or line order and a
    guess of a win without one."""
    count = positions["lines"].shape[0]
    if network is None:
        return np.tile(np.arange(geometry.num_lines), (count, 1)), np.ones(count, int)
    loaded, _ = agent_registry.load_network(network, geometry)
    lines = np.asarray(positions["lines"], bool)
    states = env_lib.State(
        lines=lines, box_owner=np.asarray(positions["box_owner"], np.int8),
        scores=np.asarray(positions["scores"], np.int32),
        current_player=np.asarray(positions["current_player"], np.int32),
        num_moves=lines.sum(1).astype(np.int32), terminated=np.zeros(count, bool), truncated=np.zeros(count, bool),
        legal_action_mask=~lines, rewards=np.zeros((count, 2), np.float32))
    logits, values = jax.device_get(compiled_forward(loaded.network_config, geometry)(loaded.params, states))
    return np.argsort(-logits, axis=1, kind="stable"), np.sign(values).astype(int)


def solve_times(args) -> dict:
    geometry = board_geometry(*parse_board_size(args.board))
    moves = parse_move_numbers(args.moves)
    threads = args.threads or default_threads()
    exact_play.compile_solver_kernels(geometry)
    positions = labelled.sample_positions(geometry, moves, args.per_move, seed=args.seed)
    network = args.network or (f"pretrained:{geometry.name}" if geometry.name in ("4x4", "5x5") else None)
    orders, guesses = _guesses(geometry, positions, network)
    print(f"{geometry.name}: result class (prove_result, guess and order from {network}) against exact value "
          f"(solve), limit {args.limit:g} s, fresh solvers per move number, {threads} thread(s)")
    print("move  positions  result<=1s  +move<=1s  +move<=limit  +move median s  margin<=1s  margin<=limit  "
          "margin median s  proof nodes")
    rows = []
    for n in moves:
        at = np.flatnonzero(positions["move_numbers"] == n)
        class_solver = PositionSolver(geometry, threads=threads)
        margin_solver = PositionSolver(geometry, threads=threads)
        found = dict(class_seconds=[], class_done=[], proof_seconds=[], margin_seconds=[], margin_done=[],
                     class_nodes=[])
        for i in at:
            lines, margin = positions["lines"][i], int(positions["margin"][i])
            proof = class_solver.prove_result(lines, margin, order=orders[i], guess=int(guesses[i]),
                                              time_limit=args.limit)
            found["class_seconds"].append(proof.seconds)
            found["class_nodes"].append(proof.nodes)
            found["class_done"].append(proof.result is not None)
            found["proof_seconds"].append(proof.class_seconds if proof.result is not None else np.inf)
            solution = margin_solver.solve(lines, margin, result_moves=False, time_limit=args.limit)
            found["margin_seconds"].append(solution.seconds)
            found["margin_done"].append(solution.finished)
        row = dict(move=n, positions=int(at.size))
        for kind in ("class", "margin"):
            seconds, done = np.array(found[f"{kind}_seconds"]), np.array(found[f"{kind}_done"])
            row[f"{kind}_within_1s"] = float((done & (seconds <= 1.0)).mean())
            row[f"{kind}_within_limit"] = float(done.mean())
            row[f"{kind}_median_seconds"] = float(np.median(np.where(done, seconds, np.inf)))
        row["class_alone_within_1s"] = float((np.array(found["proof_seconds"]) <= 1.0).mean())
        row["class_nodes"] = int(sum(found["class_nodes"]))
        rows.append(row)
        print(f"{n:4d}  {row['positions']:9d}  {row['class_alone_within_1s']:9.2f}  {row['class_within_1s']:9.2f}  "
              f"{row['class_within_limit']:12.2f}  {row['class_median_seconds']:14.2f}  "
              f"{row['margin_within_1s']:10.2f}  "
              f"{row['margin_within_limit']:13.2f}  {row['margin_median_seconds']:15.2f}  {row['class_nodes']:11d}",
              flush=True)
    return dict(board=geometry.name, limit=args.limit, network=network, rows=rows)


def match(args) -> dict:
    """Equal-time games in pairs (one opening, both seats), each pair its own key (``fold_in(seed, pair)``), so that
    ``--log`` can keep every finished pair (a JSON line each) and a rerun goes on from there: a long match runs in
    pieces. The figures are over the first ``--games / 2`` pairs in the log. Each piece starts its clock agents
    afresh (their reach, ladder and solver table), as a new session would."""
    geometry = board_geometry(*parse_board_size(args.board))
    if args.games < 2 or args.games % 2:
        raise SystemExit(f"--games must be even and at least 2 (the first player alternates), got {args.games}")
    log = pathlib.Path(args.log) if args.log else None
    settings = dict(board=geometry.name, agent=args.agent, opponent=args.opponent, opening=args.opening,
                    seed=args.seed)
    pairs: dict[int, dict] = {}
    if log is not None and log.exists():
        lines = log.read_text().splitlines()
        for number, line in enumerate(lines):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                if number == len(lines) - 1:  # a pair cut off while it was written: played again
                    print(f"{log}: its last line is cut off; that pair is played again")
                    log.write_text("".join(f"{kept}\n" for kept in lines[:-1]))
                    break
                raise SystemExit(f"{log}, line {number + 1}: not a pair of games ({line[:60]!r})") from None
            if row["settings"] != settings:
                raise SystemExit(f"{log} holds games of {row['settings']}, not {settings}: another --log")
            pairs[row["pair"]] = row
    agents = {spec: agent_registry.make_agent(spec, geometry) for spec in (args.agent, args.opponent)}
    todo = [p for p in range(args.games // 2) if p not in pairs]
    if todo:
        for agent in agents.values():
            if hasattr(agent, "prepare"):
                agent.prepare()
    key = jax.random.PRNGKey(args.seed)
    commit = source_commit(pathlib.Path(__file__).resolve().parent)
    for pair in todo:
        seen = {spec: agent.move_seconds.size for spec, agent in agents.items() if hasattr(agent, "move_seconds")}
        start = time.perf_counter()
        games = arena.play_match(geometry, agents[args.agent], agents[args.opponent], jax.random.fold_in(key, pair),
                                 2, opening_moves=args.opening)
        own = games.scores[np.arange(2), games.a_player]
        row = dict(settings=settings, pair=pair, margins=(own - (games.scores.sum(1) - own)).tolist(),
                   seconds=time.perf_counter() - start, commit=commit, moves={})
        for spec in seen:
            agent = agents[spec]
            records = getattr(agent, "records", [])[seen[spec]:]
            row["moves"][spec] = dict(
                seconds=[round(float(t), 4) for t in agent.move_seconds[seen[spec]:]],
                sources=[r.source for r in records],
                proofs=[[r.undrawn, r.solver_seconds, r.proven_result is not None] for r in records
                        if r.solver_seconds > 0])
        pairs[pair] = row
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a") as out:
                out.write(json.dumps(row) + "\n")
                out.flush()
        print(f"pair {pair}: margins {row['margins']}, {row['seconds']:.0f} s", flush=True)
    rows = [pairs[p] for p in range(args.games // 2) if p in pairs]
    commits = collections.Counter(row.get("commit") for row in rows)
    if len(commits) > 1:
        print(f"pairs by commit: {dict(commits)}")
    margins = np.array([m for row in rows for m in row["margins"]])
    result = dict(board=geometry.name, agent=args.agent, opponent=args.opponent, games=int(margins.size),
                  wins=int((margins > 0).sum()), draws=int((margins == 0).sum()), losses=int((margins < 0).sum()),
                  mean_margin=float(margins.mean()), seconds=float(sum(row["seconds"] for row in rows)))
    for spec, agent in agents.items():
        if not hasattr(agent, "move_seconds") or not all(spec in row["moves"] for row in rows):
            continue
        times = np.array([t for row in rows for t in row["moves"][spec]["seconds"]])
        sources = collections.Counter(s for row in rows for s in row["moves"][spec]["sources"])
        result[spec] = dict(moves=int(times.size), slowest=float(times.max()), mean=float(times.mean()),
                            over_budget_10pc=int((times > 1.1 * agent.seconds).sum()) if agent.seconds else 0,
                            sources=dict(sources), compile_seconds=getattr(agent, "compile_seconds", None),
                            proofs_by_undrawn=_proofs_by_undrawn(
                                [p for row in rows for p in row["moves"][spec]["proofs"]]))
        budget = f" of {agent.seconds:g} s" if agent.seconds else ""
        print(f"{spec}: {times.size} moves, slowest {times.max():.3f} s{budget}, mean {times.mean():.3f} s, "
              f"{result[spec]['over_budget_10pc']} over 1.1x; sources {dict(sources)}")
        if todo and hasattr(agent, "summary"):
            print(agent.summary())  # this piece's moves: its ladder, solver reach and leaves proven
    print(f"{args.agent} against {args.opponent}: {result['wins']} wins, {result['draws']} draws, "
          f"{result['losses']} losses in {result['games']} games (mean margin {result['mean_margin']:+.1f}), "
          f"{result['seconds']:.0f} s of play")
    return result


def _proofs_by_undrawn(proofs) -> dict:
    """``{undrawn lines: [proofs tried, results proven, median seconds of the proven]}`` of a clock agent's moves,
    from ``[undrawn, solver seconds, proven]`` a proof."""
    found: dict = {}
    for undrawn, solver_seconds, proven in proofs:
        tried, done, seconds = found.setdefault(undrawn, [0, 0, []])
        found[undrawn][0] += 1
        if proven:
            found[undrawn][1] += 1
            seconds.append(solver_seconds)
    rows = {u: [t, p, float(np.median(s)) if s else None] for u, (t, p, s) in sorted(found.items())}
    for undrawn, (tried, proven, median) in rows.items():
        if undrawn >= 36:
            print(f"  proofs at {undrawn} undrawn lines: {proven} of {tried}"
                  + (f", median {median:.2f} s" if median is not None else ""))
    return rows


def accuracy(args) -> dict:
    data = labelled.load(package_data.labelled_set_file(args.set))
    moves = parse_move_numbers(args.moves) if args.moves else sorted(set(data.move_numbers.tolist()))
    rng = np.random.default_rng(args.seed)
    keep = np.zeros(len(data), bool)
    for n in moves:
        at = np.flatnonzero(data.move_numbers == n)
        keep[rng.permutation(at)[: args.per_move]] = True
    data = labelled.subset(data, keep)
    agent = agent_registry.make_agent(args.agent, data.geometry)
    if args.no_leaf_proofs:
        if not hasattr(agent, "leaf_proofs"):
            raise SystemExit(f"--no-leaf-proofs: {args.agent} is not a network on a clock")
        agent.leaf_proofs = False
    if hasattr(agent, "prepare"):
        agent.prepare()
    start = time.perf_counter()
    result = labelled.accuracy_by_move_number(agent, data, jax.random.PRNGKey(args.seed), batch_size=64)
    print(result.format())
    out = dict(agent=args.agent, set=args.set, leaf_proofs=not args.no_leaf_proofs, seconds=time.perf_counter() - start,
               move_numbers=result.move_numbers.tolist(), count=result.count.tolist(),
               best_result=result.best_result.tolist())
    if hasattr(agent, "summary"):
        print(agent.summary())
        out["summary"] = agent.summary()
        out["slowest"] = float(agent.move_seconds.max())
    return out


def bounded(args) -> dict:
    """What a bounded proof inside self-play's search could add, by move on a labelled set: the share of positions
    that a result proof within ``--nodes`` nodes settles, that the endgame evaluator (the search's exact leaves)
    does not already solve, and where the agent's search does not already play a best-result move. That last
    share bounds what such a proof could buy; it pays only where it is large."""
    data = labelled.load(package_data.labelled_set_file(args.set))
    states = labelled.to_states(data)
    geometry = data.geometry
    solved, _ = jax.device_get(jax.jit(jax.vmap(lambda s: endgame.simple_endgame_margin(geometry, s)))(states))
    moves = labelled.agent_moves(agent_registry.make_agent(args.agent, geometry), data, jax.random.PRNGKey(args.seed),
                                 batch_size=256)
    right = data.best_result[np.arange(len(data)), moves]
    exact_play.compile_solver_kernels(geometry)
    solver = PositionSolver(geometry, threads=1)
    proven = np.zeros(len(data), bool)
    start = time.perf_counter()
    for i in range(len(data)):
        proof = solver.prove_result(data.lines[i], int(data.margin[i]), max_nodes=args.nodes, order=None)
        proven[i] = proof.result is not None
    seconds = time.perf_counter() - start
    rows = []
    print(f"{geometry.name} ({args.set}): proofs within {args.nodes} nodes ({seconds / len(data) * 1e3:.2f} ms a "
          f"position on one thread) against the endgame evaluator and {args.agent}")
    print("move  positions  evaluator  bounded proof  proof, not evaluator  ... and the search errs")
    for n in np.unique(data.move_numbers):
        at = data.move_numbers == n
        row = dict(move=int(n), positions=int(at.sum()), evaluator=float(solved[at].mean()),
                   bounded=float(proven[at].mean()), added=float((proven & ~solved)[at].mean()),
                   could_gain=float((proven & ~solved & ~right)[at].mean()))
        rows.append(row)
        print(f"{n:4d}  {row['positions']:9d}  {row['evaluator']:9.2f}  {row['bounded']:13.2f}  "
              f"{row['added']:20.2f}  {row['could_gain']:22.3f}")
    total = float((proven & ~solved & ~right).mean())
    print(f"over the set: a bounded proof would correct at most {total:.3f} of the search's moves")
    return dict(set=args.set, agent=args.agent, nodes=args.nodes, seconds_per_position=seconds / len(data),
                rows=rows, could_gain=total)


def tree_proofs(args) -> dict:
    """The network's search with and without proven values in the tree, on a labelled set (module docstring)."""
    data = labelled.load(package_data.labelled_set_file(args.set))
    if args.per_move:
        rng = np.random.default_rng(args.seed)
        keep = np.zeros(len(data), bool)
        for n in np.unique(data.move_numbers):
            keep[rng.permutation(np.flatnonzero(data.move_numbers == n))[: args.per_move]] = True
        data = labelled.subset(data, keep)
    geometry = data.geometry
    loaded, _ = agent_registry.load_network(args.network, geometry)
    env = env_lib.Env.of(geometry, loaded.early_termination)
    evaluator = mcts.network_evaluator(loaded.network_config, geometry)
    states = labelled.to_states(data)
    rows = np.arange(len(data))
    out = dict(network=args.network, set=args.set, simulations=args.simulations, positions=len(data), arms={})
    for proofs in (False, True):
        config = dataclasses.replace(loaded.search_config, num_simulations=args.simulations, gumbel_scale=0.0,
                                     proofs=proofs)
        search = jax.jit(lambda key, s, c=config: mcts.run_search(c, env, evaluator, loaded.params, key, s))
        batches = [jax.tree_util.tree_map(lambda x, i=i: x[i:i + args.batch], states)
                   for i in range(0, len(data), args.batch)]
        jax.block_until_ready(search(jax.random.PRNGKey(args.seed), batches[0]))  # compiles
        actions, proven, start = [], [], time.perf_counter()
        for batch in batches:
            result = search(jax.random.PRNGKey(args.seed), batch)
            actions.append(np.asarray(result.action))
            proven.append(np.asarray(result.root_proven & ~result.root_solved))
        seconds = time.perf_counter() - start
        right = data.best_result[rows, np.concatenate(actions)]
        proven = np.concatenate(proven)
        by_move = {int(n): float(right[data.move_numbers == n].mean()) for n in np.unique(data.move_numbers)}
        out["arms"][str(proofs)] = dict(best_result=float(right.mean()), by_move=by_move,
                                        proven_in_tree=float(proven.mean()),
                                        ms_per_position=1e3 * seconds / len(data))
        print(f"proofs {str(proofs):5s}: best-result share {right.mean():.4f}, roots the tree proves "
              f"{proven.mean():.3f}, {1e3 * seconds / len(data):.2f} ms a position (batches of {args.batch})")
    moves = sorted(out["arms"]["False"]["by_move"])
    print("move  " + "  ".join(f"{n:5d}" for n in moves))
    for arm in ("False", "True"):
        print(f"{arm:5s} " + "  ".join(f"{out['arms'][arm]['by_move'][n]:5.2f}" for n in moves))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    solve = commands.add_parser("solve", help="result-class proofs against exact values, by move")
    solve.add_argument("--board", default="5x5")
    solve.add_argument("--moves", default="16-22")
    solve.add_argument("--per-move", type=int, default=10)
    solve.add_argument("--limit", type=float, default=5.0, help="seconds a position, each solve")
    solve.add_argument("--network", default=None, help="the guess and order (default: the shipped agent)")
    solve.add_argument("--threads", type=int, default=0, help="solver threads (0: the default, every core up to 8; "
                       "1 gives node counts that do not depend on timing)")
    games = commands.add_parser("match", help="equal-time arena games")
    games.add_argument("--board", default="5x5")
    games.add_argument("--agent", default="pretrained:5x5@2s")
    games.add_argument("--opponent", default="pretrained:5x5:4096+exact:2")
    games.add_argument("--games", type=int, default=200)
    games.add_argument("--opening", type=int, default=2, help="random lines before the agents play")
    games.add_argument("--log", default=None, help="keep each finished pair of games here (JSON lines); a rerun "
                       "with the same settings goes on from it")
    score = commands.add_parser("accuracy", help="best-result share by move on a labelled set")
    score.add_argument("--agent", default="pretrained:4x4@1s")
    score.add_argument("--set", default="4x4", help="a built-in set name or an .npz path")
    score.add_argument("--moves", default=None)
    score.add_argument("--per-move", type=int, default=10)
    score.add_argument("--no-leaf-proofs", action="store_true", help="a clock agent without the proofs of promising "
                       "leaves (ClockAgent.leaf_proofs): one search a move")
    bound = commands.add_parser("bounded", help="what a bounded proof in self-play's search could add")
    bound.add_argument("--agent", default="pretrained:4x4")
    bound.add_argument("--set", default="4x4")
    bound.add_argument("--nodes", type=int, default=20000, help="node budget of one proof")
    tree = commands.add_parser("tree", help="proven values in the search tree, with and without")
    tree.add_argument("--network", default="pretrained:4x4")
    tree.add_argument("--set", default="4x4")
    tree.add_argument("--simulations", type=int, default=64)
    tree.add_argument("--per-move", type=int, default=0, help="positions of each move number (0: all)")
    tree.add_argument("--batch", type=int, default=256)
    for sub in (solve, games, score, bound, tree):
        sub.add_argument("--seed", type=int, default=0)
        sub.add_argument("--out", default=None, help="write the figures here (JSON)")
    args = parser.parse_args()
    commands_run = {"solve": solve_times, "match": match, "accuracy": accuracy, "bounded": bounded, "tree": tree_proofs}
    result = commands_run[args.command](args)
    if args.out:
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
