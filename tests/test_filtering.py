"""Psychometric filtering and the stratified split."""
import numpy as np
import pytest
from numpy.testing import assert_allclose

from atlascat import ResponseMatrix
from atlascat.errors import ConfigError
from atlascat.filtering import filter_items, point_biserial, stratified_split


@pytest.fixture
def synthetic(rng):
    n = 2000
    theta = rng.normal(size=n)
    good = (rng.random((n, 20)) < 1 / (1 + np.exp(-(theta[:, None] - rng.normal(0, 1, 20))))).astype(float)
    constant = np.ones((n, 1))                                   # SD 0
    ceiling = (rng.random((n, 1)) < 0.97).astype(float)          # mean > 0.95
    noise = (rng.random((n, 1)) < 0.5).astype(float)             # unrelated to ability
    reversed_ = 1 - good[:, :1]                                  # negative point-biserial
    values = np.hstack([good, constant, ceiling, noise, reversed_])
    ids = [f"g{i}" for i in range(20)] + ["constant", "ceiling", "noise", "reversed"]
    return ResponseMatrix(values, [f"m{i}" for i in range(n)], ids)


class TestFilter:
    def test_drops_each_kind_for_the_right_reason(self, synthetic):
        kept, report = filter_items(synthetic)
        reasons = dict(zip(report.dropped_items.item_id, report.dropped_items.reason))
        assert reasons == {"constant": "sd_below_min", "ceiling": "mean_above_max",
                           "noise": "point_biserial_below_min",
                           "reversed": "point_biserial_below_min"}
        assert kept.n_items == 20 and report.n_items_after == 20
        assert report.to_dict()["dropped_items_by_reason"]["point_biserial_below_min"] == 2

    def test_subject_percentile(self, synthetic):
        kept, report = filter_items(synthetic, subject_percentile=5)
        acc = synthetic.subset(items=[f"g{i}" for i in range(20)]).accuracy
        assert report.n_subjects_after == kept.n_subjects
        assert len(report.dropped_subjects) == int((acc < np.percentile(acc, 5)).sum())
        assert kept.accuracy.min() >= report.dropped_subjects["value"].max()

    def test_thresholds_configurable_and_skippable(self, synthetic):
        kept, report = filter_items(synthetic, min_sd=None, max_mean=None, min_point_biserial=None,
                                    subject_percentile=None)
        assert kept.n_items == synthetic.n_items and report.dropped_items.empty
        with pytest.raises(ConfigError):
            filter_items(synthetic, subject_percentile=150)

    def test_point_biserial_matches_numpy_corrcoef(self, synthetic):
        r = point_biserial(synthetic)
        total = synthetic.accuracy
        for j in (0, 5, 22):
            assert_allclose(r[j], np.corrcoef(synthetic.values[:, j], total)[0, 1], rtol=1e-10)

    def test_point_biserial_with_missing_uses_observed_pairs(self, rng):
        y = (rng.random((300, 4)) < 0.6).astype(float)
        y[rng.random(y.shape) < 0.4] = np.nan
        y[np.isnan(y).all(1), 0] = 1.0
        rm = ResponseMatrix(y)
        total = rm.accuracy
        r = point_biserial(rm)
        obs = ~np.isnan(y[:, 2])
        assert_allclose(r[2], np.corrcoef(y[obs, 2], total[obs])[0, 1], rtol=1e-10)

    def test_weights_equal_expanded_rows(self, shared_data):
        rm = ResponseMatrix.read(shared_data / "classic" / "lsat7_patterns.csv", freq_column="freq")
        assert_allclose(point_biserial(rm), point_biserial(rm.expand()), rtol=1e-10)


class TestSplit:
    def test_stratified_ninety_ten_and_seeded(self, synthetic):
        train, test = stratified_split(synthetic, rng=np.random.default_rng(1))
        assert train.n_subjects + test.n_subjects == synthetic.n_subjects
        assert abs(test.n_subjects - 200) <= 10
        assert not set(train.subject_ids) & set(test.subject_ids)
        # the score distribution is preserved in both parts
        q = [0.1, 0.5, 0.9]
        assert_allclose(np.quantile(test.accuracy, q), np.quantile(synthetic.accuracy, q), atol=0.06)
        again = stratified_split(synthetic, rng=np.random.default_rng(1))[1]
        assert again.subject_ids.tolist() == test.subject_ids.tolist()
        other = stratified_split(synthetic, rng=np.random.default_rng(2))[1]
        assert other.subject_ids.tolist() != test.subject_ids.tolist()

    def test_every_bin_represented(self, rng):
        acc_levels = np.repeat(np.linspace(0.05, 0.95, 10), 20)
        values = (rng.random((200, 50)) < acc_levels[:, None]).astype(float)
        rm = ResponseMatrix(values)
        _, test = stratified_split(rm, rng=rng)
        bins = np.digitize(test.accuracy, np.quantile(rm.accuracy, np.linspace(0, 1, 11))[1:-1])
        assert len(np.unique(bins)) >= 8


def test_split_that_leaves_no_train_or_no_test_subject_is_refused(synthetic):
    """A test share so large that no train subject is left (or so small, on two subjects in
    two bins, that no test subject is) is one ConfigError naming test_size."""
    with pytest.raises(ConfigError, match="test_size 0.9999 puts all .* none in the train set"):
        stratified_split(synthetic, test_size=0.9999, rng=np.random.default_rng(0))
    two = ResponseMatrix(np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]))   # one per score bin
    with pytest.raises(ConfigError, match="test_size 0.1 puts none of the 2 subjects"):
        stratified_split(two, test_size=0.1, n_bins=2, rng=np.random.default_rng(0))


def test_a_large_matrix_keeps_the_split_its_studies_published():
    """Winogrande (3089 models) at 0.1: the per-bin rounded shares sum to more than one model off
    308.9, within the 1% rounding slack, so the split is the per-bin draw the studies used (the
    correction for small matrices would redraw it)."""
    import atlascat as at

    rm = at.catalogue.load_responses("winogrande")
    rng = np.random.default_rng(0)
    acc = rm.accuracy
    edges = np.unique(np.quantile(acc, np.linspace(0, 1, 11)))
    bins = np.clip(np.searchsorted(edges, acc, side="right") - 1, 0, len(edges) - 2)
    want = np.zeros(rm.n_subjects, bool)
    for b in np.unique(bins):
        members = np.flatnonzero(bins == b)
        want[rng.choice(members, size=max(int(round(0.1 * members.size)), 1), replace=False)] = True
    assert abs(want.sum() - 308.9) > 1            # the case the slack is for
    _, test = stratified_split(rm, test_size=0.1, rng=np.random.default_rng(0))
    assert list(test.subject_ids) == list(np.asarray(rm.subject_ids)[want])
