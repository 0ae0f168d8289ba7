"""Terminal play with scripted input: bad input is refused with the reason, the game finishes, quit works."""

import itertools

import jax.numpy as jnp

from dabjax.cli import play
from dabjax.evaluation import agent_registry
from dabjax.game import notation
from dabjax.game.geometry import board_geometry


def scripted(lines):
    """A read_line that answers with ``lines`` in turn, then raises EOFError (end of input)."""
    answers = iter(lines)
    prompts = []

    def read_line(prompt):
        prompts.append(prompt)
        try:
            return next(answers)
        except StopIteration:
            raise EOFError from None

    return read_line, prompts


def lowest_line(geometry, key, states):
    return jnp.argmax(~states.lines, axis=-1).astype(jnp.int32)


def test_scripted_game_with_bad_input():
    g = board_geometry(1, 1)  # lines: h 0 0 = 0, h 1 0 = 1, v 0 0 = 2, v 0 1 = 3
    read_line, prompts = scripted(["nonsense", "h 5 5", "help", "moves", "v 0 0", "v 0 0", "7", "h 1 0", "3"])
    output = []
    record = play.play_game(g, lowest_line, human_player=0, read_line=read_line, write=output.append,
                            agent_name="lowest")
    text = "\n".join(output)
    assert "Refused: move 'nonsense' is not understood" in text
    assert "Refused: move 'h 5 5': horizontal line (r=5, c=5) is off a 1x1 board" in text
    assert "that line is already drawn" in text  # the second 'v 0 0'
    assert "line index outside 0..3" in text  # '7'
    assert "legal moves: h 0 0 (0), h 1 0 (1), v 0 0 (2), v 0 1 (3)" in text
    assert "Moves: 'h R C'" in text
    # Human v 0 0; agent h 0 0 (lowest line); human h 1 0 (third side); agent v 0 1 takes the box.
    assert record.moves == [2, 0, 1, 3] and not record.quit
    assert record.scores == (0, 1)
    assert "You lose: 0 - 1." in text
    assert "lowest drew h 0 0 (line 0)" in text
    assert "lowest drew v 0 1 (line 3) and completed 1 box" in text
    assert "A 0 - B 1, game over" in text


def test_quit_and_end_of_input():
    g = board_geometry(2, 2)
    record = play.play_game(g, lowest_line, read_line=scripted(["h 0 0", "quit"])[0], write=lambda s: None)
    assert record.quit and record.moves[:1] == [0]
    record = play.play_game(g, lowest_line, read_line=scripted([])[0], write=lambda s: None)
    assert record.quit and record.moves == []


def test_host_agents_play_second_and_first():
    g = board_geometry(2, 2)
    for spec, human in (("alphabeta:3", 1), ("openspiel-mcts:10", 0), ("alphabeta:3@0.05s", 1)):  # one on a clock
        agent = agent_registry.make_agent(spec, g)
        # the human plays every line in index order; refusals of drawn lines are part of the script
        read_line, _ = scripted([str(i) for i in itertools.chain.from_iterable([range(12)] * 2)])
        output = []
        record = play.play_game(g, agent, human_player=human, read_line=read_line, write=output.append)
        assert not record.quit and sorted(record.moves) == list(range(12))
        state = notation.state_from_moves(g, record.moves)
        assert tuple(int(s) for s in state.scores) == record.scores
