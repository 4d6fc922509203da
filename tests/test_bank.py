"""ItemBank: formats, round trips, validation."""
import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from atlascat import BankError, ItemBank
from atlascat.irt.bank import normalize_item_id


@pytest.fixture
def hellaswag_path(shared_data):
    return shared_data / "atlas_banks" / "hellaswag_3pl_bank.csv"


class TestFormats:
    def test_mirt_round_trip_to_1e12(self, hellaswag_path, tmp_path):
        original = pd.read_csv(hellaswag_path)
        bank = ItemBank.read(hellaswag_path)
        assert len(bank) == 5600 and bank.model == "3pl"
        ours = bank.write(tmp_path / "bank.csv")
        assert list(pd.read_csv(ours).columns[:5]) == ["item_id", "a", "b", "c", "u"]
        back = ItemBank.read(ours)
        exported = back.to_frame("mirt")
        assert list(exported["X"]) == list(original["X"])
        for col in ("a1", "d", "g", "u"):
            assert_allclose(exported[col], original[col], rtol=1e-12, atol=1e-12, err_msg=col)

    def test_parquet_round_trip_keeps_metadata(self, tmp_path):
        meta = pd.DataFrame({"content_area": ["algebra", "geometry"],
                             "choices": [["1", "2"], ["x", "y", "z"]], "answer": ["A", "C"]})
        bank = ItemBank(["q1", "q2"], [1.0, 2.0], [0.0, 1.0], [0.2, 0.0], metadata=meta)
        for name in ("b.parquet", "b.csv"):
            back = ItemBank.read(bank.write(tmp_path / name))
            assert back.metadata["content_area"].tolist() == ["algebra", "geometry"]
            assert list(back.metadata.loc["q2", "choices"]) == ["x", "y", "z"]
            assert_allclose(back.c, [0.2, 0.0])

    def test_mirt_export_file(self, tmp_path):
        bank = ItemBank(["1", "2"], [1.5, 0.5], [0.4, -1.0], [0.1, 0.2])
        df = pd.read_csv(bank.write(tmp_path / "m.csv", format="mirt"))
        assert list(df.columns) == ["X", "a1", "d", "g", "u"]
        assert_allclose(df["d"], [-0.6, 0.5])

    def test_normalize_ids(self, hellaswag_path):
        bank = ItemBank.read(hellaswag_path, normalize_ids=True)
        assert bank.item_ids[0] == "1"
        assert normalize_item_id("X514") == "514"
        assert normalize_item_id("Xylophone") == "Xylophone"
        assert normalize_item_id("abstract_algebra.12") == "abstract_algebra.12"

    def test_mirt_reference_with_unnamed_id_column(self, shared_data):
        bank = ItemBank.read(shared_data / "reference" / "mirt_tiny" / "arc_items.csv")
        assert bank.item_ids[:2].tolist() == ["1", "6"]
        assert_allclose(bank.a[0], 8.84207803984775)

    def test_model_inference(self):
        assert ItemBank(["a", "b"], [1, 1], [0, 1]).model == "1pl"
        assert ItemBank(["a", "b"], [1, 2], [0, 1]).model == "2pl"
        assert ItemBank(["a", "b"], [1, 2], [0, 1], [0.1, 0]).model == "3pl"
        assert ItemBank(["a", "b"], [1, 2], [0, 1], None, [1, 0.9]).model == "4pl"


