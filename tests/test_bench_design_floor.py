"""benchmarks/bench_design_floor.py: the oracle control variate matches each target's score, a
perfect control variate leaves no error under either draw rule, and a good one beats the plain
mean of a random sample (a synthetic Rasch population)."""
import numpy as np
import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def floor(shared_data):
    return load_benchmark("bench_design_floor")


@pytest.fixture(scope="module")
def rasch():
    rng = np.random.default_rng(3)
    theta, b = rng.normal(1.0, 0.5, 40), rng.normal(0.0, 1.5, 300)
    return (rng.random((40, 300)) < 1 / (1 + np.exp(-(theta[:, None] - b[None])))).astype(float)


def test_oracle_control_has_each_targets_score(floor, rasch):
    g = floor.oracle_control(rasch)
    assert g.shape == rasch.shape and np.all((g > 0) & (g < 1))
    assert np.allclose(g.mean(1), rasch.mean(1), atol=1e-9)


def test_perfect_control_variate_leaves_no_error(floor, rasch):
    rng = np.random.default_rng(0)
    assert np.allclose(floor.srs_errors(rasch, rasch, 50, rng), 0.0)
    assert np.allclose(floor.pps_errors(rasch, rasch, 50, 0.5, rng), 0.0, atol=1e-12)


def test_oracle_beats_the_plain_mean(floor, rasch):
    rng = np.random.default_rng(1)
    g = floor.oracle_control(rasch)
    plain = np.mean([floor.srs_errors(rasch, None, 50, rng).mean() for _ in range(40)])
    srs = np.mean([floor.srs_errors(rasch, g, 50, rng).mean() for _ in range(40)])
    pps = floor.pps_errors(np.tile(rasch, (40, 1)), np.tile(g, (40, 1)), 50, 0.5, rng).mean()
    assert srs < plain and pps < plain
    assert 0.0 < pps < 0.1


def test_source_controls_level_has_each_targets_score_and_the_fit_is_no_worse(floor, rasch):
    source, targets = rasch[:25], rasch[25:]
    cv = floor.source_controls(source, targets, pcs=5)
    level, fitted = cv["level, true c"], cv["source PCs, fitted"]
    assert level.shape == fitted.shape == targets.shape
    assert np.allclose(level.mean(1), targets.mean(1), atol=1e-9)
    assert np.all((fitted >= 0.01) & (fitted <= 0.99))
    # the fit has the level model among its columns: in-sample, never farther (up to clipping)
    mse = lambda g: ((targets - g) ** 2).mean(1)
    assert np.all(mse(fitted) <= mse(level) + 1e-4)
