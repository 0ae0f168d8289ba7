"""Elo by maximum likelihood: recovers known ratings from simulated matches; draws, anchors, errors."""

import numpy as np
import pytest

from dabjax.evaluation import elo


def simulate(true_ratings, games_per_pair, seed=0, draw_rate=0.0):
    """(games, points) for a round robin where results follow the Elo model (draws take half points)."""
    rng = np.random.default_rng(seed)
    k = len(true_ratings)
    games, points = np.zeros((k, k)), np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1, k):
            p = elo.expected_score(true_ratings[i], true_ratings[j])
            draws = rng.binomial(games_per_pair, draw_rate)
            # decisive games keep the expected score: P(win | decisive) = (p - draw_rate / 2) / (1 - draw_rate)
            wins = rng.binomial(games_per_pair - draws, (p - draw_rate / 2) / (1 - draw_rate))
            games[i, j] = games[j, i] = games_per_pair
            points[i, j] = wins + draws / 2
            points[j, i] = games_per_pair - points[i, j]
    return games, points


@pytest.mark.parametrize("draw_rate, spread", [(0.0, 1.0), (0.2, 0.5)])
def test_recovers_known_ratings(draw_rate, spread):
    names = ["random", "a", "b", "c", "d"]
    true = spread * np.array([0.0, 250.0, -120.0, 600.0, 420.0])
    games, points = simulate(true, 3000, seed=1, draw_rate=draw_rate)
    fit = elo.fit_elo(names, games, points)
    assert fit.anchor == "random" and fit.ratings[0] == 0.0 and fit.stderr[0] == 0.0
    error = np.abs(fit.ratings - true)
    assert (error[1:] < 4 * fit.stderr[1:]).all(), (fit.ratings, fit.stderr)
    assert error.max() < 40
    assert (fit.ci_low[1:] < fit.ratings[1:]).all() and (fit.ci_high[1:] > fit.ratings[1:]).all()


def test_standard_error_matches_the_two_player_formula():
    games = np.array([[0, 1000], [1000, 0]], float)
    points = np.array([[0, 640], [360, 0]], float)
    fit = elo.fit_elo(["random", "x"], games, points, prior_draws=0.0)
    p = 0.64
    assert fit.rating("x") == pytest.approx(400 * np.log10(1 / p - 1), abs=1e-6)  # random scored p
    expected_se = elo.ELO_PER_NATURAL_UNIT / np.sqrt(1000 * p * (1 - p))
    assert fit.stderr[1] == pytest.approx(expected_se, rel=1e-6)


def test_draws_are_half_points_and_anchors_shift_ratings():
    games, points = elo.tables_from_results(
        ["random", "x", "y"], [("random", "x", 0, 10, 0), ("x", "y", 30, 0, 10)]
    )
    assert points[0, 1] == 5 and points[1, 2] == 30 and points[2, 1] == 10
    fit = elo.fit_elo(["random", "x", "y"], games, points)
    assert fit.rating("x") == pytest.approx(0.0, abs=1e-6)  # only draws against the anchor
    shifted = elo.fit_elo(["random", "x", "y"], games, points, anchor="y", anchor_rating=1000.0)
    np.testing.assert_allclose(shifted.ratings - shifted.rating("y"), fit.ratings - fit.rating("y"), atol=1e-6)
    assert shifted.rating("y") == 1000.0


def test_all_wins_stay_finite_with_the_prior():
    """An all-win record (no maximum-likelihood rating without the prior) rates where the prior's ``d`` virtual
    draws put it: ``W`` wins in ``W + d`` games score ``W + d / 2``, whose log-odds are the rating, with the
    interval of that many games; all losses rate the opposite. On an ordinary record the prior pulls under an
    Elo point."""
    for wins, prior in ((50, 0.5), (50, 2.0), (5, 0.5)):
        n, p = wins + prior, (wins + prior / 2) / (wins + prior)
        expected = 400 * np.log10(p / (1 - p))
        stderr = 400 / np.log(10) / np.sqrt(n * p * (1 - p))
        for record, sign in (((wins, 0, 0), 1), ((0, 0, wins), -1)):
            games, points = elo.tables_from_results(["random", "x"], [("x", "random", *record)])
            fit = elo.fit_elo(["random", "x"], games, points, prior_draws=prior)
            assert fit.rating("x") == pytest.approx(sign * expected, rel=1e-9) and fit.rating("random") == 0.0
            assert fit.stderr[1] == pytest.approx(stderr, rel=1e-9) and np.isfinite(fit.ci_low).all()
    games, points = elo.tables_from_results(["random", "x"], [("x", "random", 300, 0, 100)])
    assert abs(elo.fit_elo(["random", "x"], games, points).rating("x") - 400 * np.log10(3)) < 1


def test_errors_name_the_problem():
    games, points = elo.tables_from_results(["random", "x", "lonely"], [("random", "x", 3, 1, 2)])
    with pytest.raises(ValueError, match="lonely"):
        elo.fit_elo(["random", "x", "lonely"], games, points)
    with pytest.raises(ValueError, match="anchor 'nobody'"):
        elo.fit_elo(["random", "x", "lonely"], games, points, anchor="nobody")
    with pytest.raises(ValueError, match="symmetric"):
        elo.fit_elo(["a", "b"], np.array([[0, 2], [3, 0]]), np.array([[0, 1], [1, 0]]))