class TestOperations:
    def test_subset_and_index(self):
        bank = ItemBank(list("abcd"), [1, 2, 3, 4], [0, 0, 0, 0])
        sub = bank.subset(["c", "a"])
        assert sub.item_ids.tolist() == ["c", "a"] and sub.a.tolist() == [3, 1]
        assert bank.subset(np.array([True, False, False, True])).item_ids.tolist() == ["a", "d"]
        assert bank.index_of(["d", "b"]).tolist() == [3, 1]
        with pytest.raises(BankError, match="not in the bank"):
            bank.index_of(["zz"])

    def test_indexing_a_bank_names_the_accessors(self):
        """bank["q1"] / bank[0] is a TypeError (and a BankError) naming how a bank is read;
        a bank is still one object to NumPy and pandas, and not iterable."""
        import collections.abc

        bank = ItemBank(["q1", "q2"], [1.0, 1.5], [0.0, 0.5])
        for key in ("id", "q1", 0):
            with pytest.raises(TypeError) as err:
                bank[key]
            said = str(err.value)
            assert isinstance(err.value, BankError) and said.startswith(
                f"an ItemBank is not indexed (bank[{key!r}]): its item ids are bank.item_ids, "
                "its parameters bank.a, bank.b, bank.c, bank.u")
            assert f"bank.index_of({key!r})" in said and "bank.to_frame()" in said
        with pytest.raises(TypeError, match="'ItemBank' object is not iterable"):
            iter(bank)
        assert not isinstance(bank, collections.abc.Iterable) and "q1" in bank
        assert np.asarray(bank).shape == () and np.asarray(bank)[()] is bank
        assert np.array([bank, bank], dtype=object).shape == (2,)
        assert pd.Series([bank]).iloc[0] is bank

    def test_arrays_are_read_only(self):
        bank = ItemBank(["a"], [1.0], [0.0])
        with pytest.raises(ValueError):
            bank.a[0] = 5.0

    def test_nonpositive_a_allowed_but_reported(self):
        bank = ItemBank(["good", "flat", "reversed"], [1.0, 0.0, -0.5], [0, 0, 0])
        assert bank.nonpositive_items.tolist() == ["flat", "reversed"]
        assert bank.summary()["nonpositive_a"] == ["flat", "reversed"]

    def test_negative_slopes_are_told_once_per_bank_not_per_examinee(self, tmp_path):
        """The adaptive test and scoring on a bank with items of a < 0 warn once, in one line
        counting them; every examinee, session and scoring after it on the same bank is
        silent (Python's own once-per-place filter off: each warning raised is counted)."""
        import warnings

        from atlascat.cat.session import CATSession
        from atlascat.cat.simulate import simulate_cat
        from atlascat.irt.ability import estimate_ability

        rng = np.random.default_rng(3)
        a = rng.lognormal(0, 0.3, 40)
        a[[2, 5, 11]] *= -1
        ids = [f"q{j}" for j in range(40)]
        bank = ItemBank(ids, a, rng.normal(0, 1, 40))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            simulate_cat(bank, thetas=rng.normal(size=25), rng=1)
            for seed in range(3):
                session = CATSession(bank, rng=seed)
                session.record(session.next_item(), 1)
            estimate_ability(pd.DataFrame((rng.random((5, 40)) < 0.5).astype(float),
                                          columns=ids), bank)
        said = [str(w.message) for w in caught if "negative slope" in str(w.message)]
        assert len(said) == 1 and "\n" not in said[0]
        assert said[0].startswith("3 of the bank's 40 items have a negative slope (a < 0, "
                                  "e.g. q2, q5, q11)")
        fine = ItemBank(ids, np.abs(a), bank.b)   # no negative slope: nothing said
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            simulate_cat(fine, thetas=[0.0], rng=1)
        assert not [w for w in caught if "negative slope" in str(w.message)]


class TestValidation:
    def test_c_not_below_u(self, tmp_path):
        path = tmp_path / "bad.csv"
        path.write_text("item_id,a,b,c,u\nq1,1,0,0.2,1\nq2,1,0,0.95,0.9\n")
        with pytest.raises(BankError) as err:
            ItemBank.read(path)
        assert "q2" in str(err.value) and "row 1" in str(err.value) and "c < u" in str(err.value)

    def test_non_finite(self):
        with pytest.raises(BankError, match=r"'b' is not finite for item\(s\) \['y'\]"):
            ItemBank(["x", "y"], [1, 1], [0, np.inf])

    def test_text_parameter_names_item(self, tmp_path):
        path = tmp_path / "bad.csv"
        path.write_text("item_id,a,b\nq1,1,0\nq2,high,0\n")
        with pytest.raises(BankError, match="non-numeric value 'high' for item q2"):
            ItemBank.read(path)

    def test_duplicate_ids(self):
        with pytest.raises(BankError, match="duplicate item id"):
            ItemBank(["x", "x"], [1, 1], [0, 0])

    def test_unknown_columns(self, tmp_path):
        path = tmp_path / "bad.csv"
        path.write_text("item_id,slope,difficulty\nq1,1,0\n")
        with pytest.raises(BankError, match="neither ours"):
            ItemBank.read(path)

    def test_mirt_zero_slope(self, tmp_path):
        path = tmp_path / "bad.csv"
        path.write_text("X,a1,d,g,u\nX1,0,1,0,1\n")
        with pytest.raises(BankError, match="a1 = 0 for item"):
            ItemBank.read(path)

    def test_empty_and_missing_file(self, tmp_path):
        path = tmp_path / "empty.csv"
        path.write_text("item_id,a,b\n")
        with pytest.raises(BankError, match="no item rows"):
            ItemBank.read(path)
        with pytest.raises(BankError, match="does not exist"):
            ItemBank.read(tmp_path / "nope.csv")
