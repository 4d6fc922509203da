"""Multidimensional CAT: D-rule selection, grid and Laplace posteriors, stopping, sessions."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from atlascat.cat.multidim import MultidimCATSession, _Posterior, _select, simulate_mcat
from atlascat.errors import ConfigError, ResponseDataError
from atlascat.irt.multidim import MultidimBank


def make_bank(rng, n_items=120, n_dims=2):
    A = rng.uniform(0.0, 0.3, (n_items, n_dims))
    A[np.arange(n_items), np.arange(n_items) % n_dims] = rng.uniform(0.8, 2.5, n_items)
    return MultidimBank([f"i{j}" for j in range(n_items)], A, rng.normal(0, 1.5, n_items))


class TestPosterior:
    def test_grid_posterior_matches_direct_computation(self, rng):
        bank = make_bank(rng, 30)
        post = _Posterior(bank, 2, np.eye(2), 31, "grid")
        items = [[3, 7, 12], [5, 6, 20]]
        answers = [[1, 0, 1], [0, 0, 1]]
        for k in range(3):
            post.update(np.array([0, 1]), np.array([items[0][k], items[1][k]]),
                        np.array([answers[0][k], answers[1][k]], dtype=float))
        x = np.linspace(-5, 5, 31)
        g = np.stack(np.meshgrid(x, x, indexing="ij"), -1).reshape(-1, 2)
        for s in range(2):
            z = g @ bank.loadings[items[s]].T + bank.intercepts[items[s]]
            y = np.array(answers[s])
            lp = (y * log_expit(z) + (1 - y) * log_expit(-z)).sum(1) - 0.5 * (g**2).sum(1)
            w = np.exp(lp - lp.max())
            w /= w.sum()
            mean = w @ g
            np.testing.assert_allclose(post.theta[s], mean, atol=1e-12)
            np.testing.assert_allclose(post.cov[s], (g - mean).T @ ((g - mean) * w[:, None]), atol=1e-12)

    def test_laplace_is_the_map_with_inverse_hessian(self, rng):
        bank = make_bank(rng, 40, 3)
        post = _Posterior(bank, 1, np.diag([1.0, 2.0, 0.5]), None, "laplace")
        items = rng.choice(40, 12, replace=False)
        y = (rng.random(12) < 0.6).astype(float)
        for j, a in zip(items, y):
            post.update(np.array([0]), np.array([j]), np.array([a]))
        prec = np.linalg.inv(np.diag([1.0, 2.0, 0.5]))
        A, d = bank.loadings[items], bank.intercepts[items]

        def neg(t):
            z = A @ t + d
            return -((y * log_expit(z) + (1 - y) * log_expit(-z)).sum() - 0.5 * t @ prec @ t)

        ref = minimize(neg, np.zeros(3), method="BFGS", options={"gtol": 1e-10})
        np.testing.assert_allclose(post.theta[0], ref.x, atol=1e-6)
        p = expit(A @ ref.x + d)
        H = (A * (p * (1 - p))[:, None]).T @ A + prec
        np.testing.assert_allclose(post.cov[0], np.linalg.inv(H), rtol=1e-6)


class TestSelection:
    @pytest.mark.parametrize("rule", ["D", "A"])
    def test_rule_picks_the_optimal_item(self, rng, rule):
        bank = make_bank(rng, 50)
        post = _Posterior(bank, 1, np.eye(2), 31, "grid")
        given = np.zeros((1, 50), dtype=bool)
        for j, a in ((0, 1.0), (9, 0.0), (14, 1.0)):
            post.update(np.array([0]), np.array([j]), np.array([a]))
            given[0, j] = True
        best, has = _select(post, given, np.ones_like(given), np.array([0]), rule, None)
        theta = post.theta[0]
        info = bank.information(theta)  # (J, K, K) at the current estimate
        base = np.eye(2) + info[given[0]].sum(0)
        if rule == "D":
            crit = [np.linalg.det(base + info[j]) if not given[0, j] else -np.inf for j in range(50)]
        else:
            crit = [-np.trace(np.linalg.inv(base + info[j])) if not given[0, j] else -np.inf for j in range(50)]
        assert has[0] and best[0] == int(np.argmax(crit))


class TestSimulation:
    def test_d_rule_beats_random_selection(self):
        """What the D-rule buys: lower error at a fixed length, fewer items to a target SE."""
        rng = np.random.default_rng(2)
        bank = make_bank(rng, 200)
        theta = rng.standard_normal((300, 2))
        res = {rule: simulate_mcat(bank, true_theta=theta, max_items=20, selection=rule, quadpts=25,
                                   rng=np.random.default_rng(9)) for rule in ("D", "random")}
        rmse = {k: np.sqrt(((r.theta - theta) ** 2).mean()) for k, r in res.items()}
        assert rmse["D"] < 0.8 * rmse["random"], rmse
        stop = {rule: simulate_mcat(bank, true_theta=theta, max_items=150, se_target=0.35, quadpts=25,
                                    selection=rule, rng=np.random.default_rng(9)).n_items.mean()
                for rule in ("D", "random")}
        assert stop["D"] < 0.6 * stop["random"], stop

    def test_laplace_three_dimensions_and_stopping(self):
        rng = np.random.default_rng(4)
        bank = make_bank(rng, 150, 3)
        theta = rng.standard_normal((100, 3))
        res = simulate_mcat(bank, true_theta=theta, max_items=40, se_target=0.45, min_items=5,
                            rng=np.random.default_rng(1))
        assert (res.n_items >= 5).all() and (res.n_items <= 40).all()
        stopped = res.n_items < 40
        assert (res.se[stopped].max(axis=1) <= 0.45 + 1e-12).all()
        assert np.corrcoef(res.theta[:, 0], theta[:, 0])[0, 1] > 0.8
        # padding after the stop
        k = int(np.argmin(res.n_items))
        assert (res.items[k, res.n_items[k]:] == -1).all() and np.isnan(res.scores[k, res.n_items[k]:]).all()

    def test_replay_uses_only_available_answers(self, rng):
        bank = make_bank(rng, 40)
        y = (rng.random((5, 40)) < 0.5).astype(float)
        y[:, ::2] = np.nan
        res = simulate_mcat(bank, responses=y, max_items=30)
        assert (res.n_items == 20).all()  # only 20 answers exist per examinee
        given = res.items[res.items >= 0]
        assert (given % 2 == 1).all()
        rows = np.repeat(np.arange(5), 30).reshape(5, 30)
        ok = res.items >= 0
        np.testing.assert_array_equal(res.scores[ok], y[rows[ok], res.items[ok]])


class TestSession:
    def test_session_replays_like_the_batch(self, rng):
        bank = make_bank(rng, 60)
        y = (rng.random((1, 60)) < 0.5).astype(float)
        batch = simulate_mcat(bank, responses=y, max_items=12)
        s = MultidimCATSession(bank, max_items=12)
        while not s.done:
            item = s.next_item()
            s.record(item, y[0, bank.index_of([item])[0]])
        assert [int(bank.index_of([i])[0]) for i in s.administered] == batch.items[0].tolist()
        np.testing.assert_allclose(s.theta, batch.theta[0], atol=1e-12)
        with pytest.raises(ConfigError, match="stopped"):
            s.next_item()

    def test_errors(self, rng):
        bank = make_bank(rng, 10)
        s = MultidimCATSession(bank)
        with pytest.raises(ResponseDataError, match="0 or 1"):
            s.record("i1", 0.5)
        s.record("i1", 1)
        with pytest.raises(ResponseDataError, match="already"):
            s.record("i1", 0)
        with pytest.raises(ConfigError, match="selection"):
            simulate_mcat(bank, true_theta=np.zeros((1, 2)), selection="KL", rng=rng)
        with pytest.raises(ConfigError, match="positive definite"):
            simulate_mcat(bank, true_theta=np.zeros((1, 2)), prior_cov=-np.eye(2), rng=rng)
        with pytest.raises(ConfigError, match="responses .* or true_theta"):
            simulate_mcat(bank)
