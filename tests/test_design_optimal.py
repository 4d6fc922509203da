"""Optimal fixed forms: rank-one scoring identities, exhaustive and MILP optima, published banks."""
from __future__ import annotations

from itertools import combinations
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.optimize import LinearConstraint, milp

from atlascat.catalogue import BANK_BENCHMARKS, load_paper_bank as load_bank
from atlascat.design.optimal import (
    _candidate_scores,
    _form_matrices,
    _item_terms,
    _regularized,
    _value,
    form_criterion,
    integrated_information,
    optimal_form,
    random_form_baseline,
    random_forms,
    theta_design,
)
from atlascat.errors import ConfigError
from atlascat.irt import models
from atlascat.irt.bank import ItemBank


def _bank(rng, n=40, guess=True):
    a = rng.uniform(0.5, 2.5, n)
    b = rng.normal(0, 1.3, n)
    c = rng.uniform(0, 0.25, n) if guess else None
    return ItemBank([f"i{j}" for j in range(n)], a, b, c)


class _MB(SimpleNamespace):
    """A K-dimensional 2PL bank as a plain object (loadings, intercepts): duck typing."""

    def __len__(self):
        return len(self.item_ids)

    def index_of(self, ids):
        pos = {i: n for n, i in enumerate(self.item_ids)}
        return np.array([pos[i] for i in ids], dtype=np.intp)


def _mb(rng, n=30, k=2):
    return _MB(item_ids=np.array([f"m{j}" for j in range(n)], dtype=object),
               loadings=rng.uniform(0.2, 2.0, (n, k)) * (rng.random((n, k)) < 0.8),
               intercepts=rng.normal(0, 1, n))


class TestThetaDesign:
    def test_default_unidimensional_grid(self):
        d = theta_design()
        assert d.nodes.shape == (41, 1)
        np.testing.assert_allclose(d.weights.sum(), 1.0)
        # E-support is the central 95% region of N(0, 1): |theta| <= 1.96
        sup = d.nodes[d.support, 0]
        assert sup.min() == pytest.approx(-1.8) and sup.max() == pytest.approx(1.8)
        # prior precision is the inverse variance of the discretized N(0, 1)
        assert d.prior_precision[0, 0] == pytest.approx(1.0, abs=1e-3)

    def test_sample_and_multidim(self, rng):
        sample = rng.normal(0.5, 2.0, 4000)
        d = theta_design(sample)
        np.testing.assert_allclose(d.weights, 1 / 4000)
        assert d.prior_precision[0, 0] == pytest.approx(1 / sample.var(), rel=1e-10)
        assert d.support.mean() == pytest.approx(0.95, abs=0.01)
        d2 = theta_design(None, n_dims=2)
        assert d2.nodes.shape[1] == 2
        mean = d2.weights @ d2.nodes
        cov = (d2.nodes * d2.weights[:, None]).T @ d2.nodes
        np.testing.assert_allclose(mean, 0, atol=1e-12)
        np.testing.assert_allclose(cov, np.eye(2), atol=1e-10)

    def test_bad_inputs(self):
        with pytest.raises(ConfigError, match="coverage"):
            theta_design(coverage=0)
        with pytest.raises(ConfigError, match="prior_precision must be a number >= 0"):
            theta_design(prior_precision=-1.0)
        with pytest.raises(ConfigError, match="1-D or"):
            theta_design(np.zeros((2, 2, 2)))


class TestRankOneScoring:
    """Vectorized candidate scores equal the criterion of M + I_j recomputed from scratch."""

    @pytest.mark.parametrize("crit", ["D", "A", "E"])
    @pytest.mark.parametrize("dims", [1, 2, 3])
    def test_against_direct(self, rng, crit, dims):
        bank = _bank(rng) if dims == 1 else _mb(rng, 25, dims)
        design = theta_design(None, dims)
        W, V = _item_terms(bank, design)
        lam0 = _regularized(design.prior_precision)
        form = [0, 3, 7]
        M = _form_matrices(W, V, lam0, form)
        fast = _candidate_scores(M, W, V, design, crit)
        direct = np.array([_value(_form_matrices(W, V, lam0, form + [j]), design, crit)
                           for j in range(len(bank))])
        direct = -direct if crit == "A" else direct
        np.testing.assert_allclose(fast, direct, rtol=1e-9, atol=1e-12)

    def test_unidimensional_weights_are_fisher_information(self, rng):
        bank = _bank(rng)
        d = theta_design()
        W, V = _item_terms(bank, d)
        np.testing.assert_allclose(W, models.item_information(d.nodes[:, 0], *bank.params))
        np.testing.assert_allclose(V, 1.0)


