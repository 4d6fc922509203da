"""Multiple-group concurrent calibration (atlascat.irt.groups) against mirt 1.45.1's
``multipleGroup(..., invariance = c("slopes", "intercepts", "free_means", "free_var"))``
(tests/data/mirt_groups/make_reference.R), the recovery of a known group shift that a stacked
one-group calibration shrinks, and ``atlas calibrate --groups``."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.errors import ConfigError
from atlascat.irt.calibrate import calibrate
from atlascat.irt.groups import read_groups

from mirt_groups_data import DATA, read_answers


@pytest.fixture(scope="module")
def data():
    return read_answers()


@pytest.mark.parametrize("model", ["2pl", "rasch", "1pl"])
def test_multiple_group_fit_is_mirts(data, model):
    x, groups = data
    name = "2pl" if model == "2pl" else "rasch"
    ref = pd.read_csv(DATA / f"{name}_fit.csv").iloc[0]
    items = pd.read_csv(DATA / f"{name}_items.csv")
    res = calibrate(x, model, prior_a=None, groups=groups, tol=1e-6, check_dimensions=False)
    assert res.converged
    assert res.loglik == pytest.approx(ref.loglik, abs=0.01)
    sd0 = np.sqrt(res.latent_variance)       # Rasch: the reference group's SD (mirt: var_A)
    assert sd0**2 == pytest.approx(ref.var_A, abs=2e-3)
    a = res.bank.a / sd0 if model == "rasch" else res.bank.a
    if model == "1pl":                        # the Rasch fit on the N(0, 1) scale
        assert np.allclose(res.bank.a, sd0) and res.model == "1pl"
        a = res.bank.a / sd0
    d = -res.bank.b * res.bank.a
    assert list(res.bank.item_ids) == list(items.item_id)
    assert np.max(np.abs(a - items.a1)) < 2e-3
    assert np.max(np.abs(d - items.d)) < 2e-3
    g = {row["group"]: row for row in res.groups["groups"]}
    assert res.groups["reference"] == "A" and g["A"]["mean"] == 0.0 and g["A"]["sd"] == 1.0
    assert g["B"]["mean"] * sd0 == pytest.approx(ref.mean_B, abs=2e-3)
    assert (g["B"]["sd"] * sd0) ** 2 == pytest.approx(ref.var_B, abs=2e-3)
    assert res.n_parameters == (40 if model == "2pl" else 21) + 2


def _two_groups(rng, n=1500, j=25, mu=1.5, sd=1.3):
    """Group "old" N(0, 1), group "new" N(mu, sd^2); 5 items answered by each group only.
    Returns the responses, the groups and the sample's own shift and SD ratio (new against
    old: the old group's sample mean and SD are the scale the fit reports on)."""
    g = np.repeat(["old", "new"], n // 2)
    theta = np.where(g == "old", rng.normal(0, 1, n), rng.normal(mu, sd, n))
    a, d = rng.lognormal(0, 0.3, j), rng.normal(0.5, 1, j)
    y = (rng.random((n, j)) < 1 / (1 + np.exp(-(a * theta[:, None] + d)))).astype(float)
    y[g == "old", :5] = np.nan
    y[g == "new", -5:] = np.nan
    ids = [f"m{i}" for i in range(n)]
    t0, t1 = theta[g == "old"], theta[g == "new"]
    return pd.DataFrame(y, index=ids, columns=[f"q{k}" for k in range(j)]), \
        pd.Series(g, index=ids), ((t1.mean() - t0.mean()) / t0.std(), t1.std() / t0.std())


def test_recovers_the_shift_that_a_stacked_calibration_shrinks():
    x, g, (mu, sd) = _two_groups(np.random.default_rng(7))
    res = calibrate(x, "2pl", groups=g, reference_group="old", check_dimensions=False)
    new = res.groups["groups"][1]
    assert new["group"] == "new"
    assert new["mean"] == pytest.approx(mu, abs=0.1)
    assert new["sd"] == pytest.approx(sd, abs=0.1)
    # the EAPs on the reference scale: the groups' gap kept
    gap = res.theta[g.to_numpy() == "new"].mean() - res.theta[g.to_numpy() == "old"].mean()
    stacked = calibrate(x, "2pl", check_dimensions=False)
    gap0 = stacked.theta[g.to_numpy() == "new"].mean() - stacked.theta[
        g.to_numpy() == "old"].mean()
    sd_old = stacked.theta[g.to_numpy() == "old"].std()
    assert abs(gap - mu) < 0.1 and gap0 / sd_old < mu - 0.2


def test_the_other_reference_group_gives_the_same_fit_on_its_scale():
    """A reparametrization of the same model, once the grid holds both groups: on mirt's
    [-6, 6] a group at 1.5 SD with SD 1.3 is cut off at the top (its SD moves by 0.014 and the
    log-likelihood by 0.015 with the reference swapped), on [-8, 8] they agree."""
    x, g, _ = _two_groups(np.random.default_rng(3), n=1000, j=15)
    grid = {"theta_range": (-8, 8), "quadpts": 81, "prior_a": None, "tol": 1e-6,
            "check_dimensions": False}
    a = calibrate(x, "2pl", groups=g, reference_group="old", **grid)
    b = calibrate(x, "2pl", groups=g.to_dict(), reference_group="new", **grid)
    assert b.groups["reference"] == "new"
    assert a.loglik == pytest.approx(b.loglik, abs=1e-4)
    new = a.groups["groups"][1]
    old_in_b = b.groups["groups"][1]          # theta_old = (theta_new - mu) / sd
    assert old_in_b["mean"] == pytest.approx(-new["mean"] / new["sd"], abs=1e-3)
    assert old_in_b["sd"] == pytest.approx(1 / new["sd"], abs=1e-3)
    slope = b.bank.a / a.bank.a               # items on the new group's scale: a * sd
    assert np.allclose(slope, new["sd"], atol=2e-3)


def test_three_groups_and_a_3pl_run():
    rng = np.random.default_rng(5)
    x, g, _ = _two_groups(rng, n=1200, j=20)
    lab = g.to_numpy().copy()
    lab[::3] = "mid"
    res = calibrate(x, "3pl", groups=lab, reference_group="old", check_dimensions=False)
    assert [r["group"] for r in res.groups["groups"]] == ["old", "mid", "new"]
    assert res.converged and np.all(np.isfinite(res.theta))
    assert res.groups["groups"][2]["mean"] > 0.8


def test_single_group_path_is_unchanged_by_the_keyword(data):
    x, _ = data
    a = calibrate(x, "2pl", check_dimensions=False)
    b = calibrate(x, "2pl", groups=None, check_dimensions=False)
    assert a.loglik == b.loglik and a.groups is None and "groups" not in a.to_dict()


@pytest.mark.parametrize("groups, match", [
    (["A"] * 2000, "at least two groups"),
    (["A"] * 1995 + ["B"] * 5, "group 'B' has 5 subject"),
    (["A"] * 10, "10 labels for 2000 subjects"),
    ({"nobody": "A"}, "not in the responses"),
])
def test_bad_groups_are_one_line_errors(data, groups, match):
    x, _ = data
    with pytest.raises(ConfigError, match=match) as err:
        calibrate(x, "2pl", groups=groups, check_dimensions=False)
    assert "\n" not in str(err.value)


def test_groups_refuse_what_they_cannot_take(data):
    x, g = data
    with pytest.raises(ConfigError, match="dtype \\(--dtype\\) set with groups"):
        calibrate(x, "2pl", groups=g, dtype="float32")
    with pytest.raises(ConfigError, match="reference group 'C' is not one of"):
        calibrate(x, "2pl", groups=g, reference_group="C")
    with pytest.raises(ConfigError, match="no group"):
        calibrate(x, "2pl", groups=g.iloc[:-1].to_dict())
    with pytest.raises(ConfigError, match="reference_group needs groups"):
        calibrate(x, "2pl", reference_group="A")


def test_read_groups_errors(tmp_path):
    p = tmp_path / "g.csv"
    p.write_text("subject_id,group\ns1,A\ns1,B\n")
    with pytest.raises(ConfigError, match="'s1' appears more than once"):
        read_groups(p)
    p.write_text("subject_id\ns1\n")
    with pytest.raises(ConfigError, match="two columns"):
        read_groups(p)
    with pytest.raises(ConfigError, match="no such file"):
        read_groups(tmp_path / "none.csv")
    p.write_text("id,extra,group\ns1,x,A\ns2,y,B\n")
    assert read_groups(p) == {"s1": "A", "s2": "B"}


def test_atlas_calibrate_groups(tmp_path, capsys):
    bank, summ = tmp_path / "bank.csv", tmp_path / "s.json"
    code = main(["calibrate", str(DATA / "responses.csv"), "-o", str(bank), "--model", "2pl",
                 "--prior-a", "none", "--tol", "1e-6", "--groups", str(DATA / "groups.csv"),
                 "--summary", str(summ), "--quiet"])
    out = capsys.readouterr()
    assert code == 0, out.err
    ref = pd.read_csv(DATA / "2pl_fit.csv").iloc[0]
    assert "group B: 1000 subjects, latent mean 1.043, SD 1.382" in out.out
    info = json.loads(summ.read_text())
    assert info["loglik"] == pytest.approx(ref.loglik, abs=0.01)
    assert info["groups"]["groups"][1]["mean"] == pytest.approx(ref.mean_B, abs=2e-3)


@pytest.mark.parametrize("rows, args, match", [
    ("subject_id,group\nnobody,A\n", ["--model", "2pl"], "not in the responses"),
    (None, ["--model", "2pl", "--reference-group", "Z"], "reference group 'Z'"),
    (None, ["--model", "2pl", "--dtype", "float32"], "dtype \\(--dtype\\) set with groups"),
])
def test_atlas_calibrate_bad_groups_exit_2(tmp_path, capsys, rows, args, match):
    path = DATA / "groups.csv"
    if rows is not None:
        path = tmp_path / "g.csv"
        path.write_text(rows)
    argv = ["calibrate", str(DATA / "responses.csv"), "-o", str(tmp_path / "b.csv"),
            "--groups", str(path), "--quiet", *args]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and re.search(match, err)


def test_array_api_strict_runs_the_same_group_fit(data):
    """The group EM is written against the array API as the one-group EM (a GPU runs it)."""
    strict = pytest.importorskip("array_api_strict", reason="array_api_strict not installed")
    x, g = data
    a = calibrate(x, "3pl", groups=g, check_dimensions=False)
    b = calibrate(x, "3pl", groups=g, check_dimensions=False, device=strict)
    assert b.loglik == pytest.approx(a.loglik, abs=1e-8) and a.n_iter == b.n_iter
    assert np.allclose(a.bank.params, b.bank.params, atol=1e-10)
    assert b.groups["groups"][1]["mean"] == pytest.approx(a.groups["groups"][1]["mean"], abs=1e-10)
    assert b.groups["groups"][1]["sd"] == pytest.approx(a.groups["groups"][1]["sd"], abs=1e-10)


def test_groups_follow_the_subjects_filtering_keeps(data):
    """Filtering drops subjects after the groups are read: the groups follow the ids."""
    x, g = data
    y = x.copy()
    y.iloc[:, -1] = 1.0                       # an item everyone gets right: dropped
    res = calibrate(y, "2pl", groups=g.to_numpy(), filter=True, check_dimensions=False)
    assert len(res.bank) == 19
    sizes = {r["group"]: r["n_subjects"] for r in res.groups["groups"]}
    kept = g.loc[[str(s) for s in res.subject_ids]].value_counts()
    assert sizes == {k: float(v) for k, v in kept.items()}


def test_pattern_weights_equal_expanded_rows(data):
    """A response-pattern table (one row per pattern and group, its frequency as weight) gives
    the fit of the rows themselves, group sizes counted in subjects."""
    x, g = data
    x = x.iloc[:, 3:17]                           # items every group answered: fewer patterns
    key = (x.astype(str).agg(",".join, axis=1) + "|" + g).to_numpy()
    _, first, count = np.unique(key, return_index=True, return_counts=True)
    a = calibrate(x, "2pl", groups=g, check_dimensions=False, tol=1e-7)
    b = calibrate(x.iloc[first], "2pl", groups=g.iloc[first], weights=count.astype(float),
                  check_dimensions=False, tol=1e-7)
    assert len(first) < len(x)
    assert b.loglik == pytest.approx(a.loglik, abs=1e-8)
    assert np.allclose(a.bank.a, b.bank.a, atol=1e-9) and np.allclose(a.bank.b, b.bank.b, atol=1e-9)
    assert [r["n_observations"] for r in b.groups["groups"]] == [1000.0, 1000.0]
    assert sum(r["n_subjects"] for r in b.groups["groups"]) == len(first)   # rows, as the fit's
    assert b.groups["groups"][1]["mean"] == pytest.approx(a.groups["groups"][1]["mean"], abs=1e-9)
