"""The jitted simple-endgame values of ``dabjax.game.endgame`` against the exact recursion
(``dabjax.solvers.endgame_values``): the premises of its dynamic programme, checked by tests/test_endgame.py on
every multiset of chains and loops up to 30 boxes, and the paper's closed form, to show where it differs. A test
helper (``import endgame_checks`` beside ``conftest``), not part of the package: only the tests use it.

* ``shortest_opening_suffices``: some optimal opening opens a shortest chain or a shortest loop;
* ``short_chains_count_by_parity``: the 1- and 2-chains only count by parity (``endgame.with_short_chains``);
* ``shortest_opening_counterexamples`` / ``short_chain_counterexamples``: the multisets where either fails;
* ``paper_closed_form_value``: Theorems 3 and 5 of Niu et al. (2025), where they give a single number.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

from dabjax.game import endgame
from dabjax.solvers.endgame_values import endgame_value


def _sorted(chains: Iterable[int], loops: Iterable[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(sorted(int(a) for a in chains)), tuple(sorted(int(a) for a in loops))


def shortest_opening_suffices(chains: Iterable[int], loops: Iterable[int] = ()) -> bool:
    """Whether opening a shortest chain or a shortest loop attains v(G) (the premise of the jitted DP)."""
    chains, loops = _sorted(chains, loops)
    best = endgame_value(chains, loops)
    if not chains and not loops:
        return True
    options = []
    if chains:
        options.append(endgame.open_chain_value(chains[0], endgame_value(chains[1:], loops)))
    if loops:
        options.append(endgame.open_loop_value(loops[0], endgame_value(chains, loops[1:])))
    return min(options) == best


def short_chains_count_by_parity(chains: Iterable[int], loops: Iterable[int] = ()) -> bool:
    """Whether ``endgame.with_short_chains`` gives v(G) (the premise of the jitted value's Theorem 5 step)."""
    chains, loops = _sorted(chains, loops)
    rest = endgame_value(tuple(a for a in chains if a >= 3), loops)
    return endgame.with_short_chains(chains.count(1), chains.count(2), rest) == endgame_value(chains, loops)


def component_multisets(
    max_boxes: int, loop_lengths: Sequence[int] | None = None
) -> Iterator[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every multiset of chains and loops with at most ``max_boxes`` boxes in all, as sorted tuples.

    Loops default to the even lengths >= 4 (a grid has no odd cycles).
    """
    loop_lengths = list(range(4, max_boxes + 1, 2)) if loop_lengths is None else list(loop_lengths)

    def parts(budget: int, smallest: int, allowed: Sequence[int]) -> Iterator[tuple[int, ...]]:
        yield ()
        for part in allowed:
            if smallest <= part <= budget:
                for rest in parts(budget - part, part, allowed):
                    yield (part,) + rest

    for chains in parts(max_boxes, 1, range(1, max_boxes + 1)):
        for loops in parts(max_boxes - sum(chains), 4, loop_lengths):
            yield chains, loops


def shortest_opening_counterexamples(max_boxes: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The multisets (up to ``max_boxes`` boxes) where no shortest component is an optimal opening."""
    return [g for g in component_multisets(max_boxes) if not shortest_opening_suffices(*g)]


def short_chain_counterexamples(max_boxes: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The multisets (up to ``max_boxes`` boxes) where ``endgame.with_short_chains`` misses v(G)."""
    return [g for g in component_multisets(max_boxes) if not short_chains_count_by_parity(*g)]


def paper_closed_form_value(chains: Iterable[int], loops: Iterable[int] = ()) -> int | None:
    """The paper's closed form (Theorems 3 and 5), or None where it gives no single number.

    Theorem 5 removes the 1- and 2-chains (k and n of them) and adjusts v(C) of the rest by parity;
    Theorem 3 gives v(C) = c(C) when c(C) >= 2. Other cases of Theorem 3 are not implemented (the paper's
    text for them is garbled in our copy) and return None. Kept to compare with the recursion, not used.
    """
    chains, loops = _sorted(chains, loops)
    k = sum(1 for a in chains if a == 1)
    n = sum(1 for a in chains if a == 2)
    long_chains = [a for a in chains if a >= 3]
    if long_chains or loops:
        size = sum(long_chains) + sum(loops)
        if not long_chains:
            terminal_bonus = 8
        elif loops and all(a == 3 for a in long_chains):
            terminal_bonus = 6
        else:
            terminal_bonus = 4
        controlled = size - 4 * len(long_chains) - 8 * len(loops) + terminal_bonus
        if controlled < 2:
            return None
        rest = controlled
    else:
        rest = 0
    if k % 2 == 1 and n % 2 == 1:
        return rest - 1
    if k % 2 == 1:
        return 1 - rest
    if n % 2 == 1:
        return 2 - rest
    return rest
