"""Static baselines: Random-k, tinyBenchmarks anchor points, metabench-style information subset."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.cluster.vq import kmeans2

from atlascat.errors import ConfigError
from atlascat.studies import baselines
from atlascat.irt import models
from atlascat.irt.bank import ItemBank


def _bank(rng, n=60):
    return ItemBank([f"i{j}" for j in range(n)], rng.uniform(0.5, 2.5, n), rng.normal(size=n),
                    rng.uniform(0, 0.25, n))


class TestKMeans:
    def test_separated_blobs_recovered_exactly(self, rng):
        centers = rng.normal(scale=10, size=(5, 8))
        truth = np.repeat(np.arange(5), 40)
        x = centers[truth] + rng.normal(scale=0.3, size=(200, 8))
        km = baselines.kmeans(x, 5, rng=rng)
        # same partition up to label names
        pairs = {(t, l) for t, l in zip(truth, km.labels)}
        assert len(pairs) == 5
        assert km.inertia == pytest.approx(((x - km.centers[km.labels]) ** 2).sum())

    def test_inertia_no_worse_than_scipy(self, rng):
        x = (rng.random((300, 40)) < rng.random(40)).astype(float)
        ours = baselines.kmeans(x, 12, rng=rng, n_init=4).inertia
        best = np.inf
        for s in range(4):
            c, lab = kmeans2(x, 12, minit="++", seed=np.random.default_rng(s))
            best = min(best, ((x - c[lab]) ** 2).sum())
        assert ours <= best * 1.02

    def test_seeded_and_k_checked(self, rng):
        x = rng.normal(size=(50, 3))
        a = baselines.kmeans(x, 4, rng=np.random.default_rng(1))
        b = baselines.kmeans(x, 4, rng=np.random.default_rng(1))
        np.testing.assert_array_equal(a.labels, b.labels)
        with pytest.raises(ConfigError):
            baselines.kmeans(x, 51, rng=rng)


class TestRandomForms:
    def test_shape_distinct_and_uniform(self, rng):
        bank = _bank(rng, 50)
        forms = baselines.random_forms(bank, 10, n_replicates=2000, rng=rng)
        assert all(len(f) == 10 and len(set(f.item_ids)) == 10 for f in forms)
        assert [f.replicate for f in forms[:3]] == [0, 1, 2]
        counts = np.zeros(50)
        for f in forms:
            counts[bank.index_of(f.item_ids)] += 1
        # each item is included with probability 10/50; binomial sd over 2000 draws ~ 17.9
        assert np.abs(counts - 400).max() < 5 * np.sqrt(2000 * 0.2 * 0.8)
        assert forms[0].name == "Random-10"

    def test_k_too_large(self, rng):
        with pytest.raises(ConfigError, match="bank size"):
            baselines.random_forms(_bank(rng, 5), 6, rng=rng)


class TestAnchorPoints:
    def test_duplicate_item_clusters_give_exact_accuracy(self, rng):
        """Items that are exact copies of 6 prototypes (cluster sizes 1..11): one anchor per
        prototype, weights = cluster shares, and the weighted anchor accuracy equals the full
        accuracy of every model exactly (the unweighted mean of the anchors does not)."""
        proto = (rng.random((300, 6)) < rng.uniform(0.2, 0.8, 6)).astype(float)
        sizes = np.array([1, 3, 5, 7, 9, 11])
        cols = np.repeat(np.arange(6), sizes)
        y = proto[:, cols]
        bank = ItemBank([f"q{j}" for j in range(y.shape[1])], np.ones(y.shape[1]),
                        np.zeros(y.shape[1]))
        form = baselines.anchor_points(y[:200], bank, 6, rng=rng)
        anchor_cols = cols[bank.index_of(form.item_ids)]
        assert sorted(anchor_cols) == list(range(6))
        np.testing.assert_allclose(form.weights, sizes[anchor_cols] / sizes.sum())
        test = y[200:][:, bank.index_of(form.item_ids)]
        np.testing.assert_allclose(form.direct_accuracy(test), y[200:].mean(axis=1), atol=1e-12)
        unweighted = test.mean(axis=1)
        assert np.abs(unweighted - y[200:].mean(axis=1)).max() > 0.05

    def test_on_real_matrix_weights_help(self, shared_data):
        from atlascat.responses import ResponseMatrix

        rm = ResponseMatrix.read(shared_data / "openllm" / "dense_arc.csv.gz")
        y = rm.values
        rng = np.random.default_rng(7)
        perm = rng.permutation(y.shape[0])
        train, test = y[perm[:1500]], y[perm[1500:]]
        bank = ItemBank(rm.item_ids, np.ones(rm.n_items), np.zeros(rm.n_items))
        form = baselines.anchor_points(train, bank, 30, rng=rng)
        sub = test[:, bank.index_of(form.item_ids)]
        full = test.mean(axis=1)
        weighted = np.abs(form.direct_accuracy(sub) - full).mean()
        plain = np.abs(sub.mean(axis=1) - full).mean()
        assert weighted < plain
        assert weighted < 0.05
        assert len(set(form.item_ids)) == 30 and form.weights.sum() == pytest.approx(1.0)

    def test_missing_train_answers_are_imputed(self, rng):
        bank = _bank(rng, 20)
        y = (rng.random((100, 20)) < 0.5).astype(float)
        y[rng.random(y.shape) < 0.2] = np.nan
        form = baselines.anchor_points(y, bank, 5, rng=rng)
        assert len(form) == 5 and np.all(form.weights > 0)
        y[:, 3] = np.nan
        from atlascat.errors import ResponseDataError

        with pytest.raises(ResponseDataError, match="no train answers"):
            baselines.anchor_points(y, bank, 5, rng=rng)


class TestInformationForm:
    def test_matches_brute_force_integrated_information(self, rng):
        bank = _bank(rng, 80)
        thetas = rng.normal(0.5, 1.0, 500)
        form = baselines.information_form(bank, 15, thetas=thetas)
        info = np.array([models.item_information(thetas, bank.a[j:j + 1], bank.b[j:j + 1],
                                                 bank.c[j:j + 1]).mean() for j in range(80)])
        expected = bank.item_ids[np.argsort(-info)[:15]]
        assert list(form.item_ids) == list(expected)
        assert form.weights is None

    def test_follows_the_theta_distribution(self, rng):
        n = 41
        bank = ItemBank([f"i{j}" for j in range(n)], np.full(n, 1.5), np.linspace(-4, 4, n))
        low = baselines.information_form(bank, 5, thetas=rng.normal(-2.0, 0.1, 200))
        high = baselines.information_form(bank, 5, thetas=rng.normal(2.0, 0.1, 200))
        assert np.abs(bank.b[bank.index_of(low.item_ids)] + 2).max() <= 0.5
        assert np.abs(bank.b[bank.index_of(high.item_ids)] - 2).max() <= 0.5


class TestFixedForm:
    def test_direct_accuracy_with_missing(self):
        form = baselines.FixedForm("x", ["a", "b", "c"], weights=[0.5, 0.25, 0.25])
        y = np.array([[1, 0, np.nan], [np.nan, np.nan, np.nan], [0, 1, 1]], float)
        acc = form.direct_accuracy(y)
        assert acc[0] == pytest.approx(0.5 / 0.75)
        assert np.isnan(acc[1])
        assert acc[2] == pytest.approx(0.5)

    def test_bad_weights(self):
        with pytest.raises(ConfigError, match="weights"):
            baselines.FixedForm("x", ["a", "b"], weights=[0.7, 0.7])
