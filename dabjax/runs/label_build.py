"""A labelled set built resumably (``dabjax label build``), with a progress bar and the time left.

    dabjax label build --board 5x5 --moves 18-30 --per-move "18-21:10,22:100,23:300,24:1000,25:2000,26-30:3500" \\
        --seed 11 --exclude 5x5 --no-move-values --out sets/5x5_train.npz

The build works in ``OUT.parts/`` (``--work-dir``): ``manifest.json`` (the arguments that decide the set),
``positions.npz`` (the sampled positions, after ``--exclude``) and one ``chunk_START_STOP.npz`` of labels per
solved chunk, each written atomically as it finishes. Stopped at any point (Ctrl-C or SIGTERM: exit status 130
or 143 and one line saying how many chunks are saved; a kill; a lost machine), the same command goes on from
the chunks on disk; other arguments that decide the set are refused, naming them (``--workers`` and the bar
may change). When every chunk is solved, the set is written to ``OUT`` and the work directory removed.

Chunks are solved in a fixed shuffled order, so the rate so far is a fair sample of the positions left and
the bar's time left (tqdm's, from the positions per second of this run) means something on sets whose move
numbers cost 10,000 times apart (5x5 move 18 against move 30).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import time

import numpy as np
from tqdm import tqdm

from dabjax.game.geometry import BoardGeometry
from dabjax.solvers import labelled, parallel_labels
from dabjax.training.config import ConfigError

MANIFEST_VERSION = 1


def work_dir_for(out: pathlib.Path, work_dir: str | None) -> pathlib.Path:
    """The build's work directory: ``work_dir`` if given, else ``OUT.parts`` beside the output file."""
    return pathlib.Path(work_dir) if work_dir else out.with_name(out.name + ".parts")


def _write_atomic(path: pathlib.Path, **arrays) -> None:
    """``np.savez`` to ``path`` through a temporary file and a rename: a file is whole or absent."""
    partial = path.with_name(path.name + ".tmp.npz")
    np.savez(partial, **arrays)
    os.replace(partial, path)


def _chunk_path(work: pathlib.Path, start: int, stop: int) -> pathlib.Path:
    return work / f"chunk_{start:07d}_{stop:07d}.npz"


def _check_manifest(work: pathlib.Path, manifest: dict) -> None:
    """Writes ``manifest.json`` in a new work directory; in an existing one, raises ConfigError (the user's
    arguments are at fault) naming the arguments that differ from the build it holds."""
    path = work / "manifest.json"
    if not path.is_file():
        work.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
        return
    held = json.loads(path.read_text())
    differ = sorted(key for key in set(held) | set(manifest) if held.get(key) != manifest.get(key))
    if differ:
        shown = ", ".join(f"{key}: {held.get(key)!r} there, {manifest.get(key)!r} now" for key in differ)
        raise ConfigError(f"{work} holds a build with other arguments ({shown}); rerun with the same arguments to "
                         f"go on, or remove {work} (or give another --work-dir) to start again")


def _positions(work: pathlib.Path, sample) -> dict[str, np.ndarray]:
    """The sampled positions: from ``positions.npz`` when the build was started before, else ``sample()``
    (saved)."""
    path = work / "positions.npz"
    if path.is_file():
        with np.load(path) as data:
            return {name: data[name] for name in data.files}
    positions = sample()
    _write_atomic(path, **positions)
    return positions


