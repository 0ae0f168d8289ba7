"""Host round trips in the hot path: the ``while`` loops, ``cond`` branches and host callbacks of the compiled
programs.

    python benchmarks/host_loops.py --config 5x5                 # the one-GPU recipe
    python benchmarks/host_loops.py --config smoke --where

On a GPU, XLA reads a ``while`` loop's condition (and a ``cond``'s predicate) back to the host and waits, at
every turn, unless it records the loop as a command buffer (``dabjax.game.loops``: importing dabjax turns them
on; measured in docs/lab/gpu.md, "The loops on one NVIDIA H200"); a callback into Python always waits, and keeps
the loops around it out of command buffers. This counts them, without a GPU, in the jaxprs of the three programs
of the hot path, built exactly as the trainer builds them for a config:

* ``self-play``: one iteration's self-play (``Trainer._play``: the searches, the forced captures, the endgame
  analysis, node extraction);
* ``agent``: the searching agent of evaluation and arenas (``search.agents.search_agent``, no Gumbel noise);
* ``learning``: one iteration's learning call (the plan and all its optimiser steps, ``train.loop`` compiled).

Each is counted once per place in the program, not per turn. The number to read is the host callbacks: 0 (the
exit status is 1 otherwise); ``--where`` prints each place. Tracing needs no device memory: the arrays are
abstract (``jax.eval_shape``).
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


def program_jaxprs(config: config_lib.TrainConfig) -> dict[str, object]:
    """``{program: closed jaxpr}`` of the hot path for ``config`` (module docstring)."""
    trainer = trainer_lib.Trainer(config, exact_samples=train_boxeszero.exact_label_samples(config))
    trainer.place = lambda tree: tree  # placing on the mesh reads arrays to the host: not under eval_shape
    state = jax.eval_shape(trainer.init_state)
    params, key, start_step = state.train_state.params, state.key, state.start_step
    jaxprs = {"self-play": jax.make_jaxpr(trainer._play)(params, key, start_step)}
    search = dataclasses.replace(trainer.search_config, gumbel_scale=0.0)
    geometry = trainer.geometry
    states = jax.eval_shape(lambda: env_lib.batch_init(geometry, config.eval.batch_size))

    def agent(params, key, states):
        return agents.search_agent(search, trainer.env, trainer.evaluator, params)(geometry, key, states)

    jaxprs["agent"] = jax.make_jaxpr(agent)(params, key, states)
    if trainer.loop == "compiled":
        exact_key = key if trainer.exact_samples is not None else None
        jaxprs["learning"] = jax.make_jaxpr(trainer._learn_compiled)(
            state.train_state, state.buffer, key, exact_key, state.iteration)
    return jaxprs


def count(config: config_lib.TrainConfig) -> dict[str, list[tuple[str, str]]]:
    """``{program: [(primitive, where), ...]}``: the ``while`` loops, ``cond`` branches and host callbacks of each
    program (``loops.host_waits``)."""
    return {name: loops.host_waits(jaxpr) for name, jaxpr in program_jaxprs(config).items()}


def host_callbacks(found: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The host callbacks among ``found`` (``count``'s list for one program): what must not be in the hot path."""
    return [(kind, where) for kind, where in found if kind in loops.HOST_CALLBACK_PRIMITIVES]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="5x5", help="a config name or path (default: 5x5, the GPU recipe)")
    parser.add_argument("--where", action="store_true", help="print where each while, cond and callback was traced")
    parser.add_argument("overrides", nargs="*", help="config overrides, key=value")
    args = parser.parse_args(argv)
    config = config_lib.load_config(config_lib.config_path(args.config), args.overrides)
    print(f"config {args.config}: while / cond / host callbacks in the compiled programs")
    callbacks = 0
    for name, found in count(config).items():
        kinds = collections.Counter(kind for kind, _ in found)
        called = len(host_callbacks(found))
        print(f"  {name:10s} while {kinds['while']}  cond {kinds['cond']}  host callbacks {called}")
        if args.where:
            for kind, where in found:
                print(f"      {kind:14s} {where}")
        callbacks += called
    return 1 if callbacks else 0


if __name__ == "__main__":
    sys.exit(main())
