"""Standard errors of a multiple-group calibration (atlascat.irt.groupse) against mirt 1.45.1's
``multipleGroup(..., invariance = c("slopes", "intercepts", "free_means", "free_var"),
SE = TRUE)`` (tests/data/mirt_groups/make_se_reference.R), against a finite-difference
Hessian of the marginal log-likelihood (independent of mirt), and ``atlas calibrate --groups
--se``."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import log_expit, logsumexp

from atlascat.cli import main
from atlascat.irt.calibrate import calibrate

from mirt_groups_data import DATA, read_answers


@pytest.fixture(scope="module")
def data():
    return read_answers()


@pytest.mark.parametrize("model", ["2pl", "rasch"])
def test_group_standard_errors_are_mirts(data, model):
    """Every item's a1 / d and group B's MEAN_1 and COV_11 (and a Rasch fit's reference
    COV_11): within 0.1% of mirt's standard errors (the brief asks 2%; they agree to 1e-4)."""
    x, groups = data
    ref = pd.read_csv(DATA / f"{model}_se.csv").dropna(subset=["se"])
    res = calibrate(x, model, prior_a=None, groups=groups, tol=1e-6, se=True,
                    check_dimensions=False)
    assert res.se.info.positive_definite
    items = res.standard_errors("mirt", scale="fitted").set_index("item_id")
    ref_items = ref[(ref.group == "A") & (ref.item != "GroupPars")]
    assert len(ref_items) == (40 if model == "2pl" else 20)
    for r in ref_items.itertuples():
        assert items.loc[r.item, r.par] == pytest.approx(r.value, abs=2e-3)
        assert items.loc[r.item, f"{r.par}_se"] == pytest.approx(r.se, rel=1e-3), r
    grp = res.se.group_frame("fitted").set_index("group")
    ref_grp = ref[ref.item == "GroupPars"]
    assert len(ref_grp) == (2 if model == "2pl" else 3)
    for r in ref_grp.itertuples():
        col = {"MEAN_1": "mean", "COV_11": "var"}[r.par]
        assert grp.loc[r.group, col] == pytest.approx(r.value, abs=2e-3)
        assert grp.loc[r.group, f"{col}_se"] == pytest.approx(r.se, rel=1e-3), r
    assert np.isnan(grp.loc["A", "mean_se"])          # the reference's mean is fixed at 0
    if model == "2pl":
        assert np.isnan(grp.loc["A", "var_se"])
    # the bank's scale (a Rasch fit divided by the reference SD) and the SD by the delta method
    std = res.se.group_frame("standard").set_index("group")
    b = std.loc["B"]
    assert b.sd_se == pytest.approx(b.var_se / (2 * b.sd), rel=1e-6)
    summ = {g["group"]: g for g in res.groups["groups"]}["B"]
    assert summ["mean_se"] == pytest.approx(b.mean_se) and summ["sd_se"] == pytest.approx(b.sd_se)
    assert summ["mean"] == pytest.approx(b["mean"]) and summ["var_se"] == pytest.approx(b.var_se)
    if model == "rasch":   # mean / sigma_A: its SE counts sigma_A's too
        assert b.mean_se > grp.loc["B", "mean_se"] / np.sqrt(grp.loc["A", "var"]) * 0.999


