#!/usr/bin/env bash
# The one-GPU check (benchmarks/gpu_check.py): environment, search and trainer throughput, and a short training of
# configs/5x5.yaml with its accuracy on data/5x5.npz, in at most 8 minutes on one GPU; one table at the end.
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
python3 benchmarks/gpu_check.py --out "$out" "$@" 2> >(tee "$out/gpu_check.log" >&2)
