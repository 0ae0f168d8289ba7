"""The search loop on an ``mctx.Tree``: mctx's ``search`` and Gumbel MuZero policy with a descent of fixed
length and a backup in one pass, so that a search can run on a GPU without the host.

mctx (``mctx.search``) runs its simulations in a ``fori_loop`` of static length, but each simulation's descent
(``simulate``) and backup (``backward``) are ``while_loop``\\ s whose trip counts depend on the tree. On a GPU,
XLA reads a ``while`` condition back to the host and waits at every turn: two round trips per tree level per
simulation. Here:

* the descent runs at most ``max_depth`` steps (mctx's own cap: ``num_simulations`` when unset) and stops at the
  leaf, as mctx's does: one ``while`` loop, which a GPU runs without the host as a command buffer
  (``dabjax.game.loops``). It records the path (node and action at every depth) on the way down;
* the backup uses that path: the discounted values of every level come from one reverse associative scan of
  the affine maps ``v -> reward + discount * v`` (a logarithmic number of vectorised steps, no loop), and the
  statistics of every node of the path are written with one scatter each.

With ``proofs``, the search also keeps proven bounds on every node's value (``Proofs``, the tree's
``extra_data``): score-bounded MCTS (Cazenave and Saffidine, "Score Bounded Monte-Carlo Tree Search", 2010) over
the result classes, MCTS-Solver's backup of proven values (Winands, Björnsson and Saito, "Monte-Carlo Tree
Search Solver", 2008) with draws. Exact leaves (terminal or solved nodes: an edge of discount 0) start the
proofs; after each backup the bounds of the path's nodes are recomputed from the leaf up, as far as they change.
A node whose bounds meet is proven: the edge into it becomes an exact one (its reward the proven value, its
discount 0), so its parent's Q is exact and nothing below it is backed up any more.

Everything else is mctx's: ``mctx.Tree``, its action selection (``gumbel_muzero_root_action_selection``,
``gumbel_muzero_interior_action_selection`` or the caller's), its qtransforms and its ``RecurrentFnOutput``. The
same keys are split in the same order as mctx's, so a search gives mctx's tree, action and policy (the suite
compares them on fixed seeds). Shapes: ``N`` the batch, ``S`` simulations, ``A`` actions, ``D`` the depth cap.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Optional

import chex
import jax
import jax.numpy as jnp
import mctx

from dabjax.game import loops

ROOT = mctx.Tree.ROOT_INDEX
UNVISITED = mctx.Tree.UNVISITED
NO_PARENT = mctx.Tree.NO_PARENT


@chex.dataclass(frozen=True)
class Descent:
    """Where one simulation's descent stopped, and how it got there (batched: a leading ``[N]``).

    parent: int32 ``[]``, the node whose ``action`` is expanded next.
    action: int32 ``[]``, that action.
    nodes: int32 ``[D]``, the node at each depth of the path (``nodes[depth - 1] == parent``; beyond: unused).
    actions: int32 ``[D]``, the action taken at each depth.
    depth: int32 ``[]``, the edges walked (the expanded child is at this depth).
    """

    parent: jax.Array
    action: jax.Array
    nodes: jax.Array
    actions: jax.Array
    depth: jax.Array


class _DescentState(NamedTuple):
    """The loop state of one unbatched descent: mctx's ``_SimulationState`` and the path walked so far."""

    rng_key: jax.Array  # split once per step, as mctx's
    parent: jax.Array  # int32 []: the node the last step selected from (NO_PARENT before the first)
    action: jax.Array  # int32 []: the action it selected there (NO_PARENT before the first step)
    node: jax.Array  # int32 []: the node that action leads to, the next to select from (UNVISITED at the leaf)
    depth: jax.Array  # []: the edges walked, in the tree's float dtype (action selection compares it with 0)
    going: jax.Array  # bool []: ``node`` is visited and ``depth < max_depth``: the descent takes another step
    nodes: jax.Array  # int32 [D]: the node selected from at each depth
    actions: jax.Array  # int32 [D]: the action selected at each depth


