"""Can the network learn a board's middle game at all, and how fast? Supervised training on exact labels,
with and without the parity plane (``network.parity_plane``), for either kind of network (``--kind``).

    python benchmarks/network_capacity.py                       # the built-in 32x3 ResNet, 3000 steps, both inputs
    python benchmarks/network_capacity.py --width 64 --blocks 4 --inputs paper
    python benchmarks/network_capacity.py --kind mlp --width 256 --blocks 2 --steps 30000 --inputs parity
    python -m dabjax.cli.label build --board 5x5 --moves 22-34 --per-move 300 --seed 2 --no-move-values \
        --time-limit 60 --out 5x5_train.npz                      # ~30 min on one core
    python benchmarks/network_capacity.py --board 5x5 --train-set 5x5_train.npz --kind mlp --width 256 \
        --blocks 3 --value-hidden 64 --steps 20000 --inputs parity
    python benchmarks/network_capacity.py --board 5x5 --trained pretrained:5x5   # or a run directory
    python benchmarks/network_capacity.py --board 4x4 --trained pretrained:4x4 --train-set data/4x4_train.npz

3x3: positions come from games of the greedy opening policy mixed with 30% random moves (as the labelled
sets, a little more random), every position of 6,144 games, each labelled from the exact 3x3 table.
Larger boards have no table: ``--train-set`` is a labelled set built with another seed than the measured
one (positions also in the measured set are dropped). Training is ``dabjax.training.supervised.fit`` (what
``dabjax pretrain`` runs): each sample mapped by a random board symmetry, value target the sign of the final
result for the side to move, policy target uniform over the best-result moves, the trainer's loss with
Adam (lr 1e-3, batch 256, no L2). The network is then
measured on ``--labelled-set`` by move number: the sign accuracy of its value (positions that are not
draws; balanced: the mean of its accuracy on won and on lost positions, 0.5 for a value blind to the
position), the best-result share of its raw policy, and of a pruned Gumbel search with it at play time; the
same value sign and raw-policy share on its own training positions, by move number, show whether it could fit
them at all. This isolates the network from reinforcement learning: whatever it cannot learn from exact labels,
self-play will not teach it either. ``--trained`` measures a network trained elsewhere (a run or checkpoint
directory, an agent folder, ``pretrained:RxC`` or ``supervised:RxC``) the same way, for comparison, and with
``--train-set`` its fit on that set. Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import search_throughput  # noqa: E402  (benchmarks/ is on the path when this script runs)

from dabjax.evaluation import pretrained
from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry, parse_board_size
from dabjax.search import agents as search_agents
from dabjax.search import mcts, network
from dabjax.solvers import labelled, retrograde
from dabjax.training import checkpoint, supervised


def observations_of(geometry, samples) -> np.ndarray:
    """The network inputs ``[N, H, W, C]`` of ``supervised`` training samples."""
    observe = jax.jit(jax.vmap(functools.partial(env_lib.observation_from, geometry)))
    positions = samples.positions
    return np.asarray(observe(positions.lines, positions.claimed, positions.margin))


def candidate_config(spec: str, base: network.NetworkConfig) -> network.NetworkConfig:
    """``KIND:WIDTHxBLOCKS[+chain][+pool][+paper]`` -> a NetworkConfig, e.g. ``mlp:256x3``,
    ``graph:64x6+chain``, ``resnet:32x3+pool`` (``+chain``: chain-structure inputs; ``+pool``: global
    pooling in the ResNet trunk; ``+paper``: no parity plane). Raises ValueError naming the problem."""
    head, *options = spec.split("+")
    kind, _, size = head.partition(":")
    width, _, blocks = size.partition("x")
    unknown = set(options) - {"chain", "pool", "paper"}
    if unknown or not (width.isdigit() and blocks.isdigit()):
        raise ValueError(f"candidate {spec!r}: write KIND:WIDTHxBLOCKS[+chain][+pool][+paper], e.g. graph:64x6+chain")
    return dataclasses.replace(base, kind=kind, width=int(width), blocks=int(blocks), chain_features="chain" in options,
                               global_pooling="pool" in options, parity_plane="paper" not in options)


def search_speed(geometry, config: network.NetworkConfig, params, simulations: int, batch: int = 256) -> float:
    """Simulations per second of the pruned Gumbel search with this network, ``batch`` mid-game positions
    (``benchmarks/search_throughput.py``'s positions and timing), best of 3."""
    states = jax.jit(lambda k: search_throughput.midgame_states(geometry, batch, k))(jax.random.PRNGKey(1))
    run = search_throughput.compiled_search(geometry, config, search_throughput.search_config(simulations, True, 6))
    (seconds,) = search_throughput.best_times([run], params, states, repeats=3)
    return batch * simulations / seconds


def balanced_sign(value: np.ndarray, result: np.ndarray) -> float:
    """The mean over won and over lost positions (``result`` > 0 / < 0 for the side to move; draws left out)
    of the share whose ``value`` has the result's sign. A value that ignores the position scores 0.5 however
    many positions the mover wins, which the plain share of right signs does not (the labelled sets' movers
    win about three positions in four). With only one of the two kinds present, the share over that kind;
    with neither (all draws), NaN. ``value``, ``result``: ``[N]``."""
    won, lost = result > 0, result < 0
    shares = [float(np.mean(value[won] > 0))] if won.any() else []
    shares += [float(np.mean(value[lost] < 0))] if lost.any() else []
    return float(np.mean(shares)) if shares else float("nan")


def fitted(geometry, config: network.NetworkConfig, params, samples) -> dict:
    """How well the network fits its own training ``samples`` (``supervised`` exact-label samples), by move
    number: ``moves`` ``[M]``, ``sign`` the ``balanced_sign`` of its value, ``policy`` the share of positions
    whose raw policy's top legal move is a best-result move (one of the policy target's moves), both ``[M]``;
    ``overall_sign`` the balanced sign over all of them. A network that cannot fit a move number's labels will
    not learn it from more of them: that move is capacity- or training-bound, not data-bound."""
    observations, values = observations_of(geometry, samples), np.asarray(samples.value)
    apply = jax.jit(network.PolicyValueNet(config).apply)
    outputs = [apply(params, observations[i:i + 4096]) for i in range(0, len(observations), 4096)]
    predicted = np.concatenate([np.asarray(value) for _, value in outputs])
    logits = np.concatenate([np.asarray(logits) for logits, _ in outputs])
    legal = ~np.asarray(samples.positions.lines)
    top = np.where(legal, logits, -np.inf).argmax(-1)
    hit = np.asarray(samples.policy)[np.arange(len(top)), top] > 0
    move_numbers = np.asarray(samples.move_number)
    moves = np.unique(move_numbers)
    return {"moves": moves, "sign": np.array([balanced_sign(predicted[move_numbers == m], values[move_numbers == m])
                                              for m in moves]),
            "policy": np.array([hit[move_numbers == m].mean() for m in moves]),
            "overall_sign": balanced_sign(predicted, values)}


def report_fit(fit: dict) -> None:
    """Prints ``fitted``'s figures by move number."""
    print("fit on its own training labels:")
    print("move:             " + " ".join(f"{m:>4d}" for m in fit["moves"]))
    print("value sign (bal.) " + " ".join(f"{x:4.2f}" for x in fit["sign"]))
    print("raw policy        " + " ".join(f"{x:4.2f}" for x in fit["policy"]))


def measure(geometry, config: network.NetworkConfig, params, labelled_set, search_config: mcts.SearchConfig) -> dict:
    """Value sign, raw-policy and search best-result shares by move number of ``labelled_set``."""
    model = network.PolicyValueNet(config)
    states = labelled.to_states(labelled_set)
    observations = jax.vmap(lambda s: env_lib.observe(geometry, s))(states)
    _, value = jax.jit(model.apply)(params, observations)
    final = labelled_set.margin + labelled_set.value
    evaluator = mcts.network_evaluator(config, geometry)

    @jax.jit
    def raw_moves(states):
        logits, _ = evaluator(params, None, states)
        return jnp.argmax(network.mask_logits(logits, states.legal_action_mask), -1).astype(jnp.int32)

    searcher = search_agents.search_agent(search_config, evaluator, params)
    search_moves = jax.jit(lambda key, states: searcher(geometry, key, states))
    key = jax.random.PRNGKey(0)
    raw = labelled.accuracy_by_move_number(lambda g, k, s: raw_moves(s), labelled_set, key)
    searched = labelled.accuracy_by_move_number(lambda g, k, s: search_moves(k, s), labelled_set, key).best_result
    value = np.asarray(value)
    sign, won = [], []
    for move in raw.move_numbers:
        at = labelled_set.move_numbers == move
        sign.append(balanced_sign(value[at], final[at]))
        decided = final[at][final[at] != 0]
        won.append(float(np.mean(decided > 0)) if decided.size else float("nan"))
    # [M] each, over the set's move numbers in increasing order.
    return {"moves": raw.move_numbers, "sign": np.array(sign), "won": np.array(won),
            "raw": np.asarray(raw.best_result), "search": np.asarray(searched)}


def report(result: dict, summary: np.ndarray, simulations: int) -> None:
    """Prints ``measure``'s figures by move number, then over the ``summary`` moves (bool ``[M]``)."""
    moves = result["moves"]
    print("move:             " + " ".join(f"{m:>4d}" for m in moves))
    rows = (("won", "mover wins"), ("sign", "value sign (bal.)"), ("raw", "raw policy"),
            ("search", f"search {simulations}"))
    for name, label in rows:
        print(f"{label:<17} " + " ".join(f"{x:4.2f}" for x in result[name]))
    print(f"moves {moves[summary][0]}-{moves[summary][-1]}: balanced value sign "
          f"{np.nanmean(result['sign'][summary]):.3f}, "
          f"search min {result['search'][summary].min():.3f}; "
          f"search min over all moves {result['search'].min():.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    built_in = network.NetworkConfig()
    parser.add_argument("--board", default="3x3", help="3x3 (labels from the exact table) or a larger board "
                        "with --train-set")
    parser.add_argument("--train-set", help="labelled set to train on (boards without a table); with --trained, "
                        "the set it was trained on, to measure how well it fits it")
    parser.add_argument("--kind", default=built_in.kind, choices=network.KINDS)
    parser.add_argument("--width", type=int, default=built_in.width)
    parser.add_argument("--blocks", type=int, default=built_in.blocks)
    parser.add_argument("--value-hidden", type=int, default=built_in.value_hidden)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--minutes", type=float, help="train each network for this much wall time instead of "
                        "--steps (the fixed CPU budget of the bench)")
    parser.add_argument("--candidate", action="append", default=[], help="a network to train, repeatable: "
                        "KIND:WIDTHxBLOCKS[+chain][+pool][+paper], e.g. mlp:256x3, graph:64x6+chain, "
                        "resnet:32x3+pool (overrides --kind/--width/--blocks/--inputs)")
    parser.add_argument("--also-measure", action="append", default=[], help="another labelled set (e.g. "
                        "data/5x5.npz) to measure size-independent networks on, untrained there; repeatable")
    parser.add_argument("--json", help="write every candidate's figures to this file")
    parser.add_argument("--save", help="save each trained network in this folder (one agent folder each, the "
                        "pretrained format): a supervised warm start for train.py's run.init_from")
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--inputs", default="parity,paper", help="comma-separated: parity (4 planes), paper (3)")
    parser.add_argument("--labelled-set", help="the measured set (default data/<board>.npz)")
    parser.add_argument("--trained", help="measure this network instead of training one: pretrained:RxC, "
                        "supervised:RxC, an agent folder or a run / checkpoint directory; a graph or ResNet "
                        "network of another board is measured on this one, untrained here")
    args = parser.parse_args()
    geometry = board_geometry(*parse_board_size(args.board))
    labelled_set = labelled.load(args.labelled_set or f"data/{geometry.name}.npz")
    if (labelled_set.rows, labelled_set.cols) != (geometry.rows, geometry.cols):
        parser.error(f"--labelled-set is {labelled_set.rows}x{labelled_set.cols}, not {geometry.name}")
    moves = np.unique(labelled_set.move_numbers)  # measure's rows, in this order
    summary = np.isin(moves, np.arange(7, 13)) if geometry.name == "3x3" else np.ones(len(moves), bool)
    train_set = labelled.load(args.train_set) if args.train_set else None
    if train_set is not None and (train_set.rows, train_set.cols) != (geometry.rows, geometry.cols):
        parser.error(f"--train-set is {train_set.rows}x{train_set.cols}, the measured set {geometry.name}")
    if args.trained:
        try:
            loaded = pretrained.load_source(args.trained)
        except (ValueError, FileNotFoundError) as error:
            parser.error(f"--trained {args.trained}: {error}")
        other_board = (loaded.rows, loaded.cols) != (geometry.rows, geometry.cols)
        if other_board and not network.fits_any_board(loaded.network_config):
            # The graph and ResNet parameters fit any board: a 4x4 network is measured on 5x5 untrained there.
            parser.error(f"--trained {args.trained} is a {loaded.rows}x{loaded.cols} MLP, which plays that board only, "
                         f"not {geometry.name}")
        print(f"{args.trained}: {loaded.network_config.kind} {loaded.network_config.width}x"
              f"{loaded.network_config.blocks}, iteration {loaded.iteration}")
        search_config = dataclasses.replace(loaded.search_config, num_simulations=args.simulations, gumbel_scale=0.0)
        report(measure(geometry, loaded.network_config, loaded.params, labelled_set, search_config), summary,
               args.simulations)
        if train_set is not None:
            report_fit(fitted(geometry, loaded.network_config, loaded.params,
                              supervised.samples_from_set(train_set)[0]))
        return
    if train_set is not None:
        data, dropped = supervised.samples_from_set(train_set, labelled_set)
        source = f"from {args.train_set} ({dropped} also in the measured set dropped)"
    elif geometry.num_lines <= labelled.TABLE_LABEL_MAX_LINES:
        table = retrograde.solve_table(geometry)
        data = supervised.samples_from_table(geometry, table, jax.random.PRNGKey(1), games=6144)
        source = "from the exact table"
    else:
        parser.error(f"{geometry.name} has no exact table here: give --train-set (a labelled set built with "
                     "another seed; see the docstring)")
    if args.candidate:
        try:
            configs = [(spec, candidate_config(spec, dataclasses.replace(built_in, value_hidden=args.value_hidden)))
                       for spec in args.candidate]
        except ValueError as error:
            parser.error(str(error))
    else:
        configs = []
        for inputs in [name.strip() for name in args.inputs.split(",") if name.strip()]:
            if inputs not in ("parity", "paper"):
                parser.error(f"--inputs: unknown {inputs!r}; choose parity or paper")
            configs.append((f"{inputs} input", dataclasses.replace(
                built_in, kind=args.kind, width=args.width, blocks=args.blocks, value_hidden=args.value_hidden,
                parity_plane=inputs == "parity")))
    other_sets = [labelled.load(path) for path in args.also_measure]
    budget = f"{args.minutes} min" if args.minutes else f"{args.steps} steps"
    print(f"{int(data.valid.shape[0])} labelled training positions {source}; random symmetries; {budget} each")
    results = []
    for name, config in configs:
        params, steps, seconds_per_step, _ = supervised.fit(
            geometry, config, data, jax.random.PRNGKey(0), steps=None if args.minutes else args.steps,
            minutes=args.minutes)
        search_config = mcts.SearchConfig(num_simulations=args.simulations, gumbel_scale=0.0, max_depth=6)
        result = measure(geometry, config, params, labelled_set, search_config)
        speed = search_speed(geometry, config, params, args.simulations)
        fit = fitted(geometry, config, params, data)
        print(f"\n{name}: {network.num_parameters(params)} parameters, {steps} steps ({1000 * seconds_per_step:.1f} "
              f"ms per step of batch 256), search {speed:,.0f} simulations/s at batch 256 on {geometry.name}; "
              f"value sign on its training positions (balanced) {fit['overall_sign']:.3f}")
        report(result, summary, args.simulations)
        report_fit(fit)
        row = {"candidate": name, "config": dataclasses.asdict(config), "parameters": network.num_parameters(params),
               "steps": steps, "ms_per_step": 1000 * seconds_per_step, "search_sims_per_s": speed,
               "fitted_sign": fit["overall_sign"],
               "fit": {k: np.asarray(v).tolist() for k, v in fit.items()},
               geometry.name: {k: np.asarray(v).tolist() for k, v in result.items()}}
        for other in other_sets:
            other_geometry = other.geometry
            if not network.fits_any_board(config):
                print(f"  {other_geometry.name}: not measured (an MLP plays one board size only)")
                continue
            other_result = measure(other_geometry, config, params, other, search_config)
            print(f"  on {other_geometry.name} (never trained on it):")
            report(other_result, np.ones(len(other_result["moves"]), bool), args.simulations)
            row[other_geometry.name] = {k: np.asarray(v).tolist() for k, v in other_result.items()}
        results.append(row)
        if args.save:
            folder = pathlib.Path(args.save) / name.replace(":", "_").replace("+", "_")
            agent = checkpoint.PlayableCheckpoint(geometry.rows, geometry.cols, config, search_config, params, 0,
                                                  0.0, {})
            source = {"trained_on": args.train_set or "the exact table", "steps": steps,
                      "method": "supervised, exact labels"}
            pretrained.save_agent_folder(folder, agent, source)
            print(f"  saved to {folder} (train.py run.init_from={folder} warm-starts from it)")
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
