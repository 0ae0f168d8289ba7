"""The policy-value network (flax.linen), of two kinds.

Input: the environment's observation, float32 ``[N, 2R+1, 2C+1, 4]`` (from the side to move; the fourth
plane, the parity of the undrawn lines, is read only when ``parity_plane`` is on). Output: policy logits
``[N, L]`` in OpenSpiel line order (not masked) and the value ``[N]`` in ``[-1, 1]`` for the side to move.
No batch statistics anywhere, so the network is a pure function of its parameters; Kaiming (He)
initialisation throughout, as the paper.

``kind="resnet"`` (the paper's kind) is fully convolutional, so one set of parameters serves every board
size. Trunk: a 3x3 stem convolution to ``width`` channels, then ``blocks`` residual blocks (two 3x3
convolutions with layer normalisation). Policy head: a 3x3 then a 1x1 convolution to one logit per grid
cell; the logits of the cells where lines sit are read out. Value head: a 1x1 convolution, mean- and
max-pooling over the grid, an MLP and ``tanh``. With the paper's 5x5 setting (``width=160``, ``blocks=6``)
it has about 2.8 M parameters.

``kind="mlp"`` reads the whole flattened grid: a dense stem to ``width`` units, ``blocks`` residual blocks
of two dense layers with layer normalisation, a dense policy head and the same value MLP. Its parameters
fit one board size only; on small boards it costs far less per position than the convolutions (the figures:
docs/training.md, "The MLP network").
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dabjax.game import chain_features
from dabjax.game import env as env_lib
from dabjax.game.geometry import board_geometry

kaiming = nn.initializers.kaiming_normal()
KINDS = ("resnet", "mlp", "graph")
DTYPES = ("float32", "bfloat16", "auto")
BF16_MIN_COMPUTE_CAPABILITY = 8.0  # Ampere: GPUs before it (a T4 is 7.5) emulate bfloat16, slower than float32


def native_bfloat16(device: jax.Device | None = None) -> bool:
    """Whether ``device`` (default: the first) computes bfloat16 natively: an NVIDIA GPU of compute capability
    8.0 or newer (A100, H100, H200, RTX 30xx and later) or a TPU; never the CPU."""
    device = jax.devices()[0] if device is None else device
    if device.platform == "tpu":
        return True
    capability = getattr(device, "compute_capability", None)
    return device.platform == "gpu" and capability is not None and float(capability) >= BF16_MIN_COMPUTE_CAPABILITY


def compute_dtype(name: str) -> jnp.dtype:
    """The compute dtype a ``network.dtype`` setting names; ``"auto"`` is bfloat16 where the device runs it
    natively (``native_bfloat16``) and float32 elsewhere, so one config trains well on a CPU, a T4 and an H100."""
    if name == "auto":
        return jnp.dtype(jnp.bfloat16 if native_bfloat16() else jnp.float32)
    return jnp.dtype(name)


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Network kind and size: the ``network`` section of a training config (``dabjax.training.config``) and
    the one place its defaults live (a 32-wide, 3-block ResNet). Frozen, so hashable (a jit static
    argument); validated at construction, the message naming the config key.

    ``kind``: ``"resnet"``, ``"mlp"`` or ``"graph"`` (strings and coins: boxes and the ground as nodes,
    undrawn lines as edges; any board size); ``width``: channels (resnet), units (mlp) or node features (graph)
    of the trunk; ``blocks``: residual blocks (message-passing rounds for the graph); ``value_hidden``: units of
    the value MLP; ``dtype``: compute dtype (``"float32"``, ``"bfloat16"`` or ``"auto"``: ``compute_dtype``;
    parameters stay float32 and the outputs are cast to float32 before the search);
    ``parity_plane``: read the observation's parity plane (``False``: the paper's three planes only);
    ``chain_features``: add the chain-structure inputs of ``dabjax.game.chain_features`` (any kind);
    ``global_pooling``: KataGo's global pooling bias in every residual block (resnet only);
    ``dense_heads``: the auxiliary heads of ``DenseHeads`` (every box's final owner and the final margin), which
    training can fit to every finished game (``targets.ownership_weight``, ``targets.margin_weight``);
    ``PolicyValueNet`` returns them only when asked."""

    kind: str = "resnet"
    width: int = 32
    blocks: int = 3
    value_hidden: int = 32
    dtype: str = "float32"
    parity_plane: bool = True
    chain_features: bool = False
    global_pooling: bool = False
    dense_heads: bool = False

    @property
    def input_planes(self) -> int:
        return env_lib.NUM_PLANES if self.parity_plane else env_lib.PAPER_PLANES

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"network.kind must be one of {KINDS}, got {self.kind!r}")
        for name in ("width", "blocks", "value_hidden"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < (0 if name == "blocks" else 1):
                raise ValueError(f"network.{name} must be a positive integer, got {value!r}")
        for name in ("parity_plane", "chain_features", "global_pooling", "dense_heads"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"network.{name} must be true or false, got {getattr(self, name)!r}")
        if self.global_pooling and self.kind != "resnet":
            raise ValueError("network.global_pooling is a ResNet option (the graph network always pools; "
                             f"an MLP sees the whole board); network.kind is {self.kind!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"network.dtype must be one of {DTYPES}, got {self.dtype!r}")


def same_parameters(a: NetworkConfig, b: NetworkConfig) -> bool:
    """Whether networks ``a`` and ``b`` have the same parameters: every setting equal but the compute dtype
    (parameters are float32 whatever the network computes in)."""
    return dataclasses.replace(a, dtype=b.dtype) == b


def warm_starts(source: NetworkConfig, target: NetworkConfig) -> bool:
    """Whether parameters of a ``source`` network can start training a ``target`` one: the same parameters
    (``same_parameters``) but perhaps for the dense heads, which ``target`` may add (they start fresh) or leave
    out (they are dropped; the trunk, policy and value carry over)."""
    return same_parameters(dataclasses.replace(source, dense_heads=target.dense_heads), target)


# Settings added after the first checkpoints were written, with the value those checkpoints' networks have:
# before the parity plane they read the paper's three planes, before the MLP they were ResNets.
SETTINGS_OF_EARLY_CHECKPOINTS = {"parity_plane": False, "kind": "resnet", "chain_features": False,
                                 "global_pooling": False, "dense_heads": False}


def config_from_saved(fields: dict) -> NetworkConfig:
    """The ``NetworkConfig`` stored in a checkpoint's metadata (``dataclasses.asdict`` of it). Never the
    defaults: a field missing from the metadata is one that did not exist yet when it was written
    (``SETTINGS_OF_EARLY_CHECKPOINTS``), any other missing field is an error."""
    known = {**SETTINGS_OF_EARLY_CHECKPOINTS, **fields}
    missing = [f.name for f in dataclasses.fields(NetworkConfig) if f.name not in known]
    if missing:
        raise ValueError(f"saved network settings {fields!r} lack {missing}")
    return NetworkConfig(**known)


def plays_any_board(config: NetworkConfig) -> bool:
    """Whether a trained network of this kind is meant to play boards it was not trained on: the graph
    network (its units are boxes and lines). A ResNet's parameters fit every board too, and warm-start
    another board's training (``run.init_from``), but a ResNet trained on one board plays only that one."""
    return config.kind == "graph"


def line_cells_of_grid(height: int, width: int) -> np.ndarray:
    """int32 ``[L]``: flat grid indices of the line cells, in OpenSpiel line order, from the grid shape."""
    if height % 2 == 0 or width % 2 == 0:
        raise ValueError(f"observation grid must be (2R+1) x (2C+1), got {height} x {width}")
    geometry = board_geometry((height - 1) // 2, (width - 1) // 2)
    return (geometry.line_cells[:, 0] * width + geometry.line_cells[:, 1]).astype(np.int32)


class ResidualBlock(nn.Module):
    """Two 3x3 convolutions with layer normalisation; with ``global_pooling``, KataGo's global pooling
    bias (Wu, "Accelerating Self-Play Learning in Go", 2019): the mean and max over the grid of the first
    convolution's output set a per-channel bias of the second, so distant parts of the board meet in
    every block instead of after ``H / 2`` of them."""

    width: int
    dtype: jnp.dtype = jnp.float32
    global_pooling: bool = False

    @nn.compact
    def __call__(self, x):
        y = nn.Conv(self.width, (3, 3), kernel_init=kaiming, dtype=self.dtype)(x)
        y = nn.relu(nn.LayerNorm(dtype=self.dtype)(y))
        if self.global_pooling:
            pooled = jnp.concatenate([y.mean(axis=(1, 2)), y.max(axis=(1, 2))], axis=-1)
            y = y + nn.Dense(self.width, kernel_init=kaiming, dtype=self.dtype)(pooled)[:, None, None, :]
        y = nn.Conv(self.width, (3, 3), kernel_init=kaiming, dtype=self.dtype)(y)
        y = nn.LayerNorm(dtype=self.dtype)(y)
        return nn.relu(x + y)


class DenseBlock(nn.Module):
    width: int
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x):
        y = nn.Dense(self.width, kernel_init=kaiming, dtype=self.dtype)(x)
        y = nn.relu(nn.LayerNorm(dtype=self.dtype)(y))
        y = nn.Dense(self.width, kernel_init=kaiming, dtype=self.dtype)(y)
        y = nn.LayerNorm(dtype=self.dtype)(y)
        return nn.relu(x + y)


def position_of(observation: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """What an observation ``[N, H, W, >= 4]`` says: ``(lines bool [N, L], claimed bool [N, B],
    score plane float32 [N], parity float32 [N])``."""
    batch, height, width, _ = observation.shape
    geometry = board_geometry((height - 1) // 2, (width - 1) // 2)
    flat = observation.reshape(batch, height * width, observation.shape[-1])
    line_cells = jnp.asarray(geometry.line_cells[:, 0] * width + geometry.line_cells[:, 1])
    box_cells = jnp.asarray(geometry.box_cells[:, 0] * width + geometry.box_cells[:, 1])
    lines = flat[:, line_cells, 0] > 0.5
    claimed = flat[:, box_cells, 1] > 0.5
    return lines, claimed, flat[:, 0, 2], flat[:, 0, 3]


def observed_chain_features(observation: jax.Array) -> chain_features.ChainFeatures:
    """``chain_features`` of every position of an observation batch ``[N, H, W, >= 4]`` (fields ``[N, ...]``)."""
    _, height, width, _ = observation.shape
    geometry = board_geometry((height - 1) // 2, (width - 1) // 2)
    lines, claimed, _, _ = position_of(observation)
    return jax.vmap(lambda l, c: chain_features.chain_features(geometry, l, c))(lines, claimed)


def chain_feature_planes(observation: jax.Array) -> jax.Array:
    """float32 ``[N, H, W, F]``: ``observed_chain_features`` painted on the grid (box features at box cells,
    line features at line cells, position features everywhere)."""
    batch, height, width, _ = observation.shape
    geometry = board_geometry((height - 1) // 2, (width - 1) // 2)
    features = observed_chain_features(observation)

    def paint(values, cells):  # values [N, K, F] -> [N, H * W, F], zero off ``cells`` (-1 reads a zero row)
        padded = jnp.concatenate([values, jnp.zeros_like(values[:, :1])], axis=1)
        return padded[:, jnp.asarray(cells.reshape(-1))]

    planes = [paint(features.box, geometry.cell_box), paint(features.line, geometry.cell_line),
              jnp.broadcast_to(features.position[:, None, :], (batch, height * width, features.position.shape[-1]))]
    return jnp.concatenate(planes, axis=-1).reshape(batch, height, width, -1)


class GraphTrunk(nn.Module):
    """The strings-and-coins graph network: ``(observation [N, H, W, P]) -> (line states [N, L, D], value
    features [N, F], box states [N, B, D])``.

    Nodes are the ``B`` boxes and one ground node (the edge of the board); every line is an edge between
    its two boxes, or a box and the ground. Messages pass along undrawn lines only, so chains and loops are
    paths and cycles of the graph. Each of ``blocks`` rounds computes every line's message from its two
    ends (symmetrically: their sum and product) and its own state, averages the messages of each node's
    undrawn lines, and updates the node from it, its own state, the mean of all nodes (global pooling, so
    distant chains meet every round) and the position's features. Nothing depends on the board size: one
    set of parameters plays every board."""

    width: int
    blocks: int
    chain_features: bool
    parity_plane: bool
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, observation: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        _, height, width, _ = observation.shape
        geometry = board_geometry((height - 1) // 2, (width - 1) // 2)
        num_boxes = geometry.num_boxes
        lines, claimed, score, parity = position_of(observation)
        undrawn = ~lines
        ends = np.where(geometry.line_boxes >= 0, geometry.line_boxes, num_boxes)  # [L, 2], B = ground
        # One-hot [2, L, B + 1] tables: reading a line's two ends and summing over a node's lines are then
        # matrix products, whose gradients are matrix products too (a gather's is a scatter, slow on CPUs).
        end_of = np.zeros((2, geometry.num_lines, num_boxes + 1), np.float32)
        for side in range(2):
            end_of[side, np.arange(geometry.num_lines), ends[:, side]] = 1.0
        incidence = jnp.asarray(np.minimum(end_of.sum(0), 1.0), self.dtype)  # [L, B + 1]: line l touches node v
        end_of = jnp.asarray(end_of, self.dtype)

        def line_ends(nodes):  # [N, B + 1, D] -> the states at each line's two ends, [N, L, D] each
            return jnp.einsum("lv,nvd->nld", end_of[0], nodes), jnp.einsum("lv,nvd->nld", end_of[1], nodes)

        valence = jax.vmap(functools.partial(chain_features.box_valences, geometry))(lines, claimed)  # [N, B]
        box_in = [claimed[..., None], jax.nn.one_hot(valence, 5)]
        on_edge = ~jnp.asarray(geometry.line_box_valid.all(-1))[None, :, None]
        line_in = [undrawn[..., None], on_edge & undrawn[..., None]]
        position_in = [score[:, None]] + ([parity[:, None]] if self.parity_plane else [])
        if self.chain_features:
            features = observed_chain_features(observation)
            box_in.append(features.box)
            line_in.append(features.line)
            position_in.append(features.position)
        box_in = jnp.concatenate([x.astype(jnp.float32) for x in box_in], -1)  # [N, B, Fb]
        batch = box_in.shape[0]
        ground_in = jnp.zeros((batch, 1, box_in.shape[-1] + 1), jnp.float32).at[..., -1].set(1.0)
        node_in = jnp.concatenate([jnp.pad(box_in, ((0, 0), (0, 0), (0, 1))), ground_in], axis=1)  # [N, B+1, F]
        line_in = jnp.concatenate([x.astype(jnp.float32) for x in line_in], -1)
        position_in = jnp.concatenate([x.astype(jnp.float32) for x in position_in], -1)

        dense = functools.partial(nn.Dense, self.width, kernel_init=kaiming, dtype=self.dtype)
        norm = functools.partial(nn.LayerNorm, dtype=self.dtype)
        position = nn.relu(dense()(position_in.astype(self.dtype)))  # [N, D]
        nodes = nn.relu(norm()(dense()(node_in.astype(self.dtype)) + position[:, None]))  # [N, B + 1, D]
        edges = nn.relu(norm()(dense()(line_in.astype(self.dtype))))  # [N, L, D]
        live = undrawn.astype(self.dtype)[..., None]  # [N, L, 1]
        degree = jnp.maximum(jnp.einsum("lv,nl->nv", incidence.astype(jnp.float32), undrawn.astype(jnp.float32)),
                             1.0)[..., None]
        for _ in range(self.blocks):
            a, b = line_ends(nodes)
            message = nn.relu(dense()(jnp.concatenate([a + b, a * b, edges], -1)))  # [N, L, D]
            edges = norm()(edges + dense()(message))
            gathered = jnp.einsum("lv,nld->nvd", incidence, message * live) / degree.astype(self.dtype)
            pooled = nodes[:, :num_boxes].mean(axis=1, keepdims=True)
            update = nn.relu(dense()(jnp.concatenate(
                [nodes, gathered, jnp.broadcast_to(pooled, nodes.shape), jnp.broadcast_to(position[:, None],
                                                                                     nodes.shape)], -1)))
            nodes = norm()(nodes + dense()(update))
        a, b = line_ends(nodes)
        line_states = nn.relu(dense()(jnp.concatenate([edges, a + b, a * b], -1)))
        boxes = nodes[:, :num_boxes]
        value_features = jnp.concatenate([boxes.mean(1), boxes.max(1), nodes[:, num_boxes], position], -1)
        return line_states, value_features, boxes


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


class PolicyValueNet(nn.Module):
    """``(observation [N, H, W, 4]) -> (logits [N, L], value [N])``. Logits are not masked.

    With ``dense=True`` (a network with ``config.dense_heads`` only) it returns ``(logits, value, ownership
    logits [N, B], margin [N])`` (``DenseHeads``); the default call, the search's and play's, is the same
    function with or without the heads: they are extra parameters under ``dense_heads``, read only when asked."""

    config: NetworkConfig

    @nn.compact
    def __call__(self, observation: jax.Array, dense: bool = False):
        if dense and not self.config.dense_heads:
            raise ValueError("this network has no dense heads (network.dense_heads: false)")
        dtype = compute_dtype(self.config.dtype)
        batch, height, width, _ = observation.shape
        num_boxes = ((height - 1) // 2) * ((width - 1) // 2)
        heads = DenseHeads(num_boxes, self.config.value_hidden, dtype, name="dense_heads")
        if self.config.kind == "graph":
            line_states, value_features, boxes = GraphTrunk(
                self.config.width, self.config.blocks, self.config.chain_features, self.config.parity_plane, dtype
            )(observation)
            logits = nn.Dense(1, kernel_init=kaiming, dtype=dtype)(line_states)[..., 0].astype(jnp.float32)
            value = self._value_head(value_features, dtype)
            return (logits, value, *heads(boxes, value_features)) if dense else (logits, value)
        extra = chain_feature_planes(observation) if self.config.chain_features else None
        planes = observation[..., : self.config.input_planes]
        if self.config.kind == "mlp":
            flat = [planes.reshape(batch, -1)]
            if self.config.chain_features:
                # The features themselves, not painted on a mostly empty grid: [N, B*Fb + L*Fl + G].
                features = observed_chain_features(observation)
                flat += [features.box.reshape(batch, -1), features.line.reshape(batch, -1), features.position]
            flat = jnp.concatenate(flat, -1).astype(dtype)
            x = nn.relu(nn.LayerNorm(dtype=dtype)(nn.Dense(self.config.width, kernel_init=kaiming, dtype=dtype)(flat)))
            for _ in range(self.config.blocks):
                x = DenseBlock(self.config.width, dtype)(x)
            num_lines = len(line_cells_of_grid(height, width))
            logits = nn.Dense(num_lines, kernel_init=kaiming, dtype=dtype)(x).astype(jnp.float32)
            value = self._value_head(x, dtype)
            return (logits, value, *heads(None, x)) if dense else (logits, value)

        if extra is not None:
            planes = jnp.concatenate([planes, extra], -1)
        x = nn.Conv(self.config.width, (3, 3), kernel_init=kaiming, dtype=dtype)(planes.astype(dtype))
        x = nn.relu(nn.LayerNorm(dtype=dtype)(x))
        for _ in range(self.config.blocks):
            x = ResidualBlock(self.config.width, dtype, self.config.global_pooling)(x)

        p = nn.relu(nn.Conv(max(self.config.width // 2, 1), (3, 3), kernel_init=kaiming, dtype=dtype)(x))
        p = nn.Conv(1, (1, 1), kernel_init=kaiming, dtype=dtype)(p).reshape(batch, height * width)
        logits = p[:, line_cells_of_grid(height, width)].astype(jnp.float32)

        v = nn.relu(nn.Conv(max(self.config.width // 4, 1), (1, 1), kernel_init=kaiming, dtype=dtype)(x))
        pooled = jnp.concatenate([v.mean(axis=(1, 2)), v.max(axis=(1, 2))], axis=-1)
        value = self._value_head(pooled, dtype)
        if not dense:
            return logits, value
        box_cells = board_geometry((height - 1) // 2, (width - 1) // 2).box_cells
        boxes = x.reshape(batch, height * width, -1)[:, box_cells[:, 0] * width + box_cells[:, 1]]  # [N, B, C]
        return (logits, value, *heads(boxes, pooled))

    def _value_head(self, features: jax.Array, dtype) -> jax.Array:
        """``[N, F] -> [N]`` in [-1, 1]: a hidden layer of ``value_hidden`` units, then ``tanh`` of one output."""
        v = nn.relu(nn.Dense(self.config.value_hidden, kernel_init=kaiming, dtype=dtype)(features))
        return jnp.tanh(nn.Dense(1, dtype=dtype)(v)[:, 0].astype(jnp.float32))


def mask_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Illegal moves get the most negative finite float (finite so that an all-illegal row stays NaN-free)."""
    return jnp.where(legal, logits, jnp.finfo(logits.dtype).min)


def init_params(config: NetworkConfig, grid_shape: tuple[int, int], key: jax.Array):
    """Parameters for a board whose observation grid is ``grid_shape``; a ResNet's fit every board size, an
    MLP's that board's only."""
    dummy = jnp.zeros((1, *grid_shape, env_lib.NUM_PLANES), jnp.float32)
    return PolicyValueNet(config).init(key, dummy, dense=config.dense_heads)


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


def num_parameters(params) -> int:
    return int(sum(np.prod(x.shape) for x in jax.tree_util.tree_leaves(params)))