def _descend(rng_key: jax.Array, tree: mctx.Tree, select_root, select_interior, max_depth: int) -> Descent:
    """One unbatched descent from the root to an unvisited action (or to ``max_depth`` edges), as mctx's
    ``simulate`` (same keys, same choices), recording the path."""

    def step(state: _DescentState) -> _DescentState:
        key, selection_key = jax.random.split(state.rng_key)
        node, depth = state.node, state.depth
        # Both selections are computed and one kept, as under mctx's ``vmap`` of a ``cond`` on the depth.
        action = jnp.where(depth == 0, select_root(selection_key, tree, node),
                           select_interior(selection_key, tree, node, depth)).astype(jnp.int32)
        level = depth.astype(jnp.int32)
        nodes, actions = state.nodes.at[level].set(node), state.actions.at[level].set(action)
        child = tree.children_index[node, action]
        depth = depth + 1
        going = (child != UNVISITED) & (depth < max_depth)
        return _DescentState(rng_key=key, parent=node, action=action, node=child, depth=depth, going=going,
                             nodes=nodes, actions=actions)

    start = _DescentState(rng_key=rng_key, parent=jnp.int32(NO_PARENT), action=jnp.int32(NO_PARENT),
                          node=jnp.int32(ROOT), depth=jnp.zeros((), tree.children_prior_logits.dtype),
                          going=jnp.bool_(True), nodes=jnp.zeros(max_depth, jnp.int32),
                          actions=jnp.zeros(max_depth, jnp.int32))
    end = loops.repeat_while(lambda state: state.going, step, start, 1)
    return Descent(parent=end.parent, action=end.action, nodes=end.nodes, actions=end.actions,
                   depth=end.depth.astype(jnp.int32))


def _compose_backwards(later, earlier):
    """The affine map ``earlier ∘ later`` of two maps ``v -> reward + discount * v`` given as
    ``(discount, reward)``."""
    later_discount, later_reward = later
    earlier_discount, earlier_reward = earlier
    return earlier_discount * later_discount, earlier_reward + earlier_discount * later_reward


def _backup(tree: mctx.Tree, leaf: jax.Array, descent: Descent) -> mctx.Tree:
    """One unbatched backup of the leaf's value along the recorded path, as mctx's ``backward`` computes it
    level by level from the leaf up (the values of every level by one associative scan, then one scatter per
    statistic)."""
    max_depth = descent.nodes.shape[0]
    on_path = jnp.arange(max_depth) < descent.depth  # edge j: from nodes[j] by actions[j]
    parents, actions = descent.nodes, descent.actions
    rewards = jnp.where(on_path, tree.children_rewards[parents, actions], 0.0)
    discounts = jnp.where(on_path, tree.children_discounts[parents, actions], 1.0)
    # The map of levels j..D-1 applied to the leaf's value gives the value backed up into nodes[j].
    discount, reward = jax.lax.associative_scan(_compose_backwards, (discounts, rewards), reverse=True)
    backed_up = reward + discount * tree.node_values[leaf]  # [D]
    counts = tree.node_visits[parents]
    parent_values = (tree.node_values[parents] * counts + backed_up) / (counts + 1.0)
    # A node's child value is the child's updated value; the leaf's is the value its expansion gave it.
    below = jnp.concatenate([parent_values[1:], parent_values[:1]])
    child_values = jnp.where(jnp.arange(max_depth) == descent.depth - 1, tree.node_values[leaf], below)
    nowhere = tree.node_visits.shape[0]  # off the path: an index out of range, dropped by the scatters
    at = jnp.where(on_path, parents, nowhere)
    return tree.replace(
        node_values=tree.node_values.at[at].set(parent_values, mode="drop"),
        node_visits=tree.node_visits.at[at].set(counts + 1, mode="drop"),
        children_values=tree.children_values.at[at, actions].set(child_values, mode="drop"),
        children_visits=tree.children_visits.at[at, actions].set(
            tree.children_visits[parents, actions] + 1, mode="drop"),
    )


@chex.dataclass(frozen=True)
class Proofs:
    """The ``extra_data`` of a tree searched with ``proofs``: each node's proven bounds on its value, from its
    mover's side, in the search's value scale (the result class: +1 win, 0 draw, -1 loss), and Gumbel MuZero's
    root noise where that algorithm searches (mctx's root selection reads ``extra_data.root_gumbel``).

    lower, upper: float ``[N, S + 1]``; ``-1`` and ``+1`` where nothing is proven; equal where the node is proven.
    root_gumbel: float ``[N, A]``, or None outside Gumbel MuZero.
    """

    lower: jax.Array
    upper: jax.Array
    root_gumbel: Optional[jax.Array] = None


