"""benchmarks/loop_copies.py: the compiled search copies neither its tree nor its states on a turn of its loops,
and the check finds such a copy where a loop makes one."""

import re

import jax
import jax.numpy as jnp
from conftest import load_benchmark

loop_copies = load_benchmark("loop_copies")


def test_the_compiled_search_copies_neither_its_tree_nor_its_states_on_a_turn(capsys):
    assert loop_copies.main(["--tiny"]) == 0
    # The loops were found: the simulations, the descent, the settle and the chain walk (each on lanes and on the
    # whole batch).
    assert int(re.search(r"result: (\d+) loops", capsys.readouterr().out).group(1)) >= 4


def test_the_copy_check_finds_a_tree_kept_beside_its_update():
    def keeps_the_old_tree(tree, index):
        def body(carry):
            turn, current, _ = carry
            return turn + 1, current.at[jnp.arange(8), index[turn % 8]].add(1.0), current

        return jax.lax.while_loop(lambda c: c[0] < 10, body, (0, tree, tree))[1:]

    hlo = jax.jit(keeps_the_old_tree).lower(jnp.zeros((8, 7, 12)), jnp.zeros(8, jnp.int32)).compile().as_text()
    found = loop_copies.tree_or_state_copies(loop_copies.loop_copies(hlo), games=8, nodes=7, lines=12, boxes=4)
    assert found and all(copy.shape.startswith("f32[8,7,12]") for copy in found)
