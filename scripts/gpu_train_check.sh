#!/usr/bin/env bash
# A short GPU lease's check of the one-GPU recipe, in about BUDGET seconds (default 540) on one GPU:
#   1. benchmarks/gpu_check.py's trainer rows ROWS (default 1 2 6 8: the recipe at commit c5236b8, today's default
#      at 2,048 and 16,384 games, the 32x8 graph network; `python benchmarks/gpu_check.py --list-rows`),
#      unprofiled, within ROWS_SECONDS (default 210); ROWS `none` skips them;
#   2. `python train.py --config configs/5x5.yaml` as a user runs it, for MINUTES training minutes (default 3.5,
#      fewer if BUDGET has less left, keeping 150 s for its start, compiling and last checkpoint, but at least 0.5,
#      which can run past BUDGET) from its warm
#      start, evaluation off: the games come from the card's memory (16,384 on an H100 or H200); its metrics.jsonl
#      gives the recipe's own throughput and curriculum by iteration;
#   3. the trained network exported as an agent (OUT/agent: agent.json and params.msgpack, 64 simulations), to be
#      measured on a CPU afterwards (`dabjax evaluate accuracy`, `dabjax evaluate arena`).
# It exits 0, or with the training's status when the training fails (then it exports nothing and prints why).
#
#   bash scripts/gpu_train_check.sh OUT [MINUTES] [BUDGET] [ROWS...]
#
# The c5236b8 baseline is BASELINE (a checkout of that commit; default: a git worktree of it under the work
# folder, or no baseline row where there is no git history). OUT receives at most eight files: table.txt (the
# bench's table), log.txt (everything printed), gpu_check.json, metrics.jsonl, nvidia-smi.txt and the agent's two
# files; the run and the compilation cache stay in a work folder (WORK, default a temporary one). For a dry run on
# any backend (the suite's): CONFIG (default configs/5x5.yaml), TRAIN_OVERRIDES (more key=value for the training)
# and CHECK_ARGS (more gpu_check.py arguments, --tiny say).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: gpu_train_check.sh OUT [MINUTES] [BUDGET] [ROWS...]}"
minutes="${2:-3.5}"
budget="${3:-540}"
shift 3 2>/dev/null || shift $#
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(1 2 6 8)
work="${WORK:-$(mktemp -d)}"
config="${CONFIG:-configs/5x5.yaml}"
began=$(date +%s)
mkdir -p "$out" "$work"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export JAX_COMPILATION_CACHE_DIR="$work/jax-cache"
log="$out/log.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv >"$out/nvidia-smi.txt" 2>&1 || true
if [ "${rows[*]}" = "none" ]; then
  echo "== 1. no trainer rows" | tee -a "$log"
else
  baseline="${BASELINE:-}"
  if [ -n "$baseline" ] && [ ! -d "$baseline" ]; then
    echo "gpu_train_check.sh: BASELINE $baseline is no folder: no baseline row" | tee -a "$log"
    baseline=""
  elif [ -z "$baseline" ] && git worktree add -f "$work/baseline" c5236b8 >/dev/null 2>&1; then
    baseline="$work/baseline"
    trap 'git worktree remove --force "$work/baseline" >/dev/null 2>&1' EXIT  # on every way out
  fi
  seconds="${ROWS_SECONDS:-210}"
  echo "== 1. trainer rows ${rows[*]} in $seconds s" | tee -a "$log"
  bench=(python3 benchmarks/gpu_check.py --out "$work/check" --minutes "$(python3 -c "print($seconds / 60)")"
         --skip host-loops training environment search --no-profile --trainer-rows "${rows[@]}")
  [ -n "$baseline" ] && bench+=(--baseline "$baseline")
  # shellcheck disable=SC2206  # CHECK_ARGS is a list of words
  bench+=(${CHECK_ARGS:-})
  "${bench[@]}" >"$out/table.txt" 2>>"$log"
  echo "gpu_check: exit $?" | tee -a "$log"
  cp "$work/check/gpu_check.json" "$out/" 2>/dev/null || true
  cat "$out/table.txt"
fi

left=$(( budget - ($(date +%s) - began) - 150 ))
minutes=$(python3 -c "print(round(max(0.5, min($minutes, $left / 60)), 2))")
echo "== 2. train: $config, $minutes training minutes" | tee -a "$log"
# shellcheck disable=SC2086  # TRAIN_OVERRIDES is a list of key=value words
python3 train.py --config "$config" "run.max_minutes=$minutes" eval.every=0 run.progress=false \
  "run.dir=$work/run" ${TRAIN_OVERRIDES:-} >>"$log" 2>&1
trained=$?
echo "train: exit $trained" | tee -a "$log"
cp "$work/run/metrics.jsonl" "$out/" 2>/dev/null || true
if [ "$trained" -ne 0 ]; then
  # Say why here, not only in OUT/log.txt: a detached run's caller sees this output's last lines, and the lease's
  # next call should be the fix, not a search.
  echo "gpu_train_check.sh: the training failed (exit $trained), nothing exported; its last lines:"
  tail -n 8 "$log" | grep -v '^train: exit'
  exit "$trained"
fi

echo "== 3. export the trained network" | tee -a "$log"
python3 -m dabjax pretrained export "$work/run" --sims 64 --out "$out/agent" \
  --note "$config for $minutes training minutes on $(head -2 "$out/nvidia-smi.txt" | tail -1 | cut -d, -f1)" \
  >>"$log" 2>&1
echo "export: exit $?" | tee -a "$log"
echo "total $(( $(date +%s) - began )) s" | tee -a "$log"
