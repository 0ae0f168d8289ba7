"""Global self-attention over the strings-and-coins board: the layers of the ``graph_attention`` and ``transformer``
network kinds (``network_kinds``).

Message passing cannot count substructures such as chains and loops, nor tell one 8-loop from two 4-loops
(Chen, Chen, Villar and Bruna, "Can Graph Neural Networks Count Substructures?", NeurIPS 2020); every token
attending to every other can. The tokens are the board's ``L`` lines, its ``B`` boxes and one ground token (the
edge of the board), in that order (``T = L + B + 1``). No token has an absolute position: attention is biased by
what a pair of tokens is to each other, so one set of parameters serves every board size, and the bias is the same
under every symmetry of the board, so the networks commute with them:

* the pair's static relation (``TokenRelations.relation``): the kinds of the two tokens (line, box, ground; two
  lines parallel or not) and their offset on the observation grid, measured in the frame of the pair's line (along
  it and across it) or, for two boxes, as the larger and smaller of the two distances, each clipped at
  ``MAX_OFFSET``; a pair with the ground reads the other token's distance to the edge;
* the pair's link in the strings-and-coins graph (``TokenRelations.link``): a line and a box it bounds, an edge line
  and the ground, two boxes sharing a line, a box and the ground through its edge lines; and how many of the lines
  that link them are still undrawn (strings not yet cut), read from the position.

Each layer has its own tables of biases, one value per head and relation (``RelationBias``), initialised to zero
(attention starts uniform)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game.geometry import BoardGeometry

kaiming = nn.initializers.kaiming_normal()  # as the other trunks (``trunks.kaiming``)

MAX_OFFSET = 8  # grid cells (two per box): offsets beyond it share the last bucket, on every board size
OFFSETS = MAX_OFFSET + 1
# The kinds of token pairs of the static relation, with the ground token's pairs last.
PAIR_KINDS = ("line-line parallel", "line-line across", "line-box", "box-line", "box-box", "line-ground",
              "ground-line", "box-ground", "ground-box", "ground-ground")
NUM_RELATIONS = len(PAIR_KINDS) * OFFSETS * OFFSETS
LINK_KINDS = ("none", "line-box", "line-ground", "box-box", "box-ground")
MAX_LINK_LINES = 4  # a box of a 1x1 board meets the ground through four lines
LINK_STATES = 3  # undrawn lines between the pair: none, one, two or more
NUM_LINKS = len(LINK_KINDS) * LINK_STATES


class TokenRelations(NamedTuple):
    """What each pair of a board's tokens (``T = L + B + 1``: lines, boxes, ground) is to each other; numpy arrays,
    fixed per board size.

    ``relation``: int32 ``[T, T]`` in ``[0, NUM_RELATIONS)``, the static relation (pair kind and offset);
    ``link_kind``: int32 ``[T, T]``, the index into ``LINK_KINDS``;
    ``link_lines``: int32 ``[T, T, MAX_LINK_LINES]``, the lines that link the pair, ``L`` (a padding line that is
    never undrawn) where there are fewer."""

    relation: np.ndarray
    link_kind: np.ndarray
    link_lines: np.ndarray


def _pair_offset(kind_i: int, kind_j: int, cell_i, cell_j, horizontal_i: bool, horizontal_j: bool,
                 edge_i: int, edge_j: int) -> tuple[int, int, int]:
    """``(pair kind, a, b)`` of two tokens: the index into ``PAIR_KINDS`` and two offsets in grid cells that no
    symmetry of the board changes. Token kinds: 0 line, 1 box, 2 ground."""
    dr, dc = (abs(int(cell_i[0]) - int(cell_j[0])), abs(int(cell_i[1]) - int(cell_j[1]))) if 2 not in (
        kind_i, kind_j) else (0, 0)

    def along_line(horizontal):  # (along the line, across it)
        return (dc, dr) if horizontal else (dr, dc)

    if kind_i == 0 and kind_j == 0:
        return (0 if horizontal_i == horizontal_j else 1), *along_line(horizontal_i)
    if kind_i == 0 and kind_j == 1:
        return 2, *along_line(horizontal_i)
    if kind_i == 1 and kind_j == 0:
        return 3, *along_line(horizontal_j)
    if kind_i == 1 and kind_j == 1:
        return 4, max(dr, dc), min(dr, dc)
    if kind_j == 2 and kind_i != 2:
        return (5 if kind_i == 0 else 7), edge_i, 0
    if kind_i == 2 and kind_j != 2:
        return (6 if kind_j == 0 else 8), edge_j, 0
    return 9, 0, 0


@functools.lru_cache(maxsize=None)
def token_relations(geometry: BoardGeometry) -> TokenRelations:
    """The ``TokenRelations`` of ``geometry``'s tokens (built once per board size)."""
    num_lines, num_boxes = geometry.num_lines, geometry.num_boxes
    count = num_lines + num_boxes + 1
    height, width = geometry.grid_shape
    kinds = np.array([0] * num_lines + [1] * num_boxes + [2])
    cells = np.concatenate([geometry.line_cells, geometry.box_cells, np.zeros((1, 2), np.int32)])
    horizontal = np.concatenate([geometry.line_is_horizontal, np.zeros(num_boxes + 1, bool)])
    edge = np.minimum.reduce([cells[:, 0], height - 1 - cells[:, 0], cells[:, 1], width - 1 - cells[:, 1]])
    relation = np.zeros((count, count), np.int32)
    for i in range(count):
        for j in range(count):
            pair, a, b = _pair_offset(kinds[i], kinds[j], cells[i], cells[j], horizontal[i], horizontal[j],
                                      int(edge[i]), int(edge[j]))
            relation[i, j] = (pair * OFFSETS + min(a, MAX_OFFSET)) * OFFSETS + min(b, MAX_OFFSET)

    link_kind = np.zeros((count, count), np.int32)
    link_lines = np.full((count, count, MAX_LINK_LINES), num_lines, np.int32)
    ground = count - 1

    def link(i: int, j: int, kind: str, lines: list[int]) -> None:
        for a, b in ((i, j), (j, i)):
            link_kind[a, b] = LINK_KINDS.index(kind)
            link_lines[a, b, :len(lines)] = lines

    for box in range(num_boxes):
        token = num_lines + box
        edge_lines = []
        for line in geometry.box_lines[box]:
            link(int(line), token, "line-box", [int(line)])
            other = [b for b in geometry.line_boxes[line] if b >= 0 and b != box]
            if other:
                link(token, num_lines + int(other[0]), "box-box", [int(line)])
            else:
                edge_lines.append(int(line))
        if edge_lines:
            link(token, ground, "box-ground", edge_lines)
    for line in np.flatnonzero(~geometry.line_box_valid.all(-1)):
        link(int(line), ground, "line-ground", [int(line)])
    for array in (relation, link_kind, link_lines):
        array.setflags(write=False)
    return TokenRelations(relation, link_kind, link_lines)


