"""The multidimensional 2PL's once-per-fit grid passes (standard errors' information, EAP
scores, predictive probabilities) by blocks of subjects: tiny blocks give what one block gives."""
import numpy as np
import pytest
from scipy.special import expit, log_expit

from cli_checks import two_factor_answers

from atlascat.irt.multidim import MultidimBank, MultidimIRT, grid_eap, product_grid
from atlascat.irt.multidimem import posterior_blocks
from atlascat.irt.multidimse import multidim_information


def _data(n, j, seed=5):
    bank, y = two_factor_answers(n, j, seed=seed)
    y = y.to_numpy(float).copy()
    rng = np.random.default_rng(seed)
    y[rng.random(y.shape) < 0.1] = np.nan
    return bank, y, rng.integers(1, 4, n).astype(float)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("missing", [True, False])
def test_information_in_tiny_blocks_is_the_one_block_information(k, missing):
    bank, y, w = _data(90, 7)
    if not missing:
        y = np.nan_to_num(y)
    nodes, logw = product_grid(k, 9)
    A = np.column_stack([bank.loadings, np.linspace(0.2, 0.5, 7)])[:, :k]
    args = (A, bank.intercepts, y, w, nodes, logw)
    one = multidim_information(*args, prior_a_sd=3.0, block_bytes=1 << 30)
    # 2 subjects a block, items one by one (the pair moments' item blocks: 1 x 1)
    tiny = multidim_information(*args, prior_a_sd=3.0, block_bytes=8 * len(nodes) * 2)
    for a, b in zip(one, tiny):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12 * np.max(np.abs(a)))


def test_eap_and_predictions_in_blocks_are_the_direct_posterior():
    bank, y, _ = _data(1500, 8)   # > one 8 MB block of 961 nodes (1091 subjects)
    obs = ~np.isnan(y)
    nodes, logw = product_grid(2, 31)
    z = nodes @ bank.loadings.T + bank.intercepts
    y1 = np.where(obs, y, 0.0)
    ll = y1 @ log_expit(z).T + (obs - y1) @ log_expit(-z).T + logw
    post = np.exp(ll - ll.max(axis=1, keepdims=True))
    post /= post.sum(axis=1, keepdims=True)
    mean = post @ nodes
    for cells in (961 * 3, 10**9):
        m, c = grid_eap(y, obs, bank, 31, block_cells=cells)
        np.testing.assert_allclose(m, mean, atol=1e-12)
        cov = np.einsum("nq,qa,qb->nab", post, nodes, nodes) - mean[:, :, None] * mean[:, None, :]
        np.testing.assert_allclose(c, cov, atol=1e-12)
    seen = [(rows.start, rows.stop) for rows, _, _ in posterior_blocks(y, obs, z, logw)]
    assert len(seen) == 2 and seen[-1][1] == len(y)
    model = MultidimIRT(2, quadpts=31)
    model.bank_ = bank
    np.testing.assert_allclose(model.predict_proba(y), post @ expit(z), atol=1e-12)


def test_three_dimensional_eap_takes_mirts_default_grid():
    """score_multidim's default K = 3 grid is mirt's fscores 31^3 = 29791 nodes (past the fit's
    10001-node cap, which refused it: the EAP goes by blocks and checks its own cap)."""
    from atlascat.irt.multidimscore import score_multidim

    rng = np.random.default_rng(1)
    b3 = MultidimBank([f"i{j}" for j in range(6)], rng.uniform(0.5, 2, (6, 3)), rng.normal(size=6))
    y = np.array([[1, 0, np.nan, 1, 1, 0], [0, 0, 1, np.nan, 1, 1]])
    res = score_multidim(y, b3)
    nodes, logw = product_grid(3, 31, max_nodes=31**3)
    z = nodes @ b3.loadings.T + b3.intercepts
    obs = ~np.isnan(y)
    y1 = np.where(obs, y, 0.0)
    ll = y1 @ log_expit(z).T + (obs - y1) @ log_expit(-z).T + logw
    post = np.exp(ll - ll.max(axis=1, keepdims=True))
    post /= post.sum(axis=1, keepdims=True)
    assert res.quadpts == 31
    np.testing.assert_allclose(res.theta, post @ nodes, atol=1e-12)
