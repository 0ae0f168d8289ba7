"""``python train.py --config configs/td_3x3.yaml``: TD(lambda) training (seed 003). The shell around
``dabjax.td``; ``train.py`` sends configs with ``mode: td`` here.

    python train.py --config configs/td_3x3.yaml                       # against level 0
    python train.py --config configs/td_3x3.yaml td.opponent=level2 td.lam=0.9 run.dir=runs/td-l2

Run directory (as the BoxesZero trainer's): ``config.yaml`` (the resolved config; a changed config on
resume keeps the old one as ``config.<time>.yaml``), ``metrics.jsonl`` (one JSON object per iteration:
``iteration``, ``games``, ``time`` (training seconds), ``loss``, ``mean_abs_value``, ``train_win_rate``,
``train_margin``, ``games_per_s``, and every ``eval.every`` iterations ``eval/win_rate_vs_<opponent>`` and
``eval/margin_vs_<opponent>``), ``tb/`` and ``checkpoints/<iteration>/`` (``dabjax.checkpoint``'s orbax
layout: ``params`` = the MLP's flax variables, ``trainer`` = optimiser state, PRNG key and iteration,
``meta`` = JSON with ``method: td``, board, network and the whole config). The same command on an
existing run directory resumes from its latest checkpoint; Ctrl-C saves before exiting.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from dabjax import checkpoint, td
from dabjax.cli.train import MetricsLog, _write_config
from dabjax.config import ConfigError
from dabjax.geometry import board_geometry
from dabjax.td_config import TDConfig, load_td_config


def _evaluate(config: TDConfig, params, key) -> dict:
    geometry = board_geometry(config.board.rows, config.board.cols)
    net = td.value_net_config(config)
    out = {}
    for opponent, sub in zip(config.eval.opponents, jax.random.split(key, len(config.eval.opponents))):
        match = td.compiled_match(net, geometry, opponent, config.eval.games, config.board.early_termination)
        reward, margin = match(params, sub)
        out[f"eval/win_rate_vs_{opponent}"] = float((np.asarray(reward) > 0).mean())
        out[f"eval/margin_vs_{opponent}"] = float(np.asarray(margin).mean())
    return out


def _save(store: checkpoint.CheckpointStore, config: TDConfig, state: td.TDState, wall_time: float) -> None:
    trainer = {"opt_state": state.opt_state, "key": state.key, "iteration": state.iteration}
    store.save(int(state.iteration), state.params, trainer, dict(td.meta(config), wall_time=wall_time))


def _restore(store: checkpoint.CheckpointStore, config: TDConfig, fresh: td.TDState, iteration: int):
    meta = store.read_meta(iteration)
    where = store.directory / str(iteration)
    if meta.get("method") != td.METHOD:
        raise ValueError(f"checkpoint {where} is not a TD run (method {meta.get('method', 'boxeszero')!r})")
    expected = td.meta(config)
    for key in ("rows", "cols", "network"):
        if meta[key] != expected[key]:
            raise ValueError(
                f"checkpoint {where} has {key} {meta[key]!r}, but the config asks for {expected[key]!r}; "
                "use another run directory"
            )
    trainer = {"opt_state": fresh.opt_state, "key": fresh.key, "iteration": fresh.iteration}
    params, restored, meta = store.restore(iteration, fresh.params, trainer)
    state = td.TDState(params, restored["opt_state"], restored["key"], jnp.int32(restored["iteration"]))
    return state, float(meta.get("wall_time", 0.0))


def train(config: TDConfig, quiet: bool = False) -> dict:
    """Trains (or resumes) one TD run to ``run.iterations`` or ``run.max_minutes``; returns its last metrics."""
    run_dir = pathlib.Path(config.run.dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    store = checkpoint.CheckpointStore(run_dir, keep=config.run.keep_checkpoints)
    fresh = td.init_state(config)
    latest = store.latest_iteration()
    try:
        state, wall_time = (fresh, 0.0) if latest is None else _restore(store, config, fresh, latest)
    except ValueError:
        store.close()
        raise
    _write_config(run_dir, config, quiet=quiet)
    start = int(state.iteration)
    log = MetricsLog(run_dir, start)
    say = (lambda text: None) if quiet else tqdm.write
    say(
        f"{'resuming' if latest is not None else 'starting'} TD({config.td.lam}) against {config.td.opponent} on "
        f"{config.board.rows}x{config.board.cols} at iteration {start}; run dir {run_dir}"
    )
    iteration_fn = td.make_iteration(config)
    budget = config.run.max_minutes * 60 if config.run.max_minutes else float("inf")
    eval_key = jax.random.PRNGKey(config.run.seed + 1)
    bar = tqdm(total=config.run.iterations, initial=start, disable=quiet or not config.run.progress, unit="it")
    metrics: dict = {}
    try:
        while int(state.iteration) < config.run.iterations and wall_time < budget:
            began = time.perf_counter()
            state, out = iteration_fn(state)
            out = {k: float(v) for k, v in jax.device_get(out).items()}
            seconds = time.perf_counter() - began
            wall_time += seconds
            iteration = int(state.iteration)
            metrics = dict(
                iteration=iteration, games=iteration * config.td.games, time=wall_time,
                games_per_s=config.td.games / max(seconds, 1e-9), **out,
            )
            if config.eval.every and iteration % config.eval.every == 0:
                eval_key, sub = jax.random.split(eval_key)
                metrics.update(_evaluate(config, state.params, sub))
            log.write(metrics)
            if iteration % config.run.checkpoint_every == 0:
                _save(store, config, state, wall_time)
            bar.set_postfix(loss=f"{out['loss']:.3f}", win=f"{out['train_win_rate']:.2f}")
            bar.update(1)
    except KeyboardInterrupt:
        say("interrupted: saving a checkpoint")
    finally:
        bar.close()
        if store.latest_iteration() != int(state.iteration) and (latest is None or int(state.iteration) > latest):
            _save(store, config, state, wall_time)
        store.close()
        log.close()
    say(f"done: iteration {int(state.iteration)}; checkpoints in {store.directory}")
    return metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="train.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", required=True, help="YAML config with mode: td")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or messages")
    parser.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. td.lam=0.9 run.dir=runs/x")
    args = parser.parse_intermixed_args(argv)
    try:
        config = load_td_config(args.config, args.overrides)
        if args.print_config:
            from omegaconf import OmegaConf

            print(OmegaConf.to_yaml(OmegaConf.structured(config)), end="")
            return 0
        train(config, quiet=args.quiet)
    except (ConfigError, ValueError, FileNotFoundError) as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
