"""The learner: loss, optimiser (Adam with SGDR cosine warm restarts) and a jitted run of training steps.

Loss per sample (the paper's, section 5.2): ``-pi . log p + (target - v)^2``, weighted by ``gamma ** age``
and normalised by the total weight, plus ``l2 * ||theta||^2`` over the convolution and dense kernels.
Logits are masked to the legal moves of each sample before the softmax. A network with dense heads
(``heads.DenseHeads``) adds ``ownership_weight`` times the sigmoid cross-entropy of each known box's final
owner and ``margin_weight`` times the squared error of the final margin, each normalised by the weight of the
samples that have the target (``replay.DenseTargets``: unknown targets give no loss).

Batches are drawn from the replay buffer by an *epoch plan*: a random permutation of the valid samples,
each used once per epoch (with ``symmetries="all"``, once per symmetry: the data expanded by the board's
symmetries), and with ``"random"`` a random symmetry each time. Plans have a fixed shape
(``max_steps x batch``) and the step function compiles once.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import optax

from dabjax.game import env as env_lib
from dabjax.game.geometry import BoardGeometry
from dabjax.search import network
from dabjax.training import replay


@chex.dataclass(frozen=True)
class TrainState:
    params: dict
    opt_state: optax.OptState
    step: jax.Array  # int32 [], optimiser steps so far


def cosine_rate(lr: float, min_fraction: float, phase) -> jax.Array:
    """float32 ``[]``: the rate at ``phase`` (in [0, 1]) of a cosine from ``lr`` down to ``lr * min_fraction``."""
    return lr * (min_fraction + (1.0 - min_fraction) * 0.5 * (1.0 + jnp.cos(jnp.pi * phase)))


def sgdr_schedule(lr: float, min_fraction: float, period: int) -> optax.Schedule:
    """Cosine annealing with warm restarts (SGDR): from ``lr`` to ``lr * min_fraction`` every ``period``."""
    return lambda step: cosine_rate(lr, min_fraction, jnp.mod(step, period) / period)


def make_optimizer(lr: float, min_fraction: float, period: int) -> optax.GradientTransformation:
    """Adam on the SGDR schedule."""
    return optax.adam(sgdr_schedule(lr, min_fraction, period))


def init_train_state(params, optimizer: optax.GradientTransformation) -> TrainState:
    return TrainState(params=params, opt_state=optimizer.init(params), step=jnp.int32(0))


def l2_norm_squared(params) -> jax.Array:
    """Sum of squares of the kernels (not biases or normalisation scales)."""
    leaves = jax.tree_util.tree_leaves_with_path(params)
    kernels = [x for path, x in leaves if getattr(path[-1], "key", None) == "kernel"]
    return sum(jnp.sum(jnp.square(k)) for k in kernels)


@chex.dataclass(frozen=True)
class Batch:
    observation: jax.Array  # float32 [bs, H, W, 4]
    legal: jax.Array  # bool [bs, L]
    policy: jax.Array  # float32 [bs, L]
    value: jax.Array  # float32 [bs]
    weight: jax.Array  # float32 [bs]
    dense: replay.DenseTargets | None = None  # [bs], boxes mapped by the sample's symmetry; None: no dense heads


def make_batch(
    geometry: BoardGeometry, samples: replay.Samples, weights: jax.Array, index: jax.Array, sym: jax.Array
) -> Batch:
    """Gathers samples ``index`` (int32 ``[bs]``) of a flat buffer and maps each by symmetry ``sym``."""
    picked = jax.tree_util.tree_map(lambda x: x[index], samples)
    line_gather = jnp.asarray(geometry.sym_line_gather)[sym]  # [bs, L]
    box_gather = jnp.asarray(geometry.sym_box_gather)[sym]  # [bs, B]
    lines = jnp.take_along_axis(picked.positions.lines, line_gather, axis=1)
    claimed = jnp.take_along_axis(picked.positions.claimed, box_gather, axis=1)
    policy = jnp.take_along_axis(picked.policy, line_gather, axis=1)
    observation = jax.vmap(lambda l, c, m: env_lib.observation_from(geometry, l, c, m))(
        lines, claimed, picked.positions.margin
    )
    dense = picked.dense
    if dense is not None:
        dense = dense.replace(ownership=jnp.take_along_axis(dense.ownership, box_gather, axis=1))
    return Batch(observation=observation, legal=~lines, policy=policy, value=picked.value, weight=weights[index],
                 dense=dense)


def dense_losses(ownership_logits: jax.Array, margin: jax.Array, targets: replay.DenseTargets, weight: jax.Array
                 ) -> tuple[jax.Array, jax.Array]:
    """``(ownership loss, margin loss)``, float32 ``[]`` each: the sigmoid cross-entropy of ``ownership_logits``
    ``[bs, B]`` against the known final owners (mean over a sample's known boxes) and the squared error of
    ``margin`` ``[bs]``, each a ``weight``-weighted mean over the samples that have the target (0 when none do)."""
    known_box = targets.ownership != 0
    mine = (targets.ownership > 0).astype(jnp.float32)
    cross_entropy = optax.sigmoid_binary_cross_entropy(ownership_logits, mine)
    per_sample = jnp.where(known_box, cross_entropy, 0.0).sum(-1) / jnp.maximum(known_box.sum(-1), 1)
    owner_weight = weight * known_box.any(-1)
    ownership_loss = (owner_weight * per_sample).sum() / jnp.maximum(owner_weight.sum(), 1e-8)
    margin_weight = weight * targets.margin_known
    margin_loss = (margin_weight * jnp.square(targets.margin - margin)).sum() / jnp.maximum(margin_weight.sum(), 1e-8)
    return ownership_loss, margin_loss


def loss_fn(params, model: network.PolicyValueNet, batch: Batch, l2: float, ownership_weight: float = 0.0,
            margin_weight: float = 0.0):
    dense = model.config.dense_heads
    outputs = model.apply(params, batch.observation, dense=dense)
    if dense:
        logits, value, ownership_logits, margin = outputs
        ownership_loss, margin_loss = dense_losses(ownership_logits, margin, batch.dense, batch.weight)
    else:
        logits, value = outputs
        ownership_loss = margin_loss = jnp.float32(0.0)
    log_p = jax.nn.log_softmax(network.mask_logits(logits, batch.legal), axis=-1)
    # Where the target is 0 the (possibly huge negative) log-probability must not leak in as 0 * -inf.
    policy_loss = -jnp.where(batch.policy > 0, batch.policy * log_p, 0.0).sum(-1)
    value_loss = jnp.square(batch.value - value)
    total_weight = jnp.maximum(batch.weight.sum(), 1e-8)
    weighted_policy = (batch.weight * policy_loss).sum() / total_weight
    weighted_value = (batch.weight * value_loss).sum() / total_weight
    regulariser = l2 * l2_norm_squared(params)
    loss = weighted_policy + weighted_value + regulariser
    if model.config.dense_heads:  # without the heads the loss is the paper's, term for term
        loss = loss + ownership_weight * ownership_loss + margin_weight * margin_loss
    return loss, dict(loss=loss, policy_loss=weighted_policy, value_loss=weighted_value, l2=regulariser,
                      ownership_loss=ownership_loss, margin_loss=margin_loss)


def epoch_plan(
    key: jax.Array, valid: jax.Array, num_valid: jax.Array | int, num_symmetries: int, symmetries: str,
    epochs: int, batch_size: int, max_steps: int,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(index [max_steps, bs], sym [max_steps, bs], active int32 [])`` for one iteration of training. Jit-able.

    ``valid`` bool ``[S]`` marks the buffer's samples, ``num_valid`` their count (int32 ``[]``, traced or not:
    the plan is made on the device, nothing goes through the host). Each epoch is a fresh random
    permutation; with ``symmetries="all"`` an epoch goes through every symmetric copy. ``active`` is the
    number of steps that cover ``epochs`` epochs, at most ``max_steps``.
    """
    copies = num_symmetries if symmetries == "all" else 1
    num_valid = jnp.asarray(num_valid, jnp.int32)
    per_epoch = num_valid * copies
    active = jnp.minimum(max_steps, (epochs * per_epoch + batch_size - 1) // batch_size).astype(jnp.int32)
    keys = jax.random.split(key, 3)
    total = max_steps * batch_size
    position = jnp.arange(total)
    epoch = position // jnp.maximum(per_epoch, 1)
    within = position % jnp.maximum(per_epoch, 1)
    # One permutation of the valid samples per epoch: valid ones first, in random order. Positions past
    # the last epoch are never active (``active`` stops before them).
    noise = jax.random.uniform(keys[0], (epochs, valid.shape[0]))
    orders = jnp.argsort(jnp.where(valid[None, :], noise, 2.0), axis=1)  # [epochs, S]
    index = orders[jnp.minimum(epoch, orders.shape[0] - 1), within % jnp.maximum(num_valid, 1)]
    if symmetries == "all":
        sym = within // jnp.maximum(num_valid, 1)
    elif symmetries == "random":
        sym = jax.random.randint(keys[1], (total,), 0, num_symmetries)
    else:
        sym = jnp.zeros(total, jnp.int32)
    return (
        index.reshape(max_steps, batch_size).astype(jnp.int32),
        sym.reshape(max_steps, batch_size).astype(jnp.int32),
        active,
    )


def fixed_plan(key: jax.Array, steps: int, per_batch: int, count: int, num_symmetries: int
               ) -> tuple[jax.Array, jax.Array]:
    """``(index, sym)`` int32 ``[steps, per_batch]``: the samples of a fixed set of ``count`` (e.g. exact labels)
    that join each batch of an epoch plan, drawn uniformly, each with a random symmetry of ``num_symmetries``
    (1: none). Static ``steps``, ``per_batch``, ``count``, ``num_symmetries``."""
    pick_key, sym_key = jax.random.split(key)
    index = jax.random.randint(pick_key, (steps, per_batch), 0, count)
    sym = jax.random.randint(sym_key, (steps, per_batch), 0, num_symmetries)
    return index.astype(jnp.int32), sym.astype(jnp.int32)


LOOPS = ("auto", "compiled", "host")


def resolve_loop(loop: str, network_kind: str) -> str:
    """``"compiled"`` or ``"host"`` for a ``train.loop`` setting and a ``network.kind``: ``"auto"`` compiles the
    loop of steps everywhere but for a ResNet on the CPU, where XLA runs convolutions inside a loop an order of
    magnitude slower than from a host loop (the figures, with their command: docs/lab/gpu.md,
    "The same trainer on the 2-core CPU")."""
    if loop not in LOOPS:
        raise ValueError(f"train.loop must be one of {LOOPS}, got {loop!r}")
    if loop == "auto":
        return "host" if network_kind == "resnet" and jax.default_backend() == "cpu" else "compiled"
    return loop


Metrics = dict[str, jax.Array]  # float32 [] each: METRIC_NAMES (the dense heads' losses 0 without them)
METRIC_NAMES = ("loss", "policy_loss", "value_loss", "l2", "ownership_loss", "margin_loss")


class FixedBatch(NamedTuple):
    """The part of a batch drawn from a fixed set of samples (the exact labels, ``train.exact_labels``): its
    samples join the batch with loss weight 1. ``samples``: ``replay.Samples [F]``; ``index`` (into the ``F``) and
    ``sym`` (a symmetry of the board), int32: ``[k]`` for one step (``make_train_step``), ``[max_steps, k]`` for a
    plan of steps (``fixed_plan``; ``at_step`` picks one)."""

    samples: replay.Samples
    index: jax.Array
    sym: jax.Array

    def at_step(self, t) -> FixedBatch:
        """The part of step ``t`` (int32 ``[]``, traced or not) of a plan."""
        return self._replace(index=self.index[t], sym=self.sym[t])


def make_train_step(
    geometry: BoardGeometry, model: network.PolicyValueNet, optimizer: optax.GradientTransformation, l2: float,
    ownership_weight: float = 0.0, margin_weight: float = 0.0,
):
    """``step(state, samples, weights, index, sym, fixed=None) -> (state, metrics)``: one optimiser step on the
    batch ``index, sym`` (int32 ``[bs]``) of the ``samples`` with loss weights ``weights`` float32 ``[S]`` (or
    a buffer's ``[D, M]``, ``index`` then counting through it flat). ``fixed``: a ``FixedBatch`` of ``k`` samples
    (index, sym ``[k]``) that join the batch with loss weight 1 (the buffer's stay where they are: only the batch
    rows are joined). ``ownership_weight``, ``margin_weight``: the dense heads' loss weights (``loss_fn``).
    Pure; jit-able."""
    grad_fn = jax.value_and_grad(functools.partial(loss_fn, model=model, l2=l2, ownership_weight=ownership_weight,
                                                   margin_weight=margin_weight), has_aux=True)

    def step(state: TrainState, samples: replay.Samples, weights: jax.Array, index, sym,
             fixed: FixedBatch | None = None):
        if weights.ndim > 1:  # a buffer's [D, M] blocks: indices count through them flat (a free reshape here)
            lead = weights.ndim
            samples = jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[lead:]), samples)
            weights = weights.reshape(-1)
        # The samples' dense targets fitted to the network (static: dropped without heads, unknown where missing).
        samples = replay.with_dense_targets(samples, model.config.dense_heads)
        batch = make_batch(geometry, samples, weights, index, sym)
        if fixed is not None:
            fixed_samples = replay.with_dense_targets(fixed.samples, model.config.dense_heads)
            extra = make_batch(geometry, fixed_samples, jnp.ones(fixed_samples.valid.shape, jnp.float32),
                               fixed.index, fixed.sym)
            batch = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), batch, extra)
        (_, metrics), grads = grad_fn(state.params, batch=batch)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return TrainState(params=params, opt_state=opt_state, step=state.step + 1), metrics

    return step