class TestOptimality:
    @pytest.mark.parametrize("crit", ["D", "A", "E"])
    def test_matches_exhaustive_search(self, crit):
        rng = np.random.default_rng(7)
        bank = _bank(rng, n=14)
        k = 4
        subsets = np.array(list(combinations(range(len(bank)), k)))
        vals = form_criterion(bank, subsets, crit)
        best = vals.min() if crit == "A" else vals.max()
        res = optimal_form(bank, k, crit)
        if crit == "E":  # maximin is NP-hard; the heuristic must be within 2%
            assert res.value >= 0.98 * best
        else:
            assert res.value == pytest.approx(best, rel=1e-9)

    def test_multidim_exhaustive_d(self):
        rng = np.random.default_rng(3)
        bank = _mb(rng, 13, 2)
        subsets = np.array(list(combinations(range(13), 4)))
        vals = form_criterion(bank, subsets, "D")
        res = optimal_form(bank, 4, "D")
        assert res.value == pytest.approx(vals.max(), rel=1e-9)

    def test_e_criterion_against_milp(self, rng):
        """Unidimensional maximin is a MILP (van der Linden 2005): max y s.t.
        lam0 + sum_j x_j I_j(theta_q) >= y on the support, sum x = k, x binary."""
        bank = _bank(rng, n=120)
        k = 12
        res = optimal_form(bank, k, "E")
        d = res.design
        W, _ = _item_terms(bank, d)
        Ws = W[d.support]
        n = len(bank)
        c = np.zeros(n + 1)
        c[-1] = -1.0
        cover = LinearConstraint(np.hstack([Ws, -np.ones((Ws.shape[0], 1))]),
                                 -d.prior_precision[0, 0], np.inf)
        size = LinearConstraint(np.r_[np.ones(n), 0.0][None, :], k, k)
        integrality = np.r_[np.ones(n), 0.0]
        bounds = (np.r_[np.zeros(n), 0.0], np.r_[np.ones(n), np.inf])
        from scipy.optimize import Bounds

        sol = milp(c, constraints=[cover, size], integrality=integrality,
                   bounds=Bounds(*bounds), options={"time_limit": 20})
        assert sol.status in (0, 1)
        assert res.value >= 0.97 * (-sol.fun)
        assert res.value <= -sol.fun * (1 + 1e-6)

    def test_exchange_never_worsens_and_is_logged(self, rng):
        bank = _bank(rng, n=200)
        for crit in "DAE":
            res = optimal_form(bank, 15, crit)
            if crit == "A":
                assert res.value <= res.greedy_value + 1e-12
            else:
                assert res.value >= res.greedy_value - 1e-12
            assert (res.history.phase == "exchange").sum() == res.n_exchanges
            assert len(set(res.item_ids)) == 15
            # the reported value is the value of the returned form
            assert form_criterion(bank, res.item_ids, crit) == pytest.approx(res.value, rel=1e-10)

    def test_d_with_zero_prior_is_integrated_log_information(self, rng):
        bank = _bank(rng)
        res = optimal_form(bank, 10, "D", prior_precision=0.0)
        d = res.design
        info = models.test_information(d.nodes[:, 0], *bank.subset(res.indices).params)
        assert res.value == pytest.approx(d.weights @ np.log(info), rel=1e-8)  # 1e-9 jitter

    def test_design_follows_the_theta_distribution(self, rng):
        """Forms designed for able examinees pick harder items."""
        bank = _bank(rng, n=300, guess=False)
        low = optimal_form(bank, 20, "D", thetas=rng.normal(-2, 0.3, 500))
        high = optimal_form(bank, 20, "D", thetas=rng.normal(2, 0.3, 500))
        assert bank.b[low.indices].mean() < -1 < 1 < bank.b[high.indices].mean()

    def test_candidates_and_errors(self, rng):
        bank = _bank(rng, n=50)
        allowed = [f"i{j}" for j in range(0, 50, 2)]
        res = optimal_form(bank, 5, "A", candidates=allowed)
        assert set(res.item_ids) <= set(allowed)
        with pytest.raises(ConfigError, match="between 1 and the 25"):
            optimal_form(bank, 26, candidates=allowed)
        with pytest.raises(ConfigError, match="unknown criterion"):
            optimal_form(bank, 5, "T")
        with pytest.raises(ConfigError, match=r"thetas have 2 dimension\(s\) and the bank 1"):
            optimal_form(bank, 5, thetas=rng.normal(size=(100, 2)))

    def test_rng_only_breaks_ties(self, rng):
        # identical items: all ties; with an rng the choice is random but reproducible
        bank = ItemBank([f"t{j}" for j in range(30)], np.ones(30), np.zeros(30))
        r1 = optimal_form(bank, 3, rng=np.random.default_rng(1), exchange=False)
        r2 = optimal_form(bank, 3, rng=np.random.default_rng(1), exchange=False)
        r0 = optimal_form(bank, 3, exchange=False)
        assert list(r1.item_ids) == list(r2.item_ids)
        assert list(r0.item_ids) == ["t0", "t1", "t2"]


