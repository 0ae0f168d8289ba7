"""What the recipe's network moves and costs, per position: its forward pass, a learning step, and the search.

    python benchmarks/network_bytes.py                              # this checkout, 1,024 positions
    python benchmarks/network_bytes.py --against ../dabjax-7947b56  # and another checkout, alternately
    python benchmarks/network_bytes.py --tiny                       # 2x2, 8 positions, 4 simulations (tests)

The network is configs/5x5.yaml's (the graph network; float32 on the CPU, its ``auto`` dtype) with the parameters
of ``--agent`` (``pretrained:5x5``); the positions are uniformly random 5x5 games at move ``--move``, their forced
captures played (the search's roots). For each part, XLA's cost analysis of the compiled program (flops and bytes
accessed, over the positions) and the best of ``--repeats`` calls:

* forward: the network on the positions' observations (what the search evaluates at every simulation);
* learning: the gradient of the trainer's loss terms on those observations (policy cross-entropy against a
  random target, squared value error against a random target) with respect to the parameters;
* search: ``mcts.run_search`` at the recipe's settings (Gumbel MuZero, its simulations, both prunings), in
  simulations per second (positions x simulations / seconds).

Each side runs in a subprocess that imports its checkout's package (first on the path, past an editable install's
hook): this script's checkout and, with ``--against PATH``, another one (this script unchanged), ``--rounds``
times each, alternately, keeping each side's best times:
other jobs on the machine then weigh on both alike. The last line gives this checkout's ratios. XLA counts
each program once: a ``while`` loop's body once, whatever its trips. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import pathlib
import subprocess
import sys
import time

import jax

RESULT_MARK = "network_bytes result: "
ROOT = pathlib.Path(__file__).resolve().parents[1]  # this script's checkout


def played_moves(num_lines: int, move: int) -> int:
    """The positions' move number: ``move``, at most half the lines (random games end early past it)."""
    return min(move, num_lines // 2)


def measure(tiny: bool, agent: str, games: int, move: int, repeats: int) -> dict:
    """One side's figures: ``{part: {flops, bytes, us}}`` per position (``us`` per position, or per position and
    simulation for the search) with ``search_simulations_per_s``."""
    from dabjax.evaluation import pretrained
    from dabjax.game import env as env_lib
    from dabjax.game import policies
    from dabjax.game.geometry import board_geometry
    from dabjax.search import mcts, network
    from dabjax.training import config as config_lib

    config = config_lib.load_config("5x5")
    search, env = config.search, config.board.env()
    if tiny:
        env, search = env_lib.Env.of(board_geometry(2, 2), env.early_termination), dataclasses.replace(
            search, num_simulations=4)
    geometry = env.geometry
    source = pretrained.load_source(agent)
    if dataclasses.replace(source.network_config, dtype=config.network.dtype) != config.network:
        raise SystemExit(f"{agent}'s network {source.network_config} is not configs/5x5.yaml's {config.network}")
    params = source.params
    model = network.PolicyValueNet(config.network)

    def positions(key):
        def body(states, k):
            actions = policies.random_agent(geometry, k, states)
            return jax.vmap(env.step)(states, actions), None

        keys = jax.random.split(key, played_moves(geometry.num_lines, move))
        states = jax.lax.scan(body, env_lib.batch_init(geometry, games), keys)[0]
        roots = getattr(mcts, "search_roots", None) or mcts.prepare_roots  # a checkout before search_roots
        return roots(search, env, states)

    states = jax.jit(positions)(jax.random.PRNGKey(1))
    observations = jax.jit(jax.vmap(lambda s: env_lib.observe(geometry, s)))(states)
    policy_target = jax.nn.softmax(jax.random.normal(jax.random.PRNGKey(2), (games, geometry.num_lines)))
    value_target = jax.random.uniform(jax.random.PRNGKey(3), (games,), minval=-1.0, maxval=1.0)

    def learning(p, obs):
        def loss(p):
            logits, value = model.apply(p, obs)
            policy_loss = -(policy_target * jax.nn.log_softmax(logits)).sum(-1).mean()
            return policy_loss + ((value - value_target) ** 2).mean()

        return jax.grad(loss)(p)

    evaluator = mcts.network_evaluator(config.network, geometry)
    programs = {
        "forward": (lambda p, k, obs, s: model.apply(p, obs)),
        "learning": (lambda p, k, obs, s: learning(p, obs)),
        "search": (lambda p, k, obs, s: mcts.run_search(search, env, evaluator, p, k, s)),
    }
    arguments = (params, jax.random.PRNGKey(4), observations, states)
    compiled = {part: jax.jit(fn).lower(*arguments).compile() for part, fn in programs.items()}
    best = {part: float("inf") for part in compiled}
    for _ in range(repeats):
        for part, executable in compiled.items():
            start = time.perf_counter()
            jax.block_until_ready(executable(*arguments))
            best[part] = min(best[part], time.perf_counter() - start)
    figures = {}
    for part, executable in compiled.items():
        analysis = executable.cost_analysis()
        analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
        per = games * (search.num_simulations if part == "search" else 1)
        figures[part] = dict(flops=float(analysis.get("flops", 0.0)) / games,
                             bytes=float(analysis.get("bytes accessed", 0.0)) / games, us=best[part] / per * 1e6)
    figures["search_simulations_per_s"] = games * search.num_simulations / best["search"]
    figures["move"] = played_moves(geometry.num_lines, move)
    return figures


def use_checkout(checkout: pathlib.Path) -> None:
    """Make ``import dabjax`` read ``checkout``'s package: first on the path, and past an editable install's
    import hook, which would otherwise answer first."""
    sys.meta_path[:] = [finder for finder in sys.meta_path
                        if not (getattr(finder, "__module__", "") or "").startswith("__editable__")]
    sys.path.insert(0, str(checkout.resolve()))


def run_side(checkout: pathlib.Path, args) -> dict:
    """``measure`` in a subprocess, with ``checkout``'s package."""
    command = [sys.executable, __file__, "--side", "--agent", args.agent, "--games", str(args.games),
               "--move", str(args.move), "--repeats", str(args.repeats), "--checkout", str(checkout)]
    command += ["--tiny"] if args.tiny else []
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"measuring {checkout} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len(RESULT_MARK):])


def best_of(rounds: list[dict]) -> dict:
    """Each part's cost analysis (the same every round) and its best time over the rounds."""
    best = copy.deepcopy(rounds[0])
    for figures in rounds[1:]:
        for part in ("forward", "learning", "search"):
            best[part]["us"] = min(best[part]["us"], figures[part]["us"])
        best["search_simulations_per_s"] = max(best["search_simulations_per_s"], figures["search_simulations_per_s"])
    return best


def table(sides: dict[str, dict]) -> str:
    """The sides' figures as a markdown table, one row a checkout."""
    lines = ["| checkout | forward MB | forward MFLOP | forward µs | learning MB | learning µs | search sims/s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, f in sides.items():
        lines.append(f"| {name} | {f['forward']['bytes'] / 1e6:.3f} | {f['forward']['flops'] / 1e6:.2f} | "
                     f"{f['forward']['us']:.1f} | {f['learning']['bytes'] / 1e6:.3f} | {f['learning']['us']:.1f} | "
                     f"{f['search_simulations_per_s']:,.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=pathlib.Path, help="another checkout to measure alternately")
    parser.add_argument("--rounds", type=int, default=2, help="subprocess runs per side (default: 2)")
    parser.add_argument("--games", type=int, default=1024, help="positions (default: 1024)")
    parser.add_argument("--move", type=int, default=30, help="the positions' move number (default: 30)")
    parser.add_argument("--agent", default="pretrained:5x5", help="the parameters (default: pretrained:5x5)")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per part and run; the best counts")
    parser.add_argument("--tiny", action="store_true", help="2x2 board, 8 positions, 4 simulations (tests)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the figures to this file")
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--checkout", type=pathlib.Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tiny:
        args.games, args.repeats, args.rounds = 8, 1, 1
    if args.side:
        if args.checkout is not None:
            use_checkout(args.checkout)
        import dabjax

        if args.checkout is not None and pathlib.Path(dabjax.__file__).resolve().parents[1] != args.checkout.resolve():
            raise SystemExit(f"dabjax was imported from {dabjax.__file__}, not from {args.checkout}")
        print(RESULT_MARK + json.dumps(measure(args.tiny, args.agent, args.games, args.move, args.repeats)))
        return 0
    checkouts = {"this checkout": ROOT}
    if args.against is not None:
        checkouts[str(args.against)] = args.against
    rounds: dict[str, list] = {name: [] for name in checkouts}
    for _ in range(args.rounds):
        for name, checkout in checkouts.items():
            rounds[name].append(run_side(checkout, args))
    sides = {name: best_of(runs) for name, runs in rounds.items()}
    move = sides["this checkout"]["move"]
    print(f"{args.games} positions at move {move}, {args.agent}, backend {jax.default_backend()}")
    print(table(sides))
    if args.against is not None:
        ours, theirs = sides["this checkout"], sides[str(args.against)]
        ratio = {part: ours[part]["bytes"] / theirs[part]["bytes"] for part in ("forward", "learning")}
        print(f"this checkout / {args.against}: forward bytes {ratio['forward']:.2f}x, "
              f"forward time {ours['forward']['us'] / theirs['forward']['us']:.2f}x, "
              f"learning bytes {ratio['learning']:.2f}x, learning time "
              f"{ours['learning']['us'] / theirs['learning']['us']:.2f}x, search sims/s "
              f"{ours['search_simulations_per_s'] / theirs['search_simulations_per_s']:.2f}x")
    if args.json is not None:
        args.json.write_text(json.dumps(dict(games=args.games, move=args.move, agent=args.agent, sides=sides),
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