def build_resumable(
    geometry: BoardGeometry,
    move_numbers: list[int],
    per_move,
    out,
    *,
    seed: int = 0,
    random_rate: float = 0.2,
    move_values: bool = True,
    time_limit: float = 60.0,
    workers: int | None = None,
    exclude: tuple[str, labelled.LabelledSet] | None = None,
    work_dir: str | None = None,
    progress_bar: bool = True,
    cache_dir=None,
) -> labelled.LabelledSet:
    """Builds the set of ``labelled.build_set`` (the same positions and labels) chunk by chunk under a work
    directory (``work_dir_for``), resuming from it; writes it to ``out`` and returns it.

    ``exclude``: ``(name, set)``, the positions to leave out (its name goes into the manifest and settings).
    The bar (tqdm, on stderr) counts positions; its postfix counts the unfinished ones so far.
    """
    out = pathlib.Path(out)
    workers = labelled.default_workers(workers)
    counts = labelled.per_move_counts(move_numbers, per_move)
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "board": [geometry.rows, geometry.cols],
        "move_numbers": [int(n) for n in move_numbers],
        "per_move": {str(n): c for n, c in counts.items()},
        "seed": int(seed),
        "random_rate": float(random_rate),
        "move_values": bool(move_values),
        "time_limit": float(time_limit),
        "exclude": None if exclude is None else exclude[0],
    }
    work = work_dir_for(out, work_dir)
    _check_manifest(work, manifest)
    start_time = time.perf_counter()
    seconds_path = work / "seconds.json"  # the solving time of earlier runs of this build
    previous = float(json.loads(seconds_path.read_text())) if seconds_path.is_file() else 0.0
    excluded: dict = {}

    def sample():
        positions, dropped = labelled.sample_excluding(geometry, move_numbers, per_move, seed=seed,
                                                       random_rate=random_rate,
                                                       exclude=None if exclude is None else exclude[1])
        excluded["positions"] = None if dropped is None else dropped["positions"]
        return positions

    positions = _positions(work, sample)
    if excluded:  # sampled in this run: keep the count for the settings of a resumed build
        (work / "excluded.json").write_text(json.dumps(excluded))
    elif (work / "excluded.json").is_file():
        excluded = json.loads((work / "excluded.json").read_text())
    count = len(positions["move_numbers"])
    use_table = geometry.num_lines <= labelled.TABLE_LABEL_MAX_LINES
    if use_table:
        labels = labelled.table_labels(geometry, positions, cache_dir)
    else:
        labels = _solve_resumably(geometry, positions, work, workers=workers, move_values=move_values,
                                  time_limit=time_limit, seed=seed, progress_bar=progress_bar)
    settings = labelled.build_settings(geometry, move_numbers, per_move, seed=seed, random_rate=random_rate,
                                       time_limit=time_limit, workers=workers,
                                       excluded=None if exclude is None else {"set": exclude[0], **excluded})
    settings["build_seconds"] = round(previous + time.perf_counter() - start_time, 1)
    built = labelled.assemble(geometry, positions, labels, settings, move_values=move_values or use_table)
    labelled.save(built, out)
    shutil.rmtree(work)
    if count and not len(built):
        raise RuntimeError(f"no position of {count} was solved within --time-limit {time_limit:g} s")
    return built


def _solve_resumably(geometry: BoardGeometry, positions: dict[str, np.ndarray], work: pathlib.Path, *,
                     workers: int, move_values: bool, time_limit: float, seed: int,
                     progress_bar: bool) -> dict[str, np.ndarray]:
    """The labels of every position (``parallel_labels.empty_labels``), from the chunk files in ``work`` and
    by solving the chunks that have none (each saved as it is done)."""
    count = len(positions["move_numbers"])
    labels = parallel_labels.empty_labels(count, geometry.num_lines)
    bounds = parallel_labels.chunk_bounds(positions["move_numbers"], workers)
    todo = []
    for start, stop in bounds:
        path = _chunk_path(work, start, stop)
        if path.is_file():
            with np.load(path) as chunk:
                for name in labels:
                    labels[name][start:stop] = chunk[name]
        else:
            todo.append((start, stop))
    # A fixed shuffled order: the rate so far samples every move number alike (see the module docstring).
    order = np.random.default_rng(seed).permutation(len(todo))
    todo = [todo[i] for i in order]
    done = count - sum(stop - start for start, stop in todo)
    unfinished = int((~labels["finished"][:count]).sum()) - sum(stop - start for start, stop in todo)
    seconds_path = work / "seconds.json"
    spent = float(json.loads(seconds_path.read_text())) if seconds_path.is_file() else 0.0
    run_start = time.perf_counter()
    bar = tqdm(total=count, initial=done, desc=f"label {geometry.name}", unit="pos", disable=not progress_bar,
               dynamic_ncols=True, smoothing=0.05)
    bar.set_postfix(unfinished=unfinished)
    try:
        for start, stop, chunk in parallel_labels.solve_chunks(
                geometry.rows, geometry.cols, positions["lines"], positions["margin"], positions["move_numbers"],
                todo, workers=workers, move_values=move_values, time_limit=time_limit):
            _write_atomic(_chunk_path(work, start, stop), **chunk)
            seconds_path.write_text(json.dumps(spent + time.perf_counter() - run_start))
            for name in labels:
                labels[name][start:stop] = chunk[name]
            unfinished += int((~chunk["finished"]).sum())
            bar.update(stop - start)
            bar.set_postfix(unfinished=unfinished, move=int(positions["move_numbers"][start]))
    except KeyboardInterrupt:
        bar.close()
        solved = sum(1 for start, stop in bounds if _chunk_path(work, start, stop).is_file())
        raise KeyboardInterrupt(f"stopped: {solved} of {len(bounds)} chunks are saved in {work}; the same command "
                                "goes on from there") from None
    bar.close()
    return labels
