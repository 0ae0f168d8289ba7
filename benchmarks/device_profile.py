"""What the device did, from the device's side: a ``jax.profiler`` trace of a call, reduced to its busy share
and its largest gaps.

    python benchmarks/device_profile.py --config smoke        # one trainer iteration of a config, profiled

``profile(fn)`` runs ``fn`` under ``jax.profiler.trace`` (with its Perfetto JSON export, so no TensorBoard
plugin is needed to read it) and returns a ``DeviceProfile``:

* the device's intervals: on a GPU or TPU, the events of the device's own timelines (the ``/device:...``
  processes; on NVIDIA GPUs the kernel and copy events of the ``Stream`` lines, not the derived "XLA Modules"
  and "XLA Ops" lines, which span the waits too); on the CPU backend, which has no device timeline, the events
  of XLA's execution threads (``tf_XLA...``), so the figure means "a compiled program ran";
* ``busy_share``: the union of those intervals over the wall time of the call (seconds busy / seconds);
* ``gaps``: the largest idle stretches between them, in seconds, longest first, with where they start;
* ``kernels``: the events' names (on a GPU the kernels, on the CPU backend the compiled programs' thunks) that
  took the most time, each with its total seconds and how often it ran in the call.

The trace directory is kept where ``log_dir`` says (open it in Perfetto or TensorBoard's profile plugin).
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import gzip
import json
import os
import pathlib
import sys
import tempfile
import time

import jax

import dabjax.game.loops  # noqa: I001  (import dabjax puts its command buffers into XLA_FLAGS first)

# XLA turns command buffers off under the profiler unless told otherwise: keep the loops as they run unprofiled
# (dabjax.game.loops puts its command buffers in XLA_FLAGS; XLA reads the flags when the backend starts).
PROFILE_COMMAND_BUFFERS = "--xla_enable_command_buffers_during_profiling=true"
if (dabjax.game.loops.COMMAND_BUFFER_OPTION in os.environ.get("XLA_FLAGS", "")
        and "command_buffers_during_profiling" not in os.environ.get("XLA_FLAGS", "")):
    os.environ["XLA_FLAGS"] += f" {PROFILE_COMMAND_BUFFERS}"

# Lines of a GPU's timeline derived from the kernels (they span a module's launch to its end, waits included).
DERIVED_LINES = ("XLA Modules", "XLA Ops", "Steps", "XLA TraceMe", "Framework")


@dataclasses.dataclass(frozen=True)
class DeviceProfile:
    """One profiled call: ``wall_seconds`` from the call's start to its end (host clock, results ready),
    ``busy_seconds`` the union of the device's intervals inside it, ``gaps`` ``[(seconds, starts_after)]``
    the longest idle stretches (``starts_after``: seconds from the first device event), ``events`` how many
    device events, ``source`` which timeline they came from, and ``kernels`` ``[(name, seconds, count)]`` the
    events' names that took the most time, longest first."""

    wall_seconds: float
    busy_seconds: float
    gaps: tuple[tuple[float, float], ...]
    events: int
    source: str
    kernels: tuple[tuple[str, float, int], ...] = ()

    @property
    def busy_share(self) -> float:
        return min(1.0, self.busy_seconds / self.wall_seconds) if self.wall_seconds > 0 else 0.0

    def as_dict(self) -> dict:
        return dict(wall_seconds=self.wall_seconds, busy_seconds=self.busy_seconds, busy_share=self.busy_share,
                    gaps=[list(gap) for gap in self.gaps], events=self.events, source=self.source,
                    kernels=[list(kernel) for kernel in self.kernels])


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``[(start, end)]`` intervals as sorted, disjoint intervals."""
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def largest_gaps(merged: list[tuple[float, float]], count: int = 3) -> tuple[tuple[float, float], ...]:
    """The ``count`` longest stretches between disjoint sorted intervals: ``(length, start - first start)``."""
    if not merged:
        return ()
    origin = merged[0][0]
    gaps = [(b[0] - a[1], a[1] - origin) for a, b in zip(merged, merged[1:])]
    return tuple(sorted(gaps, reverse=True)[:count])


def device_events(events: list[dict]) -> tuple[list[dict], str]:
    """The device's complete events in a Chrome/Perfetto trace's events, and which timeline they came from (see
    the module's docstring)."""
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e]

    def line(e) -> str:
        return threads.get((e["pid"], e.get("tid")), "")

    on_device = [e for e in complete if processes.get(e["pid"], "").startswith("/device:")]
    streams = [e for e in on_device if line(e).startswith("Stream")]
    if streams:
        chosen, source = streams, "device streams"
    elif on_device:
        chosen = [e for e in on_device if not line(e).startswith(DERIVED_LINES)]
        source = "device timeline"
    else:
        chosen = [e for e in complete if line(e).startswith("tf_XLA")]
        source = "XLA's CPU execution threads"
    return chosen, source


