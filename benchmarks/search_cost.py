"""Where a simulation's time goes: the parts of one search at the recipe's settings, timed and costed apart.

    python benchmarks/search_cost.py                              # 1,024 and 4,096 games, pretrained:5x5
    python benchmarks/search_cost.py --games 1024 --json cost.json
    python benchmarks/search_cost.py --tiny                       # 2x2, 8 games, 4 simulations (tests)

The settings are configs/5x5.yaml's (``load_config("5x5")``): its graph network (float32 on the CPU, the
``auto`` dtype), Gumbel MuZero at its simulations with both prunings, the evaluator built as the trainer builds it
(``mcts.network_evaluator``); the parameters of ``--agent`` (``pretrained:5x5`` by default, ``random`` for a random
initialisation). The positions: uniformly random games at move ``--move``, their forced captures played (the
search's roots, ``mcts.search_roots``).

Each part is the search's own function, jitted and vmapped over the batch on its own, and run once per simulation
and game in the search (``mcts.make_recurrent_fn``), but for the searchable mask, which the search computes at
the root (inside the tree the forced-capture settle gives it):

* network: the network's forward pass on the observations;
* observation: ``env.observe``;
* step + settle: ``env.step`` and the forced captures that follow, with the searchable mask they give
  (``mcts._expand``), on a random searchable move of each position;
* endgame: the simple-endgame analysis (``mcts._solve``: ``endgame.simple_endgame_margin``);
* searchable mask: ``forced.searchable_mask`` (``mcts._searchable``);
* search: the whole ``mcts.run_search`` (the root's evaluation included), per game per simulation. The rest of
  it, past the parts' sum, is the tree's own bookkeeping (descent, backup, node writes); a part alone may also
  run slower than inside the search, where XLA may fuse it with its neighbours.

Times are the best of ``--repeats`` calls, in microseconds per game per simulation (the batch's time over the
games); flops and bytes are XLA's cost analysis of the compiled part, per position. XLA counts a ``while`` loop's
body once, whatever its trips: the search's figures are about its root's and one simulation's, and a part's
data-dependent loop counts as one step.

Trip counts: the search's data-dependent loops (``dabjax.game.loops.repeat_while``: the forced-capture settle,
the chain walk, the label propagation, the tree descent) run, batched, as many steps as their slowest element.
An instrumented search (the library's code, its ``repeat_while`` and ``on_lanes`` wrapped from here while it is
traced) counts, for each lane, the steps at which the loop's condition held, and reports per loop the mean steps
per game, the batch's maximum, and the lane-steps it ran per game (lanes x steps: the settle and the endgame
analysis run on lanes, ``search.lane_share`` of the batch, where few games need them; ``--lane-share 1`` runs
them on the whole batch), averaged over the loop's runs (one per simulation, and the root's); ``busy`` is the
share of the lane-steps that did work. For the loops on lanes it also gives the share of games that needed them.
The settle's counts start after its first turn, which runs on the whole batch outside the loop (two steps a game
at any share). A step is one guarded body (``repeat_while``
takes ``steps_per_turn`` of them per turn of the ``while`` loop). A loop the search never runs is left out.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import search_throughput  # noqa: E402  (a sibling script: benchmarks/ is on the path)

from dabjax.evaluation import pretrained  # noqa: E402
from dabjax.game import env as env_lib  # noqa: E402
from dabjax.game import loops, policies  # noqa: E402
from dabjax.game.geometry import BoardGeometry, board_geometry  # noqa: E402
from dabjax.search import mcts, network  # noqa: E402
from dabjax.training import config as config_lib  # noqa: E402

# The functions whose loop each is: the innermost frame of these names above a repeat_while (or an on_lanes).
LOOP_NAMES = {
    "play_forced_moves_with_choice": "forced-capture settle",
    "play_forced_moves_on_lanes": "forced-capture settle",
    "chains_and_loops": "chain walk",
    "simple_endgame_margin_on_lanes": "chain walk",
    "label_components": "label propagation",
    "_descend": "tree descent",
}
PARTS = ("network", "observation", "step + settle", "endgame", "searchable mask", "search")


@dataclasses.dataclass(frozen=True)
class Setting:
    """What one measurement searches: the environment (board and rule), the search and network settings, and the
    parameters."""

    env: env_lib.Env
    search: mcts.SearchConfig
    network: network.NetworkConfig
    params: object

    @property
    def geometry(self) -> BoardGeometry:
        return self.env.geometry


def recipe(tiny: bool, agent: str) -> Setting:
    """configs/5x5.yaml's search and network (``--tiny``: on a 2x2 board, 4 simulations), with ``agent``'s
    parameters (``pretrained:...``) or a random initialisation (``random``)."""
    config = config_lib.load_config("5x5")
    search, env = config.search, config.board.env()
    if tiny:
        env, search = env_lib.Env.of(board_geometry(2, 2), env.early_termination), dataclasses.replace(
            search, num_simulations=4)
    geometry = env.geometry
    if agent == "random":
        params = network.init_params(config.network, geometry.grid_shape, jax.random.PRNGKey(0))
    else:  # the graph network plays any board: the 5x5 parameters serve the tiny board too
        params = pretrained.load_source(agent).params
    return Setting(env, search, config.network, params)


def random_positions(setting: Setting, games: int, move: int, key) -> env_lib.State:
    """``games`` uniformly random games at move ``move`` (at most half the lines), forced captures played."""
    g = setting.geometry

    def body(states, k):
        actions = policies.random_agent(g, k, states)
        return jax.vmap(setting.env.step)(states, actions), None

    keys = jax.random.split(key, min(move, g.num_lines // 2))
    states = jax.lax.scan(body, env_lib.batch_init(g, games), keys)[0]
    return mcts.search_roots(setting.search, setting.env, states)


def random_searchable_moves(setting: Setting, states: env_lib.State, key) -> jax.Array:
    """int32 ``[N]``: a uniformly random move worth searching in each position (what a descent may expand)."""
    searchable = mcts._searchable(setting.search, setting.geometry, states)
    return jax.vmap(policies.choose_best)(
        jax.random.split(key, searchable.shape[0]), jnp.zeros(searchable.shape, jnp.float32), searchable)


def part_functions(setting: Setting) -> dict:
    """``{part: fn(params, key, inputs)}``, ``inputs`` the ``(observations, states, moves)`` of ``part_inputs``."""
    g, search = setting.geometry, setting.search
    model = network.PolicyValueNet(setting.network)
    evaluator = mcts.network_evaluator(setting.network, g)
    # The search's own helpers, so that each part is exactly what make_recurrent_fn runs.
    return {
        "network": lambda p, k, inputs: model.apply(p, inputs[0]),
        "observation": lambda p, k, inputs: jax.vmap(lambda s: env_lib.observe(g, s))(inputs[1]),
        "step + settle": lambda p, k, inputs: mcts._expand(search, setting.env, inputs[1], inputs[2]),
        "endgame": lambda p, k, inputs: mcts._solve(search, g, inputs[1]),
        "searchable mask": lambda p, k, inputs: mcts._searchable(search, g, inputs[1]),
        "search": lambda p, k, inputs: mcts.run_search(search, setting.env, evaluator, p, k, inputs[1]),
    }


def part_inputs(setting: Setting, states: env_lib.State, key) -> tuple:
    """``(observations, states, moves)``: the positions' observations, the positions, a random searchable move
    of each (what a descent may expand)."""
    observations = jax.jit(jax.vmap(lambda s: env_lib.observe(setting.geometry, s)))(states)
    moves = jax.jit(functools.partial(random_searchable_moves, setting))(states, key)
    return observations, states, moves


def cost_per_position(compiled, games: int) -> tuple[float, float]:
    """``(flops, bytes accessed)`` of one call of a compiled part, over the batch's positions."""
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    return float(analysis.get("flops", 0.0)) / games, float(analysis.get("bytes accessed", 0.0)) / games


