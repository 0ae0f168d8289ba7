"""One replay capacity: the buffer the trainer allocates is the one ``estimate_memory`` sizes, for every shipped
training config."""

import pathlib

import jax
import pytest

from dabjax.runs import train_boxeszero
from dabjax.training import config as config_lib
from dabjax.training import sizing
from dabjax.training import trainer as trainer_lib

CONFIGS = sorted(path.name for path in (pathlib.Path(__file__).resolve().parents[1] / "configs").glob("*.yaml")
                 if not path.name.startswith("td_"))  # td_*.yaml train the TD baseline: no replay buffer


@pytest.mark.parametrize("name", CONFIGS)
def test_the_trainer_allocates_the_buffer_estimate_memory_sizes(name):
    config = config_lib.load_config(config_lib.config_path(name))
    trainer = trainer_lib.Trainer(config, exact_samples=train_boxeszero.exact_label_samples(config))
    trainer.place = lambda tree: tree  # placing reads arrays to the host: not under eval_shape
    buffer = jax.eval_shape(trainer.init_state).buffer
    capacity = sizing.replay_capacity_per_iteration(config)
    assert buffer.samples.valid.shape == (config.replay.iterations, capacity)
    estimate = sizing.estimate_memory(config)
    per_sample = estimate["replay_buffer"] / (config.replay.iterations * capacity)
    assert per_sample == int(per_sample) > 0  # the estimate counts exactly that many samples
    nodes_recorded = trainer.settings.extraction is not None
    assert nodes_recorded == (sizing.node_slots_per_search(config) > 0)