def _tiny(seed=3, n=600, j=6):
    """Three groups N(0, 1), N(0.8, 1.2^2), N(-0.5, 0.8^2), 200 subjects each, 6 2PL items."""
    rng = np.random.default_rng(seed)
    g = np.repeat(["a", "b", "c"], n // 3)
    theta = np.where(g == "a", rng.normal(0, 1, n),
                     np.where(g == "b", rng.normal(0.8, 1.2, n), rng.normal(-0.5, 0.8, n)))
    a = rng.uniform(0.8, 2.0, j)
    d = rng.normal(0, 0.8, j)
    y = (rng.random((n, j)) < 1 / (1 + np.exp(-(a * theta[:, None] + d)))).astype(float)
    y[rng.random((n, j)) < 0.1] = np.nan
    ids = [f"s{i}" for i in range(n)]
    return (pd.DataFrame(y, index=ids, columns=[f"i{k}" for k in range(j)]),
            pd.Series(g, index=ids))


def _marginal_loglik(y, gidx, nodes, a, d, means, variances):
    """sum_i log sum_q pi_{g_i q} prod_j P_j(x_q)^y_ij (1 - P_j(x_q))^(1 - y_ij), written
    from scratch (normalized grid weights per group)."""
    z = a[None, :] * nodes[:, None] + d[None, :]                       # (Q, J)
    lp, lq = log_expit(z), log_expit(-z)
    obs = ~np.isnan(y)
    y1 = np.where(obs, y, 0.0)
    ll = y1 @ lp.T + (obs - y1) @ lq.T                                 # (n, Q)
    lw = -0.5 * (nodes[None, :] - means[:, None]) ** 2 / variances[:, None]
    lw -= logsumexp(lw, axis=1, keepdims=True)
    return float(np.sum(logsumexp(ll + lw[gidx], axis=1)))


@pytest.mark.parametrize("model", ["2pl", "rasch"])
def test_group_standard_errors_match_a_finite_difference_hessian(model):
    """The SEs from Oakes' identity equal those from minus the inverse of a finite-difference
    Hessian of the marginal log-likelihood, written here from scratch (no mirt): 3 groups, the
    items' a, d (Rasch: d and the reference variance), two groups' means and variances."""
    x, groups = _tiny()
    res = calibrate(x, model, prior_a=None, groups=groups, tol=1e-8, se=True,
                    check_dimensions=False)
    se = res.se
    nodes = np.linspace(-6, 6, 61)
    gidx = pd.Categorical(groups, categories=["a", "b", "c"]).codes
    y = x.to_numpy()
    J = y.shape[1]
    rasch = model == "rasch"
    # the free parameters in the information's order: per item (a,) d; then mu_b, v_b, mu_c,
    # v_c; then the reference variance (Rasch)
    p0 = np.concatenate([se.params[:, [1] if rasch else [0, 1]].reshape(-1),
                         np.column_stack([se.group_means[1:], se.group_vars[1:]]).reshape(-1),
                         [se.group_vars[0]] if rasch else []])
    assert len(p0) == len(se.covariance)

    def f(p):
        k = 1 if rasch else 2
        it = p[:k * J].reshape(J, k)
        a = np.ones(J) if rasch else it[:, 0]
        d = it[:, -1]
        lat = p[k * J:]
        means = np.array([0.0, lat[0], lat[2]])
        variances = np.array([lat[-1] if rasch else 1.0, lat[1], lat[3]])
        return _marginal_loglik(y, gidx, nodes, a, d, means, variances)

    P = len(p0)
    h = 1e-4 * (1 + np.abs(p0))
    H = np.empty((P, P))
    for i in range(P):
        for k in range(i, P):
            def at(si, sk):
                p = p0.copy()
                p[i] += si * h[i]
                p[k] += sk * h[k]
                return f(p)
            H[i, k] = H[k, i] = (at(1, 1) - at(1, -1) - at(-1, 1) + at(-1, -1)) \
                / (4 * h[i] * h[k])
    fd_se = np.sqrt(np.diag(np.linalg.inv(-H)))
    ours = np.sqrt(np.diag(se.covariance))
    assert np.max(np.abs(ours / fd_se - 1)) < 5e-3
    grp = se.group_frame("fitted").set_index("group")
    assert grp.loc["c", "var_se"] == pytest.approx(fd_se[-2 if rasch else -1], rel=5e-3)


def test_atlas_calibrate_groups_se(tmp_path, capsys):
    bank, summ = tmp_path / "bank.csv", tmp_path / "s.json"
    code = main(["calibrate", str(DATA / "responses.csv"), "-o", str(bank), "--model", "2pl",
                 "--prior-a", "none", "--tol", "1e-6", "--groups", str(DATA / "groups.csv"),
                 "--se", "--format", "mirt", "--summary", str(summ), "--quiet"])
    out = capsys.readouterr()
    assert code == 0, out.err
    ref = pd.read_csv(DATA / "2pl_se.csv")
    b_mean = ref[(ref.group == "B") & (ref.par == "MEAN_1")].iloc[0]
    b_var = ref[(ref.group == "B") & (ref.par == "COV_11")].iloc[0]
    assert f"group B: 1000 subjects, latent mean 1.043 (SE {b_mean.se:.3f})" in out.out
    assert f"variance 1.911 (SE {b_var.se:.3f})" in out.out
    written = pd.read_csv(bank, index_col=0)       # mirt's format: item ids as row names
    ref_a = ref[(ref.group == "A") & (ref.par == "a1")].set_index("item")
    assert np.allclose(written.loc[ref_a.index, "a1_se"], ref_a.se, rtol=1e-3)
    info = json.loads(summ.read_text())
    g = {r["group"]: r for r in info["groups"]["groups"]}
    assert g["A"]["mean_se"] is None and g["A"]["var_se"] is None
    assert g["B"]["mean_se"] == pytest.approx(b_mean.se, rel=1e-3)
    assert g["B"]["var_se"] == pytest.approx(b_var.se, rel=1e-3)
    assert g["B"]["sd_se"] == pytest.approx(b_var.se / (2 * np.sqrt(b_var.value)), rel=1e-3)
    assert info["standard_errors"]["positive_definite"] is True
