"""Wall time and peak memory of a 4-run smoke sweep, one run after another and through Ray Tune.

    python benchmarks/sweep_wall_time.py                        # 4 runs of configs/smoke.yaml (2x2, 3 iterations)
    python benchmarks/sweep_wall_time.py --runs 4 --iterations 20 --max-concurrent 2

Each launcher runs ``python train.py --sweep ... --quiet`` in a fresh temporary directory, as a subprocess; its
memory is sampled every 0.2 s as the summed resident set size (RSS) of that process and every process under it
(Ray's GCS, raylet, dashboard agents and trial workers: a local Ray started by the driver runs under it). RSS
counts shared pages once per process, so the sum is an upper bound of what the processes hold together. Both
sweeps run the same seeds, and the script checks that they logged the same numbers (timings aside).
Needs the ``sweep`` extra (Ray Tune, and psutil, which Ray installs). Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import psutil

from dabjax.training import trainer as trainer_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
TIMINGS = {"time", *trainer_lib.TIMING_METRICS}  # "time": the shell's training minutes


def tree_rss(process: psutil.Process) -> tuple[int, int]:
    """(bytes of RSS summed over ``process`` and its descendants, how many processes)."""
    total, count = 0, 0
    try:
        members = [process] + process.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0, 0
    for member in members:
        try:
            total += member.memory_info().rss
            count += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass  # ended between the listing and the reading
    return total, count


def run_measured(command: list[str]) -> dict:
    """Runs ``command`` (cwd: the repository) to its end; its wall seconds, peak summed RSS and exit status."""
    start = time.perf_counter()
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    process = psutil.Process(child.pid)
    peak, peak_count = 0, 0
    while child.poll() is None:
        rss, count = tree_rss(process)
        if rss > peak:
            peak, peak_count = rss, count
        time.sleep(0.2)
    seconds = time.perf_counter() - start
    output = child.stdout.read()
    return {"seconds": seconds, "peak_rss": peak, "processes": peak_count, "status": child.returncode,
            "output": output}


def logged_numbers(sweep_dir: pathlib.Path) -> dict:
    """Each run's metrics rows without the wall-clock fields: what the seeds fix."""
    numbers = {}
    for log in sorted(sweep_dir.glob("*/metrics.jsonl")):
        rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        numbers[log.parent.name] = [{k: v for k, v in row.items() if k not in TIMINGS} for row in rows]
    return numbers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=4, help="runs in the sweep (seeds 0 .. runs-1)")
    parser.add_argument("--iterations", type=int, default=3, help="run.iterations of each run (smoke: 3)")
    parser.add_argument("--max-concurrent", type=int, help="--launcher ray: trials at once (default: one a core)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dabjax-sweep-bench-") as tmp:
        tmp = pathlib.Path(tmp)
        sweep = tmp / "sweep.yaml"
        sweep.write_text(
            f"base: {ROOT / 'configs' / 'smoke.yaml'}\noverrides: [run.iterations={args.iterations}]\n"
            f"grid: {{run.seed: {list(range(args.runs))}}}\n"
        )
        base = [sys.executable, str(ROOT / "train.py"), "--sweep", str(sweep), "--quiet"]
        ray_options = ["--launcher", "ray"] + (
            ["--max-concurrent", str(args.max_concurrent)] if args.max_concurrent else [])
        results = {}
        for launcher, extra in (("sequential", []), ("ray", ray_options)):
            results[launcher] = run_measured(base + extra + [f"run.dir={tmp / launcher}"])
            if results[launcher]["status"] != 0:
                print(results[launcher]["output"][-3000:], file=sys.stderr)
                print(f"the {launcher} sweep failed (exit status {results[launcher]['status']})", file=sys.stderr)
                return 1
        same = logged_numbers(tmp / "sequential") == logged_numbers(tmp / "ray")
    print(f"{args.runs}-run smoke sweep ({args.iterations} iterations each), {psutil.cpu_count()} CPUs")
    print(f"{'launcher':<12}{'wall (s)':>10}{'peak RSS (MiB)':>16}{'processes':>11}")
    for launcher, result in results.items():
        print(f"{launcher:<12}{result['seconds']:>10.1f}{result['peak_rss'] / 2**20:>16.0f}{result['processes']:>11}")
    print(f"same logged numbers both ways (timings aside): {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
