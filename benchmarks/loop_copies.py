"""Whether one search copies its tree or its states on the turns of its loops: the compiled program's copies.

    python benchmarks/loop_copies.py                   # configs/5x5.yaml's search, 256 games; exit 1 on a copy
    python benchmarks/loop_copies.py --games 1024 --all  # and every copy at a loop, per loop
    python benchmarks/loop_copies.py --tiny            # 2x2, 8 games, 6 simulations (tests)

The search is ``mcts.run_search`` at configs/5x5.yaml's settings (its graph network, randomly initialised: the
program does not depend on the values), compiled by XLA for this machine's backend. Its loops carry the tree
(arrays ``[N, S + 1, ...]``) and the batched states (``[N, L]``, ``[N, B]``); a turn that cannot update them in
place makes XLA insert a copy of the whole array. This script reads the optimised HLO (``compile().as_text()``)
and lists the copies inside every ``while`` loop's body and condition (and the computations they call, the
branches of a ``lax.switch`` among them; a nested loop's body is its own): ``copy`` instructions, asynchronous
copies, and fusions that only move data. A copy inside a fusion that also computes is that fusion's own pass
and is not counted. It reports, per loop, the copies' bytes per game and turn, and fails where one of them is a
tree or state array. ``jax.random``'s own loops (threefry rounds) are left out.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys

import jax

DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
               "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "token": 0}
ARRAY = re.compile(r"\b([a-z]+[0-9]*)\[([0-9,]*)\]")
HEADER = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) \((.*)\) -> (.*) \{$")
# A fusion of only these moves data; with a copy or a transpose among them it is a copy.
MOVES = {"parameter", "copy", "bitcast", "transpose", "reshape", "tuple", "get-tuple-element", "broadcast"}
# Instructions whose called computations run inside them (a fusion's, a reduction's): not walked.
INLINED = ("fusion", "reduce", "reduce-window", "scatter", "sort", "select-and-scatter", "all-reduce", "map")
RANDOM_LOOPS = ("threefry", "_uniform")  # jax.random's own loops: not the search's


@dataclasses.dataclass
class Instruction:
    name: str
    shape: str
    opcode: str
    operands: list
    attributes: str

    def attribute(self, key: str) -> str | None:
        found = re.search(key + r"=%([\w.\-]+)", self.attributes)
        return found.group(1) if found else None

    def called(self) -> list[str]:
        names = re.findall(r"(?:calls|to_apply|body|condition|true_computation|false_computation)=%([\w.\-]+)",
                           self.attributes)
        branches = re.search(r"branch_computations=\{([^}]*)\}", self.attributes)
        return names + (re.findall(r"%([\w.\-]+)", branches.group(1)) if branches else [])


@dataclasses.dataclass(frozen=True)
class LoopCopy:
    """One copy at a loop: the ``while`` instruction, where (``body``/``cond``, and the computation inside
    it), the copy's name and shape, its bytes."""

    loop: str  # the while instruction and what JAX traced it in (its op_name)
    where: str
    name: str
    shape: str
    bytes: int

    @property
    def dims(self) -> list[int]:
        found = ARRAY.search(self.shape)
        return [int(d) for d in found.group(2).split(",") if d] if found else []


def shape_bytes(shape: str) -> int:
    total = 0
    for dtype, dims in ARRAY.findall(shape):
        count = 1
        for dim in filter(None, dims.split(",")):
            count *= int(dim)
        total += count * DTYPE_BYTES.get(dtype, 0)
    return total


def closing(text: str, start: int) -> int:
    """The index just past the parenthesis group that opens at ``text[start]``."""
    depth = 0
    for index in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0 and text[index] == ")":
            return index + 1
    return len(text)


def parse(hlo_text: str) -> dict[str, list[Instruction]]:
    """``{computation: [instructions]}`` of an HLO module's text."""
    computations, current, name = {}, None, None
    for line in hlo_text.splitlines():
        text = line.strip()
        if current is None:
            header = HEADER.match(text)
            if header and text.endswith("{"):
                current, name = [], header.group(1)
            continue
        if text == "}":
            computations[name], current = current, None
            continue
        text = text.removeprefix("ROOT ")
        if not text.startswith("%") or " = " not in text:
            continue
        instruction, rest = text[1:].split(" = ", 1)
        if rest.startswith("("):
            end = closing(rest, 0)
            shape, rest = rest[:end], rest[end:].lstrip()
        else:
            shape, rest = rest.split(" ", 1)
        opening = rest.index("(")
        end = closing(rest, opening)
        current.append(Instruction(instruction, shape, rest[:opening], re.findall(r"%([\w.\-]+)", rest[opening:end]),
                                   rest[end:]))
    return computations


def is_copy(instruction: Instruction, computations: dict) -> bool:
    if instruction.opcode in ("copy", "copy-start"):  # an asynchronous copy counts once, at its start
        return True
    if instruction.opcode == "fusion":
        fused = {i.opcode for i in computations.get(instruction.attribute("calls"), [])}
        return bool(fused) and fused <= MOVES and bool(fused & {"copy", "transpose"})
    return False


