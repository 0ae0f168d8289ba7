"""The dense heads (``DenseHeads``: every box's final owner and the final margin, KataGo's auxiliary targets) and
the conversion of a parameter tree between networks with and without them (``with_heads_of``), which lets either
warm-start the other (``network.warm_starts``)."""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from dabjax.search.trunks import kaiming


class DenseHeads(nn.Module):
    """KataGo's auxiliary targets for Dots-and-Boxes (Wu, "Accelerating Self-Play Learning in Go", 2019):
    ``(box features [N, B, F] or None, global features [N, G]) -> (ownership logits [N, B], margin [N])``.

    Ownership: one logit per box, its final owner from the side to move's view (positive: mine), fitted with a
    sigmoid cross-entropy; from the trunk's per-box features by a shared MLP, or (an MLP trunk, which has none)
    one dense output per box. Margin: the final margin over the number of boxes, in [-1, 1], a ``tanh`` output
    fitted by squared error like the value. A scalar rather than KataGo's distribution over scores: the margin of a
    Dots-and-Boxes position under good play is nearly always one number (small boards, no komi), and the scalar
    costs one unit."""

    num_boxes: int
    hidden: int
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, box_features: jax.Array | None, global_features: jax.Array) -> tuple[jax.Array, jax.Array]:
        dense = functools.partial(nn.Dense, kernel_init=kaiming, dtype=self.dtype)
        if box_features is None:
            hidden = nn.relu(dense(self.hidden, name="ownership_hidden")(global_features))
            ownership = dense(self.num_boxes, name="ownership")(hidden)
        else:
            hidden = nn.relu(dense(self.hidden, name="ownership_hidden")(box_features))
            ownership = dense(1, name="ownership")(hidden)[..., 0]
        margin = dense(1, name="margin")(nn.relu(dense(self.hidden, name="margin_hidden")(global_features)))[:, 0]
        return ownership.astype(jnp.float32), jnp.tanh(margin.astype(jnp.float32))


HEAD_PARAMS = "dense_heads"  # the subtree of ``params["params"]`` that holds ``DenseHeads``' parameters


def with_heads_of(params, fresh):
    """``params`` (a network's variables) with the dense heads as ``fresh`` (a freshly initialised network of the
    wanted kind) has them: ``fresh``'s ``DenseHeads`` parameters added where ``params`` has none (a network
    trained before the heads warm-starts the trunk of one with them), and ``params``' own dropped where ``fresh``
    has none (a shipped agent with heads warm-starts a network without). Anything else is returned as it is."""
    inner, fresh_inner = params.get("params", {}), fresh.get("params", {})
    if HEAD_PARAMS in fresh_inner and HEAD_PARAMS not in inner:
        return {**params, "params": {**inner, HEAD_PARAMS: fresh_inner[HEAD_PARAMS]}}
    if HEAD_PARAMS in inner and HEAD_PARAMS not in fresh_inner:
        return {**params, "params": {name: tree for name, tree in inner.items() if name != HEAD_PARAMS}}
    return params