def measure_parts(setting: Setting, games: int, move: int, repeats: int) -> list[dict]:
    """One row per part: microseconds per game per simulation, and flops and bytes per position. The parts are
    timed in turn, ``repeats`` rounds (search_throughput.best_times): other jobs on the machine then weigh on
    every part alike."""
    states = jax.jit(lambda k: random_positions(setting, games, move, k))(jax.random.PRNGKey(1))
    inputs = part_inputs(setting, states, jax.random.PRNGKey(4))
    compiled = {part: jax.jit(fn).lower(setting.params, jax.random.PRNGKey(2), inputs).compile()
                for part, fn in part_functions(setting).items()}
    times = search_throughput.best_times(list(compiled.values()), setting.params, inputs, repeats)
    rows = []
    for (part, executable), seconds in zip(compiled.items(), times):
        per_simulation = seconds / games / (setting.search.num_simulations if part == "search" else 1)
        flops, bytes_accessed = cost_per_position(executable, games)
        rows.append(dict(part=part, us_per_game_simulation=per_simulation * 1e6, flops_per_position=flops,
                         bytes_per_position=bytes_accessed))
    return rows


# --- trip counts of the data-dependent loops -------------------------------------------------------------


def echoed_into(carry, echo, steps):
    """``carry`` with ``echo - steps`` (zero: the callback echoes ``steps``) added to every numeric leaf, so
    that the callback that recorded ``steps`` is part of whatever the caller keeps of the loop's result, and not
    pruned as dead code."""
    zero = echo - steps

    def depend(leaf):
        numeric = jnp.issubdtype(leaf.dtype, jnp.integer) or jnp.issubdtype(leaf.dtype, jnp.floating)
        return leaf + zero.astype(leaf.dtype) if numeric else leaf

    return jax.tree_util.tree_map(depend, carry)