def copied(instruction: Instruction) -> str:
    """The shape a copy writes: a ``copy-start``'s is the first of its tuple (destination, source, context)."""
    if instruction.opcode == "copy-start":
        found = ARRAY.search(instruction.shape)
        return found.group(0) if found else instruction.shape
    return instruction.shape


def search_loops(hlo_text: str) -> list[str]:
    """The ``while`` instructions of a module but ``jax.random``'s."""
    return [i.name for instructions in parse(hlo_text).values() for i in instructions
            if i.opcode == "while" and not any(r in i.attributes for r in RANDOM_LOOPS)]


def reachable(computations: dict, start: str) -> list[str]:
    """The computations a loop's body or condition runs (itself, calls, branches), not nested loops' bodies."""
    seen, stack = [], [start]
    while stack:
        name = stack.pop()
        if name in seen or name not in computations:
            continue
        seen.append(name)
        for instruction in computations[name]:
            if instruction.opcode not in INLINED and instruction.opcode != "while":
                stack.extend(instruction.called())
    return seen


def loop_copies(hlo_text: str) -> list[LoopCopy]:
    """Every copy inside a ``while`` loop's body or condition, ``jax.random``'s loops left out."""
    computations = parse(hlo_text)
    found = []
    for instructions in computations.values():
        for loop in instructions:
            if loop.opcode != "while" or any(r in loop.attributes for r in RANDOM_LOOPS):
                continue
            traced = re.search(r'op_name="(?:jit\([^)]*\)/)?([^"]*)"', loop.attributes)
            label = f"{loop.name} ({traced.group(1)})" if traced else loop.name
            for where in ("body", "condition"):
                start = loop.attribute(where)
                for name in reachable(computations, start):
                    found += [LoopCopy(label, where if name == start else f"{where}: {name}", i.name, copied(i),
                                       shape_bytes(copied(i)))
                              for i in computations[name] if is_copy(i, computations)]
    return found


def tree_or_state_copies(copies: list[LoopCopy], games: int, nodes: int, lines: int, boxes: int) -> list[LoopCopy]:
    """The copies of a tree array (``[N, nodes, ...]``) or a batched state's ``[N, L]`` or ``[N, B]``."""
    return [c for c in copies if c.dims[:2] == [games, nodes] or c.dims in ([games, lines], [games, boxes])]


def compiled_search(tiny: bool, games: int):
    """``(optimised HLO text, search config, geometry)`` of configs/5x5.yaml's search on ``games`` games."""
    from dabjax.game import env as env_lib
    from dabjax.game.geometry import board_geometry
    from dabjax.search import mcts, network
    from dabjax.training import config as config_lib

    config = config_lib.load_config("5x5")
    search = config.search
    geometry = board_geometry(config.board.rows, config.board.cols)
    if tiny:
        # 6 simulations: 7 nodes, a tree shape no other array of a 2x2 search has
        geometry, search = board_geometry(2, 2), dataclasses.replace(search, num_simulations=6)
    params = network.init_params(config.network, geometry.grid_shape, jax.random.PRNGKey(0))
    evaluator = mcts.network_evaluator(config.network, geometry)
    states = jax.eval_shape(lambda: env_lib.batch_init(geometry, games))  # shapes: the program is the same
    run = jax.jit(lambda p, k, s: mcts.run_search(search, env_lib.Env.of(geometry, config.board.early_termination),
                                                  evaluator, p, k, s))
    return run.lower(params, jax.random.PRNGKey(0), states).compile().as_text(), search, geometry


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=256, help="the batch (default: 256)")
    parser.add_argument("--all", action="store_true", help="list every copy, not only the totals per loop")
    parser.add_argument("--tiny", action="store_true", help="2x2 board, 8 games, 6 simulations (tests)")
    args = parser.parse_args(argv)
    games = 8 if args.tiny else args.games
    hlo_text, search, geometry = compiled_search(args.tiny, games)
    copies = loop_copies(hlo_text)
    totals: dict = {}
    for copy in copies:
        count, size = totals.get(copy.loop, (0, 0))
        totals[copy.loop] = (count + 1, size + copy.bytes)
    print(f"{geometry.rows}x{geometry.cols}, {games} games, {search.num_simulations} simulations "
          f"({jax.default_backend()}): copies inside each loop's turn")
    print("| loop | copies | bytes / game / turn |\n| --- | ---: | ---: |")
    for loop, (count, size) in totals.items():
        print(f"| {loop} | {count} | {size / games:.1f} |")
    if args.all:
        for copy in copies:
            print(f"  {copy.loop} {copy.where}: {copy.name} {copy.shape} ({copy.bytes:,} B)")
    bad = tree_or_state_copies(copies, games, search.num_simulations + 1, geometry.num_lines, geometry.num_boxes)
    for copy in bad:
        print(f"TREE OR STATE COPY: {copy.loop} {copy.where}: {copy.name} {copy.shape}")
    loops = search_loops(hlo_text)
    print(f"loop_copies result: {len(loops)} loops, {len(copies)} copies at loops, {len(bad)} of the tree or the "
          "states")
    return 1 if bad or not loops else 0


if __name__ == "__main__":
    sys.exit(main())
