#!/bin/bash
# The experiments behind docs/lab/training.md's value-network sections, one after another, each alone on the CPU
# (trainings are timed: run nothing else meanwhile). Rerunnable: a finished step leaves runs/queue/<step>.done,
# a training resumes its budget; logs in runs/queue/; `touch runs/queue/stop` stops it before the next step.
# Exact-label sets are built first (not timed, one core each). Names as arguments run only those steps
# (pace*, noexact4*, resnet_widths and the 5x5/exact steps after them use only what the repository ships:
# supervised:4x4, the built-in 4x4_train, pretrained:*; the earlier 4x4 steps need `labels`):
#   nohup scripts/value_experiments.sh > runs/queue.out 2>&1 &
#   nohup scripts/value_experiments.sh pace pace_measure pace_arena > runs/queue.out 2>&1 &
cd "$(dirname "$0")/.." || exit 1
[ -e .venv/bin/activate ] && . .venv/bin/activate
export JAX_COMPILATION_CACHE_DIR=$HOME/.cache/dabjax/jax-compilation-cache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0.5
Q=runs/queue; mkdir -p $Q runs/labels
ONLY=" $* "
step() {  # step NAME COMMAND...
  local name=$1; shift
  [ "$ONLY" != "  " ] && [[ "$ONLY" != *" $name "* ]] && return 0
  [ -e $Q/$name.done ] && return 0
  [ -e $Q/stop ] && { echo "=== $(date -u +%FT%TZ) stopped before $name ($Q/stop)" >> $Q/queue.log; exit 0; }
  echo "=== $(date -u +%FT%TZ) start $name: $*" >> $Q/queue.log
  local t0=$(date +%s)
  "$@" > $Q/$name.log 2>&1; local rc=$?
  echo "=== $(date -u +%FT%TZ) end $name rc=$rc in $(( $(date +%s) - t0 )) s" >> $Q/queue.log
  [ $rc -eq 0 ] && touch $Q/$name.done
  return $rc
}
labels() {  # two seeds at a time, one core each (not timed)
  for pair in "101 102" "103 104"; do
    for seed in $pair; do
      [ -e runs/labels/4x4_train_s$seed.npz ] || python -m dabjax.cli.label build --board 4x4 --moves 12-39 \
        --per-move 600 --seed $seed --no-move-values --time-limit 30 --out runs/labels/4x4_train_s$seed.npz \
        > runs/labels/s$seed.log 2>&1 &
    done
    wait
  done
  python -m dabjax.cli.label merge runs/labels/4x4_train4.npz runs/labels/4x4_train_s10{1,2,3,4}.npz
}
step labels labels
labels5() {  # 5x5 moves 22-40, two seeds, one core each (not timed)
  for seed in 201 202; do
    [ -e runs/labels/5x5_train_s$seed.npz ] || python -m dabjax.cli.label build --board 5x5 --moves 22-40 \
      --per-move 300 --seed $seed --no-move-values --time-limit 60 --out runs/labels/5x5_train_s$seed.npz \
      > runs/labels/s$seed.log 2>&1 &
  done
  wait
  python -m dabjax.cli.label merge runs/labels/5x5_train.npz runs/labels/5x5_train_s20{1,2}.npz
}
step warm4x4 dabjax pretrain --config 4x4 --labels runs/labels/4x4_train4.npz --minutes 15 --out runs/warm-4x4-4seeds
step warm4x4_measure python benchmarks/network_capacity.py --board 4x4 --trained runs/warm-4x4-4seeds --simulations 64
step mix4x4 python train.py --config configs/4x4.yaml run.dir=runs/4x4-mix run.init_from=runs/warm-4x4-4seeds train.exact_labels=runs/labels/4x4_train4.npz
step mix4x4_measure python benchmarks/network_capacity.py --board 4x4 --trained runs/4x4-mix --simulations 64
step shipped4x4_measure python benchmarks/network_capacity.py --board 4x4 --trained pretrained:4x4 --simulations 64
step mix4x4_arena python evaluate.py arena --board 4x4 --vs ckpt:runs/4x4-mix:64 --agents pretrained:4x4,alphabeta:3,level2 --games 100
step warm4x4_measure5 python benchmarks/network_capacity.py --board 5x5 --trained runs/warm-4x4-4seeds --simulations 64
step supervised4x4_measure5 python benchmarks/network_capacity.py --board 5x5 --trained supervised:4x4 --simulations 64
step bz5 python train.py --config configs/5x5_cpu.yaml run.dir=runs/5x5-bz30 run.init_from=runs/warm-4x4-4seeds run.max_minutes=30
step az5 python train.py --config configs/5x5_cpu.yaml mode=alphazero run.dir=runs/5x5-az30 run.init_from=runs/warm-4x4-4seeds run.max_minutes=30
step bz5_measure python benchmarks/network_capacity.py --board 5x5 --trained runs/5x5-bz30 --simulations 64
step az5_measure python benchmarks/network_capacity.py --board 5x5 --trained runs/5x5-az30 --simulations 64
step bzaz_arena python evaluate.py arena --board 5x5 --vs ckpt:runs/5x5-bz30:64 --agents ckpt:runs/5x5-az30:64,alphabeta:3 --games 100
step az_arena python evaluate.py arena --board 5x5 --vs ckpt:runs/5x5-az30:64 --agents alphabeta:3 --games 100
# Curriculum pacing: the paper's slow advance (up to 150 iterations per start step, on when 85% of the
# network's values are right) against configs/4x4.yaml's (6, 0.6), whose run is the shipped pretrained:4x4.
step pace python train.py --config configs/4x4.yaml run.dir=runs/4x4-pace-paper curriculum.max_iterations_per_step=150 curriculum.nv_ratio_threshold=0.85
step pace_measure python benchmarks/network_capacity.py --board 4x4 --trained runs/4x4-pace-paper --simulations 64
step pace_arena python evaluate.py arena --board 4x4 --vs ckpt:runs/4x4-pace-paper:64 --agents pretrained:4x4,alphabeta:3,level2 --games 100
# The control for exact labels in every batch: the same warm start and 45 minutes, self-play targets only.
step noexact4 python train.py --config configs/4x4.yaml run.dir=runs/4x4-noexact train.exact_labels=null
step noexact4_measure python benchmarks/network_capacity.py --board 4x4 --trained runs/4x4-noexact --simulations 64
step noexact4_arena python evaluate.py arena --board 4x4 --vs ckpt:runs/4x4-noexact:64 --agents pretrained:4x4,alphabeta:3,level2 --games 100
# The ResNet with pooling at widths 16 and 64 on the bench, the graph network beside them on the same labels.
step resnet_widths python benchmarks/network_capacity.py --board 4x4 --train-set data/4x4_train.npz --minutes 3 --value-hidden 64 --candidate resnet:16x3+pool --candidate resnet:64x3+pool --candidate graph:32x4 --json runs/bench_resnet_widths.json
step osmcts5 python evaluate.py arena --board 5x5 --vs pretrained:5x5 --agents openspiel-mcts:1000 --games 100
step labels5 labels5
step tune5 dabjax pretrain --config 5x5_cpu --labels runs/labels/5x5_train.npz --init pretrained:5x5 --minutes 20 --out runs/5x5-tuned
step tune5_measure python benchmarks/network_capacity.py --board 5x5 --trained runs/5x5-tuned --simulations 64
step tune5_arena python evaluate.py arena --board 5x5 --vs ckpt:runs/5x5-tuned:64 --agents pretrained:5x5,alphabeta:3 --games 100
step mix5 python train.py --config configs/5x5_cpu.yaml run.dir=runs/5x5-mix run.init_from=runs/5x5-tuned train.exact_labels=runs/labels/5x5_train.npz curriculum.beta=30 run.max_minutes=60
step mix5_measure python benchmarks/network_capacity.py --board 5x5 --trained runs/5x5-mix --simulations 64
step mix5_arena python evaluate.py arena --board 5x5 --vs ckpt:runs/5x5-mix:64 --agents pretrained:5x5,ckpt:runs/5x5-tuned:64,alphabeta:3 --games 100
step exact5 python benchmarks/exact_play.py --set data/5x5.npz --agent pretrained:5x5:64 --per-move 10 --exact-seconds 2
step exact5_arena python evaluate.py arena --board 5x5 --vs pretrained:5x5+exact --agents alphabeta:3,pretrained:5x5 --games 100
step exact4 python benchmarks/exact_play.py --set data/4x4.npz --agent pretrained:4x4:64 --per-move 10 --exact-seconds 2
step exact4_arena python evaluate.py arena --board 4x4 --vs pretrained:4x4+exact --agents alphabeta:3,pretrained:4x4,level2 --games 100
echo "=== $(date -u +%FT%TZ) queue done" >> $Q/queue.log
