"""Elo ratings by maximum likelihood: the Bradley-Terry model with draws counted as half points.

Agent ``i`` scores against agent ``j`` with probability ``P(i beats j) = 1 / (1 + 10 ** ((r_j - r_i) / 400))``
(``r`` in Elo points). Given, for every pair, the games played ``n_ij`` and the points scored ``s_ij``
(wins + draws / 2), ``fit_elo`` maximises

    sum over pairs of  s_ij log P(i beats j) + (n_ij - s_ij) log P(j beats i)

by Newton's method with one rating held fixed (the *anchor*, ``r = anchor_rating``, 0 by default). The
log-likelihood is concave, so Newton converges from zero. An agent that won (or lost) every game has an
infinite MLE; ``prior_draws`` virtual draws are added to every pair that played (0.5 by default: a quarter
of a win and a quarter of a loss) so ratings stay finite; with hundreds of games per pair their pull is a
few Elo.

Confidence intervals come from the observed Fisher information (the negative Hessian of the
log-likelihood at the optimum): ``rating +- z * sqrt(diag(inverse))``; they are relative to the anchor,
whose interval is zero.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

ELO_PER_NATURAL_UNIT = 400.0 / math.log(10.0)  # Elo points per unit of the logistic model's log-odds.
Z_95 = 1.959963984540054


@dataclasses.dataclass(frozen=True)
class EloFit:
    """Ratings of ``K`` agents. ``ratings``, ``stderr``: float64 ``[K]`` in Elo points; ``anchor``: the agent
    held fixed; ``ci_low`` / ``ci_high``: the ``confidence`` interval bounds."""

    names: tuple[str, ...]
    ratings: np.ndarray
    stderr: np.ndarray
    anchor: str
    confidence: float
    z: float

    @property
    def ci_low(self) -> np.ndarray:
        return self.ratings - self.z * self.stderr

    @property
    def ci_high(self) -> np.ndarray:
        return self.ratings + self.z * self.stderr

    def rating(self, name: str) -> float:
        return float(self.ratings[self.names.index(name)])


def expected_score(rating_a, rating_b):
    """A's expected score (win = 1, draw = 1/2) against B for Elo ratings (scalars or arrays)."""
    return 1.0 / (1.0 + 10.0 ** ((np.asarray(rating_b) - np.asarray(rating_a)) / 400.0))