class TestEvaluation:
    def test_vectorized_form_criterion_matches_loop(self, rng):
        bank = _bank(rng)
        forms = random_forms(len(bank), 6, 9, rng)
        assert forms.shape == (9, 6) and all(len(set(f)) == 6 for f in forms)
        for crit in "DAE":
            many = form_criterion(bank, forms, crit)
            one = [form_criterion(bank, f, crit) for f in forms]
            np.testing.assert_allclose(many, one, rtol=1e-12)

    def test_integrated_information(self, rng):
        bank = _bank(rng)
        d = theta_design()
        form = [1, 2, 5]
        expected = d.weights @ models.test_information(d.nodes[:, 0], *bank.subset(form).params)
        assert integrated_information(bank, form) == pytest.approx(expected, rel=1e-12)

    def test_published_banks_beat_random_forms(self):
        """Acceptance: a D-optimal 50-item form has more integrated information than the median
        of 50 random forms on every published bank."""
        for bench in BANK_BENCHMARKS:
            bank = load_bank(bench)
            res = optimal_form(bank, 50, "D")
            cmp = random_form_baseline(bank, res.indices, "D", n_forms=50,
                                       rng=np.random.default_rng(0))
            assert cmp["info_ratio"] > 1.5, (bench, cmp)
            assert cmp["fraction_beaten"] == 1.0, (bench, cmp)


def test_continuous_score_bank_weights_are_quasi_information(rng):
    """A bank with a dispersion column (continuous scores) carries phi_j: an item's information
    is the quasi-likelihood's, P'^2 / (P Q phi_j), as the adaptive test and estimate_ability
    read it; so the form takes the item whose scores vary less about the curve."""
    from atlascat.irt.dispersion import with_dispersion

    base = _bank(rng, n=12, guess=False)
    phi = np.linspace(0.05, 1.0, 12)
    bank = with_dispersion(base, phi)
    d = theta_design()
    W, _ = _item_terms(bank, d)
    np.testing.assert_allclose(W, models.item_information(d.nodes[:, 0], *base.params) / phi)
    assert integrated_information(bank, [0, 1]) == pytest.approx((d.weights @ W[:, [0, 1]]).sum())
    twins = with_dispersion(ItemBank(["rough", "smooth"], [1.0, 1.0], [0.0, 0.0]), [1.0, 0.1])
    assert optimal_form(twins, 1, "D").item_ids.tolist() == ["smooth"]


def test_abilities_of_another_dimension_than_the_bank_are_refused():
    """A 2-column theta sample for a unidimensional bank (or one column for a 2-D bank) is
    refused in one line naming both dimensions, by the form, its criterion and the baseline."""
    from atlascat.design.optimal import random_form_baseline

    rng = np.random.default_rng(0)
    bank = ItemBank([f"i{j}" for j in range(30)], rng.lognormal(0, 0.3, 30), rng.normal(size=30))
    two = rng.normal(size=(40, 2))
    for call in (lambda: optimal_form(bank, 5, "D", two),
                 lambda: form_criterion(bank, [0, 1, 2], "A", two),
                 lambda: random_form_baseline(bank, [0, 1, 2], "D", two, n_forms=3, rng=rng)):
        with pytest.raises(ConfigError, match=r"thetas have 2 dimension\(s\) and the bank 1"):
            call()


@pytest.mark.parametrize("evaluate", [
    lambda b, f: form_criterion(b, f), lambda b, f: form_criterion(b, f, "E"),
    lambda b, f: integrated_information(b, f),
    lambda b, f: random_form_baseline(b, f, rng=np.random.default_rng(0))])
@pytest.mark.parametrize("form", [[], np.zeros((3, 0), dtype=int)])
def test_an_empty_form_is_refused_as_optimal_form_refuses_k_0(rng, evaluate, form):
    """An empty form has no information to score: one line naming the form length, as
    optimal_form(bank, 0) and random_forms with k = 0 (not the prior's value, nor 0)."""
    bank = _bank(rng, n=12)
    with pytest.raises(ConfigError, match=r"form length k \(0\) must be between 1 and") as e:
        evaluate(bank, form)
    assert "\n" not in str(e.value)
    for refused in (lambda: optimal_form(bank, 0), lambda: random_forms(12, 0, 5, rng)):
        with pytest.raises(ConfigError, match=r"form length k \(0\) must be between 1 and"):
            refused()