def loop_name() -> str:
    """The loop a ``repeat_while`` or ``on_lanes`` being traced belongs to: the innermost caller in
    ``LOOP_NAMES`` (else the direct caller's name)."""
    frame = sys._getframe(2)
    direct = frame.f_code.co_name
    while frame is not None:
        if frame.f_code.co_name in LOOP_NAMES:
            return LOOP_NAMES[frame.f_code.co_name]
        frame = frame.f_back
    return direct


def recorded(carry, value, record):
    """``carry`` made to depend on a ``pure_callback`` that hands ``value`` to ``record`` when it runs."""
    def call(value):
        record(np.asarray(value))
        return np.asarray(value)

    echo = jax.pure_callback(call, jax.ShapeDtypeStruct(value.shape, value.dtype), value,
                             vmap_method="broadcast_all")
    return echoed_into(carry, echo, value)


@contextlib.contextmanager
def counting_loops(runs: list):
    """While inside, every ``repeat_while`` traced appends ``("steps", loop, steps int [K])`` to ``runs`` each
    time it runs (per element of its batch, ``K`` lanes, the steps at which its condition held), and every
    ``on_lanes`` appends ``("calls", loop, needing, games)`` (its batch's elements that needed the work, and
    the batch) each time it runs, whichever way it goes (a loop that no element needs runs no steps). The
    library's functions are the same; only the names the modules call are wrapped, for the traces made inside
    (jit a new function there)."""
    original_while, original_lanes = loops.repeat_while, loops.on_lanes

    def counted_while(cond, body, init, steps_per_turn):
        loop = loop_name()

        def count_body(carry):  # repeat_while keeps the old carry, counter included, where cond fails
            return body(carry[0]), carry[1] + 1

        carry, steps = original_while(lambda carry: cond(carry[0]), count_body, (init, jnp.int32(0)),
                                      steps_per_turn)
        return recorded(carry, steps, lambda s: runs.append(("steps", loop, s.reshape(-1))))

    def counted_lanes(fn, needs, inputs, otherwise, lanes):
        loop = loop_name()
        result = original_lanes(fn, needs, inputs, otherwise, lanes)
        count = needs.sum(dtype=jnp.int32)
        return recorded(result, count, lambda c: runs.append(("calls", loop, int(c), needs.shape[0])))

    patched = []
    for module in list(sys.modules.values()):
        for name, original, counted in (("repeat_while", original_while, counted_while),
                                        ("on_lanes", original_lanes, counted_lanes)):
            if getattr(module, name, None) is original:
                patched.append((module, name, original))
                setattr(module, name, counted)
    try:
        yield runs
    finally:
        for module, name, original in patched:
            setattr(module, name, original)


