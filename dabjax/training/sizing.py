"""How big a run is on its device: the memory a config needs, and the games that fill a device.

``estimate_memory`` gives the bytes of the main device buffers from the config alone; ``check_memory`` fails
early when they exceed the device. ``sized_to_device`` takes ``selfplay.games`` from the device's memory
(``selfplay.memory_share``), with the learning steps and the replay scaled to keep the sample reuse
(``scaled_to_games``). The trainer applies it when it is built; the CPU backend reports no memory limit, so
there the games are the config's.
"""

from __future__ import annotations

import dataclasses

import jax

from dabjax.game.geometry import board_geometry
from dabjax.training.config import TrainConfig


def node_slots_per_search(config: TrainConfig) -> int:
    """Tree nodes recorded per search: ``augmentation.max_nodes`` with node augmentation, which runs only with the
    backward curriculum (it filters nodes by the start step), else 0."""
    return config.augmentation.max_nodes if config.augmentation.nodes and config.curriculum.backward else 0


def replay_capacity_per_iteration(config: TrainConfig) -> int:
    """Samples one iteration adds at most to the replay buffer: ``replay.capacity_per_iteration``, or every
    round's position of every game (all ``L`` rounds) and its node slots. The one definition the trainer and
    ``estimate_memory`` share."""
    g = board_geometry(config.board.rows, config.board.cols)
    return config.replay.capacity_per_iteration or (
        config.selfplay.games * g.num_lines * (1 + node_slots_per_search(config)))


def estimate_memory(config: TrainConfig) -> dict[str, int]:
    """Bytes the main device buffers need, from the config alone (per device for the sharded parts).

    * ``search_trees``: mctx's trees of one batched search: ``games x (simulations + 1)`` nodes, each with
      ``6 x L`` float32/int32 child fields, 5 node fields and a State (lines, owners, scalars);
    * ``selfplay_records``: ``L`` rounds x games x (position + policy + targets), and the tree-node slots;
    * ``replay_buffer``: ``D x M`` samples (replicated);
    * ``training_activations``: about ``batch x H x W x width x 4 bytes x (4 blocks + 6)`` for backprop
      (an MLP has no ``H x W``: one vector per position);
    * ``inference_activations``: the same forward pass over all games at once, without backprop.
    XLA adds workspace on top; treat the total as a lower bound (docs/gpu.md, "Sizing to a GPU").
    """
    g = board_geometry(config.board.rows, config.board.cols)
    n_devices = max(1, jax.device_count())
    games = config.selfplay.games // n_devices
    lines, boxes = g.num_lines, g.num_boxes
    height, width = g.grid_shape
    nodes = config.search.num_simulations + 1
    state_bytes = 2 * lines + boxes + 4 * 6
    position_bytes = lines + boxes + 4
    node_slots = node_slots_per_search(config)
    capacity = replay_capacity_per_iteration(config)
    sample_bytes = position_bytes + 4 * lines + 4 + 4 + 2 + (boxes + 4 + 1 if config.network.dense_heads else 0)
    channels = config.network.width * (4 * config.network.blocks + 6)
    # Activations per position: a ResNet's every grid cell, a graph network's every line and node, an MLP's one vector.
    cells = {"resnet": height * width, "graph": lines + boxes + 1}.get(config.network.kind, 1)
    estimate = dict(
        search_trees=games * nodes * (6 * lines * 4 + 5 * 4 + state_bytes),
        selfplay_records=lines * games * (1 + node_slots) * (position_bytes + 4 * lines + 16),
        replay_buffer=config.replay.iterations * capacity * sample_bytes,
        training_activations=(config.train.batch_size // n_devices) * cells * channels * 4,
        inference_activations=games * cells * channels * 4 // 2,
    )
    estimate["total"] = sum(estimate.values())
    return estimate


def check_memory(config: TrainConfig, device: jax.Device | None = None) -> None:
    """Fails early, with the estimate's parts, when it exceeds the device's memory (where JAX reports it:
    GPUs and TPUs; the CPU backend reports no limit)."""
    device = device or jax.local_devices()[0]
    limit = device_memory(device)
    if limit is None:
        return
    estimate = estimate_memory(config)
    if estimate["total"] > limit:
        parts = ", ".join(f"{k} {v / 2**30:.2f} GiB" for k, v in estimate.items() if k != "total")
        raise ValueError(
            f"this config needs about {estimate['total'] / 2**30:.1f} GiB per device, more than the "
            f"{limit / 2**30:.1f} GiB of {device.device_kind}: {parts}. Reduce selfplay.games, "
            "search.num_simulations, replay.capacity_per_iteration or train.batch_size"
        )



def scaled_to_games(config: TrainConfig, games: int) -> TrainConfig:
    """``config`` with ``games`` games per iteration, the same sample reuse (optimiser samples drawn per
    sample added) and the same games per start step of the curriculum at most: ``train.max_steps_per_iteration``
    and an explicit ``replay.capacity_per_iteration`` scale by ``games / selfplay.games``, and
    ``curriculum.max_iterations_per_step`` by its inverse, rounded down (at least 1); the batch, and so the
    optimiser's step size, stays. (Without the last, 8x the games would keep a start step up to 8x as many games,
    and the curriculum would spend most of a short run's minutes on its first start steps; docs/results.md.)"""
    factor = games / config.selfplay.games
    capacity = config.replay.capacity_per_iteration
    return dataclasses.replace(
        config,
        selfplay=dataclasses.replace(config.selfplay, games=games),
        curriculum=dataclasses.replace(config.curriculum, max_iterations_per_step=max(
            1, config.curriculum.max_iterations_per_step * config.selfplay.games // games)),
        train=dataclasses.replace(config.train, max_steps_per_iteration=max(
            1, round(config.train.max_steps_per_iteration * factor))),
        replay=dataclasses.replace(config.replay, capacity_per_iteration=None if capacity is None else max(
            1, round(capacity * factor))),
    )


def games_for_memory(config: TrainConfig, bytes_available: float) -> int:
    """The most games, ``selfplay.games`` doubled as often as ``selfplay.max_games`` allows, whose
    ``estimate_memory`` total (the config scaled by ``scaled_to_games``) fits ``bytes_available``; at least
    ``selfplay.games``."""
    games = config.selfplay.games
    while (games * 2 <= config.selfplay.max_games
           and estimate_memory(scaled_to_games(config, games * 2))["total"] <= bytes_available):
        games *= 2
    return games


def device_memory(device: jax.Device | None = None) -> int | None:
    """Bytes of memory the device reports (GPUs and TPUs), or None (the CPU backend reports no limit)."""
    device = device or jax.local_devices()[0]
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    return (stats or {}).get("bytes_limit") or None


def sized_to_device(config: TrainConfig, device: jax.Device | None = None) -> TrainConfig:
    """``config`` with its games taken from the device's memory: with ``selfplay.memory_share`` > 0 on a
    device that reports its memory, ``scaled_to_games(config, games_for_memory(...))`` of that share of it;
    else ``config`` unchanged."""
    share = config.selfplay.memory_share
    limit = device_memory(device) if share > 0 else None
    if limit is None:
        return config
    return scaled_to_games(config, games_for_memory(config, share * limit))
