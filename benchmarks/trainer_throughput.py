"""Trainer throughput: what one training iteration does per second, for a config plus overrides, on any backend.

    python benchmarks/trainer_throughput.py --config 5x5                       # the one-GPU recipe
    python benchmarks/trainer_throughput.py --config 5x5_cpu --iterations 3 train.loop=compiled
    python benchmarks/trainer_throughput.py --config 5x5_cpu selfplay.games=2048 train.batch_size=1024 \
        train.max_steps_per_iteration=200 --json results/cpu_recipe.json

It builds the trainer exactly as ``dabjax train`` does (warm start and exact labels included; no periodic
evaluation, no checkpoints, no run directory), runs one iteration to compile, then ``--iterations`` timed ones,
and prints for each:

* self-play: searched positions/s and simulations/s (searched positions x ``search.num_simulations``; the
  forced captures that are played without a search are not counted);
* learning: optimiser steps/s and samples/s (steps x ``train.batch_size``);
* dispatch s and ready s (``dabjax.training.trainer.IterationClock``): the seconds the host spent inside the
  calls that launch compiled work, and blocked on their results. With asynchronous dispatch the first is small
  and the second carries the device's time; a dispatch near the iteration's time means the host waited on the
  device inside the launches (a ``while`` or ``cond`` that XLA's GPU runtime drives from the host);
* smi: on NVIDIA GPUs, ``nvidia-smi``'s utilisation sampled every 100 ms (the share of time some kernel ran),
  elsewhere ``n/a``.

The last line gives the medians. Then one more iteration runs under ``jax.profiler`` (``device_profile.py``;
``--no-profile`` skips it): the device-busy share from the trace (the union of the device's intervals over the
iteration's wall time) and the largest gaps. ``--json`` writes every figure. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import threading
import time

import jax

from dabjax.game import loops
from dabjax.runs import train_boxeszero
from dabjax.training import config as config_lib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import device_profile  # noqa: E402  (a sibling script; benchmarks/ is no package)


class GpuUtilisation:
    """``nvidia-smi``'s utilisation of GPU 0, sampled every ``interval_ms`` in a background process; ``share(t0,
    t1)`` is the mean busy share of the samples taken in ``[t0, t1]`` (``time.perf_counter`` seconds), or None
    where there is no NVIDIA GPU or no sample."""

    def __init__(self, interval_ms: int = 100):
        self.samples: list[tuple[float, float]] = []
        self.process = None
        if jax.default_backend() != "gpu" or shutil.which("nvidia-smi") is None:
            return
        self.process = subprocess.Popen(
            ["nvidia-smi", "--id=0", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
             f"-lms={interval_ms}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            try:
                self.samples.append((time.perf_counter(), float(line.strip()) / 100.0))
            except ValueError:  # a header or a blank line
                continue

    def share(self, began: float, ended: float) -> float | None:
        inside = [value for at, value in list(self.samples) if began <= at <= ended]
        return statistics.mean(inside) if inside else None

    def close(self):
        if self.process is not None:
            self.process.terminate()


def iteration_figures(config: config_lib.TrainConfig, metrics: dict, busy: float | None) -> dict:
    """One iteration's throughput figures from the trainer's metrics."""
    selfplay, train = metrics["selfplay_seconds"], metrics["train_seconds"]
    searched, steps = metrics["searched_positions"], metrics["train_steps"]
    return dict(
        iteration=metrics["iteration"],
        start_step=metrics["start_step"],
        seconds=metrics["iteration_seconds"],
        selfplay_seconds=selfplay,
        train_seconds=train,
        positions_per_s=searched / selfplay,
        simulations_per_s=searched * config.search.num_simulations / selfplay,
        steps_per_s=steps / train if train > 0 else 0.0,
        samples_per_s=steps * config.train.batch_size / train if train > 0 else 0.0,
        dispatch_seconds=metrics["dispatch_seconds"],
        ready_seconds=metrics["ready_seconds"],
        smi_busy_share=busy,
    )


COLUMNS = [  # (title, key, format)
    ("iteration", "iteration", "{:d}"), ("st", "start_step", "{:>3d}"), ("s", "seconds", "{:>7.2f}"),
    ("play s", "selfplay_seconds", "{:>7.2f}"), ("pos/s", "positions_per_s", "{:>9.0f}"),
    ("sims/s", "simulations_per_s", "{:>10.0f}"), ("learn s", "train_seconds", "{:>7.2f}"),
    ("steps/s", "steps_per_s", "{:>8.1f}"), ("samples/s", "samples_per_s", "{:>10.0f}"),
    ("dispatch s", "dispatch_seconds", "{:>10.3f}"), ("ready s", "ready_seconds", "{:>7.3f}"),
    ("smi", "smi_busy_share", "{:>4.2f}"),
]


def cell_width(title: str, form: str) -> int:
    return max(len(title), len(form.format(0)))


def row(figures: dict, label: str | None = None) -> str:
    """One line of the table; ``label`` replaces the iteration number (``median``)."""
    cells = []
    for title, key, form in COLUMNS:
        value = figures.get(key)
        text = label if key == "iteration" and label else ("n/a" if value is None else form.format(value).strip())
        cells.append(text.rjust(cell_width(title, form)))
    return " ".join(cells)


def header() -> str:
    return " ".join(title.rjust(cell_width(title, form)) for title, _, form in COLUMNS)


def medians(rows: list[dict]) -> dict:
    out = {}
    for _, key, _ in COLUMNS:
        values = [r[key] for r in rows if r.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    out["iteration"], out["start_step"] = 0, rows[-1]["start_step"]
    return out


def compiled_training(config_name: str, overrides: list[str]):
    """``(training, state, config, compile seconds)``: the trainer built as ``dabjax train`` builds it for
    ``config_name`` + ``overrides`` (no evaluation, no progress bar), after one iteration that compiles it."""
    config = config_lib.load_config(config_name, [*overrides, "eval.every=0", "run.progress=false"])
    training = train_boxeszero.BoxesZeroTraining(config)
    state = training.init_state()
    began = time.perf_counter()
    state, _ = training.iterate(state)
    return training, state, config, time.perf_counter() - began


def measure(config_name: str, overrides: list[str], iterations: int, out=sys.stdout,
            profile_dir: pathlib.Path | None = None, profile: bool = True) -> dict:
    """Builds the trainer for ``config_name`` + ``overrides``, compiles it, times ``iterations`` iterations and
    prints their table, then profiles one more (unless ``profile`` is false; the trace goes to
    ``profile_dir``, else a temporary folder); returns the figures (``rows``, ``median``, ``profile``,
    ``compile_seconds``, the config's sizes)."""
    training, state, config, compile_seconds = compiled_training(config_name, overrides)
    device = jax.devices()[0]
    print(f"{config_name} {' '.join(overrides)}: {config.network.kind} {config.network.width}x"
          f"{config.network.blocks}, {config.selfplay.games} games, {config.search.num_simulations} simulations, "
          f"{config.train.max_steps_per_iteration} steps of {config.train.batch_size}, loop "
          f"{getattr(training.trainer, 'loop', 'host')}, command buffers "
          f"{'on' if loops.COMMAND_BUFFER_FLAG in os.environ.get('XLA_FLAGS', '') else 'off'}; {device.device_kind} "
          f"({jax.default_backend()}); first iteration (compiling) {compile_seconds:.1f} s", file=out)
    print(header(), file=out)
    sampler = GpuUtilisation()
    rows = []
    try:
        for _ in range(iterations):
            began = time.perf_counter()
            state, metrics = training.iterate(state)
            figures = iteration_figures(config, metrics, sampler.share(began, time.perf_counter()))
            rows.append(figures)
            print(row(figures), file=out, flush=True)
    finally:
        sampler.close()
    median = medians(rows)
    print(row(median, label="median"), file=out)
    found, profile_error = None, None
    if profile:
        try:
            (state, _), found = device_profile.profile(lambda: training.iterate(state), profile_dir)
            print(f"profiled iteration: {device_profile.describe(found)}", file=out)
            print(f"profiled iteration: {device_profile.describe_kernels(found)}", file=out)
        except Exception as error:  # a profiler the backend cannot run must not cost the timed figures
            profile_error = f"{type(error).__name__}: {error}"
            print(f"profiled iteration: FAILED ({profile_error})", file=out)
    return dict(config=config_name, overrides=list(overrides), device=device.device_kind,
                backend=jax.default_backend(), compile_seconds=compile_seconds,
                rows=rows, median=median, profile=None if found is None else found.as_dict(),
                profile_error=profile_error, xla_flags=os.environ.get("XLA_FLAGS", ""),
                games=config.selfplay.games, simulations=config.search.num_simulations,
                batch_size=config.train.batch_size, network=f"{config.network.kind} {config.network.width}x"
                f"{config.network.blocks}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="5x5", help="a config file or built-in name (default: 5x5)")
    parser.add_argument("--iterations", type=int, default=3, help="timed iterations after the compiling one")
    parser.add_argument("--json", type=pathlib.Path, help="also write every figure to this file")
    parser.add_argument("--no-profile", action="store_true", help="skip the profiled iteration")
    parser.add_argument("--profile-dir", type=pathlib.Path,
                        help="keep the profiled iteration's trace here (default: a temporary folder)")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    if args.iterations < 1:
        parser.error("--iterations must be at least 1")
    try:
        result = measure(args.config, args.overrides, args.iterations, profile_dir=args.profile_dir,
                         profile=not args.no_profile)
    except config_lib.ConfigError as error:
        parser.error(str(error))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
