"""benchmarks/play_settings.py's variants: search settings parsed from the command line, wrong keys named."""

import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def play_settings():
    return load_benchmark("play_settings")


def test_a_variant_is_search_settings_with_python_values(play_settings):
    assert play_settings.parse_variant("max_num_considered_actions=8,algorithm=puct, max_depth = null") == {
        "max_num_considered_actions": 8, "algorithm": "puct", "max_depth": None}
    assert play_settings.parse_variant("c_puct=1.5") == {"c_puct": 1.5}


@pytest.mark.parametrize("text", ["max_considered=8", "algorithm", "=3"])
def test_an_unknown_setting_is_named(play_settings, text):
    with pytest.raises(ValueError, match="is not a search setting"):
        play_settings.parse_variant(text)


def test_a_bad_variant_stops_the_command_naming_it(play_settings, capsys):
    with pytest.raises(SystemExit):
        play_settings.main(["--agent", "pretrained:4x4", "--set", "data/4x4.npz", "--variant", "simulations=8"])
    assert "'simulations' is not a search setting" in capsys.readouterr().err