def searchable_children(tree: mctx.Tree, node_index: jax.Array, depth: jax.Array) -> jax.Array:
    """bool ``[A]``: the moves searchable at a node of an unbatched tree: masked prior logits (at the dtype's
    lowest finite value) mark the others, and the root also has its ``root_invalid_actions``."""
    logits = tree.children_prior_logits[node_index]
    valid = logits > jnp.finfo(logits.dtype).min / 2
    return valid & ~(tree.root_invalid_actions.astype(bool) & (depth == 0))


def _edge_bounds(children: jax.Array, rewards: jax.Array, discounts: jax.Array, lower: jax.Array,
                 upper: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(lower [A], upper [A])``: the bounds on a node's Q of each action, from its children (``children`` int32
    ``[A]``, their ``rewards`` and ``discounts`` ``[A]``) and the nodes' bounds (``lower``, ``upper`` ``[S + 1]``).
    An unexpanded action is unknown (-1, +1); a negative discount (the mover changes) swaps the child's bounds."""
    expanded = children != UNVISITED
    at = jnp.maximum(children, 0)
    low, high = lower[at], upper[at]
    edge_lower = rewards + jnp.where(discounts >= 0, discounts * low, discounts * high)
    edge_upper = rewards + jnp.where(discounts >= 0, discounts * high, discounts * low)
    return jnp.where(expanded, edge_lower, -1.0), jnp.where(expanded, edge_upper, 1.0)


def _prove(tree: mctx.Tree, descent: Descent) -> mctx.Tree:
    """One unbatched update of the proven bounds after a backup: from the expanded leaf's parent up the recorded
    path, each node's bounds become the best of its searchable actions' (``_edge_bounds``), as long as they change;
    a node they prove gets an exact edge from its parent."""
    def step(carry):
        level, _, lower, upper, rewards, discounts = carry
        node = descent.nodes[level]
        edge_lower, edge_upper = _edge_bounds(tree.children_index[node], rewards[node], discounts[node], lower,
                                              upper)
        searchable = searchable_children(tree, node, level)
        has_moves = searchable.any()
        low = jnp.where(has_moves, jnp.max(jnp.where(searchable, edge_lower, -1.0)), lower[node])
        high = jnp.where(has_moves, jnp.max(jnp.where(searchable, edge_upper, -1.0)), upper[node])
        changed = (low != lower[node]) | (high != upper[node])
        lower, upper = lower.at[node].set(low), upper.at[node].set(high)
        # The edge into a proven node becomes exact (an exact leaf's edge already is: discount 0).
        above = jnp.maximum(level - 1, 0)
        parent, action = descent.nodes[above], descent.actions[above]
        exact = (low == high) & (level > 0)
        reward, discount = rewards[parent, action], discounts[parent, action]
        rewards = rewards.at[parent, action].set(jnp.where(exact, reward + discount * low, reward))
        discounts = discounts.at[parent, action].set(jnp.where(exact, 0.0, discount))
        return level - 1, changed, lower, upper, rewards, discounts

    start = (descent.depth - 1, jnp.bool_(True), tree.extra_data.lower, tree.extra_data.upper,
             tree.children_rewards, tree.children_discounts)
    _, _, lower, upper, rewards, discounts = loops.repeat_while(
        lambda carry: carry[1] & (carry[0] >= 0), step, start, 1)
    return tree.replace(children_rewards=rewards, children_discounts=discounts,
                        extra_data=tree.extra_data.replace(lower=lower, upper=upper))


class RootBounds(NamedTuple):
    """The proven bounds at the roots of a batch of trees searched with ``proofs`` (``root_bounds``).

    lower, upper: float ``[N]``, the root's value; action_lower, action_upper: float ``[N, A]``, each action's Q
    (unexpanded: -1, +1; the caller masks the actions not searchable)."""

    lower: jax.Array
    upper: jax.Array
    action_lower: jax.Array
    action_upper: jax.Array


def root_bounds(tree: mctx.Tree) -> RootBounds:
    """The proven bounds at the roots of ``tree`` (batched, searched with ``proofs``)."""
    proofs = tree.extra_data
    action_lower, action_upper = jax.vmap(_edge_bounds)(tree.children_index[:, ROOT], tree.children_rewards[:, ROOT],
                                                        tree.children_discounts[:, ROOT], proofs.lower, proofs.upper)
    return RootBounds(proofs.lower[:, ROOT], proofs.upper[:, ROOT], action_lower, action_upper)


def _set(array, values, *indices):
    return array.at[indices].set(values)


_batched_set = jax.vmap(_set)