def link_states(relations: TokenRelations, undrawn: jax.Array, first_token: int = 0) -> jax.Array:
    """int32 ``[N, T', T']``: each pair's link category in ``[0, NUM_LINKS)`` (its link kind and how many of the
    lines linking it are undrawn: none, one, two or more), for the tokens from ``first_token`` on (``T' = T -
    first_token``: the graph network's nodes are the tokens from ``L`` on). ``undrawn``: bool ``[N, L]``."""
    # A product with the fixed line-to-pair incidence, not a gather of [N, T', T', 4]: XLA's CPU backend runs the
    # product as one matrix multiplication and a gather element by element.
    incidence = _link_incidence(relations, first_token)  # [L, T' * T']
    count = len(relations.link_kind) - first_token
    open_count = jnp.dot(undrawn.astype(jnp.float32), jnp.asarray(incidence)).reshape(-1, count, count)
    kind = jnp.asarray(relations.link_kind[first_token:, first_token:])
    return kind * LINK_STATES + jnp.minimum(open_count, LINK_STATES - 1).astype(jnp.int32)


def _link_incidence(relations: TokenRelations, first_token: int) -> np.ndarray:
    """float32 ``[L, T' * T']``: how many times line ``l`` links each pair of the tokens from ``first_token`` on."""
    lines = relations.link_lines[first_token:, first_token:]  # [T', T', MAX_LINK_LINES], L = padding
    num_lines = int(relations.link_lines.max())  # the padding line's index is L
    count = lines.shape[0]
    incidence = np.zeros((num_lines + 1, count * count), np.float32)
    pair = np.broadcast_to(np.arange(count * count).reshape(count, count, 1), lines.shape)
    np.add.at(incidence, (lines.reshape(-1), pair.reshape(-1)), 1.0)
    return incidence[:num_lines]


