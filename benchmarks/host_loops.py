"""Host round trips in the hot path: the ``while`` loops, ``cond`` branches and host callbacks of the compiled
programs.

    python benchmarks/host_loops.py --config 5x5                 # the one-GPU recipe, both loop styles
    python benchmarks/host_loops.py --config smoke --style bounded --where

On a GPU, XLA reads a ``while`` loop's condition (and a ``cond``'s predicate) back to the host and waits, at
every turn, unless it records the loop as a command buffer (``dabjax.game.loops``); a callback into Python
always waits, and keeps the loops around it out of command buffers. This counts them, without a GPU, in the
jaxprs of the three programs of the hot path, built exactly as the trainer builds them for a config:

* ``self-play``: one iteration's self-play (``Trainer._play``: the searches, the forced captures, the endgame
  analysis, node extraction);
* ``agent``: the searching agent of evaluation and arenas (``search.agents.search_agent``, no Gumbel noise);
* ``learning``: one iteration's learning call (the plan and all its optimiser steps, ``train.loop`` compiled).

A ``while`` or ``cond`` is counted once per place in the program, not per turn: the number to read is 0 in the
bounded style (the hot path depends on the host nowhere else). The default on every backend is the while style,
whose loops a GPU runs as XLA command buffers without the host (``dabjax.game.loops``; measured in docs/gpu.md).
``ALLOWED`` names the exceptions and why; ``--where`` prints each place. Tracing
needs no device memory: the arrays are abstract (``jax.eval_shape``).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys

import jax

from dabjax.game import env as env_lib
from dabjax.game import loops
from dabjax.runs import train_boxeszero
from dabjax.search import agents
from dabjax.training import config as config_lib
from dabjax.training import trainer as trainer_lib

# Places (a path fragment of the frame that traced them) where a host wait is kept on purpose, and why.
ALLOWED = {
    "dabjax/game/match.py": "an arena asks each agent only for the part of the batch where that agent moves: one "
                            "predicate per part and move step, not per simulation; asking both agents always "
                            "would double an arena's searches",
}


def allowed(where: str) -> str | None:
    """The reason a host wait traced at ``where`` is allowed, or None."""
    return next((reason for place, reason in ALLOWED.items() if place in where), None)


def program_jaxprs(config: config_lib.TrainConfig) -> dict[str, object]:
    """``{program: closed jaxpr}`` of the hot path for ``config`` (module docstring), traced in the loop style in
    force (``loops.use_loop_style``)."""
    trainer = trainer_lib.Trainer(config, exact_samples=train_boxeszero.exact_label_samples(config))
    trainer.place = lambda tree: tree  # placing on the mesh reads arrays to the host: not under eval_shape
    state = jax.eval_shape(trainer.init_state)
    params, key, start_step = state.train_state.params, state.key, state.start_step
    jaxprs = {"self-play": jax.make_jaxpr(trainer._play)(params, key, start_step)}
    search = dataclasses.replace(trainer.search_config, gumbel_scale=0.0)
    geometry = trainer.geometry
    states = jax.eval_shape(lambda: env_lib.batch_init(geometry, config.eval.batch_size))

    def agent(params, key, states):
        return agents.search_agent(search, trainer.evaluator, params)(geometry, key, states)

    jaxprs["agent"] = jax.make_jaxpr(agent)(params, key, states)
    if trainer.loop == "compiled":
        exact_key = key if trainer.exact_samples is not None else None
        jaxprs["learning"] = jax.make_jaxpr(trainer._learn_compiled)(
            state.train_state, state.buffer, key, exact_key, state.iteration)
    return jaxprs


def count(config: config_lib.TrainConfig, style: str) -> dict[str, list[tuple[str, str]]]:
    """``{program: [(primitive, where), ...]}``: the host waits of each program in ``style``."""
    with loops.use_loop_style(style):
        return {name: loops.host_waits(jaxpr) for name, jaxpr in program_jaxprs(config).items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="5x5", help="a config name or path (default: 5x5, the GPU recipe)")
    parser.add_argument("--style", choices=("while", "bounded", "both"), default="both")
    parser.add_argument("--where", action="store_true", help="print where each while and cond was traced")
    parser.add_argument("overrides", nargs="*", help="config overrides, key=value")
    args = parser.parse_args(argv)
    config = config_lib.load_config(config_lib.config_path(args.config), args.overrides)
    styles = ("while", "bounded") if args.style == "both" else (args.style,)
    print(f"config {args.config}: while / cond in the compiled programs (allowed ones in brackets)")
    unexplained = 0
    for style in styles:
        for name, found in count(config, style).items():
            kinds = collections.Counter(kind for kind, where in found if not allowed(where))
            kept = collections.Counter(kind for kind, where in found if allowed(where))
            print(f"  {style:8s} {name:10s} while {kinds['while']} [{kept['while']}]  cond {kinds['cond']} "
                  f"[{kept['cond']}]")
            if args.where:
                for kind, where in found:
                    print(f"      {kind:5s} {where}" + (f"  (allowed: {allowed(where)})" if allowed(where) else ""))
            if style == "bounded":
                unexplained += sum(kinds.values())
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