def trip_counts(setting: Setting, games: int, move: int) -> list[dict]:
    """Per loop of one instrumented search: its runs, the mean steps per game, the batch's maximum (mean over
    the runs recorded: a loop on lanes that no game needs records none), the lanes it stepped per game and run
    (lanes x steps, over the games), and ``busy``, the share of those lane-steps that did work; for a loop on
    lanes (``on_lanes``), the share of games that needed it (mean and largest over its runs)."""
    states = jax.jit(lambda k: random_positions(setting, games, move, k))(jax.random.PRNGKey(1))
    evaluator = mcts.network_evaluator(setting.network, setting.geometry)
    runs: list = []
    with counting_loops(runs):
        search = jax.jit(lambda p, k, s: mcts.run_search(setting.search, setting.env, evaluator, p, k, s))
        jax.block_until_ready(search(setting.params, jax.random.PRNGKey(2), states))
    rows = []
    for loop in dict.fromkeys(entry[1] for entry in runs):
        steps = [entry[2] for entry in runs if entry[:2] == ("steps", loop)]
        calls = [entry[2:] for entry in runs if entry[:2] == ("calls", loop)]
        worked = float(sum(s.sum() for s in steps))
        lane_steps = float(sum(s.size * s.max() for s in steps if s.size))
        count = len(calls) if calls else len(steps)  # a loop on lanes: one run per call, stepped or not
        row = dict(loop=loop, runs=count, mean_steps=worked / (count * games),
                   max_steps=float(np.mean([s.max() for s in steps])) if steps else 0.0,
                   lane_steps=lane_steps / (count * games), busy=worked / lane_steps if lane_steps else 1.0)
        if calls:
            shares = [needing / batch for needing, batch in calls]
            row.update(needing=float(np.mean(shares)), needing_max=float(np.max(shares)))
        rows.append(row)
    return rows


# --- the report ----------------------------------------------------------------------------------------------


def markdown(games: int, setting: Setting, parts: list[dict], trips: list[dict]) -> str:
    g = setting.geometry
    lines = [f"### {games:,} games, {g.rows}x{g.cols}, {setting.search.num_simulations} simulations "
             f"({jax.default_backend()})", "",
             "| part | us / game / simulation | share of search | flops / position | bytes / position |",
             "| --- | ---: | ---: | ---: | ---: |"]
    search = next((row["us_per_game_simulation"] for row in parts if row["part"] == "search"), 1.0)
    for row in parts:
        lines.append(f"| {row['part']} | {row['us_per_game_simulation']:.2f} | "
                     f"{row['us_per_game_simulation'] / search:.0%} | {row['flops_per_position']:,.0f} | "
                     f"{row['bytes_per_position']:,.0f} |")
    lines += ["", f"Lanes: {setting.search.lane_share:g} of the games (search.lane_share).", "",
              "| loop | runs | games needing it (mean / most) | mean steps / game | batch max steps | "
              "lane-steps / game | busy |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in trips:
        needing = (f"{row['needing']:.0%} / {row['needing_max']:.0%}" if "needing" in row else "all")
        lines.append(f"| {row['loop']} | {row['runs']} | {needing} | {row['mean_steps']:.2f} | "
                     f"{row['max_steps']:.2f} | {row['lane_steps']:.2f} | {row['busy']:.0%} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", default="1024,4096", help="comma-separated batch sizes (default: 1024,4096)")
    parser.add_argument("--move", type=int, default=30, help="the positions' move number (default: 30)")
    parser.add_argument("--agent", default="pretrained:5x5", help="pretrained:RxC or random (default: pretrained:5x5)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per part; the best counts")
    parser.add_argument("--lane-share", type=float,
                        help="search.lane_share (default: the config's; 1: every loop on the whole batch)")
    parser.add_argument("--trips-only", action="store_true", help="count the loops' steps; time nothing")
    parser.add_argument("--tiny", action="store_true", help="2x2 board, 8 games, 4 simulations (tests)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    setting = recipe(args.tiny, args.agent)
    if args.lane_share is not None:
        setting = dataclasses.replace(setting, search=dataclasses.replace(setting.search, lane_share=args.lane_share))
    batches = [8] if args.tiny else [int(games) for games in args.games.split(",")]
    report = []
    for games in batches:
        parts = [] if args.trips_only else measure_parts(setting, games, args.move, args.repeats)
        trips = trip_counts(setting, games, args.move)
        print(markdown(games, setting, parts, trips), "\n", flush=True)
        report.append(dict(games=games, board=f"{setting.geometry.rows}x{setting.geometry.cols}",
                           simulations=setting.search.num_simulations, move=args.move, agent=args.agent,
                           backend=jax.default_backend(), parts=parts, loops=trips))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
