"""Can the network learn the 3x3 middle game at all, and how fast? Supervised training on exact labels,
with and without the parity plane (``network.parity_plane``), for either kind of network (``--kind``).

    python benchmarks/network_capacity.py                       # the built-in 32x3 ResNet, 3000 steps, both inputs
    python benchmarks/network_capacity.py --width 64 --blocks 4 --inputs paper
    python benchmarks/network_capacity.py --kind mlp --width 256 --blocks 2 --steps 30000 --inputs parity

Positions come from games of the greedy opening policy mixed with 30% random moves (as the labelled sets,
a little more random), every position of 6,144 games; each is labelled from the exact 3x3 table: the value
target is the sign of the final result for the side to move, the policy target is uniform over the
best-result moves. The network is trained with Adam (lr 1e-3, batch 256) and then measured on data/3x3.npz
by move number: the sign accuracy of its value (positions that are not draws), the best-result share of its
raw policy, and of a pruned Gumbel search with it at play time. This isolates the network from
reinforcement learning: whatever it cannot learn from exact labels, self-play will not teach it either.
Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry
from dabjax.search import agents as search_agents
from dabjax.search import mcts, network
from dabjax.solvers import labelled, retrograde
from dabjax.solvers.position_solver import best_result_moves


def exact_training_set(geometry, table, key, batches: int, games: int, random_rate: float):
    """Observations ``[N, H, W, 4]``, value targets ``[N]`` and policy targets ``[N, L]``."""
    observe = jax.jit(jax.vmap(functools.partial(env_lib.observation_from, geometry)))
    parts = []
    for _ in range(batches):
        key, sub = jax.random.split(key)
        history = labelled.play_trajectories(geometry, sub, games, random_rate)
        flat = jax.tree_util.tree_map(lambda x: x.reshape(-1, *x.shape[2:]), history)
        legal = ~flat.lines
        keep = legal.any(-1)
        margin = np.asarray(flat.margin)
        values = retrograde.move_values(geometry, table, flat.lines)
        best = best_result_moves(values, legal, margin)
        value = np.sign(margin + values.max(-1)).astype(np.float32)
        policy = (best / np.maximum(best.sum(-1, keepdims=True), 1)).astype(np.float32)
        obs = np.asarray(observe(flat.lines, flat.box_owner >= 0, margin.astype(np.int32)))
        parts.append((obs[keep], value[keep], policy[keep]))
    return tuple(np.concatenate(column) for column in zip(*parts))


def train(config: network.NetworkConfig, data, steps: int, seed: int):
    observations, values, policies = data
    model = network.PolicyValueNet(config)
    params = network.init_params(config, observations.shape[1:3], jax.random.PRNGKey(seed))
    optimiser = optax.adam(1e-3)
    opt_state = optimiser.init(params)

    @jax.jit
    def step(params, opt_state, obs, value, policy):
        def loss_fn(params):
            logits, predicted = model.apply(params, obs)
            # No mask: the targets are 0 on drawn lines, so their logits are pushed down like any wrong move.
            cross_entropy = -jnp.sum(policy * jax.nn.log_softmax(logits), -1)
            return jnp.mean(cross_entropy + (predicted - value) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimiser.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    rng = np.random.default_rng(seed)
    for _ in range(steps):
        index = rng.integers(0, len(observations), 256)
        params, opt_state, _ = step(params, opt_state, observations[index], values[index], policies[index])
    return params


def measure(geometry, config: network.NetworkConfig, params, labelled_set, simulations: int) -> dict:
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

    search_config = mcts.SearchConfig(num_simulations=simulations, gumbel_scale=0.0)
    searcher = search_agents.search_agent(search_config, evaluator, params)
    search_moves = jax.jit(lambda key, states: searcher(geometry, key, states))
    key = jax.random.PRNGKey(0)
    raw = labelled.accuracy_by_move_number(lambda g, k, s: raw_moves(s), labelled_set, key).best_result
    searched = labelled.accuracy_by_move_number(lambda g, k, s: search_moves(k, s), labelled_set, key).best_result
    sign = []
    for move in range(geometry.num_lines):
        at = (labelled_set.move_numbers == move) & (final != 0)
        sign.append(float(np.mean(np.sign(np.asarray(value)[at]) == np.sign(final[at]))) if at.any() else 1.0)
    return {"sign": np.array(sign), "raw": np.asarray(raw), "search": np.asarray(searched)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    built_in = network.NetworkConfig()
    parser.add_argument("--kind", default=built_in.kind, choices=network.KINDS)
    parser.add_argument("--width", type=int, default=built_in.width)
    parser.add_argument("--blocks", type=int, default=built_in.blocks)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--inputs", default="parity,paper", help="comma-separated: parity (4 planes), paper (3)")
    parser.add_argument("--labelled-set", default="data/3x3.npz")
    args = parser.parse_args()
    geometry = board_geometry(3, 3)
    table = retrograde.solve_table(geometry)
    labelled_set = labelled.load(args.labelled_set)
    data = exact_training_set(geometry, table, jax.random.PRNGKey(1), batches=12, games=512, random_rate=0.3)
    print(f"{len(data[0])} labelled training positions; {args.kind} {args.width}x{args.blocks}, {args.steps} steps")
    for inputs in [name.strip() for name in args.inputs.split(",") if name.strip()]:
        if inputs not in ("parity", "paper"):
            parser.error(f"--inputs: unknown {inputs!r}; choose parity or paper")
        config = dataclasses.replace(
            built_in, kind=args.kind, width=args.width, blocks=args.blocks, parity_plane=inputs == "parity"
        )
        start = time.perf_counter()
        params = train(config, data, args.steps, seed=0)
        seconds = time.perf_counter() - start
        result = measure(geometry, config, params, labelled_set, args.simulations)
        print(f"\n{inputs} input ({config.input_planes} planes, {network.num_parameters(params)} parameters), "
              f"trained in {seconds:.0f} s ({1000 * seconds / args.steps:.1f} ms per step)")
        print("move:            " + " ".join(f"{m:>4d}" for m in range(geometry.num_lines)))
        for name, label in (("sign", "value sign"), ("raw", "raw policy"), ("search", f"search {args.simulations}")):
            print(f"{label:<16} " + " ".join(f"{x:4.2f}" for x in result[name]))
        middle = slice(7, 13)
        print(f"moves 7-12: value sign {result['sign'][middle].mean():.3f}, "
              f"search min {result['search'][middle].min():.3f}; "
              f"search min over all moves {result['search'].min():.3f}")


if __name__ == "__main__":
    main()