# The one learning loop: ``plan_step`` is its body, whether ``run_steps`` compiles the loop around it
# (``lax.fori_loop``, the step traced inside) or ``run_steps_on_host`` drives it from Python (the step jitted, one
# dispatch per step).

def plan_step(step, t, carry: tuple[TrainState, Metrics], samples: replay.Samples, weights: jax.Array,
              index: jax.Array, sym: jax.Array, fixed: FixedBatch | None = None) -> tuple[TrainState, Metrics]:
    """Step ``t`` (int32 ``[]``, or an int) of the plan ``index, sym`` (``[max_steps, bs]``) by ``step``
    (``make_train_step``'s, or its jitted form): ``carry`` is the training state and the metrics summed over the
    steps before (``zero_totals`` before the first); returns both after it. The other arguments are ``step``'s,
    ``fixed`` with its plan ``[max_steps, k]``. Pure; jit-able."""
    state, totals = carry
    state, metrics = step(state, samples, weights, index[t], sym[t], None if fixed is None else fixed.at_step(t))
    return state, {name: totals[name] + metrics[name] for name in METRIC_NAMES}


def zero_totals() -> Metrics:
    """The metric totals before the first step."""
    return {name: jnp.float32(0.0) for name in METRIC_NAMES}


def mean_metrics(totals: Metrics, active) -> Metrics:
    """The mean metrics of ``active`` steps (int32 ``[]`` or an int) from their totals (zeros when none ran)."""
    steps = jnp.maximum(jnp.asarray(active, jnp.int32), 1).astype(jnp.float32)
    return {name: total / steps for name, total in totals.items()}