class RelationBias(nn.Module):
    """``(relation [T, T] (numpy), link [N, T, T]) -> attention bias float32 [N, heads, T, T]``: a learned value
    per head for each static relation plus one for each link category, both tables starting at zero."""

    heads: int

    @nn.compact
    def __call__(self, relation: np.ndarray, link: jax.Array) -> jax.Array:
        static = self.param("relation", nn.initializers.zeros_init(), (NUM_RELATIONS, self.heads), jnp.float32)
        linked = self.param("link", nn.initializers.zeros_init(), (NUM_LINKS, self.heads), jnp.float32)
        # The link's table read as a product with its one-hot code (a gather is element by element on a CPU).
        linked_bias = jnp.einsum("ntsk,kh->nhts", jax.nn.one_hot(link, NUM_LINKS, dtype=jnp.float32), linked)
        return static[jnp.asarray(relation)].transpose(2, 0, 1)[None] + linked_bias  # [N, heads, T, T]


def biased_attention(query: jax.Array, key: jax.Array, value: jax.Array, bias: jax.Array) -> jax.Array:
    """Scaled dot-product attention with an additive bias: ``query``, ``key``, ``value`` ``[N, T, heads, d]``,
    ``bias`` ``[N, heads, T, T]`` -> ``[N, T, heads, d]``; the softmax in float32. ``nn.dot_product_attention``
    computes the same, but its products keep the heads inside the token axis, which XLA's CPU backend runs several
    times slower than these products over ``[N, heads, T, d]``."""
    dtype = query.dtype
    query, key, value = (x.transpose(0, 2, 1, 3) for x in (query, key, value))  # [N, heads, T, d]
    logits = jnp.matmul(query, key.transpose(0, 1, 3, 2), preferred_element_type=jnp.float32)
    weights = jax.nn.softmax(logits / np.sqrt(query.shape[-1]) + bias.astype(jnp.float32), axis=-1)
    return jnp.matmul(weights.astype(dtype), value).transpose(0, 2, 1, 3)


class AttentionBlock(nn.Module):
    """A pre-norm transformer block: ``(tokens [N, T, D], relation [T, T], link [N, T, T]) -> tokens [N, T, D]``.
    Self-attention of ``heads`` heads biased by ``RelationBias``, then a two-layer MLP of ``2 D`` hidden units,
    each added to the tokens."""

    width: int
    heads: int
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, tokens: jax.Array, relation: np.ndarray, link: jax.Array) -> jax.Array:
        head_width = self.width // self.heads
        dense = functools.partial(nn.DenseGeneral, kernel_init=kaiming, dtype=self.dtype)
        y = nn.LayerNorm(dtype=self.dtype)(tokens)
        query, key, value = (dense((self.heads, head_width), name=name)(y) for name in ("query", "key", "value"))
        bias = RelationBias(self.heads)(relation, link).astype(self.dtype)
        attended = biased_attention(query, key, value, bias)  # [N, T, heads, d]
        tokens = tokens + dense(self.width, axis=(-2, -1), name="out")(attended)
        y = nn.LayerNorm(dtype=self.dtype)(tokens)
        y = nn.relu(nn.Dense(2 * self.width, kernel_init=kaiming, dtype=self.dtype)(y))
        return tokens + nn.Dense(self.width, kernel_init=kaiming, dtype=self.dtype)(y)