def _z_value(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if abs(confidence - 0.95) < 1e-12:
        return Z_95
    from scipy.stats import norm  # scipy comes with the JAX stack

    return float(norm.ppf(0.5 + confidence / 2.0))


def _check_connected(names: Sequence[str], games: np.ndarray, anchor_index: int) -> None:
    """Raises ValueError naming the agents that no chain of played games links to the anchor."""
    reached = {anchor_index}
    frontier = [anchor_index]
    while frontier:
        i = frontier.pop()
        for j in np.flatnonzero(games[i] > 0):
            if int(j) not in reached:
                reached.add(int(j))
                frontier.append(int(j))
    missing = [names[i] for i in range(len(names)) if i not in reached]
    if missing:
        raise ValueError(
            f"cannot rate {missing}: no chain of played games links them to the anchor {names[anchor_index]!r}"
        )


def fit_elo(
    names: Sequence[str],
    games: np.ndarray,
    points: np.ndarray,
    anchor: str | None = None,
    anchor_rating: float = 0.0,
    prior_draws: float = 0.5,
    confidence: float = 0.95,
    max_iterations: int = 100,
) -> EloFit:
    """Maximum-likelihood Elo ratings.

    Args:
      names: the ``K`` agents.
      games: float ``[K, K]``, games played between ``i`` and ``j`` (symmetric; the diagonal is ignored).
      points: float ``[K, K]``, points scored by ``i`` against ``j`` (wins + draws / 2), so that
        ``points + points.T == games``.
      anchor: the agent whose rating is fixed (default ``"random"`` if present, else the first agent).
      anchor_rating: its rating.
      prior_draws: virtual draws added to every pair that played (keeps all-win records finite).
      confidence: of the intervals (``EloFit.ci_low`` / ``ci_high``).
    """
    names = tuple(names)
    k = len(names)
    games = np.asarray(games, np.float64)
    points = np.asarray(points, np.float64)
    if games.shape != (k, k) or points.shape != (k, k):
        raise ValueError(f"games and points must be [{k}, {k}] for {k} agents, got {games.shape}, {points.shape}")
    if len(set(names)) != k:
        raise ValueError(f"agent names must be distinct, got {names}")
    games, points = games.copy(), points.copy()
    np.fill_diagonal(games, 0.0)
    np.fill_diagonal(points, 0.0)
    if (games < 0).any() or (points < 0).any() or (points > games + 1e-9).any():
        raise ValueError("games and points must be non-negative with points <= games")
    if not np.allclose(games, games.T) or not np.allclose(points + points.T, games):
        raise ValueError("games must be symmetric and points[i, j] + points[j, i] must equal games[i, j]")
    if anchor is None:
        anchor = "random" if "random" in names else names[0]
    if anchor not in names:
        raise ValueError(f"anchor {anchor!r} is not one of the rated agents {list(names)}")
    anchor_index = names.index(anchor)
    _check_connected(names, games, anchor_index)
    played = games > 0
    games = games + prior_draws * played
    points = points + 0.5 * prior_draws * played
    free = np.array([i != anchor_index for i in range(k)])
    theta = np.zeros(k)  # natural units, anchor at 0
    hessian = np.zeros((k, k))
    for _ in range(max_iterations):
        p = 1.0 / (1.0 + np.exp(theta[None, :] - theta[:, None]))  # P(i beats j)
        gradient = (points - games * p).sum(axis=1)
        weight = games * p * (1.0 - p)
        hessian = weight - np.diag(weight.sum(axis=1))
        step = np.linalg.solve(hessian[np.ix_(free, free)], -gradient[free])
        step = np.clip(step, -5.0, 5.0)  # damped: never jump more than ~870 Elo at once
        theta[free] += step
        if np.abs(step).max() < 1e-10:
            break
    covariance = np.zeros((k, k))
    covariance[np.ix_(free, free)] = np.linalg.inv(-hessian[np.ix_(free, free)])
    stderr = np.sqrt(np.maximum(np.diag(covariance), 0.0)) * ELO_PER_NATURAL_UNIT
    ratings = theta * ELO_PER_NATURAL_UNIT + anchor_rating
    return EloFit(names, ratings, stderr, anchor, confidence, _z_value(confidence))


def tables_from_results(names: Sequence[str], results) -> tuple[np.ndarray, np.ndarray]:
    """``(games, points)`` ``[K, K]`` from ``(name_a, name_b, wins_a, draws, losses_a)`` tuples."""
    index = {name: i for i, name in enumerate(names)}
    k = len(index)
    games = np.zeros((k, k))
    points = np.zeros((k, k))
    for name_a, name_b, wins, draws, losses in results:
        i, j = index[name_a], index[name_b]
        n = wins + draws + losses
        games[i, j] += n
        games[j, i] += n
        points[i, j] += wins + 0.5 * draws
        points[j, i] += losses + 0.5 * draws
    return games, points


def pair_rating(wins: int, draws: int, losses: int, confidence: float = 0.95) -> tuple[float, float, float]:
    """``(Elo, low, high)`` of A against B (held at 0) from A's record ``wins``-``draws``-``losses``, with the
    ``confidence`` interval: one head-to-head pairing, as ``fit_elo`` rates it."""
    games, points = tables_from_results(["a", "b"], [("a", "b", wins, draws, losses)])
    fit = fit_elo(["a", "b"], games, points, anchor="b", confidence=confidence)
    return float(fit.ratings[0]), float(fit.ci_low[0]), float(fit.ci_high[0])
