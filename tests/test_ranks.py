"""Rank analysis: correlations, rank shifts, equal-accuracy pairs, plots."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from atlascat.errors import ConfigError
from atlascat.studies.ranks import plot_rank_analysis, rank_analysis, tied_pairs


def test_hand_made_example():
    acc = np.array([0.9, 0.8, 0.8, 0.5, 0.2])
    theta = np.array([2.0, 0.1, 0.9, 0.0, -1.0])
    se = np.array([0.1, 0.1, 0.1, 0.1, 0.1])
    rep = rank_analysis(theta, acc, se=se, subject_ids=list("abcde"), shift_threshold=0)
    t = rep.table.set_index("subject_id")
    # ranks: 1 = best; b and c tie on accuracy (average rank 2.5)
    assert list(t["rank_accuracy"]) == [1, 2.5, 2.5, 4, 5]
    assert list(t["rank_theta"]) == [1, 3, 2, 4, 5]
    assert list(t["rank_shift"]) == [0, -0.5, 0.5, 0, 0]
    assert rep.n_shifted == 2 and rep.share_shifted == pytest.approx(0.4)
    assert rep.n_tied_pairs == 1 and rep.n_tied_pairs_theta_differs == 1
    assert rep.n_tied_pairs_significant == 1        # |0.9 - 0.1| / sqrt(0.02) = 5.7 > 1.96
    assert rep.spearman == pytest.approx(spearmanr(theta, acc)[0])
    assert rep.kendall == pytest.approx(kendalltau(theta, acc)[0])
    s = rep.summary()
    assert s["n_models"] == 5 and s["share_tied_pairs_theta_differs"] == 1.0


def test_tied_pairs_against_brute_force(rng):
    acc = rng.integers(0, 15, 300) / 15.0            # many exact ties
    theta = rng.normal(size=300)
    theta[:20] = theta[20:40]                        # some equal thetas too
    se = rng.uniform(0.05, 0.3, 300)
    pairs = tied_pairs(acc, theta, se)
    brute = {(i, j) for i, j in itertools.combinations(range(300), 2) if acc[i] == acc[j]}
    got = {tuple(sorted((int(a), int(b)))) for a, b in zip(pairs["subject_1"], pairs["subject_2"])}
    assert got == brute
    z = np.array([abs(theta[i] - theta[j]) / np.hypot(se[i], se[j]) for i, j in
                  zip(pairs["subject_1"].astype(int), pairs["subject_2"].astype(int))])
    np.testing.assert_allclose(pairs["z"], z)
    rep = rank_analysis(theta, acc, se=se)
    differs = sum(abs(theta[i] - theta[j]) > 1e-6 for i, j in brute)
    assert rep.n_tied_pairs == len(brute) and rep.n_tied_pairs_theta_differs == differs


def test_identical_orderings_and_errors(rng):
    theta = rng.normal(size=50)
    acc = 1 / (1 + np.exp(-theta))
    rep = rank_analysis(theta, acc)
    assert rep.spearman == pytest.approx(1.0) and rep.kendall == pytest.approx(1.0)
    assert rep.n_shifted == 0 and rep.max_shift == 0 and rep.n_tied_pairs == 0
    assert rep.n_tied_pairs_significant is None
    with pytest.raises(ConfigError):
        rank_analysis(theta, acc[:10])
    with pytest.raises(ConfigError):
        rank_analysis(np.r_[theta[:-1], np.nan], acc)


def test_plots_are_written(tmp_path, rng):
    acc = rng.integers(0, 40, 120) / 40
    theta = 3 * acc + rng.normal(0, 0.3, 120)
    rep = rank_analysis(theta, acc, se=np.full(120, 0.2))
    paths = plot_rank_analysis(rep, tmp_path / "figs", prefix="arc")
    assert [p.name for p in paths] == ["arc_theta_vs_accuracy.png", "arc_rank_shift.png",
                                       "arc_shift_hist.png", "arc_ties.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000
