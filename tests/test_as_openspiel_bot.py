"""dabjax agents as ``pyspiel.Bot``s in OpenSpiel's own loop (``evaluate_bots``): legal moves, the same games as our
arena for deterministic agents, and win rates against OpenSpiel's MCTSBot that agree with our arena's."""

import jax
import numpy as np
import pyspiel
import pytest
from open_spiel.python.algorithms import evaluate_bots, mcts

from dabjax.evaluation import agent_registry, arena
from dabjax.evaluation.as_openspiel_bot import DabjaxBot
from dabjax.game.geometry import board_geometry


def load(rows: int, cols: int):
    return pyspiel.load_game(f"dots_and_boxes(num_rows={rows},num_cols={cols})")


class Checked(pyspiel.Bot):
    """Passes ``step`` to ``bot``, recording each move and checking it is legal in OpenSpiel's state."""

    def __init__(self, bot):
        pyspiel.Bot.__init__(self)
        self.bot = bot
        self.moves = []

    def restart_at(self, state):
        self.bot.restart_at(state)

    def inform_action(self, state, player_id, action):
        self.bot.inform_action(state, player_id, action)

    def step(self, state):
        action = self.bot.step(state)
        assert action in state.legal_actions(), (action, state.legal_actions())
        self.moves.append(action)
        return action


def openspiel_mcts(game, simulations: int, seed: int):
    random_state = np.random.RandomState(seed)
    evaluator = mcts.RandomRolloutEvaluator(n_rollouts=1, random_state=random_state)
    return mcts.MCTSBot(game, 2.0, simulations, evaluator, random_state=random_state)


def test_bot_is_a_pyspiel_bot_and_checks_its_game():
    game = load(2, 2)
    bot = DabjaxBot(game, "level1")
    assert isinstance(bot, pyspiel.Bot) and "level1" in str(bot)
    with pytest.raises(ValueError, match="plays dots_and_boxes, not 'tic_tac_toe'"):
        DabjaxBot(pyspiel.load_game("tic_tac_toe"), "level1")
    with pytest.raises(ValueError, match="unknown agent 'wizard'"):
        DabjaxBot(game, "wizard")


@pytest.mark.parametrize("spec", ["level2", "openspiel-mcts:10", "alphabeta:2@0.05s"])
def test_any_agent_plays_legal_moves_in_evaluate_bots(spec):
    """A jax agent (a key per move), a host agent that needs the move history and one on a clock, in both seats,
    from the empty board and from a position reached by other moves."""
    game = load(2, 3)
    bot = Checked(DabjaxBot(game, spec, seed=1))
    rng = np.random.RandomState(0)
    for seat in (0, 1):
        opponent = openspiel_mcts(game, 10, seat)
        for opening in ([], [0, 7, 3]):
            state = game.new_initial_state()
            for line in opening:
                state.apply_action(line)
            played = len(bot.moves)
            returns = evaluate_bots.evaluate_bots(state, [bot, opponent] if seat == 0 else [opponent, bot], rng)
            assert state.is_terminal() and len(bot.moves) > played
            assert sorted(returns) in ([-1.0, 1.0], [0.0, 0.0])


def test_deterministic_agents_play_the_same_games_as_our_arena(tiny_run):
    """Raw-policy checkpoints (argmax, no randomness) give the very games of ``arena.play_match``, openings
    included, when they play as bots in OpenSpiel's loop."""
    geometry = board_geometry(2, 2)
    game = load(2, 2)
    specs = [f"ckpt:{tiny_run}/checkpoints/1:0", f"ckpt:{tiny_run}/checkpoints/2:0"]
    agents = [agent_registry.make_agent(spec, geometry) for spec in specs]
    games = arena.play_match(geometry, agents[0], agents[1], jax.random.PRNGKey(3), num_games=6, opening_moves=2)
    bots = [DabjaxBot(game, spec) for spec in specs]
    for history, a_player, scores in zip(games.histories, games.a_player, games.scores):
        state = game.new_initial_state()
        for line in history[:2]:
            state.apply_action(line)
        seated = bots if a_player == 0 else bots[::-1]
        returns = evaluate_bots.evaluate_bots(state, seated, np.random.RandomState(0))
        assert state.history() == history
        assert returns[0] == np.sign(scores[0] - scores[1])
    assert len({tuple(h) for h in games.histories}) > 1  # the openings made different games


def test_win_rate_against_openspiel_mcts_agrees_with_our_arena():
    """level2 as a bot against OpenSpiel's MCTSBot (50 simulations) on 3x3 scores what our arena's level2 scores
    against ``openspiel-mcts:50``: within 3 standard errors of the difference (binomial, pooled; at least 0.1)."""
    rows = cols = 3
    games, simulations = 24, 50
    game = load(rows, cols)
    bot = Checked(DabjaxBot(game, "level2", seed=0))
    opponent = openspiel_mcts(game, simulations, 0)
    rng = np.random.RandomState(0)
    points = 0.0
    for number in range(games):
        seat = number % 2
        returns = evaluate_bots.evaluate_bots(game.new_initial_state(), [bot, opponent][:: 1 - 2 * seat], rng)
        points += (returns[seat] + 1) / 2
    bot_score = points / games
    geometry = board_geometry(rows, cols)
    ours = arena.play_match(geometry, agent_registry.make_agent("level2", geometry),
                            agent_registry.make_agent(f"openspiel-mcts:{simulations}", geometry),
                            jax.random.PRNGKey(0), games).summary().score
    pooled = (bot_score + ours) / 2
    tolerance = max(3 * np.sqrt(pooled * (1 - pooled) * 2 / games), 0.1)
    print(f"level2 as a bot {bot_score:.3f}, in our arena {ours:.3f}, tolerance {tolerance:.3f}")
    assert abs(bot_score - ours) <= tolerance, (bot_score, ours, tolerance)
    assert bot_score > 0.7 and ours > 0.7  # level2 clearly beats 50 random-rollout simulations on 3x3