def _write_node(tree: mctx.Tree, node: jax.Array, prior_logits, value, embedding) -> mctx.Tree:
    """Fills node ``node`` (int32 ``[N]``) of every tree of the batch (mctx's ``update_tree_node``)."""
    batch_range = jnp.arange(node.shape[0])
    return tree.replace(
        children_prior_logits=_batched_set(tree.children_prior_logits, prior_logits, node),
        raw_values=_batched_set(tree.raw_values, value, node),
        node_values=_batched_set(tree.node_values, value, node),
        node_visits=_batched_set(tree.node_visits, tree.node_visits[batch_range, node] + 1, node),
        embeddings=jax.tree_util.tree_map(lambda t, s: _batched_set(t, s, node), tree.embeddings, embedding),
    )


def unproven(batch_size: int, num_simulations: int, dtype, root_gumbel: Optional[jax.Array] = None) -> Proofs:
    """``Proofs`` of a new batch of trees: nothing proven at any node."""
    nodes = (batch_size, num_simulations + 1)
    return Proofs(lower=jnp.full(nodes, -1.0, dtype), upper=jnp.full(nodes, 1.0, dtype), root_gumbel=root_gumbel)


def new_tree(root: mctx.RootFnOutput, num_simulations: int, invalid_actions: jax.Array, extra_data) -> mctx.Tree:
    """A batch of trees of ``S + 1`` nodes holding only their roots (mctx's ``instantiate_tree_from_root``)."""
    batch_size, num_actions = root.prior_logits.shape
    dtype = root.value.dtype
    nodes, node_actions = (batch_size, num_simulations + 1), (batch_size, num_simulations + 1, num_actions)
    tree = mctx.Tree(
        node_visits=jnp.zeros(nodes, jnp.int32),
        raw_values=jnp.zeros(nodes, dtype),
        node_values=jnp.zeros(nodes, dtype),
        parents=jnp.full(nodes, NO_PARENT, jnp.int32),
        action_from_parent=jnp.full(nodes, NO_PARENT, jnp.int32),
        children_index=jnp.full(node_actions, UNVISITED, jnp.int32),
        children_prior_logits=jnp.zeros(node_actions, root.prior_logits.dtype),
        children_values=jnp.zeros(node_actions, dtype),
        children_visits=jnp.zeros(node_actions, jnp.int32),
        children_rewards=jnp.zeros(node_actions, dtype),
        children_discounts=jnp.zeros(node_actions, dtype),
        embeddings=jax.tree_util.tree_map(lambda x: jnp.zeros(nodes + x.shape[1:], x.dtype), root.embedding),
        root_invalid_actions=invalid_actions,
        extra_data=extra_data,
    )
    return _write_node(tree, jnp.full(batch_size, ROOT), root.prior_logits, root.value, root.embedding)


def search(
    params,
    rng_key: jax.Array,
    *,
    root: mctx.RootFnOutput,
    recurrent_fn: mctx.RecurrentFn,
    root_action_selection_fn: Callable,
    interior_action_selection_fn: Callable,
    num_simulations: int,
    max_depth: Optional[int] = None,
    invalid_actions: Optional[jax.Array] = None,
    extra_data: Any = None,
    proofs: bool = False,
) -> mctx.Tree:
    """``mctx.search`` with the fixed-length descent and the one-pass backup (module docstring): the same
    arguments and the same tree. ``root``: prior logits ``[N, A]``, value ``[N]``, embeddings ``[N, ...]``;
    ``invalid_actions``: bool ``[N, A]`` at the root; returns the ``mctx.Tree`` of ``S + 1`` nodes. ``proofs``:
    keep proven bounds (module docstring; ``extra_data`` must then be ``Proofs``, e.g. ``unproven(...)``)."""
    if proofs and not isinstance(extra_data, Proofs):
        raise TypeError("a search with proofs keeps them in extra_data: pass tree_search.unproven(...)")
    batch_size = root.value.shape[0]
    batch_range = jnp.arange(batch_size)
    max_depth = num_simulations if max_depth is None else max_depth
    if invalid_actions is None:
        invalid_actions = jnp.zeros_like(root.prior_logits)
    descend = jax.vmap(functools.partial(_descend, select_root=root_action_selection_fn,
                                         select_interior=interior_action_selection_fn, max_depth=max_depth))
    backup = jax.vmap(_backup)
    prove = jax.vmap(_prove)

    def simulation(sim, carry):
        rng_key, tree = carry
        rng_key, simulate_key, expand_key = jax.random.split(rng_key, 3)
        descent = descend(jax.random.split(simulate_key, batch_size), tree)
        # A node first expanded by simulation ``sim`` has index ``sim + 1`` (the root is 0).
        child = tree.children_index[batch_range, descent.parent, descent.action]
        child = jnp.where(child == UNVISITED, sim + 1, child)
        embedding = jax.tree_util.tree_map(lambda x: x[batch_range, descent.parent], tree.embeddings)
        output, embedding = recurrent_fn(params, expand_key, descent.action, embedding)
        tree = _write_node(tree, child, output.prior_logits, output.value, embedding)
        tree = tree.replace(
            children_index=_batched_set(tree.children_index, child, descent.parent, descent.action),
            children_rewards=_batched_set(tree.children_rewards, output.reward, descent.parent, descent.action),
            children_discounts=_batched_set(tree.children_discounts, output.discount, descent.parent,
                                            descent.action),
            parents=_batched_set(tree.parents, descent.parent, child),
            action_from_parent=_batched_set(tree.action_from_parent, descent.action, child),
        )
        tree = backup(tree, child, descent)
        return rng_key, prove(tree, descent) if proofs else tree

    tree = new_tree(root, num_simulations, invalid_actions, extra_data)
    _, tree = jax.lax.fori_loop(0, num_simulations, simulation, (rng_key, tree))
    return tree


