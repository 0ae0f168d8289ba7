#!/usr/bin/env bash
# The from-scratch GPU check: configs/5x5_scratch.yaml trained from nothing for 8 minutes on one GPU, its network
# kept at 2, 4 and 8 training minutes (benchmarks/time_to_strength.py --no-score), the run's searched positions/s,
# learning share and the minute it reached start step 0, the top kernels of one iteration
# (benchmarks/device_profile.py), then the first rows of the GPU check (scripts/gpu_check.sh) for the minute
# left. About 12 minutes of device time. The agents come back in OUT/agents.tar and are scored on any machine:
#   bash scripts/gpu_scratch.sh [OUT] [KEY=VALUE ...]   # OUT default results/gpu_scratch; overrides: the network
#   mkdir -p S && tar -xf OUT/agents.tar -C S && python benchmarks/time_to_strength.py --config 5x5_scratch \
#       --minutes 2 4 8 --out S --set 5x5 [the same KEY=VALUE ...]      # afterwards, on a CPU: the curve
#   bash scripts/gpu_scratch.sh OUT --tiny          # the smoke config for a few seconds, any backend (the suite)
# OUT gets six files (what a lent GPU's $OUT sends back); the run itself stays in OUT.work.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-results/gpu_scratch}"
shift || true
config=5x5_scratch; marks=(2 4 8); check_minutes="${GPU_CHECK_MINUTES:-1}"; overrides=(); check=()
for arg in "$@"; do
  if [ "$arg" = "--tiny" ]; then config=smoke; marks=(0.01 0.02); check=(--tiny); else overrides+=("$arg"); fi
done
mkdir -p "$out" "$out.work"
out="$(cd "$out" && pwd)"
work="$out.work"
export PYTHONUNBUFFERED=1
# The stages and the profile compile the same programs: each compiles once.
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-$work/jax-cache}" JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0.5
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>/dev/null | tee "$out/nvidia-smi.txt" || true
python3 benchmarks/time_to_strength.py --config "$config" --minutes "${marks[@]}" --no-score --out "$work/scratch" \
  ${overrides[@]+"${overrides[@]}"} 2>&1 | tee "$out/scratch.log"
tar -cf "$out/agents.tar" -C "$work/scratch" agents strength.json
python3 benchmarks/device_profile.py --config "$config" ${overrides[@]+"${overrides[@]}"} 2>&1 | tail -60 | tee "$out/profile.log"
if [ "$check_minutes" != 0 ]; then  # GPU_CHECK_MINUTES=0: none (the suite tests the GPU check on its own)
  bash scripts/gpu_check.sh "$work/gpu_check" --minutes "$check_minutes" ${check[@]+"${check[@]}"} 2>&1 | tail -60 > "$out/gpu_check.txt" || true
fi
echo "gpu_scratch.sh: wrote $out/agents.tar, scratch.log, profile.log and gpu_check.txt"
