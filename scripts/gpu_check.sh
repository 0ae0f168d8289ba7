#!/usr/bin/env bash
# The one-GPU check (benchmarks/gpu_check.py): the host loops left, the trainer bench against commit c5236b8 (a
# worktree under OUT) in both loop styles, at 2,048-16,384 games and with command buffers, a 3-minute training of
# configs/5x5.yaml with its accuracy on data/5x5.npz, then environment and search throughput, in at most 9 minutes
# on one GPU; one table at the end.
#   bash scripts/gpu_check.sh [OUT]          # OUT: where the run, gpu_check.json and the log go (default results/gpu_check)
#   bash scripts/gpu_check.sh OUT --tiny     # tiny sizes, any backend (the suite runs it)
# Run it from a clone with dabjax installed (pip install -e ".[cuda]"), alone on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-results/gpu_check}"
shift || true
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>/dev/null | tee "$out/nvidia-smi.txt" || true
baseline=()
case " $* " in
  *" --tiny "*) ;;  # the suite's run: no baseline checkout
  *) if git worktree add -f "$out/baseline" c5236b8 >/dev/null 2>&1 || [ -d "$out/baseline/dabjax" ]; then
       baseline=(--baseline "$out/baseline")
     else
       echo "gpu_check.sh: no git history here for the c5236b8 baseline; its row is skipped" >&2
     fi ;;
esac
python3 benchmarks/gpu_check.py --out "$out" ${baseline[@]+"${baseline[@]}"} "$@" 2> >(tee "$out/gpu_check.log" >&2)