def device_intervals(events: list[dict]) -> tuple[list[tuple[float, float]], str]:
    """The device's ``[(start, end)]`` intervals (microseconds) in a trace's events (``device_events``), and which
    timeline they came from."""
    chosen, source = device_events(events)
    return [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in chosen], source


def top_kernels(events: list[dict], count: int = 10) -> tuple[tuple[str, float, int], ...]:
    """The ``count`` names of the device's events (``device_events``) with the most time: ``(name, seconds,
    how many events)``, longest first. Events of one kernel that overlap (several streams) all count."""
    totals: dict[str, list] = {}
    for event in device_events(events)[0]:
        total = totals.setdefault(str(event.get("name", "?")), [0.0, 0])
        total[0] += float(event["dur"]) * 1e-6
        total[1] += 1
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:count]
    return tuple((name, seconds, calls) for name, (seconds, calls) in ranked)


def read_trace(log_dir: str | os.PathLike) -> list[dict]:
    """The events of the newest Perfetto JSON trace under ``log_dir``."""
    paths = sorted(glob.glob(os.path.join(log_dir, "**", "perfetto_trace.json.gz"), recursive=True),
                   key=os.path.getmtime)
    if not paths:
        raise FileNotFoundError(f"no perfetto_trace.json.gz under {log_dir}: the profiler wrote no trace")
    with gzip.open(paths[-1], "rt") as file:
        data = json.load(file)
    return data["traceEvents"] if isinstance(data, dict) else data


def profile(fn, log_dir: str | os.PathLike | None = None, gaps: int = 3):
    """``(fn's result, DeviceProfile)``: ``fn()`` run under the profiler, its result made ready inside."""
    log_dir = log_dir or tempfile.mkdtemp(prefix="dabjax-profile-")
    with jax.profiler.trace(str(log_dir), create_perfetto_trace=True):
        began = time.perf_counter()
        result = jax.block_until_ready(fn())
        wall = time.perf_counter() - began
    events = read_trace(log_dir)
    intervals, source = device_intervals(events)
    merged = union(intervals)
    busy = sum(end - start for start, end in merged) * 1e-6
    found = DeviceProfile(wall_seconds=wall, busy_seconds=busy,
                          gaps=tuple((g * 1e-6, at * 1e-6) for g, at in largest_gaps(merged, gaps)),
                          events=len(intervals), source=source, kernels=top_kernels(events))
    return result, found


def describe(found: DeviceProfile) -> str:
    gaps = ", ".join(f"{g * 1e3:.1f} ms at +{at:.2f} s" for g, at in found.gaps) or "none"
    return (f"device busy {found.busy_share:.2f} of {found.wall_seconds:.2f} s ({found.events:,} events on "
            f"{found.source}); largest gaps: {gaps}")


def describe_kernels(found: DeviceProfile, count: int = 5) -> str:
    """The top ``count`` kernels as ``name µs (calls)``, and their time over the busy time (above 100% where
    kernels overlap on several streams: the busy time is their union)."""
    shown = found.kernels[:count]
    share = sum(seconds for _, seconds, _ in shown) / found.busy_seconds if found.busy_seconds > 0 else 0.0
    kernels = ", ".join(f"{name} {seconds * 1e6:,.0f} µs ({calls}x)" for name, seconds, calls in shown) or "none"
    return f"top kernels ({share:.0%} of the busy time): {kernels}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="smoke", help="a config file or built-in name (default: smoke)")
    parser.add_argument("--log-dir", type=pathlib.Path, help="keep the trace here (default: a temporary folder)")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "trainer_throughput", pathlib.Path(__file__).with_name("trainer_throughput.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    training, state, _, _ = bench.compiled_training(args.config, args.overrides)
    _, found = profile(lambda: training.iterate(state)[0], args.log_dir)
    print(f"{args.config}: one iteration, {describe(found)}")
    print(describe_kernels(found, 10))
    return 0


if __name__ == "__main__":
    sys.exit(main())
