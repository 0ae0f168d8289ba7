"""Keys dabjax does not have: a config that sets one fails at start-up naming it; a checkpoint or agent written in
another format version fails to load naming both versions."""

import dataclasses
import json
import re

import jax
import jax.numpy as jnp
import pytest
from flax import serialization

from dabjax.evaluation import pretrained
from dabjax.search import mcts, network
from dabjax.training import checkpoint
from dabjax.training import config as config_lib

REMOVED_KEYS = ("network.value_head=wdl", "network.value_head=tanh", "search.margin_utility=0.0",
                "selfplay.full_search_share=0.5", "selfplay.cheap_simulations=2", "train.flat_optimizer=true",
                "train.flat_optimizer=false", "search.exact_value=margin", "search.exact_value=sign")
NET = network.NetworkConfig(kind="mlp", width=8, blocks=1, value_hidden=4)
SEARCH = mcts.SearchConfig(num_simulations=4)


@pytest.mark.parametrize("override", REMOVED_KEYS)
def test_a_config_with_a_removed_key_fails_naming_it(override, tmp_path):
    key = override.partition("=")[0]
    with pytest.raises(config_lib.ConfigError, match=f"'{key}'"):
        config_lib.load_config("smoke", [override])
    section, _, name = key.partition(".")
    yaml_file = tmp_path / "old.yaml"
    yaml_file.write_text(f"board: {{rows: 2, cols: 2}}\n{section}: {{{name}: {override.partition('=')[2]}}}\n")
    with pytest.raises(config_lib.ConfigError, match=f"'{key}'"):
        config_lib.load_config(yaml_file)


def test_a_checkpoint_or_agent_of_the_format_before_fails_naming_the_versions(tmp_path, monkeypatch):
    params = network.init_params(NET, (5, 5), jax.random.PRNGKey(0))
    meta = dict(rows=2, cols=2, mode="boxeszero", wall_time=1.0, start_step=0,
                network=dataclasses.asdict(NET), search={**dataclasses.asdict(SEARCH), "margin_utility": 0.0})
    current = checkpoint.FORMAT_VERSION
    before = current - 1
    with monkeypatch.context() as patch:  # a checkpoint as the format before wrote it
        patch.setattr(checkpoint, "FORMAT_VERSION", before)
        store = checkpoint.CheckpointStore(tmp_path / "run", keep=2)
        store.save(1, params, {"step": jnp.int32(0)}, meta)
        store.close()
    where = tmp_path / "run" / "checkpoints" / "1"
    with pytest.raises(ValueError, match=f"{re.escape(str(where))}: format version {before}, this dabjax reads "
                                         f"{current}"):
        checkpoint.load_for_play(where)
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / pretrained.AGENT_FILE).write_text(json.dumps({**meta, "format_version": pretrained.FORMAT_VERSION - 1}))
    with pytest.raises(ValueError, match=f"format version {pretrained.FORMAT_VERSION - 1}, this dabjax reads "
                                         f"{pretrained.FORMAT_VERSION}"):
        pretrained.load_agent_folder(agent)


def test_an_agent_saved_with_the_removed_exact_value_loads_where_it_held_the_kept_sign(tmp_path):
    """``search.exact_value`` went with its ``margin`` choice: an agent.json written with it loads when it says
    ``sign`` (the search dabjax keeps: the shipped agents say so), and fails naming it when it says ``margin``."""
    params = network.init_params(NET, (5, 5), jax.random.PRNGKey(0))
    for value in ("sign", "margin"):
        agent = tmp_path / value
        agent.mkdir()
        description = dict(format_version=pretrained.FORMAT_VERSION, rows=2, cols=2, network=dataclasses.asdict(NET),
                           search={**dataclasses.asdict(SEARCH), "exact_value": value})
        (agent / pretrained.AGENT_FILE).write_text(json.dumps(description))
        (agent / pretrained.PARAMS_FILE).write_bytes(serialization.msgpack_serialize(params))
        if value == "sign":
            assert pretrained.load_agent_folder(agent).search_config == SEARCH
        else:
            with pytest.raises(ValueError, match="search.exact_value='margin'"):
                pretrained.load_agent_folder(agent)
