"""Multidimensional 2PL: bank, rotations, EM and MH-RM calibration, dimension selection."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit, logsumexp
from scipy.stats import ortho_group

from atlascat.errors import BankError, ConfigError, ResponseDataError
from atlascat.irt.multidim import (
    MultidimBank,
    MultidimIRT,
    procrustes,
    product_grid,
    select_dimension,
    simulate_responses,
    tucker_congruence,
    varimax,
)


def simple_structure(rng, n_items=40, n_dims=2, cross=0.3):
    """Items in K blocks: a large loading (1 to 2.2) on their factor, small ones elsewhere."""
    A = rng.uniform(0.0, cross, (n_items, n_dims))
    block = np.arange(n_items) * n_dims // n_items
    A[np.arange(n_items), block] = rng.uniform(1.0, 2.2, n_items)
    d = rng.normal(0.0, 1.0, n_items)
    return MultidimBank([f"q{j}" for j in range(n_items)], A, d)


@pytest.fixture(scope="module")
def two_dim_data():
    rng = np.random.default_rng(11)
    bank = simple_structure(rng, 40, 2)
    theta = rng.standard_normal((1500, 2))
    return bank, theta, simulate_responses(bank, theta, rng)


class TestBank:
    def test_probability_information_and_files(self, tmp_path, rng):
        bank = simple_structure(rng, 12, 3)
        theta = rng.standard_normal((5, 3))
        np.testing.assert_allclose(bank.probability(theta),
                                   expit(theta @ bank.loadings.T + bank.intercepts))
        info = bank.information(theta)
        p = bank.probability(theta)
        j = 4
        np.testing.assert_allclose(info[2, j], p[2, j] * (1 - p[2, j]) * np.outer(bank.loadings[j], bank.loadings[j]))
        # information = -E[d2 log L / d theta2]: finite-difference check of the score variance
        eps = 1e-5
        t0 = theta[0]
        grad = lambda t, y: bank.loadings[j] * (y - bank.probability(t)[j])  # noqa: E731
        hess = np.stack([(grad(t0 + eps * e, 1.0) - grad(t0 - eps * e, 1.0)) / (2 * eps) for e in np.eye(3)])
        np.testing.assert_allclose(-hess, info[0, j], atol=1e-8)
        path = bank.write(tmp_path / "mbank.csv")
        assert MultidimBank.is_multidim_file(path)
        back = MultidimBank.read(path)
        np.testing.assert_array_equal(back.loadings, bank.loadings)
        np.testing.assert_array_equal(back.item_ids, bank.item_ids)
        assert back.n_dims == 3 and len(back) == 12

    def test_rotation_invariance(self, rng):
        bank = simple_structure(rng, 10, 3)
        R = ortho_group.rvs(3, random_state=1)
        theta = rng.standard_normal((7, 3))
        np.testing.assert_allclose(bank.rotate(R).probability(theta @ R), bank.probability(theta), atol=1e-12)
        with pytest.raises(ConfigError, match="orthogonal"):
            bank.rotate(2 * np.eye(3))

    def test_validation(self):
        with pytest.raises(BankError, match="duplicate"):
            MultidimBank(["a", "a"], np.ones((2, 2)), np.zeros(2))
        with pytest.raises(BankError, match="non-finite"):
            MultidimBank(["a", "b"], [[1, np.nan], [1, 1]], np.zeros(2))
        import pandas as pd

        with pytest.raises(BankError, match="a1..aK and d"):
            MultidimBank.from_frame(pd.DataFrame({"item_id": ["x"], "a": [1.0], "b": [0.0]}))


class TestRotations:
    def test_varimax_recovers_simple_structure(self, rng):
        A = np.zeros((30, 3))
        A[np.arange(30), np.arange(30) % 3] = rng.uniform(0.8, 2.0, 30)
        R = ortho_group.rvs(3, random_state=4)
        rotated, T = varimax(A @ R)
        np.testing.assert_allclose(T.T @ T, np.eye(3), atol=1e-10)
        # up to column order and sign, varimax gives back the simple structure
        aligned, _ = procrustes(rotated, A)
        np.testing.assert_allclose(aligned, A, atol=1e-6)
        perm = np.abs(tucker_congruence(rotated[:, :, None].repeat(3, 2).reshape(30, 9),
                                        np.tile(A, (1, 3)))).reshape(3, 3)
        assert np.sort(perm.max(axis=0)).min() > 0.999

    def test_procrustes_and_congruence(self, rng):
        A = rng.normal(size=(25, 2))
        R = ortho_group.rvs(2, random_state=2)
        back, T = procrustes(A @ R, A)
        np.testing.assert_allclose(back, A, atol=1e-10)
        np.testing.assert_allclose(T, R.T, atol=1e-10)
        np.testing.assert_allclose(tucker_congruence(A, 3 * A), 1.0)
        np.testing.assert_allclose(tucker_congruence(A, -A), -1.0)


class TestEM:
    def test_em_matches_direct_marginal_map(self, rng):
        """EM's fixed point is the maximum of the marginal log-posterior: compare with L-BFGS on
        the same grid, priors and data (K = 1, where the solution is unique up to sign)."""
        bank = MultidimBank([f"i{j}" for j in range(5)], rng.uniform(0.7, 2.0, (5, 1)), rng.normal(0, 1, 5))
        y = simulate_responses(bank, rng.standard_normal((600, 1)), rng)
        y[rng.random(y.shape) < 0.1] = np.nan
        model = MultidimIRT(1, tol=1e-9, max_iter=5000, prior_a_sd=2.0, prior_d_sd=3.0).fit(y)
        nodes, logw = product_grid(1)
        obs = ~np.isnan(y)
        y1 = np.where(obs, y, 0)

        def neg(par):
            a, d = par[:5], par[5:]
            z = nodes @ a[None, :] + d
            ll = y1 @ log_expit(z).T + (obs - y1) @ log_expit(-z).T + logw
            return -(logsumexp(ll, axis=1).sum() - 0.5 * (a**2).sum() / 4 - 0.5 * (d**2).sum() / 9)

        start = np.r_[np.ones(5), np.zeros(5)]
        ref = minimize(neg, start, method="L-BFGS-B", options={"gtol": 1e-10, "ftol": 1e-14, "maxiter": 5000})
        np.testing.assert_allclose(model.bank_.loadings[:, 0], ref.x[:5], atol=2e-4)
        np.testing.assert_allclose(model.bank_.intercepts, ref.x[5:], atol=2e-4)
        assert model.converged_

    def test_recovers_two_dimensional_loadings(self, two_dim_data):
        """Acceptance: Tucker congruence >= 0.95 per factor after Procrustes rotation."""
        bank, theta, y = two_dim_data
        model = MultidimIRT(2, quadpts=21).fit(y)
        assert model.converged_ and model.method_ == "em"
        aligned, _ = procrustes(model.bank_.loadings, bank.loadings)
        phi = tucker_congruence(aligned, bank.loadings)
        assert phi.min() >= 0.95, phi
        np.testing.assert_allclose(model.bank_.intercepts, bank.intercepts, atol=0.35)
        # varimax alone (no target) already finds the simple structure, up to order and sign
        var = model.bank_.loadings
        best = max(abs(tucker_congruence(var, bank.loadings)).min(),
                   abs(tucker_congruence(var[:, ::-1], bank.loadings)).min())
        assert best >= 0.95

    def test_missing_cells_and_scores(self, two_dim_data, rng):
        bank, theta, y = two_dim_data
        y = y.copy()
        y[rng.random(y.shape) < 0.3] = np.nan
        model = MultidimIRT(2, quadpts=21).fit(y)
        aligned, R = procrustes(model.bank_.loadings, bank.loadings)
        assert tucker_congruence(aligned, bank.loadings).min() >= 0.95
        eap, cov = model.score(y)
        # EAPs live in the model's rotated frame: rotate them into the true frame
        r = [np.corrcoef((eap @ R)[:, k], theta[:, k])[0, 1] for k in range(2)]
        assert min(r) > 0.85
        assert np.all(np.linalg.eigvalsh(cov) > 0)

    def test_posterior_predictive_by_direct_integration(self, two_dim_data):
        bank, _, y = two_dim_data
        model = MultidimIRT(2, quadpts=21).fit(y[:300])
        yy = y[:3].copy()
        yy[:, 5] = np.nan
        p = model.predict_proba(yy)
        b = model.bank_
        nodes, logw = product_grid(2, 21)
        for i in range(3):
            obs = ~np.isnan(yy[i])
            pr = expit(nodes @ b.loadings.T + b.intercepts)
            ll = (np.where(obs, yy[i] * np.log(pr) + (1 - yy[i]) * np.log1p(-pr), 0)).sum(1) + logw
            w = np.exp(ll - logsumexp(ll))
            assert p[i, 5] == pytest.approx(w @ pr[:, 5], rel=1e-10)


class TestMHRM:
    def test_mhrm_agrees_with_em(self, two_dim_data):
        bank, _, y = two_dim_data
        y = y[:800]
        em = MultidimIRT(2, quadpts=31).fit(y)
        mh = MultidimIRT(2, method="mhrm", rng=np.random.default_rng(5)).fit(y)
        assert mh.converged_ and mh.method_ == "mhrm"
        gram_em = em.bank_.loadings @ em.bank_.loadings.T
        gram_mh = mh.bank_.loadings @ mh.bank_.loadings.T
        assert np.abs(gram_em - gram_mh).max() < 0.25
        np.testing.assert_allclose(mh.bank_.intercepts, em.bank_.intercepts, atol=0.06)

    def test_three_dimensions(self):
        rng = np.random.default_rng(3)
        bank = simple_structure(rng, 36, 3)
        y = simulate_responses(bank, rng.standard_normal((1500, 3)), rng)
        model = MultidimIRT(3, rng=np.random.default_rng(1)).fit(y)
        aligned, _ = procrustes(model.bank_.loadings, bank.loadings)
        assert tucker_congruence(aligned, bank.loadings).min() >= 0.95


class TestDimensionSelection:
    def test_picks_two_on_two_dimensional_data(self, two_dim_data):
        """Acceptance: held-out cells choose K = 2 among 1..3."""
        _, _, y = two_dim_data
        sel = select_dimension(y, dims=(1, 2, 3), rng=np.random.default_rng(0), quadpts=21)
        assert sel.n_dims == 2, sel.table
        t = sel.table.set_index("n_dims")
        assert t.log_loss[1] - t.log_loss[2] > 5 * t.delta_se[1]

    def test_picks_one_on_unidimensional_data(self):
        rng = np.random.default_rng(8)
        bank = MultidimBank([f"u{j}" for j in range(30)], rng.uniform(0.8, 2.0, (30, 1)), rng.normal(0, 1, 30))
        y = simulate_responses(bank, rng.standard_normal((1000, 1)), rng)
        sel = select_dimension(y, dims=(1, 2), rng=np.random.default_rng(1), quadpts=21)
        assert sel.n_dims == 1, sel.table

    def test_subject_holdout(self, two_dim_data):
        _, _, y = two_dim_data
        sel = select_dimension(y, dims=(1, 2), holdout="subjects", rng=np.random.default_rng(2), quadpts=21)
        assert sel.n_dims == 2
        assert {"accuracy_error", "log_loss", "delta_se"} <= set(sel.table.columns)
        # per-subject accuracy over ~20 unseen items carries binomial noise of about
        # sqrt(0.2 / 20) = 0.1, so a mean absolute error well under 0.15 is a correct prediction
        assert (sel.table.accuracy_error < 0.15).all()
        t = sel.table.set_index("n_dims")
        assert t.accuracy_error[2] < t.accuracy_error[1]


class TestErrors:
    def test_bad_inputs(self):
        y = np.array([[1, 0, 0.5], [0, 1, 1]], dtype=float)
        with pytest.raises(ResponseDataError, match="0/1"):
            MultidimIRT(1).fit(y)
        with pytest.raises(ResponseDataError, match="no observed"):
            MultidimIRT(1).fit(np.array([[1, np.nan], [0, np.nan]]))
        with pytest.raises(ConfigError, match="n_dims"):
            MultidimIRT(0).fit(np.ones((3, 2)))
        with pytest.raises(ConfigError, match="not fitted"):
            MultidimIRT(1).predict_proba(np.ones((3, 2)))
        with pytest.raises(ConfigError, match="holdout"):
            select_dimension(np.ones((4, 2)), holdout="items")
