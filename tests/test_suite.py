"""Suites (issue 18): definition, joint prior, joint posterior, selection, session, replay."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.errors import BankError, ConfigError
from atlascat.scorelink.score_link import ScoreLink
from atlascat.irt.ability import eap
from atlascat.irt.bank import ItemBank
from atlascat.responses import ResponseMatrix
from atlascat.suite import (Suite, SuiteConfig, SuiteLink, SuiteMember, SuitePrior, SuiteSession,
                            fit_joint_link, fit_prior, load_suite, simulate_suite)
from atlascat.suite.posterior import GridLikelihood, ItemPool, gaussian_posterior, importance
from atlascat.suite.posterior import normal_draws
from atlascat.suite.link import variance_slope
from atlascat.suite.predict import weighted_quantiles
from atlascat.suite.selection import pick_round, variance_reduction

GRID = np.linspace(-6, 6, 241)
COV = np.array([[1.0, 0.8, 0.6], [0.8, 1.0, 0.7], [0.6, 0.7, 1.0]])


def _bank(name, n, seed):
    rng = np.random.default_rng(seed)
    return ItemBank([f"{name}{i}" for i in range(n)], rng.uniform(0.8, 2.5, n),
                    rng.normal(0, 1.2, n), np.full(n, 0.1))


def _link(name, lo, hi):
    score = lo + (hi - lo) / (1 + np.exp(-1.2 * GRID))
    return ScoreLink(name, GRID, score, np.full(GRID.size, 0.015 ** 2),
                     support={"chance": lo, "floor": lo, "theta_range": (-6.0, 6.0)})


@pytest.fixture(scope="module")
def suite():
    members = [SuiteMember("a", _bank("a", 40, 1), 1.0, _link("a", 0.25, 0.9)),
               SuiteMember("b", _bank("b", 30, 2), 1.0, _link("b", 0.5, 0.85)),
               SuiteMember("c", _bank("c", 50, 3), 2.0, _link("c", 0.0, 0.8))]
    prior = SuitePrior(("a", "b", "c"), np.zeros(3), COV, np.eye(3), 1000)
    return Suite("toy", members, prior)


def _answers(suite, n, seed):
    """Correlated true thetas and 0/1 answers drawn from the banks."""
    rng = np.random.default_rng(seed)
    theta = rng.multivariate_normal(np.zeros(3), COV, n)
    ids = [f"m{i}" for i in range(n)]
    mats = {}
    for b, m in enumerate(suite.members):
        y = (rng.random((n, len(m.bank))) < m.bank.probability(theta[:, b])).astype(float)
        mats[m.name] = ResponseMatrix(pd.DataFrame(y, index=ids, columns=m.bank.item_ids))
    return theta, ids, mats


@pytest.mark.slow
def test_bundled_suite_loads_and_round_trips():
    s = load_suite("openllm-v1")
    assert s.names == ["arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k"]
    assert np.allclose(s.weights, 1 / 6)
    assert s.prior is not None and s.prior.cov.shape == (6, 6)
    assert len(s.prior.components[0]) == 5 and s.joint_link.coef.shape == (6, 7)
    assert all(len(m.bank) > 0 and m.link is not None for m in s.members)
    d = s.to_dict()
    assert [m["bank"] for m in d["members"]] == s.names
    again = Suite.from_dict(json.loads(json.dumps(d)))
    assert np.allclose(again.prior.cov, s.prior.cov) and again.names == s.names
    assert np.allclose(again.joint_link.coef, s.joint_link.coef)
    assert np.allclose(again.prior.components[1], s.prior.components[1])


def test_suite_validation(suite):
    assert np.isclose(suite.weights.sum(), 1) and np.isclose(suite.weights[2], 0.5)
    with pytest.raises(ConfigError, match="unique"):
        Suite("x", [SuiteMember("a", "arc"), SuiteMember("a", "arc")])
    with pytest.raises(ConfigError, match="weights"):
        Suite("x", [SuiteMember("a", "arc", -1.0)])
    with pytest.raises(BankError, match="neither an existing file nor a bundled bank"):
        load_suite("no-such-suite")
    with pytest.raises(ConfigError, match="in-memory"):
        suite.to_dict()


def test_variance_reduction_is_the_rank_one_update(suite):
    pool = ItemPool.from_banks([m.bank for m in suite.members])
    rng = np.random.default_rng(0)
    S = np.stack([COV * 0.3, COV * 0.5])
    d = rng.normal(size=(2, 3))
    info = rng.uniform(0.1, 2.0, (2, len(pool)))
    V = variance_reduction(pool, S, d, np.zeros((2, 3)), info)
    for n in range(2):
        for j in (0, 45, 110):
            e = np.zeros(3)
            e[pool.member[j]] = 1.0
            post = np.linalg.inv(np.linalg.inv(S[n]) + info[n, j] * np.outer(e, e))
            assert np.isclose(V[n, j], d[n] @ S[n] @ d[n] - d[n] @ post @ d[n])


def test_pick_round_respects_availability(suite):
    pool = ItemPool.from_banks([m.bank for m in suite.members])
    n = 3
    avail = np.ones((n, len(pool)), bool)
    avail[1] = False
    avail[1, :4] = True
    picks = pick_round(pool, np.tile(COV, (n, 1, 1)), np.ones((n, 3)), np.ones((n, 3)),
                       np.ones((n, len(pool))), avail, 6, np.random.default_rng(0),
                       randomesque=3)
    assert picks.shape == (n, 6)
    for row in picks:
        got = row[row >= 0]
        assert len(set(got)) == len(got)
    assert sorted(picks[1][picks[1] >= 0]) == [0, 1, 2, 3] and (picks[1] == -1).sum() == 2


def test_one_member_posterior_matches_eap(suite):
    """One member, N(0, 1) prior: the importance-sampled posterior mean is the grid EAP."""
    m = suite.members[0]
    prior = SuitePrior(("a",), [0.0], [[1.0]], [[1.0]])
    pool = ItemPool.from_banks([m.bank])
    rng = np.random.default_rng(3)
    y = (rng.random((20, 15)) < 0.6).astype(float)
    lik = GridLikelihood(pool, 20)
    rows, cols = np.nonzero(np.ones_like(y))
    lik.add(rows, cols, y[rows, cols])
    mode, cov = gaussian_posterior(prior, lik)
    th, w = importance(prior, lik, normal_draws(1024, 1, 0))
    full = np.full((20, len(m.bank)), np.nan)
    full[:, :15] = y
    ref, ref_se = eap(full, m.bank, quadpts=241)
    post = (w * th[..., 0]).sum(1)
    assert np.allclose(post, ref, atol=0.03)
    assert np.allclose(mode[:, 0], ref, atol=0.15)
    assert np.allclose(np.sqrt(cov[:, 0, 0]), ref_se, atol=0.1)


def test_session_step_by_step(suite):
    ses = SuiteSession(suite, SuiteConfig(batch_size=4, max_items=12, min_items=0,
                                          target_se=0.01, draws=256), subject_ids=["x"])
    asked = []
    while True:
        items = ses.next_items()[0]
        if not items:
            break
        assert len(items) <= 4 and not set(items) & set(asked)
        asked += items
        ses.update({it: 1.0 for it in items})
    assert len(asked) == 12 and ses.stop_reason[0] == "max_items"
    p = ses.prediction()
    assert list(p.columns[:5]) == ["subject_id", "n_items", "average", "average_lo", "average_hi"]
    assert {"a", "a_lo", "a_hi", "a_items", "c_items"} <= set(p.columns)
    row = p.iloc[0]
    assert row["n_items"] == 12 and row[["a_items", "b_items", "c_items"]].sum() == 12
    for k in ("average", "a", "b", "c"):
        assert row[f"{k}_lo"] <= row[k] <= row[f"{k}_hi"]
    with pytest.raises(ConfigError, match="not in the suite"):
        ses.update({("a", "zzz"): 1.0})


def test_replay_accuracy_and_missing_member(suite):
    theta, ids, mats = _answers(suite, 60, 7)
    truth = np.column_stack([m.link.curve(theta[:, b]) for b, m in enumerate(suite.members)])
    avg = truth @ suite.weights
    cfg = SuiteConfig(max_items=40, target_se=0.01, batch_size=5, draws=256)
    res = simulate_suite(suite, mats, cfg)
    df = res.scores
    assert (df["n_items"] == 40).all()
    err = np.abs(df["average"].to_numpy() - avg)
    assert err.mean() < 0.045
    cover = (avg >= df["average_lo"]) & (avg <= df["average_hi"])
    assert cover.mean() >= 0.8
    # member b's matrix withheld: predicted from a and c, and its interval is wider
    res2 = simulate_suite(suite, {"a": mats["a"], "c": mats["c"]}, cfg)
    d2 = res2.scores
    assert (d2["b_items"] == 0).all() and np.isfinite(d2["b"]).all()
    w_with = (df["b_hi"] - df["b_lo"]).mean()
    w_without = (d2["b_hi"] - d2["b_lo"]).mean()
    assert w_without > w_with
    assert np.corrcoef(d2["b"], truth[:, 1])[0, 1] > 0.7


def test_selection_beats_random_at_equal_items(suite):
    theta, ids, mats = _answers(suite, 80, 11)
    truth = np.column_stack([m.link.curve(theta[:, b]) for b, m in enumerate(suite.members)])
    avg = truth @ suite.weights
    base = dict(max_items=18, min_items=0, target_se=0.01, batch_size=3, draws=256)
    ada = simulate_suite(suite, mats, SuiteConfig(**base)).scores
    rnd = simulate_suite(suite, mats, SuiteConfig(**base, randomesque=10_000)).scores
    e_ada = np.abs(ada["average"] - avg).mean()
    e_rnd = np.abs(rnd["average"] - avg).mean()
    assert e_ada < e_rnd


def test_fit_prior_and_joint_link(suite):
    theta, ids, mats = _answers(suite, 400, 5)
    scores = {}
    rng = np.random.default_rng(1)
    for b, m in enumerate(suite.members):
        s = m.link.curve(theta[:, b]) + rng.normal(0, 0.015, len(ids))
        scores[m.name] = pd.Series(s, index=ids)
    prior = fit_prior(suite, mats, scores)
    assert prior.names == ("a", "b", "c")
    assert np.allclose(prior.cov, COV, atol=0.2)
    assert np.allclose(np.diag(prior.resid_corr), 1) and np.abs(prior.resid_corr[0, 1]) < 0.3
    g = np.column_stack([m.link.curve(theta[:, b]) for b, m in enumerate(suite.members)])
    truth = 0.02 + 0.9 * g + rng.normal(0, 0.01, g.shape)
    jl = SuiteLink.fit(g, np.zeros((len(g), 3, 3)), truth)
    assert np.allclose(jl.coef[:, :-1], 0.9 * np.eye(3), atol=0.05)
    assert np.allclose(np.sqrt(np.diag(jl.resid_cov)), 0.01, atol=0.003)
    again = SuiteLink.from_dict(json.loads(json.dumps(jl.to_dict())))
    assert np.allclose(again.coef, jl.coef, atol=1e-6)
    assert again.answer_weights is None and np.all(jl.answer_shift(np.ones((2, 7))) == 0)


def test_joint_link_answer_stacking():
    """Item residuals that carry part of the score's residual: the answer stacking finds them,
    shrinks the residual covariance and round-trips."""
    rng = np.random.default_rng(3)
    n, b, G = 1500, 3, 40
    g = rng.uniform(0.3, 0.8, (n, b))
    E = np.where(rng.random((n, G)) < 0.3, rng.normal(0, 0.5, (n, G)), 0.0)
    w = np.zeros((b, G))
    w[0, :5] = 0.02
    w[2, 10:20] = -0.01
    truth = 0.01 + 0.95 * g + E @ w.T + rng.normal(0, 0.005, (n, b))
    plain = SuiteLink.fit(g, np.zeros((n, b, b)), truth)
    jl = SuiteLink.fit(g, np.zeros((n, b, b)), truth, residuals=E)
    assert jl.answer_weights.shape == (b, G)
    assert np.allclose(jl.answer_weights[0, :5], 0.02, atol=0.004)
    assert np.abs(jl.answer_weights[1]).max() < 0.004
    d, d0 = np.diag(jl.resid_cov), np.diag(plain.resid_cov)
    assert np.all(d[[0, 2]] < 0.6 * d0[[0, 2]]) and d[1] < 1.2 * d0[1]
    again = SuiteLink.from_dict(json.loads(json.dumps(jl.to_dict())))
    assert np.allclose(again.answer_shift(E[:5]), jl.answer_shift(E[:5]), atol=1e-5)
    with pytest.raises(ConfigError):
        jl.answer_shift(E[:, :10])


def test_variance_slope_recovers_the_gamma_glm():
    """E[r^2] = a + k pv recovered from simulated heteroscedastic residuals; k is floored at 1
    (the posterior's own spread is never shrunk)."""
    rng = np.random.default_rng(7)
    pv = np.exp(rng.uniform(np.log(0.01), np.log(10.0), 40_000))
    r = rng.normal(0.0, np.sqrt(0.3 + 2.3 * pv))
    a, k = variance_slope(r ** 2, pv)
    assert abs(a - 0.3) < 0.04 and abs(k - 2.3) < 0.12
    a, k = variance_slope(rng.normal(0.0, np.sqrt(1.0 + 0.4 * pv)) ** 2, pv)
    assert k == 1.0 and a > 0.5
    a, k = variance_slope(rng.normal(0.0, 0.2, 500) ** 2, np.zeros(500))
    assert k == 1.0 and abs(a - 0.04) < 0.01


def test_joint_link_heteroscedastic_residual():
    """Residuals that grow faster than the posterior variance: the link's per-subject covariance
    C_n + G_n matches the squared errors both where the posterior is sure and where it is not,
    and the fit without that growth keeps post_scale at 0."""
    rng = np.random.default_rng(11)
    n, b = 6000, 3
    g = rng.uniform(0.3, 0.8, (n, b))
    v = np.exp(rng.uniform(np.log(1e-6), np.log(1e-3), n))          # posterior var of each g
    V = v[:, None, None] * np.eye(b)
    k_true, a_true = np.array([3.0, 1.0, 2.0]), np.array([1e-4, 4e-4, 2e-4])
    G = 0.81 * v[:, None]
    e = rng.normal(0.0, 1.0, (n, b)) * np.sqrt(a_true + k_true * G)
    truth = 0.02 + 0.9 * g + e
    jl = SuiteLink.fit(g, V, truth)
    assert np.allclose(1.0 + jl.post_scale ** 2, k_true, atol=0.2)
    assert np.allclose(np.diag(jl.resid_cov), a_true, rtol=0.2)
    total = np.diagonal(jl.resid_covs(V), axis1=1, axis2=2) + G
    for part in (v < np.quantile(v, 0.2), v > np.quantile(v, 0.8)):
        ratio = (e[part] ** 2).mean(0) / total[part].mean(0)
        assert np.all(np.abs(ratio - 1.0) < 0.15), ratio
    again = SuiteLink.from_dict(json.loads(json.dumps(jl.to_dict())))
    assert np.allclose(again.resid_covs(V[:5]), jl.resid_covs(V[:5]), rtol=1e-4)
    old = jl.to_dict()
    del old["post_scale"]
    legacy = SuiteLink.from_dict(old)
    assert legacy.post_scale is None
    assert np.allclose(legacy.resid_covs(V[:2]), legacy.resid_cov)
    flat = SuiteLink.fit(g, V, 0.02 + 0.9 * g + rng.normal(0.0, 0.01, (n, b)))
    assert np.all(flat.post_scale == 0.0)
    with pytest.raises(ConfigError):
        SuiteLink(jl.coef, jl.resid_cov, post_scale=[-1.0, 0.0, 0.0])


def test_session_se_carries_the_heteroscedastic_part(suite):
    """The aggregate's SE adds d2' S d2 (d2 = slopes * (beta' K w)) to the posterior part and
    w' D w; the floor no item removes stays w' D w."""
    b = len(suite.members)
    coef = np.hstack([np.eye(b), np.zeros((b, 1))])
    D = np.eye(b) * 1e-4
    plain = SuiteSession(suite.replace(joint_link=SuiteLink(coef, D)), SuiteConfig(draws=64))
    het = SuiteSession(suite.replace(joint_link=SuiteLink(coef, D, post_scale=np.ones(b))),
                       SuiteConfig(draws=64))
    plain.refresh()
    het.refresh()
    w = suite.weights
    post = (plain.se / 100) ** 2 - w @ D @ w
    assert np.allclose((het.se / 100) ** 2, 2 * post + w @ D @ w)
    assert np.allclose(het.floor_se(), plain.floor_se())
    assert np.allclose(het.floor_se(), 100 * np.sqrt(w @ D @ w))


@pytest.mark.slow
def test_fit_joint_link_with_answer_stacking_end_to_end(suite):
    """A published score that counts two items of member a beyond theta: the answer stacking
    fitted on replays weighs them and the suite's predictions use it."""
    theta, ids, mats = _answers(suite, 300, 13)
    ya = mats["a"].aligned_values(suite.members[0].bank.item_ids)
    scores = {m.name: pd.Series(m.link.curve(theta[:, b]), index=ids)
              for b, m in enumerate(suite.members)}
    scores["a"] = scores["a"] + 0.03 * (ya[:, :2].sum(1) - 1)
    cfg = SuiteConfig(max_items=30, target_se=0.01, batch_size=5, draws=128, min_per_member=10)
    jl = fit_joint_link(suite, mats, scores, cfg, answers=True)
    assert jl.answer_weights.shape == (3, 120) and np.isfinite(jl.answer_weights).all()
    res = simulate_suite(suite.replace(joint_link=jl), mats, cfg, subject_ids=ids[:40])
    df = res.scores
    assert np.isfinite(df[["average", "average_lo", "average_hi", "a"]].to_numpy()).all()
    assert (df["average_lo"] <= df["average"]).all() and (df["average"] <= df["average_hi"]).all()


def test_weighted_quantiles():
    v = np.array([[0.0, 1.0, 2.0, 3.0]])
    assert np.allclose(weighted_quantiles(v, np.full((1, 4), 0.25), [0.5]), 1.5)
    w = np.array([[0.1, 0.1, 0.7, 0.1]])   # midpoints 0.05, 0.15, 0.55, 0.95
    assert np.allclose(weighted_quantiles(v, w, [0.5]), 1.875)


# ---------------------------------------------------------------- neighbour correction
def test_agreement_matches_a_direct_count():
    from atlascat.suite.neighbours import agreement

    rng = np.random.default_rng(4)
    A = rng.integers(0, 2, (30, 80)).astype(float)
    A[rng.random(A.shape) < 0.3] = np.nan
    asked = rng.random((6, 80)) < 0.4
    y = np.where(asked, rng.integers(0, 2, (6, 80)), np.nan)
    got = agreement(asked, y, A, min_share=0.5, exclude=np.arange(6))
    for i in range(6):
        for m in range(30):
            both = asked[i] & np.isfinite(A[m])
            want = (A[m][both] == y[i][both]).mean() if both.sum() >= 0.5 * asked[i].sum() else -1
            if m == i:
                want = -1
            assert abs(got[i, m] - want) < 1e-6, (i, m)


def test_neighbour_correction_reads_the_closest_models():
    """With a scorer that predicts 0, the correction is the kernel mean of the nearest
    calibration models' scores: a subject who copies model 3's answers gets model 3's score
    at a sharp kernel; the packed answers round-trip through JSON."""
    from atlascat.suite.neighbours import NeighbourCorrection

    rng = np.random.default_rng(5)
    A = rng.integers(0, 2, (50, 60)).astype(float)
    A[rng.random(A.shape) < 0.1] = np.nan
    scores = rng.uniform(0.2, 0.8, (50, 2))
    nc = NeighbourCorrection(A, scores, [f"m{i}" for i in range(50)], 5, 200.0,
                             [1.0, 0.5], np.eye(2) * 1e-4)
    asked = np.isfinite(A[3])[None] & (rng.random((1, 60)) < 0.8)
    y = np.where(asked, A[3], np.nan)
    idx, sim = nc.nearest(asked, y)
    assert idx[0, 0] == 3 and sim[0, 0] == 1.0 and np.all(np.diff(sim[0]) <= 0)
    zero = lambda a, yy: np.zeros((len(a), 2))  # noqa: E731
    assert np.allclose(nc.shift(zero, asked, y), scores[3] * [1.0, 0.5], atol=1e-6)
    # a subject that is calibration model 3 (same id) is not its own neighbour
    assert nc.index_of(["m3", "other"]).tolist() == [3, -1]
    idx2, _ = nc.nearest(asked, y, exclude=nc.index_of(["m3"]))
    assert 3 not in idx2[0]
    assert not np.allclose(nc.shift(zero, asked, y, ["m3"]), scores[3] * [1.0, 0.5], atol=1e-3)
    again = NeighbourCorrection.from_dict(json.loads(json.dumps(nc.to_dict())))
    assert np.array_equal(np.isnan(again.answers), np.isnan(A))
    assert np.allclose(np.nan_to_num(again.answers), np.nan_to_num(A))
    assert again.ids == nc.ids and again.k == 5 and again.tau == 200.0
    with pytest.raises(ConfigError):
        NeighbourCorrection.from_dict(dict(nc.to_dict(), answers="not packed"))
    with pytest.raises(ConfigError):
        NeighbourCorrection(A, scores[:10], nc.ids, 5, 1.0, [1.0, 1.0], np.eye(2))


def _families(suite, n_fam, size, seed):
    """Models in families (a base model and its fine-tunes / merges): members share most
    answers and an offset of the published score that their thetas do not carry."""
    rng = np.random.default_rng(seed)
    base = rng.multivariate_normal(np.zeros(3), COV, n_fam)
    offset = rng.normal(0.0, 0.03, (n_fam, 3))
    fam = np.repeat(np.arange(n_fam), size)
    theta = base[fam] + rng.normal(0, 0.1, (len(fam), 3))
    ids = [f"f{f}m{i}" for i, f in enumerate(fam)]
    mats, scores = {}, {}
    for b, m in enumerate(suite.members):
        p_base = m.bank.probability(base[:, b])
        pattern = (rng.random(p_base.shape) < p_base).astype(float)[fam]
        own = (rng.random((len(fam), len(m.bank))) < m.bank.probability(theta[:, b]))
        y = np.where(rng.random(own.shape) < 0.85, pattern, own.astype(float))
        mats[m.name] = ResponseMatrix(pd.DataFrame(y, index=ids, columns=m.bank.item_ids))
        s = m.link.curve(theta[:, b]) + offset[fam, b] + rng.normal(0, 0.003, len(fam))
        scores[m.name] = pd.Series(s, index=ids)
    return ids, mats, scores


@pytest.mark.slow
def test_neighbour_correction_end_to_end_on_model_families(suite):
    """Families whose published scores share an offset their thetas miss: the fitted neighbour
    correction finds it (held-out MAE of the aggregate well below the plain joint link's), its
    intervals still cover, it round-trips through JSON, and the session's
    ``neighbours=False`` gives the plain link's prediction."""
    ids, mats, scores = _families(suite, 70, 7, 21)
    held = ids[3::7]
    cal = [i for i in ids if i not in set(held)]
    cal_mats = {k: v.subset(subjects=np.isin(v.subject_ids.astype(str), cal))
                for k, v in mats.items()}
    cfg = SuiteConfig(max_items=24, min_items=12, batch_size=6, draws=128, min_per_member=4,
                      seed=2)
    jl = fit_joint_link(suite, cal_mats, scores, cfg)
    nb = jl.neighbours
    assert nb is not None and len(nb.ids) == len(cal) and nb.answers.shape == (len(cal), 120)
    assert np.all(nb.shrink > 0.5)
    assert np.diag(jl.resid_cov).sum() < 0.6 * np.diag(nb.plain_resid_cov).sum()
    fitted = suite.replace(joint_link=jl)
    res = simulate_suite(fitted, mats, cfg, subject_ids=held)
    truth = np.column_stack([scores[n].loc[held] for n in suite.names]) @ suite.weights
    err = np.abs(res.scores["average"].to_numpy() - truth)
    plain = simulate_suite(fitted, mats, SuiteConfig(**{**cfg.to_dict(), "neighbours": False}),
                           subject_ids=held)
    err0 = np.abs(plain.scores["average"].to_numpy() - truth)
    assert err.mean() < 0.75 * err0.mean(), (err.mean(), err0.mean())
    inside = (res.scores["average_lo"] <= truth) & (truth <= res.scores["average_hi"])
    assert inside.mean() >= 0.85
    again = SuiteLink.from_dict(json.loads(json.dumps(jl.to_dict())))
    assert again.neighbours.k == nb.k and again.neighbours.tau == nb.tau
    back = simulate_suite(suite.replace(joint_link=again), mats, cfg, subject_ids=held).scores
    assert np.allclose(back["average"], res.scores["average"], atol=1e-5)


def test_a_member_named_like_a_shipped_bank_is_that_bank_whatever_the_working_folder(
        tmp_path, monkeypatch):
    """A folder of the working directory named like a member (left by `evaluate -o arc`) does
    not replace the shipped bank a suite names; a folder beside the suite's file does."""
    (tmp_path / "work" / "arc").mkdir(parents=True)          # not a bank folder
    monkeypatch.chdir(tmp_path / "work")
    spec = {"name": "mine", "members": [{"name": "arc", "bank": "arc", "weight": 1.0}]}
    (tmp_path / "mine.json").write_text(json.dumps(spec))
    s = load_suite(tmp_path / "mine.json")
    assert s.members[0].source == "arc" and len(s.members[0].bank) > 0
    from atlascat.catalogue import BankRef

    live = BankRef.from_option(tmp_path / "mine.json", kinds=("suite",)).load()  # a live run's
    assert len(live) == len(s.members[0].bank)
    (tmp_path / "arc").mkdir()                               # beside the suite: it is meant
    with pytest.raises(BankError, match="suite member 'arc'"):
        load_suite(tmp_path / "mine.json")


def _guessers(n, seed):
    """{member: ResponseMatrix} of ``n`` pure guessers of the bundled suite: each item right
    with its answer chance (1 / choices; GSM8K never), whatever its difficulty."""
    from atlascat.live.suite_session import composite_for

    bank = composite_for("openllm-v1")
    meta, ids = bank.metadata, np.array([str(i) for i in bank.item_ids])
    rng = np.random.default_rng(seed)
    out = {}
    for member in dict.fromkeys(meta["member"]):
        rows = (meta["member"] == member).to_numpy()
        p = (np.zeros(rows.sum()) if member == "gsm8k"
             else 1.0 / meta.loc[rows, "n_choices"].astype(float).to_numpy())
        y = (rng.random((n, rows.sum())) < p).astype(float)
        out[member] = ResponseMatrix(y, [f"guesser{i}" for i in range(n)],
                                     [i.split("/", 1)[1] for i in ids[rows]])
    return out


def test_a_pure_guessers_average_interval_reaches_the_chance_average():
    """A model that guesses on every benchmark publishes about chance on each, whatever theta
    its lucky answers suggest: where no member's answers can be told from guessing, the
    average's interval reaches the average with every member at its chance score (as a single
    bank's reaches chance), and each member's reaches its chance; a real model is untouched."""
    from atlascat.scorelink.honesty import chance_not_excluded

    suite = load_suite("openllm-v1")
    res = simulate_suite(suite, _guessers(12, 0), SuiteConfig(max_items=60, min_items=30))
    s, ses = res.scores, res.session
    chance = np.array([m.link.chance for m in suite.members])
    n = ses.asked.astype(float) @ ses.pool.onehot
    k = np.where(ses.asked, np.nan_to_num(ses.y), 0.0) @ ses.pool.onehot
    pure = np.all([chance_not_excluded(m.link, n[:, j], k[:, j]) | (n[:, j] == 0)
                   for j, m in enumerate(suite.members)], axis=0)
    assert pure.sum() >= 8
    scores = s[suite.names].to_numpy()
    at_chance = (np.minimum(scores, chance) * suite.weights).sum(1) / suite.weights.sum()
    assert (s["average_lo"].to_numpy()[pure] <= at_chance[pure] + 1e-9).all()
    assert (s[[f"{b}_lo" for b in suite.names]].to_numpy()[pure] <= chance + 1e-9).all()
    # a leaderboard model well above chance keeps its interval
    strong = {b: ResponseMatrix(np.ones((1, len(m.bank))), ["top"], list(m.bank.item_ids))
              for b, m in zip(suite.names, suite.resolved().members)}
    top = simulate_suite(suite, strong, SuiteConfig(max_items=30, min_items=30)).scores
    assert top["average_lo"].iloc[0] > 0.6
