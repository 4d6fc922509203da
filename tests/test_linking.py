"""Scale linking: exact recovery of known constants, characteristic-curve methods, real
calibrations of two overlapping forms on different populations, ICC RMSD, `atlas link`."""
import json

import numpy as np
import pytest

from atlascat.cli import main
from atlascat.errors import ConfigError
from atlascat.irt.bank import ItemBank
from atlascat.irt.calibrate import calibrate
from atlascat.irt.linking import (Linking, haebara, icc_rmsd, link_banks, mean_mean, mean_sigma,
                                  stocking_lord, transform_bank)


@pytest.fixture
def bank(rng):
    n = 30
    return ItemBank([f"i{k}" for k in range(n)], rng.uniform(0.6, 2.5, n), rng.normal(0, 1.2, n),
                    rng.uniform(0, 0.3, n), None)


def _inverse(bank, A, B):
    """The bank as it would be calibrated on a scale with theta_new = (theta_ref - B) / A."""
    return ItemBank(bank.item_ids, bank.a * A, (bank.b - B) / A, bank.c, bank.u)


class TestTransform:
    def test_probabilities_invariant(self, bank):
        A, B = 1.3, -0.4
        moved = transform_bank(bank, A, B)
        theta_new = np.linspace(-3, 3, 13)
        np.testing.assert_allclose(moved.probability(A * theta_new + B), bank.probability(theta_new),
                                   atol=1e-12)

    def test_rejects_bad_constants(self, bank):
        with pytest.raises(ConfigError, match="A > 0"):
            transform_bank(bank, -1.0, 0.0)


class TestExactRecovery:
    A, B = 1.3, -0.4

    @pytest.mark.parametrize("method", ["stocking-lord", "haebara", "mean-sigma", "mean-mean"])
    def test_link_banks(self, bank, method):
        new = _inverse(bank, self.A, self.B)
        res = link_banks(bank, new, method)
        assert res.A == pytest.approx(self.A, abs=1e-6)
        assert res.B == pytest.approx(self.B, abs=1e-6)
        np.testing.assert_allclose(res.transform(new).b, bank.b, atol=1e-5)

    def test_functions(self, bank):
        new = _inverse(bank, self.A, self.B)
        for fn in (haebara, stocking_lord):
            A, B, crit = fn(bank, new)
            assert (A, B) == pytest.approx((self.A, self.B), abs=1e-6) and crit < 1e-12
        assert mean_sigma(bank.b, new.b) == pytest.approx((self.A, self.B))
        assert mean_mean(bank.a, bank.b, new.a, new.b) == pytest.approx((self.A, self.B))

    def test_mean_sigma_on_persons(self, rng):
        theta_new = rng.normal(0, 1, 500)
        A, B = mean_sigma(0.8 * theta_new + 0.3, theta_new)
        assert (A, B) == pytest.approx((0.8, 0.3))

    def test_curve_methods_beat_moments_with_noise(self, bank, rng):
        """With noisy anchors the curve criteria are minimized at their own optimum: the
        characteristic-curve solution has a lower criterion value than the moment solution."""
        new = _inverse(bank, self.A, self.B)
        noisy = ItemBank(new.item_ids, new.a * np.exp(rng.normal(0, 0.1, len(new))),
                         new.b + rng.normal(0, 0.15, len(new)), new.c, new.u)
        sl = link_banks(bank, noisy, "stocking-lord")
        ms = link_banks(bank, noisy, "mean-sigma")
        assert abs(sl.A - self.A) < 0.15 and abs(sl.B - self.B) < 0.15
        from atlascat.irt.linking import _cc_link  # criterion at the moment solution

        def crit(A, B):
            moved = transform_bank(noisy, A, B)
            from atlascat.irt.quadrature import normal_quadrature
            q = normal_quadrature(61, (-4, 4))
            return float(q.weights @ (bank.probability(q.nodes).sum(1)
                                      - moved.probability(q.nodes).sum(1)) ** 2)

        assert sl.criterion <= crit(ms.A, ms.B) + 1e-12
        assert sl.criterion == pytest.approx(crit(sl.A, sl.B), rel=1e-6)
        assert _cc_link(bank, noisy, "stocking-lord", 61, (-4, 4))[0] == pytest.approx(sl.A)


class TestAnchors:
    def test_needs_two_common_items(self, bank):
        other = ItemBank(["i0", "x1", "x2"], [1, 1, 1], [0, 0, 0])
        with pytest.raises(ConfigError, match="at least 2 common anchor"):
            link_banks(bank, other)

    def test_unknown_method(self, bank):
        with pytest.raises(ConfigError, match="unknown linking method"):
            link_banks(bank, bank, "equipercentile")

    def test_explicit_anchor_subset(self, bank):
        new = _inverse(bank, 0.9, 0.2)
        res = link_banks(bank, new, "haebara", anchors=["i1", "i2", "i3", "i4"])
        assert res.anchors == ("i1", "i2", "i3", "i4")
        assert (res.A, res.B) == pytest.approx((0.9, 0.2), abs=1e-6)
        with pytest.raises(ConfigError, match="not in both banks"):
            link_banks(bank, new, anchors=["i1", "zzz"])


