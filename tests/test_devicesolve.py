"""ML, MAP and WLE on a device (:mod:`atlascat.irt.devicesolve`) equal the CPU solver.

Run under ``array_api_strict`` (a NumPy-backed namespace that allows only the standard), as
the device path runs on PyTorch / CuPy: the same thetas to the solver's tolerance, the same
SEs and flags, for 2PL and 3PL banks (several likelihood modes), perfect and zero patterns,
missing answers, partial credit, a subject with no answer, and scores already on the device.
"""
import numpy as np
import pytest

from atlascat.irt import ability
from atlascat.irt.bank import ItemBank


@pytest.fixture(scope="module")
def strict():
    return pytest.importorskip("array_api_strict", reason="array_api_strict not installed")


def _data(rng, model, n=300, m=30):
    a = rng.uniform(0.5, 2.5, m)
    b = rng.normal(0, 1.2, m)
    c = rng.uniform(0.1, 0.3, m) if model == "3pl" else np.zeros(m)
    bank = ItemBank([f"i{j}" for j in range(m)], a, b, c)
    y = (rng.random((n, m)) < bank.probability(rng.normal(0, 1.3, n))).astype(float)
    y[rng.random((n, m)) < 0.2] = np.nan
    y[0] = 1.0                      # perfect
    y[1] = 0.0                      # zero
    y[2] = np.nan                   # no answer
    y[3, :5] = [0.3, 0.7, 1.0, 0.0, 0.5]   # partial credit
    return bank, y


@pytest.mark.parametrize("model", ["2pl", "3pl"])
@pytest.mark.parametrize("method", ["ml", "map", "wle"])
def test_device_solver_equals_the_cpu_solver(rng, strict, model, method):
    bank, y = _data(rng, model)
    fn = {"ml": ability.ml, "map": ability.map_estimate, "wle": ability.wle}[method]
    want = fn(y, bank)
    got = fn(y, bank, device=strict)
    assert list(got.flag) == list(want.flag)
    fin = np.isfinite(want.theta)
    np.testing.assert_array_equal(np.isfinite(got.theta), fin)
    np.testing.assert_allclose(got.theta[fin], want.theta[fin], atol=1e-7)
    np.testing.assert_allclose(got.se[fin], want.se[fin], rtol=1e-6)
    np.testing.assert_array_equal(got.theta[~fin], want.theta[~fin])
    if method == "ml":
        assert {"perfect", "zero", "no_items"} <= set(want.flag)


def test_scores_on_the_device_are_solved_there(rng, strict):
    bank, y = _data(rng, "3pl", n=80)
    want = ability.map_estimate(y, bank)
    got = ability.map_estimate(strict.asarray(y), bank)
    np.testing.assert_allclose(got.theta, want.theta, atol=1e-7)


def test_estimate_ability_runs_map_on_a_device(rng, strict):
    bank, y = _data(rng, "2pl", n=60)
    want = ability.estimate_ability(y, bank, "wle")
    got = ability.estimate_ability(y, bank, "wle", device=strict)
    np.testing.assert_allclose(got["theta"].to_numpy(), want["theta"].to_numpy(), atol=1e-7,
                               equal_nan=True)
    assert list(got["flag"]) == list(want["flag"])


@pytest.mark.parametrize("method", ["ml", "map"])
def test_device_solver_takes_the_higher_narrow_mode(strict, method):
    """Steep 4PL items: the device solver refines every bracket, as the CPU solver, and keeps
    mirt's mode (data/mirt_scores/make_steep_4pl.R) where the grid ranks the modes wrongly."""
    from pathlib import Path

    import pandas as pd

    ref_dir = Path(__file__).parent / "data" / "mirt_scores"
    bank = ItemBank.read(ref_dir / "steep_4pl_items.csv")
    y = pd.read_csv(ref_dir / "steep_4pl_patterns.csv").set_index("id")[list(bank.item_ids)]
    ref = pd.read_csv(ref_dir / "steep_4pl_scores.csv").set_index("id").loc[y.index]
    fn = {"ml": ability.ml, "map": ability.map_estimate}[method]
    got = fn(y.to_numpy(float), bank, device=strict)
    np.testing.assert_allclose(got.theta, ref[f"{method}_theta"], atol=2e-5)