def mask_invalid_logits(logits: jax.Array, invalid_actions: jax.Array) -> jax.Array:
    """float ``[N, A]``: logits shifted to a maximum of 0, the invalid ones at the dtype's lowest finite value
    (mctx's policies mask this way: a softmax over an all-invalid row stays finite)."""
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    return jnp.where(invalid_actions, jnp.finfo(logits.dtype).min, logits)


def gumbel_muzero_policy(
    params,
    rng_key: jax.Array,
    root: mctx.RootFnOutput,
    recurrent_fn: mctx.RecurrentFn,
    num_simulations: int,
    invalid_actions: jax.Array,
    max_depth: Optional[int] = None,
    *,
    qtransform=mctx.qtransform_completed_by_mix_value,
    max_num_considered_actions: int = 16,
    gumbel_scale: float = 1.0,
    proofs: bool = False,
) -> mctx.PolicyOutput:
    """``mctx.gumbel_muzero_policy`` on ``search`` above: the same arguments and the same output (action
    int32 ``[N]``, action weights float ``[N, A]``, the tree). ``invalid_actions``: bool ``[N, A]``. ``proofs``:
    the search keeps proven bounds (``Proofs``, the tree's ``extra_data``); the action and weights are then from
    the exact Q of the proven actions."""
    root = root.replace(prior_logits=mask_invalid_logits(root.prior_logits, invalid_actions))
    rng_key, gumbel_key = jax.random.split(rng_key)
    gumbel = gumbel_scale * jax.random.gumbel(gumbel_key, root.prior_logits.shape, root.prior_logits.dtype)
    tree = search(
        params,
        rng_key,
        root=root,
        recurrent_fn=recurrent_fn,
        root_action_selection_fn=functools.partial(
            mctx.gumbel_muzero_root_action_selection, num_simulations=num_simulations,
            max_num_considered_actions=max_num_considered_actions, qtransform=qtransform),
        interior_action_selection_fn=functools.partial(
            mctx.gumbel_muzero_interior_action_selection, qtransform=qtransform),
        num_simulations=num_simulations,
        max_depth=max_depth,
        invalid_actions=invalid_actions,
        extra_data=(unproven(gumbel.shape[0], num_simulations, root.value.dtype, gumbel) if proofs
                    else mctx.GumbelMuZeroExtraData(root_gumbel=gumbel)),
        proofs=proofs,
    )
    visits = tree.summary().visit_counts
    completed_q = jax.vmap(qtransform, in_axes=[0, None])(tree, ROOT)
    # Sequential halving's final choice: among the most visited candidates, the best Gumbel-perturbed score.
    considered = visits == jnp.max(visits, axis=-1, keepdims=True)
    logits = root.prior_logits - jnp.max(root.prior_logits, axis=-1, keepdims=True)
    score = jnp.maximum(-1e9, gumbel + logits + completed_q) + jnp.where(considered, 0.0, -jnp.inf)
    action = jnp.argmax(jnp.where(invalid_actions, -jnp.inf, score), axis=-1).astype(jnp.int32)
    weights = jax.nn.softmax(mask_invalid_logits(root.prior_logits + completed_q, invalid_actions))
    return mctx.PolicyOutput(action=action, action_weights=weights, search_tree=tree)