class TestCalibratedForms:
    """Two forms sharing 20 anchors, calibrated separately on populations N(0, 1) and
    N(0.5, 1.2^2): each calibration fixes its own population to N(0, 1), so the second form's
    scale is theta_ref = 1.2 theta_new + 0.5. Linking must recover that from the anchors."""

    def test_recovers_population_shift(self, rng):
        n_items, n_anchor = 40, 20
        a = rng.uniform(0.8, 2.0, 2 * n_items - n_anchor)
        b = rng.normal(0, 1, a.size)
        ids = [f"q{k}" for k in range(a.size)]
        truth = ItemBank(ids, a, b)
        form1, form2 = truth.subset(np.arange(n_items)), truth.subset(np.arange(n_items - n_anchor, a.size))

        def fit(form, theta):
            y = (rng.random((theta.size, len(form))) < form.probability(theta)).astype(float)
            res = calibrate(y, "2pl")
            return ItemBank(form.item_ids, res.bank.a, res.bank.b)

        ref = fit(form1, rng.normal(0, 1, 4000))
        new = fit(form2, rng.normal(0.5, 1.2, 4000))
        for method in ("stocking-lord", "haebara", "mean-sigma", "mean-mean"):
            res = link_banks(ref, new, method)
            assert res.A == pytest.approx(1.2, abs=0.12), method
            assert res.B == pytest.approx(0.5, abs=0.12), method
        linked = link_banks(ref, new).transform(new)
        # the non-anchor items of form 2 land on the true scale
        own = [i for i in linked.item_ids if i not in ref]
        assert np.median(icc_rmsd(linked.subset(own), truth.subset(own))) < 0.02


class TestIccRmsd:
    def test_identical_is_zero(self, bank):
        assert np.all(icc_rmsd(bank, bank) == 0)

    def test_known_value(self):
        one = ItemBank(["x"], [1.0], [0.0], [0.2])
        two = ItemBank(["x"], [1.0], [0.0], [0.3])
        # P2 - P1 = 0.1 (1 - sigma(theta)) everywhere; RMSD = 0.1 sqrt(E[(1 - sigma)^2])
        from atlascat.irt.quadrature import normal_quadrature
        q = normal_quadrature(61)
        expected = 0.1 * np.sqrt(q.weights @ (1 / (1 + np.exp(q.nodes))) ** 2)
        assert icc_rmsd(one, two).iloc[0] == pytest.approx(expected, rel=1e-12)

    def test_no_common_items(self, bank):
        with pytest.raises(ConfigError, match="no item in common"):
            icc_rmsd(bank, ItemBank(["zz"], [1], [0]))


class TestLinkingObject:
    def test_theta_and_dict(self):
        lk = Linking(2.0, 1.0, "mean-sigma", ("a", "b"))
        np.testing.assert_allclose(lk.theta([0, 1]), [1, 3])
        assert lk.to_dict()["n_anchors"] == 2


class TestLinkCLI:
    def test_link_and_merge(self, bank, tmp_path, capsys):
        ref_path, new_path = tmp_path / "ref.csv", tmp_path / "new.csv"
        bank.subset(np.arange(20)).write(ref_path)
        new = _inverse(bank, 1.3, -0.4).subset(np.arange(10, 30))
        new.write(new_path, format="mirt")
        out = tmp_path / "linked.csv"
        assert main(["link", str(ref_path), str(new_path), "-o", str(out), "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        assert info["A"] == pytest.approx(1.3, abs=1e-6) and info["n_anchors"] == 10
        linked = ItemBank.read(out)
        np.testing.assert_allclose(linked.b, bank.b[10:30], atol=1e-5)
        merged = tmp_path / "merged.csv"
        anchors = tmp_path / "anchors.txt"
        anchors.write_text("# anchors\ni10\ni11\ni12\n")
        assert main(["link", str(ref_path), str(new_path), "-o", str(merged), "--merge",
                     "--method", "haebara", "--anchors", str(anchors)]) == 0
        m = ItemBank.read(merged)
        assert len(m) == 30
        np.testing.assert_allclose(m.b, bank.b, atol=1e-5)
        assert "A = 1.3" in capsys.readouterr().out

    def test_bad_method_exit_2(self, bank, tmp_path, capsys):
        p = tmp_path / "b.csv"
        bank.write(p)
        assert main(["link", str(p), str(p), "-o", str(tmp_path / "o.csv"), "--method", "nope"]) == 2
        assert "unknown linking method" in capsys.readouterr().err