def run_steps(step, state: TrainState, samples: replay.Samples, weights: jax.Array, index: jax.Array,
              sym: jax.Array, active: jax.Array, fixed: FixedBatch | None = None) -> tuple[TrainState, Metrics]:
    """The first ``active`` (int32 ``[]``, traced) steps of the plan ``index, sym`` (``[max_steps, bs]``) as one
    compiled loop: a ``lax.fori_loop`` with a traced bound, which runs exactly ``active`` steps of ``plan_step``;
    ``fixed``: its plan ``[max_steps, k]``. Returns the mean metrics over the steps (zeros when there are none).
    Pure; jit-able: one dispatch for the whole plan."""
    active = jnp.asarray(active, jnp.int32)
    body = functools.partial(plan_step, step, samples=samples, weights=weights, index=index, sym=sym, fixed=fixed)
    state, totals = jax.lax.fori_loop(0, active, body, (state, zero_totals()))
    return state, mean_metrics(totals, active)


def run_steps_on_host(jitted_step, state: TrainState, samples: replay.Samples, weights: jax.Array,
                      index: jax.Array, sym: jax.Array, active: int, fixed: FixedBatch | None = None
                      ) -> tuple[TrainState, Metrics]:
    """``run_steps`` driven from Python: ``active`` (an int, read from the device) turns of ``plan_step``, each
    dispatching ``jitted_step`` (``make_train_step``'s step, jitted, its state donated or not) once. The same
    steps; the metrics' sums are added outside the step."""
    carry = (state, zero_totals())
    for t in range(active):
        carry = plan_step(jitted_step, t, carry, samples, weights, index, sym, fixed)
    state, totals = carry
    return state, mean_metrics(totals, active)


def make_train_steps(
    geometry: BoardGeometry, model: network.PolicyValueNet, optimizer: optax.GradientTransformation, l2: float,
    loop: str = "auto", donate: bool = False, ownership_weight: float = 0.0, margin_weight: float = 0.0,
):
    """``fn(state, samples, weights, index, sym, active, fixed=None) -> (state, mean metrics)``: ``active``
    optimiser steps on the batches ``index[t], sym[t]`` (``[max_steps, bs]`` plans from ``epoch_plan``), as
    ``make_train_step`` describes (``fixed``: a ``FixedBatch`` with a ``fixed_plan`` ``[max_steps, k]``). The
    metrics are float32 ``[]`` device arrays: read them once, when needed.

    ``loop`` (``resolve_loop`` for ``model``'s network): ``"compiled"`` runs the plan as one jitted ``run_steps``
    (one dispatch); ``"host"`` as ``run_steps_on_host``, one jitted step per optimiser step, which needs
    ``active`` on the host (one small read). ``donate``: the state's buffers are donated to the update (updated in
    place; the ``state`` passed in is deleted).
    """
    step = make_train_step(geometry, model, optimizer, l2, ownership_weight, margin_weight)
    if resolve_loop(loop, model.config.kind) == "compiled":
        return jax.jit(functools.partial(run_steps, step), donate_argnums=(0,) if donate else ())
    jitted_step = jax.jit(step, donate_argnums=(0,) if donate else ())

    def run(state: TrainState, samples: replay.Samples, weights: jax.Array, index, sym, active,
            fixed: FixedBatch | None = None):
        return run_steps_on_host(jitted_step, state, samples, weights, index, sym, int(active), fixed)

    return run
